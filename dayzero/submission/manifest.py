"""The manifest binds every file: its sha256 and size, and nothing else may be in the bundle.

The signature covers manifest.json only, so these checks are what extend it to every file.
"""

from __future__ import annotations

from dayzero.submission.bundle import MANIFEST, SIGNATURE, Reference, Subject, sha256_file
from dayzero.submission.findings import Finding, short


def listed(manifest: dict | None) -> dict[str, dict]:
    files = (manifest or {}).get("files")
    return files if isinstance(files, dict) else {}


def check_manifest_present(s: Subject, ref: Reference) -> list[Finding]:
    if not s.bundle.has(MANIFEST):
        return [Finding(MANIFEST, "manifest.missing", "no manifest", "manifest.json listing every file")]
    return []


def check_hashes(s: Subject, ref: Reference) -> list[Finding]:
    bundle, out = s.bundle, []
    for name, entry in sorted(listed(s.manifest).items()):
        if name in (MANIFEST, SIGNATURE):
            out.append(
                Finding(name, "manifest.self", "listed in the manifest", "not listed (it is the manifest)")
            )
            continue
        if not bundle.has(name):
            out.append(
                Finding(short(name, 160), "manifest.absent", "listed but not in the bundle", "present")
            )
            continue
        size = bundle.path(name).stat().st_size
        if size != entry.get("size"):
            out.append(Finding(name, "manifest.size", f"{size} bytes", f"{short(entry.get('size'))} bytes"))
        digest = sha256_file(bundle.path(name))
        if digest != entry.get("sha256"):
            out.append(
                Finding(name, "manifest.hash", f"sha256 {digest}", f"sha256 {short(entry.get('sha256'))}")
            )
    return out


def check_unlisted(s: Subject, ref: Reference) -> list[Finding]:
    if s.manifest is None:
        return []
    files = listed(s.manifest)
    return [
        Finding(name, "manifest.unlisted", "a file the manifest does not list", "every file listed")
        for name in s.bundle.files
        if name not in files and name not in (MANIFEST, SIGNATURE)
    ]


CHECKS = (check_manifest_present, check_hashes, check_unlisted)
