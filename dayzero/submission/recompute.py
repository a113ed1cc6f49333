"""Recompute every check from the raw records with the harness's own check functions.

The bundle's summaries and verdicts are claims; what counts is what the harness's own code says
about the raw records (each plan of `dayzero.run.plans` judging them as the live run judged its
answers), against the maintainers' matrix, goldens and eval sets. A claimed value they do not
reproduce is a finding; so is a recomputed check that fails (a floor not met, a golden that differs, an
accuracy below its threshold).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache, partial

from dayzero.checks import INCONCLUSIVE, NOT_MEASURED, PASSED, CheckResult, family_of
from dayzero.run.plans import Planned
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.cellview import CellView, Expected, Recorded, Unrecomputable, views
from dayzero.submission.cellview import accelerators as accelerators  # physics reads it here
from dayzero.submission.findings import Finding, short

COMPARED = ("kind", "verdict", "message", "measured", "bound")  # with details: the whole claim
MISSING = object()


def expected_checks(view: CellView) -> list[Expected]:
    """Every check the matrix requires of this cell: each plan's names (`run.plans.of`, the list
    the run iterates), recomputed by the plan's own judgement of the bundle's records, once a plan."""
    out = []
    src = Recorded(view)
    for planned in view.plans:
        judged = cache(partial(_judged, planned, src))
        out += [Expected(name, partial(_one, judged, name)) for name in planned.names()]
    return out


def _judged(planned: Planned, src: Recorded) -> dict[str, CheckResult]:
    return {r.name: r for r in planned.judge(src)}


def _one(judged: Callable[[], dict[str, CheckResult]], name: str) -> CheckResult:
    found = judged()
    if name not in found:  # a plan that names a check it did not make: the records lacked its input
        raise Unrecomputable("", f"{name} not made from the raw records")
    return found[name]


@dataclass(frozen=True)
class Recomputed:
    """One evidence document's checks as its raw records support them."""

    view: CellView
    checks: dict[str, CheckResult]
    required: tuple[str, ...]
    findings: tuple[Finding, ...] = ()


def recompute_view(view: CellView) -> Recomputed:
    checks, findings = {}, []
    expected = expected_checks(view)
    for e in expected:
        try:
            checks[e.name] = e.recompute()
        except Unrecomputable as exc:
            findings.append(
                Finding(exc.file or view.name, "recompute.records", exc.reason, f"raw records for {e.name}")
            )
    unique = tuple(dict.fromkeys(Finding(f.file, f.requirement, f.found, f.expected) for f in findings))
    return Recomputed(view, checks, tuple(dict.fromkeys(e.name for e in expected)), unique)


@lru_cache(maxsize=4)
def recompute_all(s: Subject, ref: Reference) -> dict[str, Recomputed]:
    return {view.name: recompute_view(view) for view in views(s, ref)}


def _plain(value):
    """As the value reads back from JSON (tuples become lists), so claims compare like for like."""
    return json.loads(json.dumps(value, default=str))


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def diff(claimed, recomputed, path: str) -> Iterator[tuple[str, object, object]]:
    """Leaves where the claim and the recomputation differ, compared in full: a key the claim
    leaves out (a failing attainment, a sweep's fit) is one, claimed MISSING (issue 42, item 2)."""
    if isinstance(claimed, dict):
        if not isinstance(recomputed, dict):
            yield path, claimed, recomputed
            return
        for key, value in claimed.items():
            if key not in recomputed:
                yield f"{path}.{key}", value, MISSING
            else:
                yield from diff(value, recomputed[key], f"{path}.{key}")
        for key in recomputed.keys() - claimed.keys():
            yield f"{path}.{key}", MISSING, recomputed[key]
    elif isinstance(claimed, list):
        if not isinstance(recomputed, list) or len(claimed) != len(recomputed):
            yield path, claimed, recomputed
            return
        for i, (a, b) in enumerate(zip(claimed, recomputed, strict=True)):
            yield from diff(a, b, f"{path}[{i}]")
    elif not _same(claimed, recomputed):
        yield path, claimed, recomputed


def check_claims(s: Subject, ref: Reference) -> list[Finding]:
    """Every claimed check equals its recomputation: kind, verdict, message, value, bound, details."""
    out = []
    for name, r in recompute_all(s, ref).items():
        out += r.findings
        for claimed in s.evidence[name]["checks"]:
            check_name = claimed["name"]
            redo = r.checks.get(check_name)
            if redo is None:
                if check_name not in r.required:
                    out.append(
                        Finding(
                            name,
                            "recompute.unknown",
                            f"check {short(check_name)}",
                            "a check the matrix defines",
                        )
                    )
                continue
            redone = _plain(redo.to_json())
            pairs = [(f, claimed.get(f, MISSING), redone[f]) for f in COMPARED]
            pairs.append(("details", claimed.get("details", {}), redone["details"]))
            if "family" in claimed:  # stated since checks carry it: it must be the plan's
                pairs.append(("family", claimed["family"], redone.get("family", MISSING)))
            for field_name, mine, theirs in pairs:
                for path, a, b in diff(mine, theirs, f"{check_name}.{field_name}"):
                    expected = (
                        "nothing the raw records support"
                        if b is MISSING
                        else f"{short(b)} from the raw records"
                    )
                    found = f"{path} left out" if a is MISSING else f"{path} = {short(a)}"
                    out.append(Finding(name, "recompute.claim", found, expected))
    return out


def check_requirements_met(s: Subject, ref: Reference) -> list[Finding]:
    """Probes, goldens, floors, compliance, accuracy and acceptance re-evaluated: each must pass, or
    be not measured yet (a golden not recorded on the reference cell: the cell stays Pending, as a
    lab run of it would)."""
    out = []
    for name, r in recompute_all(s, ref).items():
        for check_name, result in sorted(r.checks.items()):
            if result.verdict not in (PASSED, NOT_MEASURED):
                out.append(
                    Finding(
                        name,
                        f"recompute.{family_of(result.to_json())}",
                        f"{check_name}: {result.verdict}: {short(result.message, 200)}",
                        f"passed (bound {short(result.bound, 80)})",
                    )
                )
    return out


def check_cell_verdict(s: Subject, ref: Reference) -> list[Finding]:
    """The cell's verdict is passed exactly when every required check recomputes as passed or not
    measured yet (`run.cell`'s rule: not measured keeps the cell Pending, it fails nothing)."""
    out = []
    for name, r in recompute_all(s, ref).items():
        passed = not r.findings and all(
            n in r.checks and r.checks[n].verdict in (PASSED, NOT_MEASURED) for n in r.required
        )
        # nothing failed but a floor's interval straddled its bound: `evidence.build`'s rule
        unsure = not r.findings and all(
            n in r.checks and r.checks[n].verdict in (PASSED, NOT_MEASURED, INCONCLUSIVE) for n in r.required
        )
        expected = "passed" if passed else INCONCLUSIVE if unsure else "failed"
        claimed = s.evidence[name]["verdict"]
        if claimed != expected and claimed != "broken":
            out.append(
                Finding(name, "recompute.verdict", f"verdict {claimed}", f"{expected} from the raw records")
            )
    return out


CHECKS = (check_claims, check_requirements_met, check_cell_verdict)
