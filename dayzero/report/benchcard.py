"""The benchmark card: one per model x hardware kind, built from evidence only.

What the cookbook's speed tables and InferenceX's charts show, from the sweeps a run measured
(`sweep:*` checks, their points recomputable from raw records): a sweep table (mode/strategy,
load, output tok/s per accelerator, tok/s per user, TTFT/ITL p50/p99, SLO attainment, goodput,
energy and cost per token where known), the Pareto of tok/s per accelerator against tok/s per
user with each party's frontier (the lab's, each vendor's: `frontiers`) and the card's published
claims as points, and the context-length plot. Every point says whose run it is.
Written as `cards/<model>/<kind>.{md,html,json}` (plus the two SVGs) under the reports folder.
A kind with no sweep evidence says "pending" and still shows the published claims.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from dayzero import atomic
from dayzero.checks import family_of
from dayzero.escape import escape
from dayzero.report import cardplan, reproduction
from dayzero.report.acceptance import carried, latest_evidence
from dayzero.report.cost import Price, per_million_tokens, prices
from dayzero.report.pictures import charts
from dayzero.report.plots import Series, line_chart
from dayzero.spec.card import MODE, Claim, ModelCard, as_names
from dayzero.spec.matrix import Matrix

CARDS_DIR = "cards"


@dataclass(frozen=True)
class Point:
    """One measured sweep point as the card prints it."""

    cell: str
    mode: str
    strategy: str
    sweep: str
    kind: str  # concurrency | rate | context
    load: float
    label: str
    tok_s_per_accelerator: float | None
    tok_s_per_user: float | None  # median over requests of 1000 / TPOT (InferenceX's interactivity)
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    tpot_p50_ms: float | None
    attainment: float | None
    goodput_tok_s: float | None
    goodput_rps: float | None
    server_ttft_gap_ms: float | None
    client_flagged: bool
    gap_judged: bool  # False: requests could queue for a server slot, the gap holds the wait
    joules_per_token: float | None
    energy_source: str  # the tool the energy came from; "" where not measured
    energy_reason: str  # why not measured; "" where measured
    cost_per_million: float | None
    evidence: str
    frontier: bool = False
    # each figure's 95% interval as the evidence keeps it (`checks.intervals`: lo, hi, n, why);
    # empty in evidence written before intervals
    intervals: Mapping[str, Mapping] = field(default_factory=dict)
    contended: str = ""  # what contended a host while the point was measured: never a clean number
    # whose run it is (`reproduction.party`): the lab's, or the vendor whose accepted bundle it
    # came from, on the vendor's word (issue 42, item 3)
    whose: str = reproduction.LAB
    bundle: str = ""  # a vendor point's bundle sha256

    @property
    def origin(self) -> str:
        """As the card prints it: `lab`, or `acme (vendor, bundle 1a2b...)`."""
        return reproduction.origin(self.whose, self.bundle)

    @property
    def id(self) -> str:
        """Unique on the card: the chart markers and table rows carry it."""
        return f"{self.mode}/{self.strategy} {self.sweep} {self.label}"


@dataclass(frozen=True)
class ClaimPoint:
    """A published claim drawn on the Pareto: (tok/s per user, tok/s per accelerator) and its source."""

    label: str
    tok_s_per_user: float
    tok_s_per_accelerator: float
    source: str = ""


@dataclass(frozen=True)
class BenchCard:
    model: str
    kind: str
    display_name: str
    points: tuple[Point, ...]
    summaries: tuple[dict, ...]  # per sweep: max load at SLO, context fit, skipped points
    claims: tuple[ClaimPoint, ...] = ()
    price: Price | None = None
    energy: str = ""  # why energy is not measured, where it is not
    evidence: tuple[str, ...] = field(default=())
    plan: tuple[cardplan.PlanRow, ...] = ()  # every sweep point the card asks for, measured or not
    claim_lines: tuple[str, ...] = ()  # the claims that apply, with prerequisites and status
    fit: tuple[str, ...] = ()  # weights and cache against the kind's memory

    @property
    def status(self) -> str:
        return "measured" if self.points else "pending"


def claim_points(card: ModelCard, kind: str) -> tuple[ClaimPoint, ...]:
    """The card's published claims (`ModelCard.claims`) as points on this kind's Pareto: an
    output-throughput claim per accelerator and one per user of the same workload, concurrency
    and prerequisites make one point (a claim of one axis alone has no place on the plot)."""
    pairs: dict[tuple, dict[str, Claim]] = {}
    for claim in card.claims:
        kinds = claim.when.get("hardware")
        if kinds is not None and kind not in as_names(kinds):
            continue
        if claim.metric == "output_throughput" and claim.unit in ("per_accelerator", "per_user"):
            key = (claim.workload, str(claim.concurrency), repr(sorted(claim.when.items())))
            pairs.setdefault(key, {})[claim.unit] = claim
    out = []
    for (workload, conc, _), both in pairs.items():
        if len(both) == 2:
            acc, user = both["per_accelerator"], both["per_user"]
            at = f" c{conc}" if conc not in ("None", MODE) else ""
            out.append(ClaimPoint(f"{workload}{at}", user.value, acc.value, acc.source))
    return tuple(out)


def frontier(points: Sequence[Point]) -> set[str]:
    """Ids of the points no other point beats on both tok/s per user and tok/s per accelerator
    (one party's points: `frontiers`)."""
    xy = [(p.id, p.tok_s_per_user, p.tok_s_per_accelerator) for p in points]
    xy = [t for t in xy if t[1] is not None and t[2] is not None]
    out = set()
    best = float("-inf")
    for pid, _, y in sorted(xy, key=lambda t: (-t[1], -t[2])):
        if y > best:
            out.add(pid)
            best = y
    return out


def frontiers(points: Sequence[Point]) -> set[str]:
    """Each party's own frontier (the lab's, each vendor's): a vendor's point, on its word, never
    pushes a lab point off the lab's frontier, nor stands on it (issue 42, item 3)."""
    return {
        pid
        for whose in {p.whose for p in points}
        for pid in frontier([p for p in points if p.whose == whose])
    }


def marked(points: Sequence[Point]) -> list[Point]:
    """The points with each party's frontier marked; a point measured on a contended host is
    shown, marked, but is no clean number to draw a frontier through (issue 41, item 4)."""
    on = frontiers([p for p in points if p.kind != "context" and not p.contended])
    return [replace(p, frontier=p.id in on) for p in points]


def parties(points: Sequence[Point]) -> list[str]:
    """The parties whose points these are, the lab first."""
    return sorted({p.whose for p in points}, key=lambda w: (w != reproduction.LAB, w))


def energy_line(points: Sequence[Point]) -> str:
    """What the card says about energy: measured by which tool, or why not (the samplers' reasons)."""
    sources = sorted({p.energy_source for p in points if p.energy_source})
    if sources:
        return f"measured by {', '.join(sources)} beside each sweep point"
    reasons = sorted({p.energy_reason for p in points if p.energy_reason})
    return "not measured: " + ("; ".join(reasons) if reasons else "no sweep evidence")


def _engine_prefix(doc: dict) -> str:
    """`sglang ` where the kind is served by several engines (the cell id's `cpu+sglang`)."""
    kind = doc["cell"].split("/")[1] if doc["cell"].count("/") >= 3 else ""
    return f"{kind.split('+', 1)[1]} " if "+" in kind else ""


def points_of(doc: dict, evidence_path: str, price: Price | None) -> tuple[list[Point], list[dict]]:
    """The sweep points and per-sweep summaries of one evidence document."""
    points, summaries = [], []
    whose, bundle = reproduction.party(doc), reproduction.bundle_of(doc)
    floors = {  # the sweep check's name -> its floor's check (`checks.sweep.sweep_floor_check`)
        (c.get("details") or {}).get("sweep"): c
        for c in doc["checks"]
        if family_of(c) == "floor" and (c.get("details") or {}).get("sweep")
    }
    for check in doc["checks"]:
        if family_of(check) != "sweep":
            continue
        d = check.get("details") or {}
        floor = floors.get(check["name"])
        summaries.append(
            {
                "cell": doc["cell"],
                "whose": whose,
                "sweep": d.get("sweep"),
                "kind": d.get("kind"),
                "workload": d.get("workload"),
                "verdict": check["verdict"],
                "message": check["message"],
                "skipped": d.get("skipped", []),
                **({"slo": d["slo"]} if "slo" in d else {}),
                **({"max_load_at_slo": d["max_load_at_slo"]} if "max_load_at_slo" in d else {}),
                **({"fit": d["fit"]} if "fit" in d else {}),
                **({"floor": _floor_summary(floor)} if floor else {}),
            }
        )
        contended = d.get("contended") or {}
        for p in d.get("points") or ():
            per_acc = p.get("output_throughput_per_accelerator")
            marks = [
                why
                for phase, why in contended.items()
                for rel in p.get("records") or ()
                if rel.endswith(f"/{phase}.json")
            ]
            points.append(
                Point(
                    cell=doc["cell"],
                    mode=_engine_prefix(doc) + doc["mode"],
                    strategy="+".join([doc["strategy"], *doc.get("options", [])]),
                    sweep=str(d.get("sweep")),
                    kind=str(d.get("kind")),
                    load=p["load"],
                    label=p["label"],
                    tok_s_per_accelerator=per_acc,
                    tok_s_per_user=p.get("median_interactivity"),
                    ttft_p50_ms=p.get("median_ttft_ms"),
                    ttft_p99_ms=p.get("p99_ttft_ms"),
                    itl_p50_ms=p.get("median_itl_ms"),
                    itl_p99_ms=p.get("p99_itl_ms"),
                    tpot_p50_ms=p.get("median_tpot_ms"),
                    attainment=p.get("attainment"),
                    goodput_tok_s=p.get("goodput_tok_s"),
                    goodput_rps=p.get("goodput_rps"),
                    server_ttft_gap_ms=p.get("server_ttft_gap_ms"),
                    client_flagged=bool(p.get("client_flagged")),
                    gap_judged=bool(p.get("gap_judged")),
                    joules_per_token=(p.get("energy") or {}).get("joules_per_token"),
                    energy_source=(p.get("energy") or {}).get("source", ""),
                    energy_reason=(p.get("energy") or {"not_measured": "an older run"}).get(
                        "not_measured", ""
                    ),
                    cost_per_million=per_million_tokens(price, per_acc),
                    evidence=evidence_path,
                    intervals={**(p.get("intervals") or {}), **(p.get("slo_intervals") or {})},
                    contended="; ".join(dict.fromkeys(marks)),
                    whose=whose,
                    bundle=bundle,
                )
            )
    return points, summaries


def _floor_summary(check: dict) -> dict:
    """A sweep floor's verdict, with its interval where it was judged on one (`checks.sweep`)."""
    out = {"check": check["name"], **{k: check.get(k) for k in ("verdict", "message", "measured", "bound")}}
    iv = (check.get("details") or {}).get("interval")
    return out | ({"interval": iv} if iv else {})


def _floor_interval(iv: Mapping | None) -> str:
    """` [lo, hi] (n=N)`, or what the sample cannot support; empty in evidence without one."""
    if not iv:
        return ""
    if iv.get("lo") is None or iv.get("hi") is None:
        return f" ({iv.get('why') or 'no interval'})"
    return f" [{iv['lo']:g}, {iv['hi']:g}] (n={iv.get('n')})"


def build(matrix: Matrix, reports_dir: Path, price_of: Mapping[str, Price] | None = None) -> list[BenchCard]:
    """Every (model, hardware kind) the matrix serves, from the latest evidence of each cell;
    `price_of` (a lab's `--prices` file) replaces the catalogue's prices."""
    latest, _ = carried(matrix, latest_evidence(reports_dir))  # a renamed cell's evidence: its new id's
    price_of = prices(matrix) if price_of is None else price_of
    out = []
    for card in matrix.cards.values():
        for kind in card.hardware:
            cells = [c for c in matrix.cells if c.model == card.model and c.hardware == kind]
            points: list[Point] = []
            summaries: list[dict] = []
            used = []
            for cell in cells:
                if cell.id not in latest:
                    continue
                path, doc = latest[cell.id]
                rel = str(Path(path).relative_to(reports_dir))
                got, sums = points_of(doc, rel, price_of.get(kind))
                if got:
                    used.append(rel)
                points += got
                summaries += sums
            points = marked(points)
            docs = {c.id: latest[c.id][1] for c in cells if c.id in latest}
            supported = [c for c in cells if c.supported]
            out.append(
                BenchCard(
                    card.model,
                    kind,
                    card.display_name,
                    tuple(points),
                    tuple(summaries),
                    claim_points(card, kind),
                    price_of.get(kind),
                    energy_line(points),
                    tuple(used),
                    tuple(cardplan.rows(matrix, card.model, kind, points)),
                    tuple(cardplan.claim_lines(card, supported, docs)),
                    tuple(cardplan.fit_lines(card, matrix.hardware, kind)),
                )
            )
    return out


# --- charts -------------------------------------------------------------------------------------


def pareto_svg(card: BenchCard) -> str:
    """tok/s per accelerator against tok/s per user: one marker series per sweep, the frontier as
    a line, claims as large markers."""
    series: dict[str, list[Point]] = {}
    shown = [
        p
        for p in card.points
        if p.kind != "context" and p.tok_s_per_user is not None and p.tok_s_per_accelerator is not None
    ]
    several = len({(p.mode, p.strategy) for p in shown}) > 1  # else the legend names the sweep alone
    for p in shown:
        name = f"{p.mode}/{p.strategy} {p.sweep}" if several else f"{p.sweep} ({p.kind})"
        name += "" if p.whose == reproduction.LAB else f", {p.whose}'s (vendor)"  # whose, in the legend
        series.setdefault("measured on a contended host" if p.contended else name, []).append(p)
    charts = [
        Series(
            name,
            tuple((p.tok_s_per_user, p.tok_s_per_accelerator) for p in pts),
            labels=tuple(p.id for p in pts),
            line=False,
            bars=tuple(_bar(p, "output_throughput_per_accelerator") for p in pts),
        )
        for name, pts in series.items()
    ]
    front = [p for p in card.points if p.frontier]
    for whose in parties(front):  # one frontier per party: never the lab's and a vendor's as one
        theirs = [p for p in front if p.whose == whose]
        named = "" if parties(card.points) == [reproduction.LAB] else f" ({_whose(whose)})"
        charts.append(
            Series(
                f"Pareto frontier{named}",
                tuple((p.tok_s_per_user, p.tok_s_per_accelerator) for p in theirs),
                colour=len(charts) if named else 1,  # with several parties, no point series' colour
                dashed=True,
                radius=0,
            )
        )
    if card.claims:
        charts.append(
            Series(
                "published claims",
                tuple((c.tok_s_per_user, c.tok_s_per_accelerator) for c in card.claims),
                colour=4,
                labels=tuple(f"claim: {c.label}" for c in card.claims),
                line=False,
                radius=7,
            )
        )
    return line_chart(
        charts,
        f"{card.model} on {card.kind}: throughput vs interactivity",
        "tok/s per user (1000 / TPOT)",
        "output tok/s per accelerator",
    )


def _whose(whose: str) -> str:
    return "the lab's" if whose == reproduction.LAB else f"{whose}'s, vendor"


CONTEXT_CHARTS = {
    "context": ("time to first token", (("TTFT p50", "ttft_p50_ms", False),)),
    "decode": (
        "decode time per token",
        (("decode/token p50", "tpot_p50_ms", False), ("ITL p50", "itl_p50_ms", True)),
    ),
}


INTERVAL_OF = {
    "ttft_p50_ms": "median_ttft_ms",
    "tpot_p50_ms": "median_tpot_ms",
    "itl_p50_ms": "median_itl_ms",
}


def _bar(p: Point, key: str) -> tuple[float, float] | None:
    """A point's figure's interval as an error bar; None where it has none."""
    iv = (p.intervals or {}).get(key) or {}
    return (
        (float(iv["lo"]), float(iv["hi"])) if iv.get("lo") is not None and iv.get("hi") is not None else None
    )


def context_svg(card: BenchCard, chart: str = "context") -> str:
    """Against input length, per context sweep: TTFT (`context`), or decode time per token and
    ITL (`decode`; on its own axis, seconds of prefill would flatten it)."""
    title, metrics = CONTEXT_CHARTS[chart]
    charts = []
    cells = sorted({(p.mode, p.strategy, p.sweep) for p in card.points if p.kind == "context"})
    for p_cell in cells:
        pts = sorted(
            (p for p in card.points if p.kind == "context" and (p.mode, p.strategy, p.sweep) == p_cell),
            key=lambda p: p.load,
        )
        name = f"{p_cell[0]}/{p_cell[1]} " if len(cells) > 1 else ""  # the legend is narrow
        for metric, attr, dashed in metrics:
            got = [p for p in pts if getattr(p, attr) is not None]
            charts.append(
                Series(
                    f"{name}{metric}",
                    tuple((p.load, getattr(p, attr)) for p in got),
                    colour=len(charts),
                    dashed=dashed,
                    labels=tuple(f"{p.id} {metric}" + (" (contended)" if p.contended else "") for p in got),
                    bars=tuple(_bar(p, INTERVAL_OF[attr]) for p in got),
                )
            )
    return line_chart(charts, f"{card.model} on {card.kind}: {title} vs input length", "input tokens", "ms")


# --- documents ------------------------------------------------------------------------------------

COLUMNS = (
    ("mode/strategy", lambda p: f"{p.mode}/{p.strategy}"),
    ("sweep", lambda p: p.sweep),
    ("load", lambda p: p.label),
    ("tok/s/acc", lambda p: _with(p, "output_throughput_per_accelerator", p.tok_s_per_accelerator)),
    ("tok/s/user", lambda p: _with(p, "median_interactivity", p.tok_s_per_user)),
    ("TTFT p50", lambda p: _with(p, "median_ttft_ms", p.ttft_p50_ms)),
    ("TTFT p99", lambda p: _with(p, "p99_ttft_ms", p.ttft_p99_ms)),
    ("ITL p50", lambda p: _with(p, "median_itl_ms", p.itl_p50_ms)),
    ("ITL p99", lambda p: _with(p, "p99_itl_ms", p.itl_p99_ms)),
    ("SLO att.", lambda p: _attainment(p)),
    ("goodput tok/s", lambda p: _with(p, "goodput_tok_s", p.goodput_tok_s)),
    ("goodput req/s", lambda p: p.goodput_rps),
    ("client-server TTFT gap", lambda p: _gap(p)),
    ("J/token", lambda p: p.joules_per_token),
    ("cost/1M tok", lambda p: p.cost_per_million),
    ("Pareto", lambda p: "yes" if p.frontier else ""),
    ("whose", lambda p: p.origin),
    ("contended", lambda p: _contended(p)),
)


def _with(p: Point, key: str, value: float | None) -> str | None:
    """A figure with its 95% interval, or what its sample cannot support (a p99 of 16 requests
    is no number): `52.1 [48.2, 55.0]`, `not supported by n=16`."""
    iv = (p.intervals or {}).get(key)
    if value is None or not iv:
        return None if value is None else _cell(float(value))
    if iv.get("lo") is None or iv.get("hi") is None:
        return iv.get("why") or f"not supported by n={iv.get('n')}"
    return f"{_cell(float(value))} [{_cell(float(iv['lo']))}, {_cell(float(iv['hi']))}]"


def _attainment(p: Point) -> str | None:
    if p.attainment is None:
        return None
    iv = (p.intervals or {}).get("attainment") or {}
    if iv.get("lo") is None or iv.get("hi") is None:
        return f"{p.attainment:.0%}"
    return f"{p.attainment:.0%} [{iv['lo']:.0%}, {iv['hi']:.0%}]"


def _contended(p: Point) -> str | None:
    """A vendor's contention marks are its own (its host-load samples stay on its side)."""
    if not p.contended:
        return None
    return p.contended if p.whose == reproduction.LAB else f"{p.contended} ({reproduction.VENDORS_WORD})"


def _gap(p: Point) -> str | None:
    if p.server_ttft_gap_ms is None:
        return None
    note = " (client flagged)" if p.client_flagged else "" if p.gap_judged else " (with queue)"
    return f"{p.server_ttft_gap_ms:g} ms{note}"


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def to_json(card: BenchCard) -> dict:
    return {
        "model": card.model,
        "hardware": card.kind,
        "status": card.status,
        "points": [asdict(p) | {"id": p.id} for p in card.points],
        "sweeps": list(card.summaries),
        "claims": [asdict(c) for c in card.claims],
        "price": asdict(card.price) if card.price else None,
        "frontier_cost": [
            {
                "point": p.id,
                "tok_s_per_user": p.tok_s_per_user,
                "cost_per_million": p.cost_per_million,
                "whose": p.whose,
            }
            for p in frontier_costs(card)
        ],
        "energy": card.energy,
        "evidence": list(card.evidence),
        "plan": [asdict(r) for r in card.plan],
        "claim_lines": list(card.claim_lines),
        "fit": list(card.fit),
    }


def _summary_lines(card: BenchCard) -> list[str]:
    lines = [origin_line(card)] if card.points else []
    for s in card.summaries:
        whose = s.get("whose", reproduction.LAB)
        text = f"{s['cell']} {s['sweep']}" + ("" if whose == reproduction.LAB else f" ({whose}'s run)")
        text += f": {s['message']}"
        fit = s.get("fit")
        if fit:
            grows = ", ".join(
                f"{m.removeprefix('median_').removesuffix('_ms').upper()} {fit[m]['growth']}"
                for m in ("median_ttft_ms", "median_itl_ms", "median_tpot_ms")
                if fit.get(m, {}).get("growth")
            )
            text += f"; growth with context: {grows}; decode time longest/shortest: {fit.get('decode_ratio')}"
        if floor := s.get("floor"):
            metric = floor["check"].removeprefix("floor:").split("@", 1)[0]
            way = "<=" if metric == "decode_ratio" else ">="
            text += f"; floor {metric} {way} {floor['bound']:g}{_floor_interval(floor.get('interval'))}: "
            text += f"{floor['verdict']} ({floor['message']})"
        lines.append(text)
    return lines


def origin_line(card: BenchCard) -> str:
    """Whose runs the points are: the lab's, or a vendor's accepted bundle (the vendor's word)."""
    theirs = sorted({p.origin for p in card.points if p.whose != reproduction.LAB})
    if not theirs:
        return "points: the lab's own runs"
    mixed = "the lab's own runs and " if any(p.whose == reproduction.LAB for p in card.points) else ""
    return f"points: {mixed}accepted vendor submissions, on the vendor's word: {', '.join(theirs)}"


def frontier_costs(card: BenchCard) -> list[Point]:
    """The frontiers' priced points, party by party (the lab first), by tok/s per user: what
    interactivity costs on each party's own frontier."""
    on = [p for p in card.points if p.frontier and p.cost_per_million is not None]
    order = parties(on)
    return sorted(on, key=lambda p: (order.index(p.whose), p.tok_s_per_user or 0.0))


def frontier_cost_line(card: BenchCard) -> str:
    """Cost per 1M output tokens along each party's frontier, and its cheapest point (the one
    with the most tok/s per accelerator: cost is price over throughput); the lab's alone is
    said as it always was, a vendor's frontier by its origin."""
    if card.price is None:
        return "cost on the Pareto frontier: not known (no price per accelerator-hour for this hardware kind)"
    on = frontier_costs(card)
    if not on:
        return "cost on the Pareto frontier: no priced point on it"
    unit = f"{card.price.currency} per 1M output tokens"
    said = []
    for whose in parties(on):
        theirs = [p for p in on if p.whose == whose]
        at = ", ".join(
            f"{p.cost_per_million:.4g} at {p.tok_s_per_user:.4g}" + (" tok/s per user" if i == 0 else "")
            for i, p in enumerate(theirs)
        )
        cheapest = min(theirs, key=lambda p: p.cost_per_million)
        named = (
            ""
            if parties(card.points) == [reproduction.LAB]
            else "the lab's frontier: "
            if whose == reproduction.LAB
            else f"the frontier of {theirs[0].origin}: "
        )
        said.append(f"{named}{at}; cheapest: {cheapest.id}")
    return f"cost on the Pareto frontier ({unit}): " + ". ".join(said)


def _price_line(card: BenchCard) -> str:
    if card.price is None:
        return "cost: not known (no price per accelerator-hour for this hardware kind)"
    p = card.price
    return f"cost: {p.per_accelerator_hour:g} {p.currency} per accelerator-hour ({p.source})"


def to_markdown(card: BenchCard, stem: str) -> str:
    def md(v) -> str:
        return escape(_cell(v), "markdown")

    lines = [
        f"# Benchmark card: {escape(card.display_name, 'markdown')} on {escape(card.kind, 'markdown')}",
        "",
        f"Status: **{card.status}**. Generated by dayzero from evidence only; do not edit.",
        "",
    ]
    if card.status == "pending":
        lines += ["No sweep evidence for this hardware kind yet: pending.", ""]
    else:
        lines += [
            f"![Pareto]({stem}.pareto.svg)",
            "",
            "| " + " | ".join(name for name, _ in COLUMNS) + " |",
            "|" + "---|" * len(COLUMNS),
        ]
        lines += ["| " + " | ".join(md(get(p)) for _, get in COLUMNS) + " |" for p in card.points]
        lines.append("")
        if any(p.kind == "context" for p in card.points):
            lines += [f"![context]({stem}.context.svg)", "", f"![decode]({stem}.decode.svg)", ""]
    lines += [f"- {escape(line, 'markdown')}" for line in _summary_lines(card)]
    lines += [f"- energy: {card.energy}", f"- {escape(_price_line(card), 'markdown')}"]
    lines.append(f"- {escape(frontier_cost_line(card), 'markdown')}")
    lines += [
        f"- published claims: {len(card.claims)}"
        + ("" if card.claims else " drawn (none states both tok/s per accelerator and per user)"),
        "",
    ]
    lines += cardplan.markdown(card.plan, card.claim_lines, card.fit)
    return "\n".join(lines)


def to_html(card: BenchCard, pareto: str, context: str, history: Sequence[str] = ()) -> str:
    """`history`: each cell's series across nights with its change points (our own SVGs)."""

    def esc(v) -> str:
        return escape(_cell(v), "html")

    head = "".join(f"<th>{escape(name, 'html')}</th>" for name, _ in COLUMNS)
    rows = [
        f'<tr class="point" data-point="{escape(p.id, "html")}" data-frontier="{str(p.frontier).lower()}">'
        + "".join(f"<td>{esc(get(p))}</td>" for _, get in COLUMNS)
        + "</tr>"
        for p in card.points
    ]
    body = [f'<p>Status: <b id="status">{card.status}</b>. Generated by dayzero from evidence only.</p>']
    if card.status == "pending":
        body.append("<p>No sweep evidence for this hardware kind yet: pending.</p>")
    else:
        body += [f'<div id="pareto">{pareto}</div>']
        body += [f'<table id="sweeps"><thead><tr>{head}</tr></thead><tbody>', *rows, "</tbody></table>"]
        if any(p.kind == "context" for p in card.points):
            body.append(f'<div id="context">{context}</div>')
    items = [*_summary_lines(card), f"energy: {card.energy}", _price_line(card), frontier_cost_line(card)]
    items.append(f"published claims: {len(card.claims)}")
    body.append("<ul>" + "".join(f"<li>{escape(i, 'html')}</li>" for i in items) + "</ul>")
    body += cardplan.html(card.plan, card.claim_lines, card.fit)
    if history:
        body += ['<div id="history"><h2>Across nights</h2>', *history, "</div>"]
    title = f"Benchmark card: {card.display_name} on {card.kind}"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            f'<html lang="en"><head><meta charset="utf-8"><title>{escape(title, "html")}</title>',
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:90%}"
            "td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}"
            "#plan td{text-align:left;vertical-align:top}#plan td.cells{font-size:85%;max-width:28em}"
            "#plan ul{margin:0;padding-left:1.2em}li[data-measured=yes]{background:#dcfce7}"
            "tr[data-frontier=true]{background:#fef3c7}</style></head><body>",
            f"<h1>{escape(title, 'html')}</h1>",
            *body,
            "</body></html>",
            "",
        ]
    )


