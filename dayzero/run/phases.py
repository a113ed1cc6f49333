"""The measurement phases of a cell run: performance floors, sweeps, accuracy gate, speculative acceptance;
and the tool-call phase the correctness step runs after the probes (`run_tool_calls`).

`dayzero.run.cell.measure` calls `run_all` once the deployment is ready. Every phase sends what
the request plan says (`dayzero.run.plan`) through the host client (`Endpoint.client`), keeps the
client's raw answer under its record name (`Endpoint.keep`), and turns it into checks with the
pure functions of `dayzero.checks`. Around every phase the server's own `/metrics` are read
(`metered`) and kept next to its records (`Endpoint.keep_metrics`): a second account of what the
phase cost the server, and the counters speculative acceptance is computed from. Metrics that
cannot be read leave a not-measured check (`engine:metrics`), so such a cell is never Verified.
The protocol (repetitions, prompts per concurrency, warm-up, client processes) comes from the
model card, so a CPU card can budget a short run and a B300 card the full one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dayzero.checks import FAILED, INCONCLUSIVE, NOT_MEASURED, CheckResult
from dayzero.checks.energy import merge_windows
from dayzero.checks.measurement import Measurement
from dayzero.checks.metrics import run_summary, saturation
from dayzero.checks.performance import INVALID, check_floor
from dayzero.checks.server_metrics import summed
from dayzero.lab.hostload import HostLoad, contention
from dayzero.run import plans, sweeps
from dayzero.run.plan import MeasurementPlan
from dayzero.run.plans import speculative, tool_calls
from dayzero.run.plans.base import LOAD_TIMEOUT
from dayzero.run.plans.probes import forced
from dayzero.spec.card import ModelCard, Protocol
from dayzero.spec.goldens import Golden
from dayzero.spec.matrix import Cell


@dataclass
class Endpoint:
    """How phases reach the server: the host client, where raw records go, liveness, reporting."""

    url: str
    client: Callable[[dict, float], dict]
    keep: Callable[[str, dict], str]
    alive: Callable[[], None] = lambda: None
    say: Callable[[str], None] = print
    attach: Callable[[str, Any], None] = lambda name, data: None
    step: Callable[[str], Any] = field(default=lambda title: contextlib.nullcontext())
    meters: tuple[tuple[str, str], ...] = ()  # (launch, its /metrics url): read around every phase
    keep_metrics: Callable[[str, dict], str] = lambda phase, doc: ""
    engine: str = ""  # whose counters the metrics are: the card's engine name (`dayzero.engines`)
    recipe_digest: str = ""
    unread: list[str] = field(default_factory=list)  # phases whose metrics could not be read
    # The hosts' foreign load sampled while a phase runs (host -> samples), and the share of a
    # host's cores foreign processes may use before a missed floor is the lab's (0: off).
    watch: Callable[[], Any] = field(default=lambda: contextlib.nullcontext({}))
    max_foreign_load: dict[str, float] = field(default_factory=dict)  # host -> share (0 or absent: off)
    contended: dict[str, str] = field(default_factory=dict)  # phase -> "host contended: ..."
    # Power beside a phase that asks for it: the client samples its own host (`host`); every other
    # host of the cell is read by `power_watch(options)` (host -> windows, `lab.power`).
    host: str = ""
    power_watch: Callable[[Mapping], Any] = field(default=lambda options: contextlib.nullcontext({}))


def snapshot(ep: Endpoint) -> list[dict]:
    """Every target's /metrics as the server printed it (raw: the checker parses it itself)."""
    out = []
    for target, url in ep.meters:
        answer = ep.client({"action": "get", "url": url, "timeout": 30}, 60)
        status = answer.get("status")
        out.append(
            {
                "target": target,
                "url": url,
                "status": status,
                "body": answer.get("body") if status == 200 else "",
                "error": answer.get("error") or (None if status == 200 else f"HTTP {status}"),
            }
        )
    return out


