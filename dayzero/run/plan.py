"""What each phase of a cell run requests: the request plan, derived from the model card alone.

The live run sends exactly these requests and the submission checker expects exactly these in a
bundle's raw records, each kind's plans made and judged by its module of `dayzero.run.plans`
(`dayzero.submission.antigaming` and `.inputs` read the requests too). One plan for both, so that what a run
asks and what a checker expects cannot drift apart. Raw records are named by `dayzero.run.records`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dayzero import engines
from dayzero.checks import FAILED, NOT_MEASURED
from dayzero.checks.accuracy import EvalItem, EvalSet, load_eval, request_for
from dayzero.checks.measurement import Measurement, aggregate
from dayzero.checks.tool_calls import ToolSuite, load_suite
from dayzero.checks.tool_calls import request_for as tool_request
from dayzero.run import records
from dayzero.spec.card import (
    TOP_LOGPROBS,
    AcceptanceRule,
    AccuracyGate,
    Floor,
    GoldenPolicy,
    ModelCard,
    Probe,
    Protocol,
    ToolCallRule,
    floors_for,
    gates_for,
    golden_source,
    rules_for,
    tool_rules_for,
)
from dayzero.spec.matrix import Cell
from dayzero.spec.workloads import Workload, resolve


@dataclass(frozen=True)
class ProbePlan:
    """The card's probes, sent once each."""

    probes: tuple[Probe, ...]
    concurrency: int
    policy: GoldenPolicy
    phase: str = records.PROBES
    golden_cell: str = ""  # whose golden the answers meet: a reference cell's, or the cell's own
    missing_verdict: str = FAILED  # no golden yet: failed, or not measured under cross-hardware goldens
    top_logprobs: int = 0  # asked with each token where the engine returns them (near-ties)

    def requests(self) -> list[dict]:
        out = [{"id": p.id, "prompt": p.prompt, "max_tokens": p.max_tokens} for p in self.probes]
        return with_logprobs(out, self.top_logprobs)


def with_logprobs(requests: list[dict], top: int) -> list[dict]:
    """Requests that also ask for `top` log-probabilities with each token (none where 0)."""
    if top:
        for req in requests:
            req["extra"] = {**(req.get("extra") or {}), "logprobs": True, "top_logprobs": top}
    return requests


def probes(card: ModelCard, cell: Cell) -> ProbePlan:
    """Exact goldens need one request at a time; other policies run at the mode's concurrency so
    that batching is exercised the way users will meet it."""
    golden_cell, policy = golden_source(card, cell)
    concurrency = 1 if policy.policy == "exact" else card.mode(cell.mode).concurrency
    missing = NOT_MEASURED if card.goldens else FAILED
    top = top_logprobs(card) if policy.by_tokens else 0
    return ProbePlan(
        tuple(card.probes),
        concurrency,
        policy,
        golden_cell=golden_cell,
        missing_verdict=missing,
        top_logprobs=top,
    )


@dataclass(frozen=True)
class ScorePlan:
    """The probes' goldens scored by the engine under test (teacher forcing, `dayzero.checks.
    forced`): one request a probe whose golden has a text, made of the engine's own calls."""

    engine: str
    prompts: tuple[tuple[str, str, str], ...]  # (probe id, prompt, the golden's text)
    phase: str = records.SCORES
    concurrency: int = 1
    top: int = TOP_LOGPROBS

    def requests(self) -> list[dict]:
        engine = engines.find_or_plain(self.engine)
        return [
            {"id": pid, "kind": "score", "max_tokens": 1, "calls": engine.score_calls(prompt, text, self.top)}
            for pid, prompt, text in self.prompts
        ]

    def forced(self, answered: Sequence[Mapping]) -> dict[str, tuple[list | None, str]]:
        """Per probe, the engine's scores read from the phase's raw records (one a call,
        `<probe>/s<k>`), or None and why not."""
        engine = engines.find_or_plain(self.engine)
        out = {}
        for pid, _, _ in self.prompts:
            mine = sorted(
                (r for r in answered if str(r.get("id", "")).startswith(f"{pid}/s")), key=lambda r: r["id"]
            )
            if failed := next((r for r in mine if r.get("error")), None):
                out[pid] = None, f"the scoring call failed: {failed['error']}"
            elif (entries := engine.scored([r.get("response") for r in mine])) is None:
                out[pid] = None, "no scores in the engine's answers"
            else:
                out[pid] = entries, ""
        return out


