"""Weights as a lab has them: the card's model files, checked on a host before a cell uses it.

A card names each file of its weights and draft models under `{model_root}` (the host's var) with
a revision and, once known, a size and sha256 (`ModelFile`). Preflight runs `check_command` on
every host of the cell and `problems` judges what it printed: a file that is missing, of another
size or another checksum is a lab fault naming the host's path (the host is quarantined, the cell
broken), never a launch that downloads 1.5 TB against a readiness deadline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.spec.card import ModelFile
from dayzero.spec.shell import quote

MARK = "DAYZERO-FILE"


@dataclass(frozen=True)
class Wanted:
    """One model file as one host should hold it: the card's entry with its path resolved."""

    file: ModelFile
    path: str


def resolve(files: Sequence[ModelFile], host_vars: Mapping[str, str]) -> list[Wanted]:
    """The card's files on a host: `{model_root}` from the host's vars (a host without one cannot
    hold them: its path stays `{model_root}/...` and the check reports it missing)."""
    root = host_vars.get("model_root")
    return [Wanted(f, f.path.replace("{model_root}", root) if root else f.path) for f in files]


def check_command(wanted: Sequence[Wanted]) -> str:
    """Shell printing `MARK <index> <size|missing> <sha256|->` per file; the checksum is read only
    where the card knows one (an index file, or the GGUF of a small model)."""
    lines = []
    for i, w in enumerate(wanted):
        p = quote(w.path)
        digest = f"$(sha256sum < {p} | cut -d' ' -f1)" if w.file.sha256 else "-"
        lines.append(
            f'if [ -f {p} ]; then echo "{MARK} {i} $(stat -L -c %s {p}) {digest}"; '
            f'else echo "{MARK} {i} missing -"; fi'
        )
    return "; ".join(lines)


def _read(output: str) -> dict[int, tuple[str, str]]:
    seen: dict[int, tuple[str, str]] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == MARK and parts[1].isdigit():
            seen[int(parts[1])] = (parts[2], parts[3])
    return seen


def facts(wanted: Sequence[Wanted], output: str) -> tuple[dict, ...]:
    """Each file as the host holds it (the card's path, size, sha256 where read), kept in the
    evidence: a vendor's weights are then known by checksum, not by the name a command gives."""
    seen = _read(output)
    out = []
    for i, w in enumerate(wanted):
        size, digest = seen.get(i, ("unread", "-"))
        out.append(
            {
                "role": w.file.role,
                "path": w.file.path,
                "size": int(size) if size.isdigit() else None,
                "sha256": digest if digest != "-" else None,
            }
        )
    return tuple(out)


def problems(wanted: Sequence[Wanted], output: str) -> list[str]:
    """What is wrong with the host's files, from `check_command`'s output; one line each."""
    seen = _read(output)
    out = []
    for i, w in enumerate(wanted):
        f, what = w.file, f"{w.file.role} file {w.path}"
        what += f" (revision {f.revision})" if f.revision else ""
        size, digest = seen.get(i, ("unread", "-"))
        if size == "missing":
            out.append(f"{what} is missing")
        elif size == "unread":
            out.append(f"{what} could not be checked")
        elif f.size is not None and int(size) != f.size:
            out.append(f"{what} has {size} bytes, the card says {f.size}")
        elif f.sha256 and digest != f.sha256:
            out.append(f"{what} has sha256 {digest}, the card says {f.sha256}")
    return out