def metered(ep: Endpoint, phase: str, send: Callable[[], dict]) -> tuple[dict, dict]:
    """`send()` between two reads of the server's metrics; the snapshots are kept next to the
    phase's records. Returns (the client's answer, the snapshots)."""
    before = snapshot(ep)
    with ep.watch() as loads:
        answer = send()
    doc = {"phase": phase, "source": ep.engine, "before": before, "after": snapshot(ep)}
    doc["host_load"] = {host: [s.to_json() for s in samples] for host, samples in loads.items()}
    if why := contended_host(loads, ep.max_foreign_load):
        ep.contended[phase] = why
        ep.say(f"{phase}: {why}")
    if ep.meters:
        ep.keep_metrics(phase, doc)
    if summed(ep.engine, before) is None or summed(ep.engine, doc["after"]) is None:
        ep.unread.append(phase)  # no launch serves /metrics, or one could not be read
    return answer, doc


def contended_host(loads: dict[str, list[HostLoad]], bounds: dict[str, float]) -> str:
    """The first host whose foreign load passed its bound during a phase, and what it saw."""
    seen = ((host, contention(samples, bounds.get(host, 0.0))) for host, samples in loads.items())
    return next((f"{host}: {why}" for host, why in seen if why), "")


def judged_for_contention(result: CheckResult, phases: list[str], ep: Endpoint) -> CheckResult:
    """A number measured while a host of the cell was contended is marked so wherever it is shown
    (`details.contended`: phase -> what contended the host), never read as a clean one; a floor
    missed (or inconclusive) then is no verdict on the product: the measurement is invalid (a lab
    fault), naming what contended the host."""
    return mark_contended(result, {p: ep.contended[p] for p in phases if p in ep.contended})


def mark_contended(result: CheckResult, seen: Mapping[str, str]) -> CheckResult:
    """`judged_for_contention`'s rule, given what contended which phase (pure: the checker applies
    it to the marks a bundle's evidence states)."""
    if not seen:
        return result
    result = replace(result, details={**result.details, "contended": seen})
    if result.verdict not in (FAILED, INCONCLUSIVE):
        return result
    why = next(iter(seen.values()))
    return replace(result, verdict=INVALID, message=f"{why}; the floor was missed then: {result.message}")


def metrics_check(ep: Endpoint) -> CheckResult | None:
    """Not measured when a phase's metrics could not be read: the cell then stays Pending."""
    if not ep.unread:
        return None
    return CheckResult(
        "engine:metrics",
        "health",
        NOT_MEASURED,
        f"the server's /metrics could not be read around {len(ep.unread)} phase(s): "
        + ", ".join(ep.unread[:5]),
        details={"phases": list(ep.unread)},
        family="engine",
    )


