"""Anti-gaming on the raw records, beyond the harness's own compliance checks (recomputed elsewhere).

The load must be the one the matrix asks for: the workload's very requests (ids, lengths) in
every repetition, no more requests in flight than the concurrency, no output past max_tokens,
probes and accuracy questions as written; and the timestamps must tell one consistent story
inside the run the evidence describes. A vendor holding its own signing key can still write any
records it likes; these checks make a fabricated set have to be consistent everywhere at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from dayzero.checks.metrics import output_tokens
from dayzero.clock import parse_iso
from dayzero.run.plan import MeasurementPlan
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.cellview import CellView, Unrecomputable, views
from dayzero.submission.findings import Finding, short

TIME_TOLERANCE_S = 0.005  # chunk offsets are rounded to microseconds
WINDOW_SLACK_S = 5.0  # evidence times are ISO seconds


def _num(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _completed(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("end") and not r.get("error")]


def repetitions(view: CellView, m: MeasurementPlan) -> Iterator[tuple[int, str, dict]]:
    """(repetition, records file, answer) for the repetitions present (absent ones: recompute reports)."""
    for rep, phase in enumerate(m.phases()):
        try:
            rel, answer = view.answer(phase)
        except Unrecomputable:
            continue
        yield rep, rel, answer


def timing_problem(r: dict) -> str:
    send, first, end, chunks = r.get("send"), r.get("first"), r.get("end"), r.get("chunks") or []
    if not (_num(send) and _num(end)):
        return "send or end is not a time"
    if end < send:
        return "end before send"
    if any(b < a for a, b in zip(chunks, chunks[1:], strict=False)) or (chunks and chunks[0] < 0):
        return "chunk times not increasing"
    if first is not None:
        if not (_num(first) and send <= first <= end):
            return "first content outside send..end"
        if chunks and abs(first - (send + chunks[0])) > TIME_TOLERANCE_S:
            return "first != send + chunks[0]"
    if chunks and send + chunks[-1] > end + TIME_TOLERANCE_S:
        return "a chunk after end"
    return ""


def _per_record(s: Subject, ref: Reference, problem_of, requirement: str, expected) -> list[Finding]:
    """One finding per records file whose completed records `problem_of` objects to (the count
    and the first one); `expected` says what was required, given that first record."""
    out = []
    for view in views(s, ref):
        for rel, answer in sorted(view.answers.items()):
            bad = [(r, p) for r in _completed(answer["records"]) if (p := problem_of(r))]
            if bad:
                r, problem = bad[0]
                out.append(
                    Finding(
                        rel,
                        requirement,
                        f"{len(bad)} record(s), e.g. {short(r['id'], 40)}: {problem}",
                        expected(r),
                    )
                )
    return out


def check_timestamps(s: Subject, ref: Reference) -> list[Finding]:
    return _per_record(s, ref, timing_problem, "antigaming.timestamps", lambda r: "consistent times")


def check_max_tokens(s: Subject, ref: Reference) -> list[Finding]:
    """No request produced more tokens than it asked for."""

    def over(r: dict) -> str:
        too_many = _num(r.get("max_tokens")) and output_tokens(r) > r["max_tokens"]
        return f"{output_tokens(r)} tokens" if too_many else ""

    return _per_record(s, ref, over, "antigaming.tokens", lambda r: f"at most max_tokens {r['max_tokens']}")


def expected_requests(requests: list[dict]) -> list[tuple[str, int]]:
    """(id, max_tokens) per record the client writes: a multi-turn session gives one per turn."""
    out = []
    for req in requests:
        if "turns" in req:
            out += [(f"{req['id']}/t{k}", turn["max_tokens"]) for k, turn in enumerate(req["turns"])]
        elif "calls" in req:  # a scoring request: one record a call (`loadgen.client.score`)
            out += [(f"{req['id']}/s{k}", call["body"]["max_tokens"]) for k, call in enumerate(req["calls"])]
        else:
            out.append((req["id"], req["max_tokens"]))
    return out


def check_streamed_tokens(s: Subject, ref: Reference) -> list[Finding]:
    """TEST06's floor: a content chunk carries at least one token, so never fewer tokens than chunks."""

    def undercounted(r: dict) -> str:
        counted = (r.get("usage") or {}).get("completion_tokens")
        chunks = len(r.get("chunks") or ())
        return f"{counted} tokens in {chunks} chunks" if counted is not None and counted < chunks else ""

    return _per_record(
        s, ref, undercounted, "antigaming.tokens", lambda r: "at least one token per streamed chunk"
    )


def listed(requests: list[tuple[str, int]], n: int = 2) -> str:
    """Requests as a finding shows them: `id (max_tokens N)`, the first `n`, and how many in all."""
    shown = ", ".join(f"{short(rid, 60)} (max_tokens {short(mt, 20)})" for rid, mt in requests[:n])
    more = f", ... ({len(requests)} in all)" if len(requests) > n else ""
    return f"{shown or 'none'}{more}"


def check_workload(s: Subject, ref: Reference) -> list[Finding]:
    """Every repetition ran the workload's own requests: same ids and max_tokens, same count."""
    out = []
    for view in views(s, ref):
        for m in view.loads:
            for rep, rel, answer in repetitions(view, m):
                want = expected_requests(m.requests(rep))
                got = [(r["id"], r.get("max_tokens")) for r in answer["records"]]
                if sorted(got, key=str) != sorted(want, key=str):
                    out.append(
                        Finding(
                            rel,
                            "antigaming.workload",
                            f"{len(got)} requests: {listed(got)}",
                            f"{len(want)} requests of {m.workload.name} repetition {rep}: {listed(want)}",
                        )
                    )
                stated = (answer.get("client") or {}).get("concurrency")
                if stated != m.concurrency:
                    out.append(
                        Finding(
                            rel,
                            "antigaming.concurrency",
                            f"client.concurrency {'absent' if stated is None else short(stated)}",
                            f"{m.concurrency}",
                        )
                    )
    return out


