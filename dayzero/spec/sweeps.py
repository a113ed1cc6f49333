"""A card's sweeps and SLOs, as typed data read from the card's `sweeps:` and `slos:` sections.

A sweep measures one workload at a list of loads: a closed-loop concurrency list, an open-loop
request-rate list (Poisson arrivals) or a list of input lengths (the context sweep), each point
with the card's protocol, the whole sweep bounded by `budget_s`. An SLO (per workload, or a
sweep's own `slo:`: a mode's) says what one request must meet; a point's attainment is the share
of its requests that met every bound.
Read from `ModelCard.raw` (the card file passed its schema), so the card parser stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from dayzero.errors import ConfigError
from dayzero.spec.card import ModelCard, matches

KINDS = ("concurrency", "rate", "context")
# What a sweep's floor may bound, per sweep kind, and which way: the max load at SLO is a floor
# (at least), the context sweep's decode-time ratio a ceiling (at most).
FLOOR_METRICS = {"max_load_at_slo": ("min", ("concurrency", "rate")), "decode_ratio": ("max", ("context",))}


@dataclass(frozen=True)
class Slo:
    """Bounds one request must meet; None: not bounded. `target`: the attainment a load must keep
    to count as served at SLO (MLPerf's server scenario asks 99% of TTFT/TPOT; DistServe 90%)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    user_tok_s: float | None = None  # tokens/s one user sees: 1000 / TPOT
    target: float = 0.9

    def describe(self) -> str:
        parts = []
        if self.ttft_ms is not None:
            parts.append(f"TTFT <= {self.ttft_ms:g} ms")
        if self.tpot_ms is not None:
            parts.append(f"TPOT <= {self.tpot_ms:g} ms")
        if self.user_tok_s is not None:
            parts.append(f">= {self.user_tok_s:g} tok/s per user")
        return ", ".join(parts) or "none"

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class SweepFloor:
    """A bound on what a whole sweep found: `max_load_at_slo` >= bound (the highest load whose
    attainment held the SLO's target), or `decode_ratio` <= bound (decode time per token at the
    longest input over the shortest)."""

    metric: str
    bound: float
    direction: str  # min | max

    def describe(self) -> str:
        return f"{self.metric} {'>=' if self.direction == 'min' else '<='} {self.bound:g}"


@dataclass(frozen=True)
class Sweep:
    """One sweep of one workload for the cells `when` selects."""

    name: str
    kind: str  # concurrency | rate | context
    workload: str
    points: tuple[float, ...]
    when: dict
    concurrency: int = 1  # in flight for a context sweep; the cap on in-flight requests for a rate sweep
    num_prompts: int | None = None  # per point; None: the protocol's
    repetitions: int = 1
    budget_s: float = 600.0  # no point starts once the sweep has run this long
    search: int = 0  # bisection steps between sweep points for the max load at SLO
    slo: Slo | None = None
    floor: SweepFloor | None = None

    @property
    def floor_name(self) -> str:
        """The floor's check name: `floor:max_load_at_slo@sweep:rate`."""
        return f"floor:{self.floor.metric}@sweep:{self.name}" if self.floor else ""

    def label(self, load: float) -> str:
        """A point's name in record names and checks: c4, q2.5, isl1024."""
        prefix = {"concurrency": "c", "rate": "q", "context": "isl"}[self.kind]
        return f"{prefix}{int(load) if load == int(load) else f'{load:g}'}"  # isl1048320, not isl1.04832e+06


def slos(card: ModelCard) -> dict[str, Slo]:
    return {name: Slo(**spec) for name, spec in (card.raw.get("slos") or {}).items()}


def parse(card: ModelCard) -> tuple[Sweep, ...]:
    """The card's sweeps; a sweep that names no workload of the card's SLOs has none."""
    known = slos(card)
    out = []
    for i, s in enumerate(card.raw.get("sweeps") or ()):
        points = tuple(float(p) for p in s["points"])
        if list(points) != sorted(set(points)):
            raise ConfigError(
                card.path, f"sweeps[{i}].points", f"expected increasing loads, got {s['points']}"
            )
        if s["kind"] == "context" and s.get("search"):
            raise ConfigError(card.path, f"sweeps[{i}].search", "a context sweep has no load to search")
        out.append(
            Sweep(
                name=s["name"],
                kind=s["kind"],
                workload=s["workload"],
                points=points,
                when=dict(s.get("when") or {}),
                concurrency=s.get("concurrency", 1 if s["kind"] == "context" else 64),
                num_prompts=s.get("num_prompts"),
                repetitions=s.get("repetitions", 1),
                budget_s=float(s.get("budget_s", 600)),
                search=s.get("search", 0),
                slo=Slo(**s["slo"]) if "slo" in s else known.get(s["workload"]),
                floor=_floor(card, i, s, known),
            )
        )
    return tuple(out)


def _floor(card: ModelCard, i: int, s: dict, known: dict[str, Slo]) -> SweepFloor | None:
    """`floor: {metric: max_load_at_slo, min: N}` or `{metric: decode_ratio, max: R}`, checked
    against the sweep it sits in (the schema checked its keys and types)."""
    spec = s.get("floor")
    if spec is None:
        return None
    field = f"sweeps[{i}].floor"
    metric = spec["metric"]
    direction, kinds = FLOOR_METRICS[metric]
    if s["kind"] not in kinds:
        other = next(m for m, (_, ks) in FLOOR_METRICS.items() if s["kind"] in ks)
        why = f"{metric} bounds a {' or '.join(kinds)} sweep; a {s['kind']} sweep's floor is {other}"
        raise ConfigError(card.path, field, why)
    if ("max" if direction == "min" else "min") in spec or direction not in spec:
        way = "at least" if direction == "min" else "at most"
        raise ConfigError(card.path, field, f"expected {metric} with `{direction}:` ({way}), got {spec}")
    if metric == "max_load_at_slo" and s["workload"] not in known and "slo" not in s:
        why = f"max_load_at_slo needs the sweep's slo: or one for workload {s['workload']!r} under slos:"
        raise ConfigError(card.path, field, why)
    if metric == "decode_ratio" and len(s["points"]) < 2:
        raise ConfigError(card.path, field, "decode_ratio needs at least two input lengths in points")
    return SweepFloor(metric, float(spec[direction]), direction)


def sweeps_for(card: ModelCard, cell) -> list[Sweep]:
    return [s for s in parse(card) if matches(s.when, cell)]
