"""An engine's identity read from its version banner: the version and, where known, the build.

Banners change format while the engine does not (llama-server's first line once carried "built
with GNU 12.2.0 ...", now the build's source comes first), so two banners are the same engine
when their parsed identities agree, never by string. A part one banner does not know (build 0,
commit unknown) is not compared; a banner with no version in it is compared as written. The
engine's name is the cell's (its card's engine), so a golden or evidence of the cell shares it.

Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION_WORD = re.compile(r"\bversion[:\s]+([vb]?\d+(?:\.\d+)*[\w.+-]*)", re.IGNORECASE)
_VERSION = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)+[\w.+-]*)")
_BUILD = re.compile(r"\bbuild[:\s]+(\w+)", re.IGNORECASE)
_COMMIT = re.compile(r"\bcommit[:\s]+(\w+)|\(([0-9a-f]{7,40})\)", re.IGNORECASE)
_SOURCE = re.compile(r"([\w.-]+ v?\d+(?:\.\d+)+[\w.+-]*) sdist", re.IGNORECASE)
_LEVEL = re.compile(r"\bbuilt for ([\w.+-]+)", re.IGNORECASE)  # the pinned instruction-set level
UNKNOWN = ("", "0", "unknown")


@dataclass(frozen=True)
class EngineIdentity:
    version: str
    build: str = ""  # build number, commit, source package: what is known of them; "" unknown

    def __str__(self) -> str:
        return self.version + (f" (build {self.build})" if self.build else "")


def parse(banner: str) -> EngineIdentity | None:
    """The identity a version banner states, or None when it names no version."""
    found = _VERSION_WORD.search(banner) or _VERSION.search(banner)
    if found is None:
        return None
    build = [
        f"{label}{m.group(m.lastindex or 1)}"
        for label, pattern in (("", _BUILD), ("commit ", _COMMIT))
        if (m := pattern.search(banner)) and (m.group(m.lastindex or 1) or "").lower() not in UNKNOWN
    ]
    if source := _SOURCE.search(banner):
        build.append(source.group(1))
    if level := _LEVEL.search(banner):
        build.append(level.group(1))
    return EngineIdentity(found.group(1), ", ".join(build))


def same_engine(a: str, b: str) -> bool:
    """Whether two banners name the same engine: the same version, and the same build where both
    know it."""
    first, second = parse(a), parse(b)
    if first is None or second is None:
        return " ".join(a.split()) == " ".join(b.split())
    if first.version != second.version:
        return False
    return not (first.build and second.build and first.build != second.build)