def max_in_flight(records: list[dict]) -> int:
    """Most requests open at once, from send..end (an end at t frees a slot for a send at t)."""
    events = []
    for r in records:
        if _num(r.get("send")) and _num(r.get("end")) and r["end"] >= r["send"]:
            events += [(r["send"] + TIME_TOLERANCE_S, 1), (r["end"], -1)]
    level = peak = 0
    for _, step in sorted(events):
        level += step
        peak = max(peak, level)
    return peak


def check_concurrency(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for view in views(s, ref):
        for m in view.loads:
            for _, rel, answer in repetitions(view, m):
                peak = max_in_flight(answer["records"])
                if peak > m.concurrency:
                    out.append(
                        Finding(
                            rel,
                            "antigaming.concurrency",
                            f"{peak} requests in flight",
                            f"at most {m.concurrency} ({m.floors[0].name if m.floors else m.display})",
                        )
                    )
    return out


def _asked(view, plans):
    """Each plan's kept answer beside what the plan asks: (plan, file, answer, got, wanted),
    requests as (id, max_tokens) pairs; a phase without records is completeness's finding."""
    for plan in plans:
        try:
            rel, answer = view.answer(plan.phase)
        except Unrecomputable:
            continue
        got = sorted(((r["id"], r.get("max_tokens")) for r in answer["records"]), key=str)
        yield plan, rel, answer, got, sorted(expected_requests(plan.requests()), key=str)


def check_probe_requests(s: Subject, ref: Reference) -> list[Finding]:
    """Probes ran as the card wrote them: same ids, same max_tokens (more tokens would be easier)."""
    out = []
    for view in views(s, ref):
        for probes, rel, answer, got, want in _asked(view, [view.probes]):
            if got != want:
                out.append(
                    Finding(
                        rel,
                        "antigaming.probes",
                        f"requests {listed(got, 8)}",
                        f"the probes {listed(want, 8)}",
                    )
                )
            if (peak := max_in_flight(answer["records"])) > probes.concurrency:
                out.append(
                    Finding(
                        rel,
                        "antigaming.concurrency",
                        f"{peak} probes in flight",
                        f"at most {probes.concurrency}",
                    )
                )
    return out


def _other_requests(s: Subject, ref: Reference, plans_of, requirement: str, asked_for) -> list[Finding]:
    return [
        Finding(rel, requirement, f"{len(got)} requests: {listed(got)}", f"{len(want)} {asked_for(plan)}")
        for view in views(s, ref)
        for plan, rel, _, got, want in _asked(view, plans_of(view))
        if got != want
    ]


def check_score_requests(s: Subject, ref: Reference) -> list[Finding]:
    """The goldens were scored as the plan asks: the maintainers' golden texts, each engine call
    once (which text a call scored is the golden check's: its scores must spell that text)."""
    return _other_requests(
        s,
        ref,
        lambda v: [p for p in [v.scores] if p],
        "antigaming.probes",
        lambda sp: "scoring calls of the goldens",
    )


def check_accuracy_requests(s: Subject, ref: Reference) -> list[Finding]:
    """The accuracy gate asked the eval set's questions, each once, with the gate's max_tokens."""
    return _other_requests(
        s, ref, lambda v: v.gates, "antigaming.accuracy", lambda a: f"questions of {a.gate.eval}"
    )


def check_speculative_requests(s: Subject, ref: Reference) -> list[Finding]:
    """Acceptance was measured on the workload's own requests, as many as the rule asks."""
    return _other_requests(
        s, ref, lambda v: v.speculative, "antigaming.workload", lambda sp: f"requests of {sp.workload.name}"
    )


def check_tool_call_requests(s: Subject, ref: Reference) -> list[Finding]:
    """The tool-call phase asked the suite's cases, each once, with the rule's max_tokens."""
    return _other_requests(
        s, ref, lambda v: v.tool_calls, "antigaming.tools", lambda tp: f"cases of suite {tp.suite.name}"
    )


def _time(value: str) -> float | None:
    moment = parse_iso(value)
    return moment.timestamp() if moment is not None else None


def check_run_window(s: Subject, ref: Reference) -> list[Finding]:
    """Records were taken during the run the evidence describes."""
    out = []
    for view in views(s, ref):
        run = view.doc["run"]
        start, end = _time(run["started"]), _time(run["finished"])
        if start is None or end is None or end < start:
            out.append(
                Finding(
                    view.name,
                    "antigaming.window",
                    "run times not RFC 3339 or reversed",
                    "run.started <= run.finished",
                )
            )
            continue
        for rel, answer in sorted(view.answers.items()):
            times = [t for r in answer["records"] for t in (r.get("send"), r.get("end")) if _num(t)]
            outside = [t for t in times if not start - WINDOW_SLACK_S <= t <= end + WINDOW_SLACK_S]
            if outside:
                out.append(
                    Finding(
                        rel,
                        "antigaming.window",
                        f"{len(outside)} time(s) outside the run",
                        f"within {run['started']} .. {run['finished']}",
                    )
                )
    return out


CHECKS = (
    check_timestamps,
    check_max_tokens,
    check_streamed_tokens,
    check_workload,
    check_concurrency,
    check_probe_requests,
    check_score_requests,
    check_accuracy_requests,
    check_speculative_requests,
    check_tool_call_requests,
    check_run_window,
)
