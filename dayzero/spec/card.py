"""The model card as typed data: parsed and checked once, when the matrix loads.

`parse` turns a card that passed its JSON schema into frozen dataclasses (engine, modes, probes,
floors, accuracy gates, speculative rules, protocol, golden policies) and rejects what a schema
cannot say (a normalisation on a latency, a bound for a workload the rule does not run), naming
the file, the field and its line. Every reader of a card reads these types; the recipe renderer
(`dayzero.spec.recipe`) alone reads the raw argv/env templates (`ModelCard.raw`), since they are
layered and hashed as written.

A rule with `when:` applies to the cells it selects (`matches`); its `concurrency` is a number,
`mode` (the cell's mode's) or, for floors, a list (a sweep: one floor per point). `floors_for`,
`gates_for` and `rules_for` give what one cell must meet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from dayzero.errors import ConfigError
from dayzero.spec import yamlfile
from dayzero.spec.cachetypes import mamba_geometry
from dayzero.spec.cell import Cell

MODE = "mode"  # a concurrency of "mode": the cell's mode's
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")
NORMALISE = {"none": "", "per_accelerator": "_per_accelerator", "per_user": "_per_user"}
DEFAULT_EOS = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<|end|>")
# Goldens by log-probabilities (dayzero.checks.near_tie), the bounds a golden policy starts from:
# the cross-machine tie that started it is 0.125 nats apart (SmolLM2 after "The rainbow"); the
# drift bound is far above the drift between CPU kernel paths measured on one machine
# (docs/goldens.md) and below what a wrong template, RoPE base, weight or tokenizer does.
NEAR_TIE_NATS = 0.5
DRIFT_NATS = 1.0
# Teacher forcing (dayzero.checks.forced): the golden's own tokens scored by the engine under test
# rank first, or second at a near-tie; their mean log-probability stays within this many nats a
# token of the golden's own (cross-kernel drift measured ~0.01; a wrong RoPE base moves it ~1).
FORCED_MAX_RANK = 2
FORCED_MEAN_NATS = 0.25
_BOUND = {
    "near_tie_nats": NEAR_TIE_NATS,
    "drift_nats": DRIFT_NATS,
    "forced_max_rank": FORCED_MAX_RANK,
    "forced_mean_nats": FORCED_MEAN_NATS,
}
TOP_LOGPROBS = 5  # the top-k a probe asks for with each generated token (and a scoring call)
GOLDEN_FIELDS = {"exact": (), "first_n_tokens": ("n",), "similarity": ("min_ratio",), "contains": ()}


# --- what a cell's server is and how it is reached --------------------------------------------------


@dataclass(frozen=True)
class Worker:
    """What ranks 1..N-1 of a multi-node role run instead of its command (llama.cpp's
    `rpc-server`), listening on `port`; rank 0 names them through `{peers}`."""

    argv: tuple[str, ...]
    port: int


@dataclass(frozen=True)
class Engine:
    name: str
    version_command: str | None = None  # run by preflight on every host; None: version unknown
    health_path: str = "/health"
    bind: str = "0.0.0.0"  # address the server binds: a literal or {host}
    multinode_args: tuple[str, ...] = ()  # added to every role that spans more than one node
    package: str | None = None  # the release the recipes are written for (name==version): lint parses with it
    router_package: str | None = None  # the same for router roles
    worker: Worker | None = None  # ranks 1..N-1 of a multi-node role run this, if set


@dataclass(frozen=True)
class Placement:
    """A card's entry for one hardware: nodes one replica needs and the image it runs."""

    nodes: int = 1
    image: str | None = None
    vars: Mapping[str, str] = field(default_factory=dict)  # placeholder values over the card's


