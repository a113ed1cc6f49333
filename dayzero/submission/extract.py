"""Safe extraction: a bundle is hostile until proven otherwise.

Every member's type, path and size is checked before a byte is written; only regular files and
directories with plain relative names are written, each with O_EXCL | O_NOFOLLOW into a fresh
directory, so nothing can land outside it. The gzip stream is first read through once, counting,
so a decompression bomb is stopped by size and ratio before the tar is parsed.
"""

from __future__ import annotations

import os
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from dayzero.submission.bundle import Bundle, sha256_file
from dayzero.submission.findings import Finding, short

SAFE_NAME = re.compile(r"^[A-Za-z0-9._+@=-]+(/[A-Za-z0-9._+@=-]+)*/?$")
MEMBER_TYPES = {
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "fifo",
    tarfile.CONTTYPE: "contiguous file",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}


@dataclass(frozen=True)
class Limits:
    # ~20 files a cell (records and /metrics snapshots per phase, logs, evidence): a lab's bundle
    # of 1k cells holds 20k; 10k rejected honest 1k-cell bundles (found by bench/reports.py)
    max_files: int = 100_000
    max_file_bytes: int = 256 << 20
    max_total_bytes: int = 2 << 30
    max_ratio: float = 100.0  # uncompressed / compressed
    ratio_allowance: int = 16 << 20  # small bundles of tar headers compress far better than 100:1
    max_name: int = 255
    max_depth: int = 16


DEFAULT_LIMITS = Limits()


class UnusableBundle(Exception):  # noqa: N818 - an answer (exit 2), not a bug
    """Not a readable gzip'd tar at all: exit 2, nothing to judge."""


def name_problem(name: str, limits: Limits) -> str:
    """Why a member name may not be written, or '' when it is a plain relative path."""
    if not name:
        return "an empty name"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "a '..' component"
    if "." in parts or "" in parts:
        return "a '.' or empty component"
    if len(name) > limits.max_name or len(parts) > limits.max_depth:
        return f"a name longer than {limits.max_name} characters or deeper than {limits.max_depth}"
    if not SAFE_NAME.fullmatch(name):
        return "characters outside [A-Za-z0-9._+@=-/]"
    return ""


def check_stream(path: Path, limits: Limits) -> list[Finding]:
    """Decompress once without writing: the total and the ratio stop a bomb; corruption is unusable.

    Exactly one gzip member and nothing after it: `gzip` reads concatenated members as one
    stream, `tarfile` stops at the first end-of-archive, so a second member (or trailing bytes)
    could carry a tar nobody checked and still be stored with the bundle.
    """
    compressed = max(path.stat().st_size, 1)
    total = 0
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one gzip member, header and trailer checked
    try:
        with path.open("rb") as raw:
            while block := raw.read(1 << 16):
                if inflate.eof:
                    return [_after_member()]
                data = inflate.decompress(block, 1 << 20)
                while True:
                    total += len(data)
                    if total > limits.max_total_bytes:
                        return [
                            Finding(
                                "",
                                "extract.size",
                                f"more than {total} bytes uncompressed",
                                f"at most {limits.max_total_bytes}",
                            )
                        ]
                    if total > limits.ratio_allowance and total / compressed > limits.max_ratio:
                        return [
                            Finding(
                                "",
                                "extract.ratio",
                                f"ratio above {total / compressed:.0f}:1 ({total} from {compressed} bytes)",
                                f"at most {limits.max_ratio:g}:1",
                            )
                        ]
                    if not inflate.unconsumed_tail:
                        break
                    data = inflate.decompress(inflate.unconsumed_tail, 1 << 20)
                if inflate.eof and inflate.unused_data:
                    return [_after_member()]
    except zlib.error as exc:
        raise UnusableBundle(f"not a readable gzip stream: {short(str(exc))}") from None
    if not inflate.eof:
        raise UnusableBundle("not a readable gzip stream: truncated (no end of the gzip member)")
    return []


def _after_member() -> Finding:
    return Finding(
        "", "extract.gzip", "bytes after the first gzip member", "one gzip member and nothing after it"
    )