def more_processes(protocol: Protocol, processes: int, concurrency: int, answer: dict) -> int | None:
    """How many client processes to retry a saturated run with; None where the card fixed the
    count or the host has no core to spare (half its cores at most: the server runs there too)."""
    cores = (answer.get("client") or {}).get("cpu_count") or 1
    more = min(processes * 2, max(1, cores // 2), concurrency)
    return more if protocol.client_processes is None and more > processes else None


def collect(
    ep: Endpoint, m: MeasurementPlan, accelerators: int, start: int = 0, processes: int | None = None
) -> tuple[list[tuple[str, dict]], int, list[dict]]:
    """Warm up, then N repetitions; more client processes when one saturates and the host has cores.

    Returns each repetition's (records file, raw answer), the client processes the last one used
    and each repetition's /metrics snapshots. `start`, `processes`: the repetitions from `start`
    on, with the processes the earlier ones ended with (a measurement extended).
    """
    protocol, concurrency = m.protocol, m.concurrency
    processes = processes or protocol.processes(concurrency)
    answers: list[tuple[str, dict]] = []
    docs: list[dict] = []
    label = m.display
    for rep in range(start, m.runs):
        while True:
            spec = {
                "action": "load",
                "url": ep.url,
                "concurrency": concurrency,
                "processes": processes,
                "requests": m.requests(rep),
            }
            if rep == 0:
                spec["warmup"] = m.warmup()
            if m.power:
                spec["power"] = dict(m.power)
            others = ep.power_watch(m.power) if m.power else contextlib.nullcontext({})
            with others as windows:
                answer, doc = metered(ep, m.phase(rep), lambda spec=spec: ep.client(spec, LOAD_TIMEOUT))
            if m.power:  # every host's readings in the phase's record (the checker reads them too)
                answer["power_host"] = ep.host or "endpoint"
                answer["power_hosts"] = {host: merge_windows(w) for host, w in windows.items()}
            ep.alive()
            found = saturation(answer, protocol.saturation)
            more = more_processes(protocol, processes, concurrency, answer)
            if found and more is not None:
                ep.say(
                    f"{label}: client saturated with {processes} process(es) ({found[0]}); "
                    f"retrying with {more}"
                )
                processes = more
                continue
            break
        answers.append((ep.keep(m.phase(rep), answer), answer))
        docs.append(doc)
        summary = run_summary(answer["records"], accelerators, concurrency)
        ep.say(
            f"{label} run {rep + 1}/{m.runs}: {summary.get('output_throughput', 0):.1f} tok/s, "
            f"median TTFT {summary.get('median_ttft_ms')} ms, {summary['failed']} failed"
            + (" [INVALID: client saturated]" if found else "")
        )
    return answers, processes, docs


def measure_workload(ep: Endpoint, m: MeasurementPlan, accelerators: int) -> Measurement:
    """Measure (talk to the server), then aggregate the raw answers (pure, as the checker does)."""
    answers, processes, docs = collect(ep, m, accelerators)
    measurement = m.measurement(answers, accelerators, processes, docs)
    ep.say(f"{m.display}: {measurement.server_gap.describe()}")
    return measurement


def until_conclusive(ep: Endpoint, m: MeasurementPlan, accelerators: int, got: tuple) -> tuple:
    """A measurement extended, one repetition at a time, while a floor on it is inconclusive
    (its interval straddles the bound) and the protocol's stated budget lasts
    (`Protocol.extra_repetitions`), as MLPerf's minimum duration and query count do; `got` and
    the answer are `collect`'s (answers, processes, snapshots)."""
    answers, processes, docs = got
    runs, left = m.runs, m.protocol.extra_repetitions
    while left > 0 and _inconclusive(m, answers, accelerators, processes, docs):
        ep.say(f"{m.display}: a floor is inconclusive after {runs} run(s): one more ({left} in the budget)")
        more, processes, more_docs = collect(
            ep, replace(m, repetitions=runs + 1), accelerators, runs, processes
        )
        answers, docs, runs, left = [*answers, *more], [*docs, *more_docs], runs + 1, left - 1
    return answers, processes, docs


def _inconclusive(m: MeasurementPlan, answers, accelerators: int, processes: int, docs) -> bool:
    measurement = m.measurement(answers, accelerators, processes, docs)
    return any(check_floor(floor, measurement).verdict == INCONCLUSIVE for floor in m.floors)


def phases(m: MeasurementPlan) -> list[str]:
    return [m.phase(rep) for rep in range(m.runs)]


@dataclass(frozen=True)
class Live:
    """The live server as the plans' source of answers (`run.plans.Source`): each phase sent,
    metered and kept under its record name, then judged by its plan as the checker judges it."""

    ep: Endpoint
    card: ModelCard
    cell: Cell
    accelerators: int = 0
    golden: Golden | None = None
    recording: bool = False
    engine_version: str = "unknown"
    cpu_kind: str = "unknown"

    @property
    def recipe_digest(self) -> str:
        return self.ep.recipe_digest

    def exchange(self, phase, concurrency, requests, *, action="load", timeout=LOAD_TIMEOUT, prepare=None):
        spec = {"action": action, "url": self.ep.url, "concurrency": concurrency, "requests": requests}
        answer, snapshots = metered(self.ep, phase, lambda: self.ep.client(spec, timeout))
        self.ep.alive()
        if prepare is not None:
            prepare(answer, snapshots)
        self.ep.keep(phase, answer)
        return answer, snapshots

    def repetitions(self, m: MeasurementPlan):
        return until_conclusive(self.ep, m, self.accelerators, collect(self.ep, m, self.accelerators))

    def sweep(self, sp: sweeps.SweepPlan):
        """Points measured until the sweep's budget is spent; a point asked for again with more
        repetitions (its floor inconclusive) measures only those it does not have yet."""
        started = time.monotonic()
        kept: dict[str, Mapping] = {}  # records file -> its /metrics snapshots
        answered: dict[str, tuple[str, dict]] = {}  # phase -> (records file, answer)

        def measure(p: sweeps.SweepPoint):
            if time.monotonic() - started > p.sweep.budget_s:
                return None
            have = [answered[ph] for ph in p.phases() if ph in answered]
            processes = (have[-1][1].get("client") or {}).get("processes") if have else None
            answers, _, docs = collect(self.ep, p, self.accelerators, len(have), processes)
            kept.update({rel: doc for (rel, _), doc in zip(answers, docs, strict=True)})
            answered.update({p.phase(len(have) + i): a for i, a in enumerate(answers)})
            return [*have, *answers]

        return measure, kept.get

    def contended(self, result: CheckResult, phases: Sequence[str]) -> CheckResult:
        return judged_for_contention(result, list(phases), self.ep)

    def step(self, title: str):
        return self.ep.step(title)

    def say(self, text: str) -> None:
        self.ep.say(text)

    def attach(self, name: str, data: Any) -> None:
        self.ep.attach(name, data)


def run_stage(src: Live, suites: Path, stage: str) -> Iterator[CheckResult]:
    """Every plan of the cell's stage (`run.plans.of`), sent and judged, checks as they are made."""
    for planned in plans.of(src.card, src.cell, suites, stage):
        yield from planned.judge(src)


def run_kind(kind: plans.Kind, src: Live, suites: Path) -> Iterator[CheckResult]:
    """The plans of one kind alone (a test's, or `golden check`'s)."""
    for unit in kind.plans(src.card, src.cell, suites):
        yield from plans.Planned(kind, unit).judge(src)


def run_speculative(card: ModelCard, cell: Cell, ep: Endpoint, suites: Path) -> Iterator[CheckResult]:
    """Acceptance per workload from the counters' difference across its phase."""
    return run_kind(speculative.KIND, Live(ep, card, cell), suites)


def score_goldens(
    card: ModelCard, cell: Cell, ep: Endpoint, goldens: Mapping[str, str] | None
) -> dict[str, tuple[list | None, str]]:
    """The golden texts (`goldens`: probe id -> text) scored by the engine under test (teacher
    forcing), where it can: per probe, its scores or None and why not."""
    golden = Golden(cell.id, {}, {}, dict(goldens)) if goldens is not None else None
    return forced(Live(ep, card, cell, golden=golden))


def run_tool_calls(
    card: ModelCard,
    cell: Cell,
    ep: Endpoint,
    suites: Path,
    reference: Mapping[str, Mapping[str, list[str]]],
    reference_cell: str,
    reference_steps: Mapping[str, Mapping[str, list]] | None = None,
) -> Iterator[CheckResult]:
    """Each tool-use suite of the cell once, against the reference answers given (a golden's)."""
    golden = Golden(reference_cell, {}, {}, {}, dict(reference), tool_tokens=dict(reference_steps or {}))
    return run_kind(tool_calls.KIND, Live(ep, card, cell, golden=golden), suites)


def run_all(
    card: ModelCard,
    cell: Cell,
    ep: Endpoint,
    accelerators: int,
    suites: Path,
    into: list[CheckResult],
    cpu_kind: str = "unknown",
) -> list[CheckResult]:
    """The measurement stage: performance, then sweeps, accuracy and speculative acceptance (each
    only if the card asks; `run.plans.KINDS` holds the order).

    Checks are appended to `into` as they are made, so a later phase that raises (server died,
    host lost) leaves every earlier check in the evidence.
    """
    src = Live(ep, card, cell, accelerators, cpu_kind=cpu_kind)
    for check in run_stage(src, suites, plans.MEASUREMENT):
        into.append(check)
    if (unread := metrics_check(ep)) is not None:
        into.append(unread)
    return into
