"""Recompute every check from the raw records with the harness's own check functions.

The bundle's summaries and verdicts are claims; what counts is what the harness's own code says
about the raw records (the request plan's `aggregate` of them, then `check_floor`, `check_probe`,
`check_golden`, `check_accuracy`, `check_acceptance`, `check_tool_calls`, `sweep_check` of
dayzero.checks), against
the maintainers' matrix, goldens and eval sets. A claimed value they do not reproduce is a
finding; so is a recomputed check that fails (a floor not met, a golden that differs, an
accuracy below its threshold).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache, partial

from dayzero.checks import NOT_MEASURED, PASSED, CheckResult
from dayzero.checks.accuracy import check_accuracy
from dayzero.checks.correctness import check_golden, check_probe
from dayzero.checks.measurement import Measurement
from dayzero.checks.performance import check_floor
from dayzero.checks.speculative import check_acceptance
from dayzero.checks.sweep import sweep_check, sweep_floor_check
from dayzero.checks.tool_calls import check_names, check_tool_calls
from dayzero.engines.prometheus import SpecCounters
from dayzero.run import records
from dayzero.run.plan import AccuracyPlan, SpeculativePlan, ToolCallPlan
from dayzero.run.sweeps import SweepPlan, walk
from dayzero.spec.card import Floor, Probe
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.cellview import CellView, Expected, Unrecomputable, views
from dayzero.submission.findings import Finding, short

COMPARED = ("kind", "verdict", "message", "measured", "bound")  # with details: the whole claim
MISSING = object()


def accelerators(doc: dict) -> int:
    counts = [h.get("accelerators") for h in doc["hosts"]]
    if not counts or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts):
        raise Unrecomputable(
            "", f"hosts {short(doc['hosts'])} do not say how many accelerators served the cell"
        )
    return sum(counts)


def _probe_record(view: CellView, probe: Probe) -> dict:
    rel, answer = view.answer(view.probes.phase)
    for record in answer["records"]:
        if record["id"] == probe.id:
            return record
    raise Unrecomputable(rel, f"no record for probe {probe.id}")


def probe_result(view: CellView, probe: Probe) -> CheckResult:
    record = _probe_record(view, probe)
    return check_probe(probe, record.get("text") or "", record.get("error"))


def golden_result(view: CellView, probe: Probe) -> CheckResult:
    """As the run compared it: the golden's provenance against the evidence's recipe and engine."""
    record = _probe_record(view, probe)
    golden = view.golden
    _, answer = view.answer(view.probes.phase)
    forced, why = view.forced.get(probe.id, (None, ""))
    return check_golden(
        view.probes.policy,
        probe.id,
        golden.outputs.get(probe.id) if golden else None,
        record.get("text") or "",
        golden.provenance if golden else None,
        recipe_digest=view.doc["recipe"]["digest"],
        engine_version=view.doc["engine"]["version"],
        missing=view.probes.missing_verdict,
        alternates=golden.alternatives(probe.id) if golden else (),
        # the maintainers' recording on the golden side (a bundle cannot edit it), the bundle's own
        # log-probabilities on the other: a near-tie is one only where the reference says so too
        golden_steps=golden.tokens.get(probe.id) if golden else None,
        output_steps=record.get("logprobs"),
        machine=(answer.get("client") or {}).get("machine"),
        forced=forced,
        forced_why=why,
    )


def measurement(view: CellView, floor: Floor) -> Measurement:
    """The harness's own aggregate of the repetitions' raw answers, by the names the run wrote."""
    m = view.measurement_of(floor)
    answers = [view.answer(phase) for phase in m.phases()]
    processes = m.protocol.client_processes
    if processes is None:
        # The run grew its client processes while saturated; the recorded answers say how many the
        # last repetition used, which is what the harness reports.
        processes = (answers[-1][1].get("client") or {}).get("processes") or 1
    docs = [view.metrics.get(rel) for rel, _ in answers]
    return m.measurement(answers, accelerators(view.doc), processes, docs)


def floor_result(view: CellView, floor: Floor) -> CheckResult:
    return check_floor(floor, measurement(view, floor))


def accuracy_result(view: CellView, a: AccuracyPlan) -> CheckResult:
    _, answer = view.answer(a.phase)
    return check_accuracy(a.gate, a.items, answer["records"])


def _counters(value):
    if isinstance(value, dict):
        return SpecCounters(
            **{k: float(value[k]) for k in ("drafts", "draft_tokens", "accepted") if k in value}
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def speculative_result(view: CellView, sp: SpeculativePlan) -> CheckResult:
    _, answer = view.answer(sp.phase)
    counters = answer.get("counters") or {}
    kind = view.card.engine.name
    name = sp.workload.name
    return check_acceptance(
        name,
        sp.workload.tag,
        kind,
        _counters(counters.get("before")),
        _counters(counters.get("after")),
        answer["records"],
        sp.rule.min_accept_length.get(name),
    )


def tool_call_results(view: CellView, tp: ToolCallPlan) -> dict[str, CheckResult]:
    """As the run judged the suite's answers: against the card's thresholds and the answers the
    maintainers' goldens keep for the reference cell (never the bundle's)."""
    _, answer = view.answer(tp.phase)
    golden = view.golden  # the probes' golden cell is the tool answers' reference cell too
    reference = (golden.tool_calls if golden else {}).get(tp.suite.name)
    reference_steps = (golden.tool_tokens if golden else {}).get(tp.suite.name)  # the maintainers' too
    results = check_tool_calls(
        tp.rule, tp.suite, answer["records"], reference, view.probes.golden_cell, reference_steps
    )
    return {r.name: r for r in results}


def _tool_checks(view: CellView) -> list[Expected]:
    out = []
    for tp in view.tool_calls:
        judged = cache(partial(tool_call_results, view, tp))  # one judgement of the suite's answers
        for name in check_names(tp.rule, tp.suite):
            out.append(Expected(name, lambda judged=judged, name=name: judged()[name]))
    return out


def sweep_result(view: CellView, sp: SweepPlan) -> CheckResult:
    """The run's walk over the bundle's records: points in the card's order, then the bisection
    the recomputed attainments call for, until a point has no records (the run's budget ran out)."""
    run_id, cell_id = view.doc["run"]["id"], view.cell.id

    def measure(p):
        if records.path(run_id, cell_id, p.phase(0)) not in view.doc.get("records", []):
            return None
        return [view.answer(phase) for phase in p.phases()]

    points, skipped = walk(sp, measure, accelerators(view.doc), view.metrics.get)
    return sweep_check(sp.sweep, points, skipped)


def sweep_floor_result(sweep_of: Callable[[], CheckResult], sp: SweepPlan) -> CheckResult:
    return sweep_floor_check(sp.sweep, sweep_of())


def expected_checks(view: CellView) -> list[Expected]:
    """Every check the matrix requires of this cell (as `run.cell` and `run.phases` name them)."""
    probes = view.probes.probes
    out = [Expected(f"probe:{p.id}", partial(probe_result, view, p)) for p in probes]
    out += [Expected(f"golden:{p.id}", partial(golden_result, view, p)) for p in probes]
    out += [Expected(floor.name, partial(floor_result, view, floor)) for floor in view.floors()]
    out += [Expected(a.gate.name, partial(accuracy_result, view, a)) for a in view.gates]
    out += [
        Expected(f"speculative:accept_length@{sp.workload.name}", partial(speculative_result, view, sp))
        for sp in view.speculative
    ]
    out += _tool_checks(view)
    for sp in view.sweeps:
        walked = cache(partial(sweep_result, view, sp))  # the floor reads the sweep's own walk
        out.append(Expected(f"sweep:{sp.sweep.name}@{sp.sweep.workload}", walked))
        if sp.sweep.floor is not None:
            out.append(Expected(sp.sweep.floor_name, partial(sweep_floor_result, walked, sp)))
    return out


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
    """Leaves the claim states that the recomputation does not reproduce (its extra keys are fine)."""
    if isinstance(claimed, dict):
        if not isinstance(recomputed, dict):
            yield path, claimed, recomputed
            return
        for key, value in claimed.items():
            if key not in recomputed:
                yield f"{path}.{key}", value, MISSING
            else:
                yield from diff(value, recomputed[key], f"{path}.{key}")
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
            for field_name, mine, theirs in pairs:
                for path, a, b in diff(mine, theirs, f"{check_name}.{field_name}"):
                    expected = (
                        "nothing the raw records support"
                        if b is MISSING
                        else f"{short(b)} from the raw records"
                    )
                    out.append(Finding(name, "recompute.claim", f"{path} = {short(a)}", expected))
    return out


def check_requirements_met(s: Subject, ref: Reference) -> list[Finding]:
    """Probes, goldens, floors, compliance, accuracy and acceptance re-evaluated: each must pass, or
    be not measured yet (a golden not recorded on the reference cell: the cell stays Pending, as a
    lab run of it would)."""
    out = []
    for name, r in recompute_all(s, ref).items():
        for check_name, result in sorted(r.checks.items()):
            if result.verdict not in (PASSED, NOT_MEASURED):
                kind = check_name.split(":", 1)[0]
                out.append(
                    Finding(
                        name,
                        f"recompute.{kind}",
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
        expected = "passed" if passed else "failed"
        claimed = s.evidence[name]["verdict"]
        if claimed != expected and claimed != "broken":
            out.append(
                Finding(name, "recompute.verdict", f"verdict {claimed}", f"{expected} from the raw records")
            )
    return out


CHECKS = (check_claims, check_requirements_met, check_cell_verdict)