@dataclass(frozen=True)
class ModelFile:
    """A file of the weights or a draft model that every host of a cell must hold, named under
    the host's `{model_root}` (a lab keeps its weights there; no node downloads them at launch)."""

    path: str  # "{model_root}/..."
    revision: str | None  # the hub revision the recipes were written for; None until published
    role: str = "weights"  # weights | draft | chat_template
    hub: str | None = None
    size: int | None = None
    sha256: str | None = None
    precision: str | None = None  # as stored (q4_1, bf16, mxfp4): what `dayzero fit` sizes
    # An index file's shards (path under its folder -> sha256), pinned from a lab's first download
    shards: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GoldenPolicy:
    """How probe output is compared with its golden: batching changes greedy output."""

    policy: str = "exact"
    n: int = 8
    min_ratio: float = 0.8
    same_as: str = ""  # a mode whose cell's golden this mode's probes meet (PD meets one server's)
    # exact and first_n_tokens, where golden and output carry log-probabilities (dayzero.checks.
    # near_tie): a divergence within this many nats on both sides is a near-tie, tolerated; while
    # the tokens agree, their log-probabilities may drift this much from the golden's.
    near_tie_nats: float = NEAR_TIE_NATS
    drift_nats: float = DRIFT_NATS
    # where the engine can score a given text, the golden teacher-forced: worst rank, mean drift
    forced_max_rank: int = FORCED_MAX_RANK
    forced_mean_nats: float = FORCED_MEAN_NATS

    @property
    def by_tokens(self) -> bool:
        """Compared token by token (with near-ties) where log-probabilities exist."""
        return self.policy in ("exact", "first_n_tokens")

    def describe(self) -> str:
        text = {
            "exact": "exact tokens",
            "first_n_tokens": f"first {self.n} tokens",
            "similarity": f"similarity >= {self.min_ratio}",
            "contains": "golden text contained in output",
        }[self.policy]
        if self.by_tokens:
            text += f", or a near-tie within {self.near_tie_nats} nats"
        return f"{text} of the {self.same_as} cell's golden" if self.same_as else text

    def to_json(self) -> dict:
        """As a golden file keeps it: the policy and the parameters it uses."""
        out = {"policy": self.policy, **{k: getattr(self, k) for k in GOLDEN_FIELDS[self.policy]}}
        if self.by_tokens:  # the near-tie bounds where the card set its own
            out.update({k: getattr(self, k) for k in _BOUND if getattr(self, k) != _BOUND[k]})
        return out


@dataclass(frozen=True)
class GoldenReference:
    """Goldens recorded once, on a reference cell, and compared on every other cell of the card
    (other hardware, other modes) under a tolerant policy: kernels and batch sizes differ there,
    so byte-exact greedy output is not expected."""

    cell: str
    policy: GoldenPolicy


@dataclass(frozen=True)
class Mode:
    name: str
    concurrency: int
    description: str = ""
    golden: GoldenPolicy = GoldenPolicy()


@dataclass(frozen=True)
class Probe:
    id: str
    prompt: str
    max_tokens: int = 32
    expect_contains: tuple[str, ...] = ()


# --- how performance is measured ----------------------------------------------------------------------


@dataclass(frozen=True)
class SaturationLimits:
    """A client process busier than this is the bottleneck, so its numbers are not the server's."""

    cpu_fraction: float = 0.9  # process CPU time / wall time (one event loop uses one core)
    lag_p99_ms: float = 50.0  # event-loop lag: a 10 ms timer firing this late delays timestamps


@dataclass(frozen=True)
class Compliance:
    """MLPerf's compliance ideas restated for HTTP serving (TEST06, TEST09)."""

    length_tolerance: float = 0.10  # mean output within +-10% of the requested length
    tokens_per_chunk_max: float = 1.0  # >1 where the engine streams several tokens per chunk
    chunk_tolerance: float = 0.10
    eos: tuple[str, ...] = DEFAULT_EOS


@dataclass(frozen=True)
class StallPolicy:
    """When a phase is an engine stall: requests in flight and no streamed token from any of them
    for `after_s` seconds (the host client watches; the same bound ends a phase whose host stopped
    answering). `verdict`: what a stalled engine makes the cell, `failed` (the product hung) or
    `broken` (the card's engine is known to pause for the lab's reasons). A silent host is always
    broken: the lab's network or machine, not the product."""

    after_s: float = 30.0
    verdict: str = "failed"


