"""Checks turn raw records into verdicts: each produces a measured value, a bound and a verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASSED, FAILED = "passed", "failed"
# Nothing to compare with yet (e.g. no golden recorded): the cell stays Pending, neither Verified
# nor failed.
NOT_MEASURED = "not_measured"


@dataclass(frozen=True)
class CheckResult:
    name: str
    kind: str  # correctness | performance | health
    verdict: str
    message: str
    measured: Any = None
    bound: Any = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