def scores(card: ModelCard, cell: Cell, goldens: Mapping[str, str] | None) -> tuple[ScorePlan | None, str]:
    """The scoring plan of a cell's probes against their golden texts (`goldens`: probe id ->
    text), or None and why there is none (the golden check keeps the reason)."""
    _, policy = golden_source(card, cell)
    engine = engines.find_or_plain(card.engine.name)
    if not policy.by_tokens:
        return None, f"the {policy.policy} policy compares text"
    if engine.cannot_score:
        return None, f"{engine.display or card.engine.name}: {engine.cannot_score}"
    prompts = tuple((p.id, p.prompt, goldens[p.id]) for p in card.probes if goldens and p.id in goldens)
    if not prompts:
        return None, "no golden to score"
    return ScorePlan(card.engine.name, prompts), ""


@dataclass(frozen=True)
class MeasurementPlan:
    """One measurement: a workload at a concurrency, repeated; the floors evaluated on it."""

    workload: Workload
    concurrency: int
    protocol: Protocol
    num_prompts: int | None = None  # the floors' own, else the protocol's
    repetitions: int | None = None  # the floors' own, else the protocol's
    index: int = 0  # the index-th measurement of this workload at this concurrency
    floors: tuple[Floor, ...] = ()
    power: Mapping | None = None  # the host client's power sampler (interval), if the phase has one
    slots: int = 0  # requests the server takes at once (the mode's concurrency); 0: not known

    @property
    def queues(self) -> bool:
        """Whether a request can wait for a server slot (the engine's prompt time leaves it out)."""
        return not self.slots or self.concurrency > self.slots

    @property
    def display(self) -> str:
        """How progress lines name it."""
        return f"{self.workload.name}-c{self.concurrency}"

    @property
    def prompts_per_run(self) -> int:
        return self.protocol.num_prompts(self.concurrency, self.num_prompts)

    @property
    def runs(self) -> int:
        return self.repetitions or self.protocol.repetitions

    def phase(self, repetition: int) -> str:
        return records.performance(self.workload.name, self.concurrency, repetition, self.index)

    def phases(self) -> list[str]:
        return [self.phase(rep) for rep in range(self.runs)]

    def requests(self, repetition: int) -> list[dict]:
        """Salted with the concurrency: measurements on one server must not share prompts."""
        return self.workload.requests(self.prompts_per_run, repetition, salt=self.concurrency)

    def warmup(self) -> list[dict]:
        """Sent before the first repetition, never measured."""
        n = self.protocol.warmup_requests(self.concurrency)
        return self.workload.requests(n, warmup=True, salt=self.concurrency)

    def measurement(
        self,
        answers: Sequence[tuple[str, Mapping]],
        accelerators: int,
        processes: int,
        metrics: Sequence[Mapping | None] = (),
    ) -> Measurement:
        """The repetitions' (records file, answer), in order, as a measurement (pure); `metrics`:
        each repetition's /metrics snapshots, where kept."""
        return aggregate(
            self.workload.name,
            self.concurrency,
            answers,
            accelerators=accelerators,
            exact_output=self.workload.exact_output,
            limits=self.protocol.saturation,
            rules=self.protocol.compliance,
            client={
                "processes": processes,
                "prompts_per_run": self.prompts_per_run,
                "tag": self.workload.tag,
            },
            metrics=metrics,
            queues=self.queues,
        )