@dataclass(frozen=True)
class Protocol:
    """The field's protocol: warm-up >= concurrency, 5 x concurrency prompts (at least 16), the
    median of N repetitions compared; a card budgets it to its hardware."""

    repetitions: int = 3
    # While a floor is inconclusive (its interval straddles the bound), up to this many more
    # repetitions are measured, one at a time: the stated budget of an extended phase.
    extra_repetitions: int = 0
    prompts_per_concurrency: int = 5
    min_prompts: int = 16
    warmup: int | None = None  # warm-up requests; None: as many as the concurrency
    client_processes: int | None = None  # None: auto (one per `per_process_concurrency`, more if saturated)
    per_process_concurrency: int = 256
    saturation: SaturationLimits = SaturationLimits()
    compliance: Compliance = Compliance()
    stall: StallPolicy = StallPolicy()
    reproduction_tolerance: float = 0.10  # a second party's floors within this of a vendor's: reproduced

    def num_prompts(self, concurrency: int, override: int | None = None) -> int:
        if override:
            return override
        return max(self.min_prompts, self.prompts_per_concurrency * concurrency)

    def warmup_requests(self, concurrency: int) -> int:
        return max(concurrency, self.warmup or 0)

    def processes(self, concurrency: int) -> int:
        if self.client_processes:
            return self.client_processes
        return max(1, math.ceil(concurrency / self.per_process_concurrency))


# --- what a cell must meet ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """A bound on one metric of one workload at one concurrency, from the model card."""

    metric: str
    bound: float
    concurrency: int
    direction: str = "min"  # min: measured >= bound; max: measured <= bound
    workload: str = "default"
    normalise: str = "none"
    max_tokens: int = 64  # output length of the default workload
    num_prompts: int | None = None
    repetitions: int | None = None
    label: str = ""  # set by floors_for only where two floors of a cell would share a name
    calibrated: tuple[tuple[str, float], ...] = ()  # (CPU kind, its bound): `dayzero floors calibrate`

    @property
    def key(self) -> str:
        """The summary key compared: metric plus normalisation suffix."""
        suffix = NORMALISE[self.normalise]
        return self.metric if self.metric.endswith(suffix) else self.metric + suffix

    @property
    def name(self) -> str:
        base = f"floor:{self.key}@{self.workload}/c{self.concurrency}"
        return f"{base}/{self.label}" if self.label else base

    # older cards and callers speak of `min`
    @property
    def min(self) -> float:
        return self.bound

    def on(self, cpu_kind: str) -> Floor:
        """The floor as it holds on hosts of `cpu_kind`: its calibrated bound there, else the
        card's own (a kind nobody calibrated keeps the hand-set bound)."""
        bound = dict(self.calibrated).get(cpu_kind)
        return self if bound is None else replace(self, bound=bound, calibrated=())


@dataclass(frozen=True)
class AccuracyGate:
    eval: str
    threshold: float
    concurrency: int
    limit: int | None = None
    max_tokens: int = 24
    style: str = "fewshot"  # fewshot: completion with worked examples; chat: one chat turn

    @property
    def name(self) -> str:
        return f"accuracy:{self.eval}"


@dataclass(frozen=True)
class AcceptanceRule:
    """Speculative acceptance length to report (and bound, per workload) for the cells selected."""

    workloads: tuple[str, ...]
    concurrency: int
    num_prompts: int = 4
    min_accept_length: dict[str, float] = field(default_factory=dict)


REASONING_MARKERS = ("<think>", "</think>")


@dataclass(frozen=True)
class ToolCallRule:
    """Tool-call (and reasoning) conformance on a shipped suite (`dayzero.checks.tool_calls`),
    with the card's thresholds; `reasoning` where the cell's server sets a reasoning parser."""

    suite: str
    concurrency: int
    max_tokens: int = 256
    min_finish_reason: float = 1.0  # answers expecting a call that end with finish_reason tool_calls
    min_valid_arguments: float = 1.0  # calls naming an offered tool with schema-valid arguments
    min_trigger_f1: float = 0.9  # call / no call agreement with the reference cell's answers
    reasoning: bool = False
    min_reasoning: float = 1.0
    reasoning_markers: tuple[str, ...] = REASONING_MARKERS

    @property
    def name(self) -> str:
        return f"tools:{self.suite}"


