"""The acceptance table: every badge derived from evidence and the matrix, never typed by hand."""

from __future__ import annotations

import datetime as dt
import re
from html.parser import HTMLParser

import yaml

from dayzero import evidence
from dayzero.report.acceptance import rows, write_acceptance
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import digest

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
LL_BASE = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
LL_NGRAM = "smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec"
HT_BASE = "smollm2-135m/cpu+llama.cpp/high_throughput/baseline"
HT_NGRAM = "smollm2-135m/cpu+llama.cpp/high_throughput/ngram_spec"
UNSUPPORTED = "kimi-k3.1-pro/trainium3/balanced/baseline"
ENGINE = "llama-cpp-python 0.3.36"


def doc(matrix, cell_id, *, finished=NOW, verdict="passed", version=ENGINE, run="r1", recipe_digest=None):
    cell = matrix.cell(cell_id)
    when = finished.isoformat(timespec="seconds")
    return {
        "schema_version": 1,
        "cell": cell.id,
        "model": cell.model,
        "hardware": cell.hardware,
        "mode": cell.mode,
        "strategy": cell.strategy,
        "options": list(cell.options),
        "source": "dayzero",
        "run": {
            "id": run,
            "started": when,
            "finished": when,
            "by": "test",
            "controller": "test",
            "worker": "master",
            "harness_version": "0.1.0",
        },
        "recipe": {
            "digest": recipe_digest or digest(matrix.card(cell), cell),
            "launches": [],
        },
        "engine": {"name": "llama.cpp", "version": version},
        "hosts": [],
        "checks": [
            {
                "name": "floor:output_throughput@default/c1",
                "kind": "performance",
                "verdict": verdict if verdict != "broken" else "passed",
                "message": "m",
                "measured": 50.0,
                "bound": 15.0,
            }
        ],
        "verdict": verdict,
    }


def statuses(table) -> dict[str, str]:
    return {r.cell.id: r.status for r in table}


class _Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-cell" in a:
            self.rows[a["data-cell"]] = a["data-status"]


def html_statuses(path) -> dict[str, str]:
    parser = _Rows()
    parser.feed(path.read_text())
    return parser.rows


def md_statuses(path) -> dict[str, str]:
    return dict(re.findall(r"^\| `([^`]+)` \| (\w[\w ]*?) \|", path.read_text(), re.M))


