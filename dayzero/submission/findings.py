"""A finding is one failed requirement: which file, which requirement, what was found, what was expected.

Khronos and CNCF answer a submission with one line per failed requirement; so do we.
"""

from __future__ import annotations

from dataclasses import dataclass

from dayzero.escape import escape


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
    """A value as it appears in a finding: repr-like, one line, bounded (hostile input can be huge)."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