CLAIM_UNITS = ("per_accelerator", "per_user", "per_node")


@dataclass(frozen=True)
class Claim:
    """A number the world was told (DESIGN: claims), with the prerequisites it holds under: the
    cells `when` selects (hardware, mode, strategy, options), its workload and concurrency. Floors
    are the lab's own bars; a claim is reproduced or not by evidence and never fails a cell.
    `needs` names prerequisites the pinned engine has no flag for: the claim is then not measured
    ("needs data: ..."), never silently mapped onto the nearest flag."""

    id: str
    source: str
    metric: str  # a throughput (dayzero.spec.card.THROUGHPUTS)
    value: float
    unit: str  # per_accelerator | per_user (each stream's own decode rate) | per_node
    workload: str
    concurrency: int | str | None = None  # None: any the cell measured the workload at; "mode": the mode's
    when: Mapping[str, Any] = field(default_factory=dict)
    tolerance: float = 0.1  # reproduced: measured >= value x (1 - tolerance)
    needs: tuple[str, ...] = ()
    note: str = ""

    @property
    def text(self) -> str:
        """The claim as one line: value, unit, workload, concurrency."""
        unit = {"per_accelerator": "per accelerator", "per_user": "per user", "per_node": "per node"}[
            self.unit
        ]
        at = f" at c{self.concurrency}" if self.concurrency not in (None, MODE) else ""
        return f"{self.value:g} {self.metric} {unit} on {self.workload}{at}"


T = TypeVar("T", Floor, AccuracyGate, AcceptanceRule, ToolCallRule)


@dataclass(frozen=True)
class Rule(Generic[T]):
    """A card entry for the cells `when` selects, at each concurrency point (`mode`: the mode's)."""

    item: T  # its concurrency is set per cell
    points: tuple[int | str, ...]
    when: Mapping[str, Any] = field(default_factory=dict)


# --- the card ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActiveWeights:
    """What one decode step of this engine reads and computes: the model's side of the roofline."""

    parameters: float  # active per token (all of them for a dense model)
    bytes_per_parameter: float  # as this engine stores them (GGUF Q4_1, bf16, MXFP4)
    compute_dtypes: tuple[str, ...] = ()  # the matmuls may run at these; the fastest the kind has counts
    speculative: tuple[str, ...] = ()  # strategies and options whose steps may emit several tokens

    @property
    def bytes(self) -> float:
        return self.parameters * self.bytes_per_parameter


def _active_weights(data: Mapping | None) -> ActiveWeights | None:
    if not data:
        return None
    return ActiveWeights(
        float(data["active_parameters"]),
        float(data["bytes_per_parameter"]),
        tuple(data.get("compute_dtypes") or ()),
        tuple(data.get("speculative") or ()),
    )


def _aside(**kw):
    """A field equality and repr leave out: a card is known by its model and file."""
    return field(compare=False, repr=False, **kw)


