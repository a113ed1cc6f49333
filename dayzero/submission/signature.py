"""SSH signatures over manifest.json (`ssh-keygen -Y`, namespace `dayzero`).

The identity is the vendor the manifest declares; the allowed-signers file kept in the repository
says which key may speak for that vendor, and for which hardware kinds (`signers`: its
`kinds="..."` option), so a bundle cannot vouch for itself nor a key for another kind.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from dayzero.errors import ConfigError, DayzeroError
from dayzero.submission.bundle import MANIFEST, NAMESPACE, SIGNATURE, VENDOR, Reference, Subject
from dayzero.submission.cellview import known_cell
from dayzero.submission.completeness import claimed_cells
from dayzero.submission.findings import Finding, short
from dayzero.submission.signers import bound_kinds, for_ssh_keygen

MAX_SIGNATURE_BYTES = 64 << 10
ARMOR = re.compile(
    rb"-----BEGIN SSH SIGNATURE-----\n(?:[A-Za-z0-9+/=]{1,76}\n)+-----END SSH SIGNATURE-----\n?"
)
TIMEOUT_S = 60


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if not found:
        raise ConfigError("ssh-keygen", "", "not found: OpenSSH >= 8.1 is needed to sign and verify bundles")
    return found


def sign(manifest: Path, key: Path) -> Path:
    """Write manifest.json.sig next to the manifest with the vendor's private key."""
    manifest = Path(manifest)
    sig = manifest.with_name(SIGNATURE)
    sig.unlink(missing_ok=True)
    result = subprocess.run(
        [_ssh_keygen(), "-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(manifest)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0 or not sig.exists():
        raise DayzeroError(f"ssh-keygen -Y sign with {key} failed: {result.stderr.strip()[-300:]}")
    return sig


def verify(manifest: Path, sig: Path, allowed_signers: Path, identity: str, kinds=None) -> tuple[bool, str]:
    """(valid, what ssh-keygen said): the key must be listed for `identity` in allowed_signers,
    and, given `kinds`, on a line bound to every one of them."""
    text = Path(allowed_signers).read_text()
    lines = for_ssh_keygen(text) if kinds is None else for_ssh_keygen(text, identity, kinds)
    if not lines:
        return False, f"no key of {identity} bound to kinds {', '.join(sorted(kinds or ()))}"
    with tempfile.TemporaryDirectory(prefix="dayzero-signers-") as tmp:
        plain = Path(tmp) / "allowed_signers"
        plain.write_text(lines)
        return _verify(manifest, sig, plain, identity)


def _verify(manifest: Path, sig: Path, allowed_signers: Path, identity: str) -> tuple[bool, str]:
    with Path(manifest).open("rb") as data:
        result = subprocess.run(
            [
                _ssh_keygen(),
                "-Y",
                "verify",
                "-f",
                str(allowed_signers),
                "-I",
                identity,
                "-n",
                NAMESPACE,
                "-s",
                str(sig),
            ],
            stdin=data,
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    said = (result.stdout + result.stderr).decode(errors="replace").strip()
    return result.returncode == 0, said


def check_signature(s: Subject, ref: Reference) -> list[Finding]:
    if not Path(ref.allowed_signers).is_file():
        raise ConfigError(ref.allowed_signers, "", "allowed-signers file not found")
    bundle = s.bundle
    if not bundle.has(SIGNATURE):
        return [
            Finding(
                SIGNATURE,
                "signature.missing",
                "no signature",
                f"ssh-keygen -Y sign -n {NAMESPACE} of manifest.json",
            )
        ]
    if not bundle.has(MANIFEST):
        return []  # reported by the manifest checks
    identity = (s.manifest or {}).get("vendor")
    if not isinstance(identity, str) or not VENDOR.fullmatch(identity):
        return [
            Finding(
                MANIFEST, "signature.identity", short(identity), f"a vendor name matching {VENDOR.pattern}"
            )
        ]
    if bundle.path(SIGNATURE).stat().st_size > MAX_SIGNATURE_BYTES:
        return [
            Finding(
                SIGNATURE,
                "signature.verify",
                "an oversized signature",
                f"at most {MAX_SIGNATURE_BYTES} bytes",
            )
        ]
    if not ARMOR.fullmatch(bundle.path(SIGNATURE).read_bytes()):
        return [
            Finding(
                SIGNATURE,
                "signature.format",
                "not one armored SSH signature",
                "ssh-keygen -Y sign output, unchanged",
            )
        ]
    ok, said = verify(bundle.path(MANIFEST), bundle.path(SIGNATURE), ref.allowed_signers, identity)
    if ok:
        return check_kinds(s, ref, identity)
    return [
        Finding(
            SIGNATURE,
            "signature.verify",
            short(said.splitlines()[-1] if said else "no valid signature", 200),
            f"a valid signature by a key allowed for {identity!r} in {Path(ref.allowed_signers).name}",
        )
    ]


def claimed_kinds(s: Subject, ref: Reference) -> set[str]:
    """The hardware kinds a bundle submits for: its evidence's and its claimed cells'."""
    cells = (known_cell(ref.matrix, c) for c in claimed_cells(s))
    return {doc["hardware"] for doc in s.evidence.values()} | {c.hardware for c in cells if c is not None}


def check_kinds(s: Subject, ref: Reference, identity: str) -> list[Finding]:
    """The key that signed is bound to every hardware kind the bundle submits for."""
    kinds = claimed_kinds(s, ref)
    ok, said = verify(s.bundle.path(MANIFEST), s.bundle.path(SIGNATURE), ref.allowed_signers, identity, kinds)
    if ok:
        return []
    bound = bound_kinds(Path(ref.allowed_signers).read_text(), identity)
    return [
        Finding(
            SIGNATURE,
            "signature.kinds",
            f"a key of {identity} bound to {', '.join(sorted(bound)) or 'no hardware kind'}"
            f" ({short(said.splitlines()[-1] if said else '', 120)})",
            f'a key of {identity} with kinds="{",".join(sorted(kinds))}" in {Path(ref.allowed_signers).name}',
        )
    ]


def signer(s: Subject, ref: Reference) -> str:
    """The key that signed (ssh-keygen's 'Good signature' line), for the verdict."""
    identity = s.vendor
    if not (s.bundle.has(SIGNATURE) and s.bundle.has(MANIFEST) and VENDOR.fullmatch(identity)):
        return ""
    ok, said = verify(s.bundle.path(MANIFEST), s.bundle.path(SIGNATURE), ref.allowed_signers, identity)
    return said.splitlines()[0] if ok and said else ""


CHECKS = (check_signature,)