def write_cards(
    matrix: Matrix,
    reports_dir: Path,
    only: Iterable[str] = (),
    price_of: Mapping[str, Price] | None = None,
    history=None,
) -> list[Path]:
    """`cards/<model>/<kind>.{md,html,json}` plus the SVGs; returns the HTML paths. `history`: a
    results store (dayzero.history) whose series of the card's cells are drawn, change points marked."""
    reports_dir = Path(reports_dir)
    written = []
    for card in build(matrix, reports_dir, price_of):
        if only and card.model not in only:
            continue
        folder = reports_dir / CARDS_DIR / card.model
        folder.mkdir(parents=True, exist_ok=True)
        pareto = pareto_svg(card)
        context = {chart: context_svg(card, chart) for chart in CONTEXT_CHARTS}
        if card.points:
            (folder / f"{card.kind}.pareto.svg").write_text(pareto)
        if any(p.kind == "context" for p in card.points):
            for chart, svg in context.items():
                (folder / f"{card.kind}.{chart}.svg").write_text(svg)
        (folder / f"{card.kind}.md").write_text(to_markdown(card, card.kind))
        atomic.write_json(folder / f"{card.kind}.json", to_json(card))
        html_path = folder / f"{card.kind}.html"
        across: list[str] = []
        if history is not None:
            across = charts(
                history, [c.id for c in matrix.cells if c.model == card.model and c.hardware == card.kind]
            )
        html_path.write_text(to_html(card, pareto, "\n".join(context.values()), across))
        written.append(html_path)
    return written


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())
