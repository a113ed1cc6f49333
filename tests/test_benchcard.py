"""The benchmark card from evidence: the frontier, a pending kind, claims as points, and the HTML
as a reader's browser shows it (every measured point in the table and on its chart).

The evidence is the submission corpus's synthetic run (`run_all` over a fake client, so the cells'
sweeps are measured and recorded exactly as a live run records them); the real cpu cells' card is
opened the same way in `test_report_e2e.py`.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dayzero.report import benchcard
from dayzero.report.benchcard import BenchCard, ClaimPoint, Point, build, frontier, pareto_svg, write_cards
from dayzero.report.cost import Price, per_million_tokens
from dayzero.spec.card import Claim, ModelCard
from dayzero.spec.matrix import load_matrix

from .submission_corpus.synthetic import synthetic_run

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "reports" / "artifacts"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("card")
    matrix = load_matrix(REPO / "matrix")
    synthetic_run(matrix, root / "reports", REPO / "suites" / "goldens")
    return matrix, root / "reports"


def point(pid: str, user: float, acc: float, kind: str = "concurrency") -> Point:
    blank = dict.fromkeys(Point.__dataclass_fields__)
    blank.update(
        cell="m/cpu/a/b", mode="a", strategy="b", sweep="s", kind=kind, load=1.0, label=pid,
        tok_s_per_user=user, tok_s_per_accelerator=acc, client_flagged=False, gap_judged=True,
        evidence="e.json",
    )  # fmt: skip
    for defaulted in ("frontier", "whose", "bundle"):  # the lab's point, off the frontier until drawn
        blank.pop(defaulted)
    return Point(**blank)


def test_frontier_keeps_the_points_nothing_beats_on_both_axes():
    pts = [point("slow", 10, 100), point("fast", 50, 20), point("middle", 30, 60), point("beaten", 25, 50)]
    assert frontier(pts) == {p.id for p in pts if p.label != "beaten"}
    assert frontier([point("none", None, 5)]) == set()


def test_claims_with_both_axes_become_points():
    def claim(unit, value, hardware="b300", conc=64):
        return Claim(
            f"{unit}-{hardware}",
            "cookbook",
            "output_throughput",
            value,
            unit,
            "w",
            conc,
            {"hardware": hardware},
        )

    card = ModelCard(
        "m",
        None,
        claims=(
            claim("per_accelerator", 900),
            claim("per_user", 45),
            claim("per_accelerator", 500, conc=256),  # no per-user claim beside it
            claim("per_accelerator", 1, hardware="h100"),
            claim("per_user", 1, hardware="h100"),
        ),
    )
    assert benchcard.claim_points(card, "b300") == (ClaimPoint("w c64", 45, 900, "cookbook"),)
    assert benchcard.claim_points(ModelCard("m", None), "b300") == ()


def test_a_kind_without_evidence_is_pending_and_still_draws_its_claims(synthetic, tmp_path):
    matrix, reports = synthetic
    cards = {(c.model, c.kind): c for c in build(matrix, reports)}
    assert cards[("kimi-k3.1-pro", "b300")].status == "pending"
    pending = replace(cards[("kimi-k3.1-pro", "b300")], claims=(ClaimPoint("published c64", 40, 800),))
    html = benchcard.to_html(pending, pareto_svg(pending), "")
    assert "pending" in html and "published claims: 1" in html
    assert 'data-point="claim: published c64"' in pareto_svg(pending)


def test_card_json_has_every_sweep_point_with_slo_goodput_and_cost(synthetic):
    matrix, reports = synthetic
    (html,) = write_cards(matrix, reports, ["smollm2-135m"])
    doc = json.loads(html.with_suffix(".json").read_text())
    assert doc["status"] == "measured"
    sweeps = {(p["mode"], p["sweep"]) for p in doc["points"]}
    ht, ll = "llama.cpp high_throughput", "llama.cpp low_latency"  # the engine is an axis on cpu
    assert sweeps == {(ht, "conc"), (ht, "rate"), (ll, "ctx")}
    rate = [p for p in doc["points"] if p["sweep"] == "rate"]
    assert all(p["attainment"] is not None and p["goodput_tok_s"] is not None for p in rate)
    assert all(p["cost_per_million"] > 0 for p in doc["points"])
    assert any(p["frontier"] for p in doc["points"])
    ctx = next(s for s in doc["sweeps"] if s["sweep"] == "ctx")
    assert ctx["fit"]["decode_ratio"] is not None
    assert (html.parent / "cpu.pareto.svg").is_file() and (html.parent / "cpu.context.svg").is_file()
    md = html.with_suffix(".md").read_text()
    assert "| mode/strategy |" in md and "![Pareto](cpu.pareto.svg)" in md


def open_card(html: Path, shot: Path) -> dict:
    """The card as Chromium renders it: table rows, chart markers, and a screenshot."""
    from devlab.browser import Browser

    with Browser(height=2200) as browser:
        browser.goto(html.resolve().as_uri())
        seen = browser.js(
            """({
              rows: [...document.querySelectorAll('#sweeps tr.point')].map(r => r.dataset.point),
              pareto: [...document.querySelectorAll('#pareto circle.point')].map(c => c.dataset.point),
              context: [...document.querySelectorAll('#context circle.point')].map(c => c.dataset.point),
              frontier: [...document.querySelectorAll('#sweeps tr[data-frontier=true]')].length,
              status: document.getElementById('status').textContent,
            })"""
        )
        browser.screenshot(shot)
    return seen


def check_every_point_shown(html: Path, shot: Path) -> dict:
    doc = json.loads(html.with_suffix(".json").read_text())
    seen = open_card(html, shot)
    ids = [p["id"] for p in doc["points"]]
    assert sorted(seen["rows"]) == sorted(ids)
    load = [p["id"] for p in doc["points"] if p["kind"] != "context"]
    assert sorted(seen["pareto"]) == sorted(load)
    ctx = [p["id"] for p in doc["points"] if p["kind"] == "context" and p["ttft_p50_ms"] is not None]
    assert sorted({c.rsplit(" ", 2)[0] for c in seen["context"]}) == sorted(ctx)
    assert seen["frontier"] >= 1 and seen["status"] == "measured"
    return seen


@pytest.mark.e2e
def test_the_card_page_shows_every_measured_point_in_chromium(synthetic, tmp_path):
    matrix, reports = synthetic
    (html,) = write_cards(matrix, reports, ["smollm2-135m"])
    shot = tmp_path / "card-synthetic.png"
    check_every_point_shown(html, shot)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / shot.name)


def test_the_acceptance_table_links_every_card(synthetic):
    from dayzero.report.acceptance import write_acceptance

    matrix, reports = synthetic
    write_cards(matrix, reports)
    md = write_acceptance(matrix, reports).read_text()
    assert "[smollm2-135m on cpu](cards/smollm2-135m/cpu.html)" in md
    assert 'href="cards/kimi-k3.1-pro/b300.html"' in (reports / "acceptance.html").read_text()


def test_a_sweeps_floor_is_in_its_summary_and_the_cards_lines():
    sweep = {"sweep": "ctx", "kind": "context", "workload": "w", "points": [], "fit": {"decode_ratio": 3.5}}
    floor = {"metric": "decode_ratio", "direction": "max", "sweep": "sweep:ctx@w"}
    doc = {
        "cell": "m/cpu/low/base",
        "mode": "low",
        "strategy": "base",
        "checks": [
            {"name": "sweep:ctx@w", "verdict": "passed", "message": "4 point(s)", "details": sweep},
            {"name": "floor:decode_ratio@sweep:ctx", "verdict": "failed", "message": "decode_ratio 3.5 > 3",
             "measured": 3.5, "bound": 3.0, "details": floor},
        ],
    }  # fmt: skip
    _, (summary,) = benchcard.points_of(doc, "e.json", None)
    assert summary["floor"] == {
        "check": "floor:decode_ratio@sweep:ctx",
        "verdict": "failed",
        "message": "decode_ratio 3.5 > 3",
        "measured": 3.5,
        "bound": 3.0,
    }
    card = benchcard.BenchCard("m", "cpu", "M", (), (summary,))
    said = "floor decode_ratio <= 3: failed (decode_ratio 3.5 > 3)"
    assert said in benchcard.to_html(card, "", "").replace("&lt;", "<").replace("&gt;", ">")


def test_cost_at_every_point_and_on_the_pareto_frontier():
    """2 USD per accelerator-hour: cost per 1M output tokens = 2 / (tok/s x 3600) x 10^6, so 100
    tok/s per accelerator costs 5.5556, 60 costs 9.2593, 20 costs 27.7778; the frontier is listed
    by tok/s per user, and its cheapest point is the one with the most tok/s per accelerator."""
    price = Price(2.0, "USD", "test")
    raw = [point("slow", 10, 100), point("fast", 50, 20), point("middle", 30, 60), point("beaten", 25, 50)]
    on = frontier(raw)
    pts = [
        replace(p, frontier=p.id in on, cost_per_million=per_million_tokens(price, p.tok_s_per_accelerator))
        for p in raw
    ]
    assert [p.cost_per_million for p in pts] == [5.5556, 27.7778, 9.2593, 11.1111]
    card = BenchCard("m", "cpu", "M", tuple(pts), (), price=price)
    got = benchcard.frontier_costs(card)
    assert [(p.label, p.tok_s_per_user, p.cost_per_million) for p in got] == [
        ("slow", 10, 5.5556),
        ("middle", 30, 9.2593),
        ("fast", 50, 27.7778),
    ]
    line = benchcard.frontier_cost_line(card)
    assert line == (
        "cost on the Pareto frontier (USD per 1M output tokens): 5.556 at 10 tok/s per user,"
        " 9.259 at 30, 27.78 at 50; cheapest: a/b s slow"
    )
    assert line in benchcard.to_markdown(card, "cpu") and line in benchcard.to_html(card, "", "")
    assert benchcard.to_json(card)["frontier_cost"] == [
        {
            "point": p.id,
            "tok_s_per_user": p.tok_s_per_user,
            "cost_per_million": p.cost_per_million,
            "whose": "dayzero",
        }
        for p in got
    ]
    unpriced = BenchCard("m", "cpu", "M", tuple(raw), ())
    assert benchcard.frontier_cost_line(unpriced) == (
        "cost on the Pareto frontier: not known (no price per accelerator-hour for this hardware kind)"
    )


def test_a_point_shows_its_intervals_and_a_contended_one_is_marked_and_off_the_frontier():
    """Issue 41 items 1 and 4: each figure with its interval (a p99 its sample cannot support
    says so), error bars on the Pareto; a point measured on a contended host is marked and never
    on the frontier, however fast it looked."""
    iv = {"lo": 40.0, "hi": 44.0, "n": 48, "runs": 3, "method": "bootstrap", "confidence": 0.95}
    no_p99 = {
        "lo": None,
        "hi": None,
        "n": 16,
        "runs": 1,
        "method": "order-statistic",
        "why": "p99 not supported by n=16",
    }
    quiet = {
        "load": 1,
        "label": "c1",
        "records": ["r/sweep-conc-c1-r0.json"],
        "output_throughput_per_accelerator": 42.0,
        "median_interactivity": 40.0,
        "p99_ttft_ms": 90.0,
        "intervals": {"output_throughput_per_accelerator": iv, "p99_ttft_ms": no_p99},
    }
    busy = {
        "load": 2,
        "label": "c2",
        "records": ["r/sweep-conc-c2-r0.json"],
        "output_throughput_per_accelerator": 80.0,
        "median_interactivity": 45.0,
        "intervals": {},
    }
    sweep = {
        "sweep": "conc",
        "kind": "concurrency",
        "workload": "w",
        "points": [quiet, busy],
        "contended": {"sweep-conc-c2-r0": "h1: host contended: load 3.1 on 2 cores"},
    }
    check = {"name": "sweep:conc@w", "verdict": "passed", "message": "2 point(s)", "details": sweep}
    doc = {"cell": "m/cpu/low/base", "mode": "low", "strategy": "base", "checks": [check]}
    (a, b), _ = benchcard.points_of(doc, "e.json", None)
    assert not a.contended and b.contended == "h1: host contended: load 3.1 on 2 cores"
    on = frontier([p for p in (a, b) if not p.contended])
    assert on == {a.id}, "the contended point beats the quiet one on both axes, and is still left out"
    card = BenchCard("m", "cpu", "M", (replace(a, frontier=True), b), ())
    md = benchcard.to_markdown(card, "cpu")
    assert "42 \\[40, 44\\]" in md and "p99 not supported by n=16" in md  # markdown escapes brackets
    assert "host contended: load 3.1" in md
    assert pareto_svg(card).count('class="error-bar"') == 1


LAB_POINTS = (point("slow", 10, 100), point("fast", 50, 20), point("beaten", 25, 15))


def mixed_card() -> BenchCard:
    """The lab's three points and a vendor's two, each beating every lab point on both axes."""
    acme = [
        replace(point("v-high", 60, 200), mode="v", whose="acme", bundle="ab" * 32),
        replace(point("v-low", 70, 150), mode="v", whose="acme", bundle="ab" * 32),
    ]
    price = Price(2.0, "USD", "test")
    pts = [
        replace(p, cost_per_million=per_million_tokens(price, p.tok_s_per_accelerator))
        for p in [*LAB_POINTS, *acme]
    ]
    return BenchCard("m", "cpu", "M", tuple(benchcard.marked(pts)), (), price=price)


def test_a_vendors_points_have_a_frontier_of_their_own_never_the_labs():
    """Issue 42 item 3: a vendor's point, on its word, that beats every lab point on both axes
    neither pushes the lab's points off the lab's frontier nor stands on it: each party has its
    own, the chart draws and names each, and the cost along each is said apart."""
    card = mixed_card()
    got = {p.label: p.frontier for p in card.points}
    assert got == {"slow": True, "fast": True, "beaten": False, "v-high": True, "v-low": True}
    svg = pareto_svg(card)
    assert 'data-name="Pareto frontier (the lab&#x27;s)"' in svg
    assert 'data-name="Pareto frontier (acme&#x27;s, vendor)"' in svg
    line = benchcard.frontier_cost_line(card)
    assert line == (
        "cost on the Pareto frontier (USD per 1M output tokens): the lab's frontier: 5.556 at 10 tok/s"
        " per user, 27.78 at 50; cheapest: a/b s slow. the frontier of acme (vendor, bundle"
        " abababababababab): 2.778 at 60 tok/s per user, 3.704 at 70; cheapest: v/b s v-high"
    )
    assert [c["whose"] for c in benchcard.to_json(card)["frontier_cost"]] == ["dayzero"] * 2 + ["acme"] * 2
    alone = BenchCard("m", "cpu", "M", tuple(benchcard.marked(LAB_POINTS)), ())
    assert 'data-name="Pareto frontier"' in pareto_svg(alone)  # the lab's alone: named as it always was


def test_a_vendors_contention_mark_is_its_own_word():
    mine = replace(point("busy", 10, 100), contended="h1: load 3 on 2 cores")
    theirs = replace(mine, whose="acme")
    contended = dict(benchcard.COLUMNS)["contended"]
    assert contended(mine) == "h1: load 3 on 2 cores"
    assert contended(theirs) == "h1: load 3 on 2 cores (the vendor's word)"


def test_a_claims_answer_from_a_vendors_run_says_whose():
    from dayzero.report import cardplan

    matrix = load_matrix(REPO / "matrix")
    card = matrix.cards["kimi-k3.1-pro"]
    cells = [c for c in matrix.cells if c.model == card.model and c.hardware == "gb300" and c.supported]
    answer = {"claim": "agentx-33.7k-per-gpu-gb300", "status": "reproduced"}
    theirs = {
        "source": "acme",
        "submission": {"vendor": "acme", "bundle_sha256": "c" * 64},
        "claims": [answer],
    }
    hit = next(c for c in cells if "high_throughput" in c.id)
    (agentx, _) = cardplan.claim_lines(card, cells, {hit.id: theirs})
    assert f"(answered by acme (vendor, bundle {'c' * 16}))" in agentx, agentx
    (agentx, _) = cardplan.claim_lines(card, cells, {hit.id: {"claims": [answer]}})
    assert "answered by" not in agentx  # the lab's own run: said as it always was


@pytest.mark.e2e
def test_each_partys_frontier_in_chromium(tmp_path):
    """The mixed card's page as Chromium draws it: two frontiers, each named in the legend, each
    through its own party's points; every row says whose."""
    from devlab.browser import Browser

    card = mixed_card()
    page = tmp_path / "mixed.html"
    page.write_text(benchcard.to_html(card, pareto_svg(card), ""))
    with Browser(height=1200) as browser:
        browser.goto(page.resolve().as_uri())
        seen = browser.js(
            """({
              lines: Object.fromEntries([...document.querySelectorAll('#pareto polyline.series')]
                .map(l => [l.dataset.name, l.getAttribute('points').trim().split(' ').length])),
              legend: [...document.querySelectorAll('#pareto text')].map(t => t.textContent),
              whose: [...document.querySelectorAll('#sweeps tr.point')]
                .map(r => [r.dataset.point, r.children[r.children.length - 2].textContent]),
            })"""
        )
        browser.screenshot(tmp_path / "card-mixed.png")
    assert seen["lines"] == {"Pareto frontier (the lab's)": 2, "Pareto frontier (acme's, vendor)": 2}
    assert {"Pareto frontier (the lab's)", "Pareto frontier (acme's, vendor)"} <= set(seen["legend"])
    said = dict(seen["whose"])
    assert said["a/b s slow"] == "lab" and said["v/b s v-high"] == "acme (vendor, bundle abababababababab)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path / "card-mixed.png", ARTIFACTS / "card-mixed.png")
