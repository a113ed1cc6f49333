"""A card's sweeps and SLOs, as typed data read from the card's `sweeps:` and `slos:` sections.

A sweep measures one workload at a list of loads: a closed-loop concurrency list, an open-loop
request-rate list (Poisson arrivals) or a list of input lengths (the context sweep), each point
with the card's protocol, the whole sweep bounded by `budget_s`. An SLO (per workload) says what
one request must meet; a point's attainment is the share of its requests that met every bound.
Read from `ModelCard.raw` (the card file passed its schema), so the card parser stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from dayzero.errors import ConfigError
from dayzero.spec.card import ModelCard, matches

KINDS = ("concurrency", "rate", "context")


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

    def label(self, load: float) -> str:
        """A point's name in record names and checks: c4, q2.5, isl1024."""
        prefix = {"concurrency": "c", "rate": "q", "context": "isl"}[self.kind]
        return f"{prefix}{load:g}"


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
                slo=known.get(s["workload"]),
            )
        )
    return tuple(out)


def sweeps_for(card: ModelCard, cell) -> list[Sweep]:
    return [s for s in parse(card) if matches(s.when, cell)]