def _member_problem(member: tarfile.TarInfo) -> str:
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE):
        return ""
    kind = MEMBER_TYPES.get(member.type, f"member type {member.type!r}")
    if member.issym() or member.islnk():
        return f"{kind} to {short(member.linkname, 80)}"
    return kind


def _conflict(dest: Path, name: str) -> bool:
    """A parent that is a file, or a file already there: only links could make it safe, and we write none."""
    here = dest
    for part in Path(name).parts[:-1]:
        here = here / part
        if here.exists() and not here.is_dir():
            return True
    return (dest / name).exists()


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, name: str) -> int:
    target = dest / name
    target.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    written = 0
    with os.fdopen(fd, "wb") as out:
        while block := source.read(1 << 20):
            written += len(block)
            out.write(block)
    return written


def _after_tar(tar: tarfile.TarFile) -> list[Finding]:
    """After the end-of-archive block only zero padding: a second tar there is never read."""
    while block := tar.fileobj.read(1 << 16):
        if block.strip(b"\0"):
            return [Finding("", "extract.trailing", "data after the end of the tar", "zero padding only")]
    return []


def not_a_bundle(folder: Path) -> str:
    """What a directory given for a bundle is, and what to check instead."""
    pack = "dayzero submission pack --vendor V --key KEY -o BUNDLE.tar.gz"
    if not any(folder.iterdir()):
        return f"{folder}: an empty directory, not a bundle: check the .tar.gz that `{pack}` wrote"
    if (folder / "evidence").is_dir():
        return f"{folder}: a reports directory, not a bundle: pack it first (`{pack} --reports {folder}`)"
    return f"{folder}: a directory, not a bundle: check the .tar.gz that `{pack}` wrote"


def extract(path: Path, dest: Path, limits: Limits = DEFAULT_LIMITS) -> tuple[Bundle, list[Finding]]:
    """Extract into the empty directory `dest`; hostile members are findings and are never written."""
    path, dest = Path(path), Path(dest)
    if path.is_dir():
        raise UnusableBundle(not_a_bundle(path))
    if not path.is_file():
        raise UnusableBundle(f"{path}: no such file")
    with path.open("rb") as f:
        if f.read(2) != b"\x1f\x8b":
            raise UnusableBundle(f"{path.name}: not a .tar.gz (no gzip magic)")
    findings = check_stream(path, limits)
    if findings:
        return Bundle(dest, (), sha256_file(path)), findings
    files: list[str] = []
    seen: set[str] = set()
    count = total = 0
    try:
        with tarfile.open(path, mode="r|gz") as tar:
            for member in tar:
                count += 1
                if count > limits.max_files:
                    findings.append(
                        Finding("", "extract.count", f"more than {limits.max_files} members", "fewer")
                    )
                    break
                name = member.name
                shown = short(name, 160)
                if problem := name_problem(name, limits):
                    findings.append(Finding(shown, "extract.path", problem, "a plain relative path"))
                    continue
                if problem := _member_problem(member):
                    findings.append(Finding(shown, "extract.type", problem, "a regular file or directory"))
                    continue
                name = name.rstrip("/")
                if name in seen:
                    findings.append(Finding(shown, "extract.duplicate", "a second member", "one member"))
                    continue
                seen.add(name)
                if _conflict(dest, name) and not (member.isdir() and (dest / name).is_dir()):
                    findings.append(
                        Finding(shown, "extract.duplicate", "a name taken by another member", "one member")
                    )
                    continue
                if member.isdir():
                    (dest / name).mkdir(parents=True, exist_ok=True)
                    continue
                if member.size > limits.max_file_bytes:
                    findings.append(
                        Finding(
                            shown, "extract.size", f"{member.size} bytes", f"at most {limits.max_file_bytes}"
                        )
                    )
                    break
                total += member.size
                if total > limits.max_total_bytes:
                    findings.append(
                        Finding(
                            shown,
                            "extract.size",
                            f"{total} bytes in all",
                            f"at most {limits.max_total_bytes}",
                        )
                    )
                    break
                _write(tar, member, dest, name)
                files.append(name)
            else:
                findings += _after_tar(tar)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise UnusableBundle(f"not a readable tar archive: {short(str(exc))}") from None
    return Bundle(dest, tuple(sorted(files)), sha256_file(path)), findings