@dataclass(frozen=True)
class ModelCard:
    model: str
    path: Path
    engine: Engine = _aside(default=Engine(""))
    display_name: str = _aside(default="")
    source: str | None = _aside(default=None)
    weights: str | None = _aside(default=None)
    vars: Mapping[str, str] = _aside(default_factory=dict)
    hardware: Mapping[str, Placement] = _aside(default_factory=dict)
    modes: Mapping[str, Mode] = _aside(default_factory=dict)
    strategies: tuple[str, ...] = _aside(default=())
    options: tuple[str, ...] = _aside(default=())
    probes: tuple[Probe, ...] = _aside(default=())
    protocol: Protocol = _aside(default=Protocol())
    workloads: Mapping[str, Mapping[str, Any]] = _aside(default_factory=dict)  # refinements, by name
    floors: tuple[Rule[Floor], ...] = _aside(default=())
    accuracy: tuple[Rule[AccuracyGate], ...] = _aside(default=())
    speculative: tuple[Rule[AcceptanceRule], ...] = _aside(default=())
    tool_calls: tuple[Rule[ToolCallRule], ...] = _aside(default=())
    mamba_ratio: Mapping[str, float | None] = _aside(default_factory=dict)  # geometry for dayzero.spec.mamba
    goldens: GoldenReference | None = _aside(default=None)  # cross-hardware goldens, if the card has them
    claims: tuple[Claim, ...] = _aside(default=())  # published numbers the card answers to
    model_files: tuple[ModelFile, ...] = _aside(default=())  # checked present on every host by preflight
    ready_deadline: float | None = _aside(default=None)  # launch to ready, sized for the weights
    roofline: ActiveWeights | None = _aside(default=None)  # the submission checker's physics bound
    raw: Mapping[str, Any] = _aside(default_factory=dict)  # the file as written: recipe templates, digests
    # each cell's calibrated bounds from its floors files (`spec.floorfiles`, attached by the matrix
    # loader): cell id -> check name -> ((CPU kind, bound), ...); they win over a rule's `calibrated:`
    calibrations: Mapping[str, Mapping[str, tuple[tuple[str, float], ...]]] = _aside(default_factory=dict)

    def mode(self, name: str) -> Mode:
        return self.modes[name]

    def protocol_for(self, cell: Cell) -> Protocol:
        """The protocol a cell is measured under: the card's, with the chunk bound of a
        speculative strategy or option that streams several tokens a chunk (its layer's
        `tokens_per_chunk_max`, the largest where several set one)."""
        layers = [("strategies", cell.strategy)] + [("options", o) for o in cell.options]
        specs = [(self.raw.get(group) or {}).get(name) or {} for group, name in layers]
        bounds = [s["tokens_per_chunk_max"] for s in specs if s.get("tokens_per_chunk_max") is not None]
        if not bounds or max(bounds) <= self.protocol.compliance.tokens_per_chunk_max:
            return self.protocol
        compliance = replace(self.protocol.compliance, tokens_per_chunk_max=float(max(bounds)))
        return replace(self.protocol, compliance=compliance)


def golden_source(card: ModelCard, cell: Cell) -> tuple[str, GoldenPolicy]:
    """Whose golden this cell's probes are compared with, and under which policy: its own under
    its mode's policy, the card's reference cell's under the tolerant cross-hardware policy, or
    the cell of the mode its policy names (`same_as`)."""
    ref = card.goldens
    if ref is not None and ref.cell != cell.id:
        return ref.cell, ref.policy
    policy = card.mode(cell.mode).golden
    if policy.same_as:  # another mode's cell: same hardware, engine and strategy
        return replace(cell, mode=policy.same_as).id, policy
    return cell.id, policy


# One word per published status, the acceptance table's: what a recipe's authors published as
# verified is their claim (Published); Verified is earned by evidence alone, never printed from
# the card.
PUBLISHED_WORDS = {"verified": "Published", "pending": "Pending", "unsupported": "Unsupported"}


def published_word(cell: Cell) -> str:
    """The word every view prints for a cell's published status (never "verified")."""
    return PUBLISHED_WORDS.get(cell.published, cell.published.capitalize())