def group(floors: Sequence[Floor]) -> dict[tuple, list[Floor]]:
    """Floors that share a workload run share one measurement (e.g. throughput and p99 TTFT)."""
    groups: dict[tuple, list[Floor]] = {}
    for f in floors:
        key = (
            f.workload,
            f.concurrency,
            f.max_tokens if f.workload == "default" else 0,
            f.num_prompts,
            f.repetitions,
        )
        groups.setdefault(key, []).append(f)
    return groups


def measurements(card: ModelCard, cell: Cell, suites: Path) -> Iterator[MeasurementPlan]:
    """The cell's measurements in the card's order; workloads are read as each one comes up."""
    protocol = card.protocol_for(cell)
    seen: dict[tuple[str, int], int] = {}
    for (name, concurrency, _, num_prompts, reps), floors in group(floors_for(card, cell)).items():
        # two measurements of one workload at one concurrency (another length, prompt count or
        # repetitions) keep their raw records apart
        k = seen[(name, concurrency)] = seen.get((name, concurrency), -1) + 1
        # the default workload takes the floors' max_tokens (the same within a group)
        workload = resolve(card, name, suites / "workloads", floors[0].max_tokens)
        slots = card.mode(cell.mode).concurrency  # requests the server takes at once
        floors = tuple(floors)
        yield MeasurementPlan(workload, concurrency, protocol, num_prompts, reps, k, floors, slots=slots)


@dataclass(frozen=True)
class AccuracyPlan:
    """One gate: the first `limit` questions of its eval set."""

    gate: AccuracyGate
    evalset: EvalSet

    @property
    def phase(self) -> str:
        return records.accuracy(self.gate.eval)

    @property
    def concurrency(self) -> int:
        return self.gate.concurrency

    @property
    def items(self) -> tuple[EvalItem, ...]:
        return self.evalset.items[: self.gate.limit] if self.gate.limit else self.evalset.items

    def requests(self) -> list[dict]:
        return [request_for(self.evalset, item, self.gate) for item in self.items]


def accuracy(card: ModelCard, cell: Cell, suites: Path) -> Iterator[AccuracyPlan]:
    for gate in gates_for(card, cell):
        yield AccuracyPlan(gate, load_eval(suites / "evals", gate.eval))


@dataclass(frozen=True)
class SpeculativePlan:
    """Acceptance measured on one workload of a rule."""

    rule: AcceptanceRule
    workload: Workload

    @property
    def phase(self) -> str:
        return records.speculative(self.workload.name)

    @property
    def concurrency(self) -> int:
        return self.rule.concurrency

    def requests(self) -> list[dict]:
        return self.workload.requests(self.rule.num_prompts)


def speculative(card: ModelCard, cell: Cell, suites: Path) -> Iterator[SpeculativePlan]:
    for rule in rules_for(card, cell):
        for name in rule.workloads:
            yield SpeculativePlan(rule, resolve(card, name, suites / "workloads"))


@dataclass(frozen=True)
class ToolCallPlan:
    """One tool-use suite, every case sent once at the rule's concurrency."""

    rule: ToolCallRule
    suite: ToolSuite
    top_logprobs: int = 0  # asked with each token where the engine returns them (trigger near-ties)

    @property
    def phase(self) -> str:
        return records.tool_calls(self.suite.name)

    @property
    def concurrency(self) -> int:
        return self.rule.concurrency

    def requests(self) -> list[dict]:
        out = [tool_request(self.suite, case, self.rule) for case in self.suite.cases]
        return with_logprobs(out, self.top_logprobs)


def top_logprobs(card: ModelCard) -> int:
    """What a probe asks with each token: the top-k near-ties are judged by, where the engine
    returns log-probabilities at all (`Engine.top_logprobs`)."""
    return min(TOP_LOGPROBS, engines.find_or_plain(card.engine.name).top_logprobs)


def tool_calls(card: ModelCard, cell: Cell, suites: Path) -> Iterator[ToolCallPlan]:
    for rule in tool_rules_for(card, cell):
        top = top_logprobs(card) if engines.find_or_plain(card.engine.name).logprobs_with_tools else 0
        yield ToolCallPlan(rule, load_suite(suites / "tools", rule.suite), top)
