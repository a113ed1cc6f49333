"""Checks turn raw records into verdicts: each produces a measured value, a bound and a verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

PASSED, FAILED = "passed", "failed"
# Nothing to compare with yet (e.g. no golden recorded): the cell stays Pending, neither Verified
# nor failed.
NOT_MEASURED = "not_measured"
# A floor whose interval straddles its bound after the protocol's budget: neither passed nor
# failed, and never green (the cell is not Verified, the run exits `exitcodes.INCONCLUSIVE`).
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class CheckResult:
    name: str
    kind: str  # correctness | performance | health
    verdict: str
    message: str
    measured: Any = None
    bound: Any = None
    details: dict[str, Any] = field(default_factory=dict)
    # Which kind of plan made it (`run.plans`: probe, golden, floor, sweep, tools, ...): reports
    # read it instead of the name's prefix; "" until the plan stamps it (left out of the JSON).
    family: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.family:
            del out["family"]
        return out


def family_of(check: Mapping[str, Any]) -> str:
    """A check's family as its evidence says it; evidence written before checks carried one is
    read by its name's prefix (`golden:x`, `floor:m@w`), here and nowhere else."""
    return check.get("family") or str(check.get("name", "")).partition(":")[0]
