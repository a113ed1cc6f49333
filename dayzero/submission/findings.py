"""A finding is one failed requirement: which file, which requirement, what was found, what was expected.

Khronos and CNCF answer a submission with one line per failed requirement; so do we.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dayzero.escape import clip, escape

# Findings are listed by cause: a bundle that cannot be read (extraction, manifest, signature), then
# a file that does not parse, then documents that do not validate, and only then what the checks
# of their content say (which may be no more than a consequence of what came first).
CAUSES = (
    "extract.",
    "manifest.",
    "signature.",
    "schema.json",
    "schema.depth",
    "schema.",
    "completeness.",
    "provenance.",
    "timeline.",
    "identity.",
    "engine.",
    "antigaming.",
    "recompute.",
)


@dataclass(frozen=True, order=True)
class Finding:
    file: str
    requirement: str
    found: str
    expected: str

    def line(self) -> str:
        """One line whatever the bundle holds: every field goes through `escape`."""
        return (
            f"{escape(self.file or '<bundle>')}: {escape(self.requirement)}: "
            f"found {escape(self.found)}; expected {escape(self.expected)}"
        )


def short(value, limit: int = 120) -> str:
    """A value as it appears in a finding: repr-like, one line, bounded (hostile input can be huge)
    and cut between words."""
    text = value if isinstance(value, str) else repr(value)
    return clip(" ".join(text.split()), limit)


def cause(f: Finding) -> int:
    return next((i for i, prefix in enumerate(CAUSES) if f.requirement.startswith(prefix)), len(CAUSES))


def by_cause(findings) -> list[Finding]:
    """Distinct findings, first causes first, then by file, requirement and what was found."""
    return sorted(set(findings), key=lambda f: (cause(f), f.file, f.requirement, f.found))


@dataclass(frozen=True)
class Group:
    """A cell's first finding and those that may follow from it, the cell's later ones (one
    edited token count: the engine's log disagrees with the records, then the engine's metrics
    and every figure recomputed from them). A vendor fixes the cause; the consequences are there
    to read, folded under it."""

    cause: Finding
    consequences: tuple[Finding, ...] = ()

    def lines(self) -> list[str]:
        if not self.consequences:
            return [self.cause.line()]
        counts = Counter(f.requirement for f in self.consequences)
        what = ", ".join(f"{escape(r)} {n}" for r, n in sorted(counts.items()))
        return [
            self.cause.line(),
            f"  + {len(self.consequences)} finding(s) that may follow from it ({what}):",
            *(f"    {f.line()}" for f in self.consequences),
        ]


def grouped(findings: Iterable[Finding], owner: Mapping[str, str]) -> list[Group]:
    """Findings by cause (`by_cause`), each cell's folded under its first (`owner`: file -> cell);
    a finding of no cell (the manifest's signature) stands alone."""
    groups: list[tuple[Finding, list[Finding]]] = []
    first: dict[str, list[Finding]] = {}  # cell -> the consequences of its first finding
    for f in by_cause(findings):
        cell = owner.get(f.file, "")
        if cell in first:
            first[cell].append(f)
            continue
        groups.append((f, []))
        if cell:
            first[cell] = groups[-1][1]
    return [Group(c, tuple(rest)) for c, rest in groups]