def test_verified_failed_pending_unsupported_from_evidence(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    evidence.write(reports, doc(matrix, LL_BASE))
    evidence.write(reports, doc(matrix, HT_BASE, verdict="failed"))
    md = write_acceptance(matrix, reports, now=NOW)
    got = md_statuses(md)
    assert got[LL_BASE] == "Verified"
    assert got[HT_BASE] == "Failed"
    assert got[LL_NGRAM] == "Pending"
    assert got[UNSUPPORTED] == "Unsupported"
    assert "Neuron support for Kimi K3.1" in md.read_text()
    # Verified carries date, engine version and a link to its evidence
    line = next(x for x in md.read_text().splitlines() if f"`{LL_BASE}`" in x)
    assert "2026-12-01" in line and ENGINE in line and "](evidence/" in line
    # the HTML page says the same, cell for cell
    html = md.with_suffix(".html")
    assert html_statuses(html) == got
    assert len(got) == len(matrix.cells)


def test_an_inconclusive_floor_is_never_green_and_a_contended_phase_is_marked(tmp_path, matrix_dir):
    """Issue 41 items 2 and 4: an interval straddling its bound is Inconclusive (not Verified);
    a check measured while its host was contended is named in the detail."""
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    unsure = doc(matrix, LL_BASE, verdict="inconclusive")
    unsure["checks"][0]["verdict"] = "inconclusive"
    unsure["checks"][0]["message"] = "interval [12, 19] straddles min 15"
    contended = doc(matrix, HT_BASE)
    contended["checks"][0]["details"] = {
        "contended": {"perf-c1-run1": "h1: foreign load 1.6 cores"},
        "interval": {"lo": 47.5, "hi": 52.25, "n": 48, "runs": 3, "method": "bootstrap"},
    }
    evidence.write(reports, unsure)
    evidence.write(reports, contended)
    table = rows(matrix, reports, now=NOW)
    got = statuses(table)
    assert got[LL_BASE] == "Inconclusive" and got[HT_BASE] == "Verified"
    details = {r.cell.id: r.detail for r in table}
    assert "straddles" in details[LL_BASE]
    assert "contended: floor:output_throughput@default/c1" in details[HT_BASE]
    assert "intervals: output_throughput 50 [47.5, 52.25] (n=48)" in details[HT_BASE]
    md = write_acceptance(matrix, reports, now=NOW)
    assert md_statuses(md)[LL_BASE] == "Inconclusive"
    assert html_statuses(md.with_suffix(".html"))[LL_BASE] == "Inconclusive"


def test_changing_one_recipe_flag_turns_its_cells_stale(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    for cell_id in (LL_BASE, LL_NGRAM, HT_BASE, HT_NGRAM):
        evidence.write(reports, doc(matrix, cell_id))
    assert set(statuses(rows(matrix, reports, now=NOW)).values()) >= {"Verified"}
    assert md_statuses(write_acceptance(matrix, reports, now=NOW))[LL_NGRAM] == "Verified"

    card_path = matrix_dir / "models" / "smollm2-135m.yaml"
    card = yaml.safe_load(card_path.read_text())
    card["strategies"]["ngram_spec"]["args"] += ["--spec-ngram-size-n", "8"]  # one flag, one strategy
    card_path.write_text(yaml.safe_dump(card, sort_keys=False))

    md = write_acceptance(load_matrix(matrix_dir), reports, now=NOW)
    got = md_statuses(md)
    assert got[LL_NGRAM] == "Stale" and got[HT_NGRAM] == "Stale"
    assert got[LL_BASE] == "Verified" and got[HT_BASE] == "Verified"
    assert "recipe changed" in next(x for x in md.read_text().splitlines() if f"`{LL_NGRAM}`" in x)
    assert html_statuses(md.with_suffix(".html"))[LL_NGRAM] == "Stale"


def test_a_newer_engine_on_the_same_hardware_makes_older_evidence_stale(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    evidence.write(reports, doc(matrix, LL_BASE, finished=NOW - dt.timedelta(days=2)))
    evidence.write(reports, doc(matrix, HT_BASE, finished=NOW - dt.timedelta(days=1), version="llama 0.3.37"))
    got = statuses(rows(matrix, reports, now=NOW))
    assert got[LL_BASE] == "Stale"  # its numbers were taken on the older build
    assert got[HT_BASE] == "Verified"
    detail = next(r.detail for r in rows(matrix, reports, now=NOW) if r.cell.id == LL_BASE)
    assert "engine changed" in detail and "llama 0.3.37" in detail
    # an unknown version is never compared
    evidence.write(reports, doc(matrix, LL_NGRAM, finished=NOW, version="unknown", run="r9"))
    assert statuses(rows(matrix, reports, now=NOW))[LL_NGRAM] == "Verified"


def test_evidence_older_than_the_window_is_stale(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    evidence.write(reports, doc(matrix, LL_BASE, finished=NOW - dt.timedelta(days=40)))
    assert statuses(rows(matrix, reports, now=NOW))[LL_BASE] == "Stale"
    assert statuses(rows(matrix, reports, now=NOW, max_age_days=60))[LL_BASE] == "Verified"
    md = write_acceptance(matrix, reports, now=NOW, max_age_days=30)
    assert "40 days old (window 30)" in md.read_text()


def test_latest_evidence_wins_and_a_rerun_clears_stale(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    evidence.write(
        reports,
        doc(
            matrix, LL_BASE, recipe_digest="0000000000000000", run="old", finished=NOW - dt.timedelta(days=1)
        ),
    )
    assert statuses(rows(matrix, reports, now=NOW))[LL_BASE] == "Stale"
    evidence.write(reports, doc(matrix, LL_BASE, run="new"))
    assert statuses(rows(matrix, reports, now=NOW))[LL_BASE] == "Verified"


def test_a_cell_only_published_as_verified_is_published_not_verified(tmp_path, matrix_dir):
    """The cookbook's claim is shown as such, with its source; only evidence earns Verified."""
    matrix = load_matrix(matrix_dir)
    kimi = "kimi-k3.1-pro/b300/balanced/dflash"
    md = write_acceptance(matrix, tmp_path / "empty", now=NOW)
    row = next(r for r in rows(matrix, tmp_path / "empty", now=NOW) if r.cell.id == kimi)
    assert row.status == "Published"
    assert row.source == f"published: {matrix.card(row.cell).source}" and "docs.sglang.ai" in row.source
    assert "no dayzero evidence" in row.detail
    assert md_statuses(md)[kimi] == "Published" == html_statuses(md.with_suffix(".html"))[kimi]
    assert "Verified" not in md_statuses(md).values()
    row = next(r for r in rows(matrix, tmp_path / "empty", now=NOW) if r.cell.id == LL_BASE)
    assert (row.status, row.source) == ("Pending", "matrix")  # its authors did not publish it
    sources = {r.source for r in rows(matrix, tmp_path / "empty", now=NOW) if r.cell.published != "verified"}
    assert not any(s.startswith("published") for s in sources), sources


def golden_check(recipe_digest: str) -> dict:
    provenance = {"recipe_digest": recipe_digest, "engine_version": ENGINE}
    details = {"golden": "Paris", "golden_provenance": provenance}
    return {
        "name": "golden:capital",
        "kind": "correctness",
        "verdict": "passed",
        "message": "ok",
        "details": details,
    }


def test_a_golden_recorded_under_another_recipe_or_engine_is_flagged_in_the_detail(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    here, there = doc(matrix, LL_BASE), doc(matrix, HT_BASE)
    evidence.write(reports, {**here, "checks": [golden_check("0123abcd")]})
    evidence.write(reports, {**there, "checks": [golden_check(there["recipe"]["digest"])]})
    table = {r.cell.id: r for r in rows(matrix, reports, now=NOW)}
    assert table[LL_BASE].status == "Verified"  # a flag, not a verdict: the golden policy decides
    flag = f"golden recorded under recipe 0123abcd, this run {here['recipe']['digest']}"
    assert flag in table[LL_BASE].detail
    assert "golden recorded" not in table[HT_BASE].detail
    assert flag in write_acceptance(matrix, reports, now=NOW).read_text()


def test_engines_side_by_side_grid_for_a_kind_served_by_two_engines(tmp_path, matrix_dir):
    """smollm2 on cpu is served by llama.cpp and SGLang: one grid, a row per mode/strategy and a
    column per engine; a mode one engine lacks shows a dash; Kimi (one engine per kind) has none."""
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    evidence.write(reports, doc(matrix, LL_BASE, finished=NOW - dt.timedelta(days=1)))
    md = write_acceptance(matrix, reports, now=NOW).read_text()
    grid = md[md.index("## Engines side by side: smollm2-135m on cpu: llama.cpp vs sglang") :]
    assert "| low_latency/baseline | Verified | Pending |" in grid
    assert "| rpc_split/baseline | Pending | — |" in grid and "| tp2_nodes/baseline | — | Pending |" in grid
    assert "| low_latency/ngram_spec | Pending | Unsupported |" in grid
    assert md.count("## Engines side by side") == 1
    html = write_acceptance(matrix, reports, now=NOW).with_suffix(".html").read_text()
    assert "Engines side by side: smollm2-135m on cpu: llama.cpp vs sglang" in html


def test_a_broken_cell_is_broken_never_stale(tmp_path, matrix_dir):
    """A dead host breaks a cell before its recipe renders: its evidence has no digest. It read
    "Stale (recipe changed (digest none -> ...); was Broken)"; Broken vouches for nothing, so no
    change can make it stale, old or not. A failure under another recipe is still Stale."""
    matrix = load_matrix(matrix_dir)
    reports = tmp_path / "reports"
    dead = doc(matrix, LL_BASE, verdict="broken")
    dead["recipe"]["digest"] = ""
    dead["error"] = "needs 1 healthy cpu host(s), 0 left; quarantined for run r1: lab2: cannot connect"
    old = doc(matrix, HT_BASE, verdict="broken", finished=NOW - dt.timedelta(days=90))
    changed = doc(matrix, LL_NGRAM, verdict="failed", recipe_digest="an-older-recipe")
    for d in (dead, old, changed):
        evidence.write(reports, d)
    md = write_acceptance(matrix, reports, now=NOW)
    got = md_statuses(md)
    assert got[LL_BASE] == "Broken" and got[HT_BASE] == "Broken", got
    assert got[LL_NGRAM] == "Stale"
    assert html_statuses(md.with_suffix(".html"))[LL_BASE] == "Broken"
    line = next(x for x in md.read_text().splitlines() if f"`{LL_BASE}`" in x)
    assert "quarantined" in line and "lab2" in line and "recipe changed" not in line, line
