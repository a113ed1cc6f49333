"""Tar-level tools: read a bundle's members, write arbitrary (hostile) members, re-sign a manifest."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from dayzero.submission.bundle import MANIFEST, SIGNATURE


@dataclass(frozen=True)
class Member:
    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    size: int | None = None  # declared size when it must differ from len(data)


def make_key(directory: Path, vendor: str) -> Path:
    key = Path(directory) / f"{vendor}_ed25519"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", vendor, "-f", str(key)],
            check=True,
            capture_output=True,
        )
    return key


def write_allowed_signers(path: Path, entries: list[tuple[str, Path]], kinds: str = 'kinds="cpu"') -> Path:
    """`identity namespaces="dayzero",kinds="cpu" <public key>` per entry, like
    submissions/allowed_signers (`kinds`: the hardware kinds the key may submit for)."""
    lines = ["# test allowed signers"]
    options = ",".join(o for o in ('namespaces="dayzero"', kinds) if o)
    for identity, key in entries:
        lines.append(f"{identity} {options} {Path(str(key) + '.pub').read_text().strip()}")
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)


def read_members(bundle: Path) -> dict[str, bytes]:
    """A trusted read of a bundle we built ourselves (regular files only)."""
    out = {}
    with tarfile.open(bundle, "r:gz") as tar:
        for m in tar.getmembers():
            if m.isfile():
                out[m.name] = tar.extractfile(m).read()
    return out


def write_members(path: Path, members: list[Member] | dict[str, bytes], level: int = 1) -> Path:
    """A tar.gz of the members as given. gzip level 1 by default (the checker reads any level;
    level 9 cost 40 ms a bundle); a case whose point is the compression ratio asks for 9."""
    if isinstance(members, dict):
        members = [Member(n, d) for n, d in sorted(members.items())]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = m.type
            info.linkname = m.linkname
            info.mode = 0o644
            if m.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                info.size = len(m.data) if m.size is None else m.size
                tar.addfile(info, io.BytesIO(m.data))
            else:
                tar.addfile(info)
    Path(path).write_bytes(gzip.compress(raw.getvalue(), compresslevel=level, mtime=0))
    return Path(path)


def manifest_for(members: dict[str, bytes], vendor: str) -> bytes:
    files = {
        n: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
        for n, d in sorted(members.items())
        if n not in (MANIFEST, SIGNATURE)
    }
    return (
        json.dumps({"schema_version": 1, "vendor": vendor, "files": files}, indent=2, sort_keys=True) + "\n"
    ).encode()


def sign_bytes(data: bytes, key: Path, workdir: Path) -> bytes:
    target = Path(workdir) / "to-sign"
    target.write_bytes(data)
    sig = target.with_name("to-sign.sig")
    sig.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", "dayzero", str(target)],
        check=True,
        capture_output=True,
    )
    return sig.read_bytes()


def resign(members: dict[str, bytes], key: Path, vendor: str, workdir: Path) -> dict[str, bytes]:
    """What a vendor holding its own key can do: rewrite documents, then a matching manifest and signature."""
    out = {n: d for n, d in members.items() if n not in (MANIFEST, SIGNATURE)}
    out[MANIFEST] = manifest_for(out, vendor)
    out[SIGNATURE] = sign_bytes(out[MANIFEST], key, workdir)
    return out


def edit_json(members: dict[str, bytes], name: str, change) -> dict[str, bytes]:
    doc = json.loads(members[name])
    change(doc)
    return {**members, name: (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()}