def as_names(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def matches(when: Mapping[str, Any], cell: Cell) -> bool:
    """Does a `when:` rule (unsupported, floors, gates) select this cell? Every given key must match."""
    for key, wanted in when.items():
        if key == "nodes":
            if cell.nodes != wanted:
                return False
        elif key == "option":
            if not set(as_names(wanted)) & set(cell.options):
                return False
        elif getattr(cell, key) not in as_names(wanted):
            return False
    return True


def _select(card: ModelCard, rules: tuple[Rule[T], ...], cell: Cell) -> list[T]:
    out = []
    for rule in rules:
        if matches(rule.when, cell):
            for point in rule.points:
                conc = card.mode(cell.mode).concurrency if point == MODE else int(point)
                out.append(replace(rule.item, concurrency=conc))
    return out


def floors_for(card: ModelCard, cell: Cell) -> list[Floor]:
    """The cell's floors; a list of concurrencies is a sweep and gives one floor per point.
    A check is known by its name (nightly comparisons, the submission checker), so floors that
    would share one are told apart by what differs: direction, output length, prompt count.
    Each floor carries the calibrated bounds of this cell's floors files (a rule covers several
    cells; a bound measured on one holds for it alone) over its rule's `calibrated:` map."""
    floors = _select(card, card.floors, cell)
    names = [f.name for f in floors]
    labelled = [
        _labelled(f, [g for g in floors if g.name == f.name]) if names.count(f.name) > 1 else f
        for f in floors
    ]
    own = card.calibrations.get(cell.id) or {}
    return [_calibrated(f, own[f.name]) if f.name in own else f for f in labelled]


def _calibrated(floor: Floor, bounds: tuple[tuple[str, float], ...]) -> Floor:
    return replace(floor, calibrated=tuple(sorted((dict(floor.calibrated) | dict(bounds)).items())))


def _labelled(floor: Floor, namesakes: list[Floor]) -> Floor:
    parts = []
    if len({g.direction for g in namesakes}) > 1:
        parts.append(floor.direction)
    if len({g.max_tokens for g in namesakes}) > 1:
        parts.append(f"len{floor.max_tokens}")
    if len({g.num_prompts for g in namesakes}) > 1:
        parts.append(f"n{floor.num_prompts}")
    same = [
        g
        for g in namesakes
        if (g.direction, g.max_tokens, g.num_prompts)
        == (floor.direction, floor.max_tokens, floor.num_prompts)
    ]
    if len(same) > 1:
        parts.append(f"#{next(i for i, g in enumerate(same) if g is floor) + 1}")
    return replace(floor, label="-".join(parts))


def claims_for(card: ModelCard, cell: Cell) -> list[Claim]:
    """The claims whose prerequisites (hardware, mode, strategy, options) this cell runs; a
    concurrency of "mode" becomes the cell's mode's."""
    out = []
    for claim in card.claims:
        if matches(claim.when, cell):
            conc = card.mode(cell.mode).concurrency if claim.concurrency == MODE else claim.concurrency
            out.append(replace(claim, concurrency=conc))
    return out


def gates_for(card: ModelCard, cell: Cell) -> list[AccuracyGate]:
    return _select(card, card.accuracy, cell)


def rules_for(card: ModelCard, cell: Cell) -> list[AcceptanceRule]:
    return _select(card, card.speculative, cell)


def tool_rules_for(card: ModelCard, cell: Cell) -> list[ToolCallRule]:
    return _select(card, card.tool_calls, cell)


# --- parsing --------------------------------------------------------------------------------------------


def _fail(path: Path | None, parts: list, message: str):
    line = yamlfile.line_of(path, parts) if path else None
    raise ConfigError(
        path or "<model card>", yamlfile.format_path(parts), message + (f" (line {line})" if line else "")
    )


def _golden(data: Mapping | None) -> GoldenPolicy:
    return GoldenPolicy(**(data or {}))


def _golden_reference(data: Mapping | None) -> GoldenReference | None:
    return GoldenReference(data["reference"], _golden(data["policy"])) if data else None


def _protocol(data: Mapping | None) -> Protocol:
    data = dict(data or {})
    if data.get("warmup") == "concurrency":
        data["warmup"] = None
    if data.get("client_processes") == "auto":
        data["client_processes"] = None
    data["saturation"] = SaturationLimits(**(data.get("saturation") or {}))
    compliance = dict(data.get("compliance") or {})
    if "eos" in compliance:
        compliance["eos"] = tuple(compliance["eos"])
    data["compliance"] = Compliance(**compliance)
    data["stall"] = StallPolicy(**(data.get("stall") or {}))
    return Protocol(**data)


def _points(value) -> tuple[int | str, ...]:
    return tuple(value) if isinstance(value, list) else (value,)


def _floor(path: Path | None, i: int, rule: Mapping) -> Rule[Floor]:
    direction = "max" if "max" in rule else "min"
    floor = Floor(
        metric=rule["metric"],
        bound=float(rule[direction]),
        concurrency=0,
        direction=direction,
        workload=rule.get("workload", "default"),
        normalise=rule.get("normalise", "none"),
        max_tokens=rule.get("max_tokens", 64),
        num_prompts=rule.get("num_prompts"),
        repetitions=rule.get("repetitions"),
        calibrated=tuple(sorted((k, float(v)) for k, v in (rule.get("calibrated") or {}).items())),
    )
    suffix = NORMALISE[floor.normalise]
    if suffix and floor.metric not in THROUGHPUTS and not floor.metric.endswith(suffix):
        _fail(
            path,
            ["floors", i, "normalise"],
            f"{floor.normalise} applies to a throughput ({', '.join(THROUGHPUTS)}), not to {floor.metric!r}",
        )
    return Rule(floor, _points(rule["concurrency"]), rule.get("when", {}))


def _gate(rule: Mapping) -> Rule[AccuracyGate]:
    gate = AccuracyGate(
        eval=rule["eval"],
        threshold=float(rule["threshold"]),
        concurrency=0,
        limit=rule.get("limit"),
        max_tokens=rule.get("max_tokens", 24),
        style=rule.get("style", "fewshot"),
    )
    return Rule(gate, _points(rule.get("concurrency", MODE)), rule.get("when", {}))


def _speculative(path: Path | None, i: int, rule: Mapping) -> Rule[AcceptanceRule]:
    bounds = dict(rule.get("min_accept_length") or {})
    for name in bounds:
        if name not in rule["workloads"]:
            _fail(
                path,
                ["speculative", i, "min_accept_length", name],
                f"a bound for workload {name!r}, which this rule does not run; "
                f"expected one of {list(rule['workloads'])}",
            )
    accept = AcceptanceRule(
        workloads=tuple(rule["workloads"]),
        concurrency=0,
        num_prompts=rule.get("num_prompts", 4),
        min_accept_length=bounds,
    )
    return Rule(accept, _points(rule.get("concurrency", MODE)), rule.get("when", {}))


def _tool_calls(rule: Mapping) -> Rule[ToolCallRule]:
    reasoning = rule.get("reasoning") or {}
    item = ToolCallRule(
        suite=rule["suite"],
        concurrency=0,
        max_tokens=rule.get("max_tokens", 256),
        min_finish_reason=float(rule.get("min_finish_reason", 1.0)),
        min_valid_arguments=float(rule.get("min_valid_arguments", 1.0)),
        min_trigger_f1=float(rule.get("min_trigger_f1", 0.9)),
        reasoning=bool(reasoning),
        min_reasoning=float(reasoning.get("min", 1.0)),
        reasoning_markers=tuple(reasoning.get("markers") or REASONING_MARKERS),
    )
    return Rule(item, _points(rule.get("concurrency", MODE)), rule.get("when", {}))


def _claim(path: Path | None, i: int, data: Mapping) -> Claim:
    claim = Claim(
        id=data["id"],
        source=data["source"],
        metric=data["metric"],
        value=float(data["value"]),
        unit=data["unit"],
        workload=data["workload"],
        concurrency=data.get("concurrency"),
        when=dict(data.get("when") or {}),
        tolerance=float(data.get("tolerance", 0.1)),
        needs=tuple(data.get("needs") or ()),
        note=data.get("note", ""),
    )
    if claim.metric not in THROUGHPUTS:
        _fail(
            path,
            ["claims", i, "metric"],
            f"expected a throughput ({', '.join(THROUGHPUTS)}), got {claim.metric!r}",
        )
    if claim.unit == "per_user" and claim.metric != "output_throughput":
        _fail(
            path,
            ["claims", i, "unit"],
            f"per_user is each stream's own decode rate, an output_throughput; got it for {claim.metric!r}",
        )
    return claim


def _claims(path: Path | None, data) -> tuple[Claim, ...]:
    claims = tuple(_claim(path, i, c) for i, c in enumerate(data or ()))
    ids = [c.id for c in claims]
    for i, c in enumerate(claims):
        if ids.index(c.id) != i:
            _fail(path, ["claims", i, "id"], f"claim id {c.id!r} is used twice; expected unique ids")
    return claims


def _worker(data: Mapping | None) -> Worker | None:
    return Worker(tuple(str(a) for a in data["command"]), int(data["port"])) if data else None


def _engine(path: Path | None, data: Mapping) -> Engine:
    engine = Engine(
        name=data["name"],
        version_command=data.get("version_command"),
        health_path=data.get("health_path", "/health"),
        bind=data.get("bind", "0.0.0.0"),
        multinode_args=tuple(str(a) for a in data.get("multinode_args") or ()),
        package=data.get("package"),
        router_package=data.get("router_package"),
        worker=_worker(data.get("worker")),
    )
    if not engine.health_path.startswith("/"):
        _fail(
            path, ["engine", "health_path"], f"expected a path starting with '/', got {engine.health_path!r}"
        )
    return engine


def _mamba_ratio(data: Mapping[str, Any]) -> dict:
    """The card's `mamba_ratio` inputs, the state and KV sizes it leaves null taken from `fit`
    (its architecture at the recipe's cache flags), never copied by hand."""
    given = dict(data.get("mamba_ratio") or {})
    if not given:
        return given
    sized = mamba_geometry(data, data["engine"].get("name"))
    return {**given, **{k: v for k, v in sized.items() if given.get(k) is None}}


def parse(path: Path | None, data: Mapping[str, Any]) -> ModelCard:
    """A card from its file's data (already valid against the `model_card` schema)."""
    modes = {
        name: Mode(name, m["concurrency"], m.get("description", ""), _golden(m.get("golden")))
        for name, m in (data.get("modes") or {}).items()
    }
    for name, mode in modes.items():
        other = mode.golden.same_as
        if other and (other not in modes or other == name):
            expected = f"expected another mode of the card ({', '.join(sorted(modes))}), got {other!r}"
            _fail(path, ["modes", name, "golden", "same_as"], expected)
    return ModelCard(
        model=data["model"],
        path=path,
        engine=_engine(path, data["engine"]),
        display_name=data.get("display_name", data["model"]),
        source=data.get("source"),
        weights=data.get("weights"),
        vars=dict(data.get("vars") or {}),
        mamba_ratio=_mamba_ratio(data),
        hardware={
            name: Placement(h.get("nodes", 1), h.get("image"), h.get("vars") or {})
            for name, h in (data.get("hardware") or {}).items()
        },
        modes=modes,
        strategies=tuple(data.get("strategies") or ()),
        options=tuple(data.get("options") or ()),
        probes=tuple(
            Probe(p["id"], p["prompt"], p.get("max_tokens", 32), tuple(p.get("expect_contains", ())))
            for p in data.get("probes") or ()
        ),
        protocol=_protocol(data.get("protocol")),
        workloads=dict(data.get("workloads") or {}),
        floors=tuple(_floor(path, i, r) for i, r in enumerate(data.get("floors") or ())),
        accuracy=tuple(_gate(r) for r in data.get("accuracy") or ()),
        speculative=tuple(_speculative(path, i, r) for i, r in enumerate(data.get("speculative") or ())),
        tool_calls=tuple(_tool_calls(r) for r in data.get("tool_calls") or ()),
        goldens=_golden_reference(data.get("goldens")),
        claims=_claims(path, data.get("claims")),
        model_files=tuple(
            ModelFile(
                f["path"],
                f["revision"],
                f.get("role", "weights"),
                f.get("hub"),
                f.get("size"),
                f.get("sha256"),
                f.get("precision"),
                dict(f.get("shards") or {}),
            )
            for f in data.get("model_files") or ()
        ),
        ready_deadline=data.get("ready_deadline"),
        roofline=_active_weights(data.get("roofline")),
        raw=data,
    )
