"""Report building blocks without a host: plots, Allure run files, story pieces, regressions."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from dayzero.report import allure_build, allure_cell, allure_env, nightly, plots
from dayzero.spec.matrix import Hardware


def test_line_chart_is_valid_svg_with_one_line_per_series():
    svg = plots.throughput_chart(
        [("output_throughput", 1, 64.0), ("output_throughput", 4, 110.5), ("total_token_throughput", 4, 130)]
    )
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}polyline")
    assert [p.get("data-name") for p in lines] == ["output_throughput", "total_token_throughput"]
    assert len(lines[0].get("points").split()) == 2
    assert "Throughput versus concurrency" in svg


def test_every_point_lies_inside_the_plot_area():
    svg = plots.throughput_chart([("output_throughput", 1, 76.574), ("output_throughput", 4, 309.7)])
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    for c in root.findall(f"{ns}circle"):
        assert plots.MARGIN_TOP <= float(c.get("cy")) <= plots.HEIGHT - plots.MARGIN_BOTTOM
        assert plots.MARGIN_LEFT <= float(c.get("cx")) <= plots.WIDTH - plots.MARGIN_RIGHT


def test_latency_chart_draws_one_line_per_run_and_kind_and_handles_no_data():
    svg = plots.latency_cdf_chart(
        {
            "c1": {"ttft": [(12.0, 0.5), (15.5, 0.9), (16.1, 0.99)], "e2e": []},
            "c4": {"ttft": [(1, 0.5)], "e2e": [(9, 0.5)]},
        }
    )
    root = ET.fromstring(svg)
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert [(p.get("data-name"), bool(p.get("stroke-dasharray"))) for p in lines] == [
        ("c1 ttft", True),
        ("c4 ttft", True),
        ("c4 e2e", False),
    ]
    assert len(lines[0].get("points").split()) == 3
    assert lines[1].get("stroke") == lines[2].get("stroke") != lines[0].get("stroke")
    assert "no data" in plots.latency_cdf_chart({})


def _floor_check(name, workload, concurrency, summaries):
    return {
        "name": name,
        "kind": "performance",
        "verdict": "passed",
        "message": "",
        "details": {"workload": workload, "concurrency": concurrency, "summaries": summaries},
    }


def test_latencies_come_from_the_checks_summaries_not_from_records():
    """The report reads the quantiles performance.summarize computed; no records file is opened."""
    rep = [
        {"median_ttft_ms": 10.0, "p90_ttft_ms": 20.0, "p99_ttft_ms": 30.0, "median_e2e_latency_ms": 100.0},
        {"median_ttft_ms": 12.0, "p90_ttft_ms": 22.0, "p99_ttft_ms": None, "median_e2e_latency_ms": 140.0},
    ]
    doc = {
        "records": ["runs/x/no-such-file/records/perf-default-c4-r0.json"],
        "checks": [
            _floor_check("floor:output_throughput@default/c4", "default", 4, rep),
            _floor_check("floor:median_ttft_ms@default/c4", "default", 4, rep[:1]),
            {"name": "probe:a", "kind": "correctness", "verdict": "passed", "message": ""},
        ],
    }
    assert allure_cell.latencies(doc) == {
        "default-c4": {"ttft": [(11.0, 0.5), (21.0, 0.9), (30.0, 0.99)], "e2e": [(120.0, 0.5)]}
    }


def test_environment_facts_take_the_driver_from_the_evidence():
    class Ctx:
        class matrix:  # noqa: N801 - a stand-in for the Matrix attribute
            hardware = {"cpu": Hardware("cpu", "any", None, 1, "nproc")}

    doc = {
        "hardware": "cpu",
        "engine": {"name": "llama.cpp", "version": "1"},
        "run": {"controller": "c", "harness_version": "0"},
        "hosts": [
            {"name": "a", "facts": {"driver_version": "none (cpu)"}},
            {"name": "old", "facts": {}},  # evidence written before preflight read the driver
            {"name": "vendor"},
        ],
    }
    hosts = allure_cell.environment_facts(Ctx, doc)["hosts"]
    assert [h.get("driver") for h in hosts] == ["none (cpu)", "unknown", None]


@pytest.mark.parametrize(("lo", "hi"), [(0, 76.574), (0, 1), (0, 0), (3, 3), (0, 1234.5), (0.001, 0.0042)])
def test_ticks_cover_the_data(lo, hi):
    ticks = plots.nice_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi and len(ticks) >= 2


def test_properties_escape_keys_and_mask_secrets():
    text = allure_env.properties(
        {"lab hosts": "a, b", "setup": "export HF_TOKEN=hf_abcdef123", "url": "http://x:1/y"},
        secrets=["export HF_TOKEN=hf_abcdef123"],
    )
    assert "lab\\ hosts=a, b\n" in text
    assert "hf_abcdef123" not in text
    assert "url=http://x:1/y" in text


def test_results_extras_are_written(tmp_path):
    docs = [
        {
            "hardware": "cpu",
            "engine": {"name": "llama.cpp", "version": "0.3.36"},
            "hosts": [{"name": "local"}],
            "verdict": "passed",
        }
    ]
    paths = allure_env.write_results_extras(tmp_path, "run-1", {"inventory": "hosts/local.yaml"}, docs)
    assert sorted(p.name for p in paths) == ["categories.json", "environment.properties", "executor.json"]
    assert json.loads((tmp_path / "executor.json").read_text())["buildName"] == "dayzero run run-1"
    assert "engine.0=cpu\\: llama.cpp 0.3.36" not in (tmp_path / "environment.properties").read_text()
    assert "engine.0=cpu: llama.cpp 0.3.36" in (tmp_path / "environment.properties").read_text()
    names = [c["name"] for c in json.loads((tmp_path / "categories.json").read_text())]
    assert names[0].startswith("Infrastructure") and any(n.startswith("Regression") for n in names)


def test_allure3_config_has_single_file_history_and_our_categories(tmp_path):
    cfg = allure_build.config(tmp_path / "out", tmp_path / "h.jsonl", "dayzero")
    assert cfg["plugins"]["awesome"]["options"]["singleFile"] is True
    assert cfg["historyPath"].endswith("h.jsonl")
    ids = [c["id"] for c in cfg["categories"]]
    assert ids == ["infrastructure", "correctness", "performance_floor", "regression"]


def test_failure_category():
    checks = [
        {"kind": "correctness", "verdict": "failed"},
        {"kind": "performance", "verdict": "failed"},
    ]
    assert allure_cell.failure_category(checks) == "correctness"
    assert allure_cell.failure_category(checks[1:]) == "performance_floor"
    assert allure_cell.failure_category([], error="did not become ready") == "correctness"
    assert allure_cell.failure_category(checks, verdict="broken") == "infrastructure"


def test_golden_diff_shows_identical_and_changed_answers():
    doc = {
        "checks": [
            {
                "name": "golden:a",
                "verdict": "passed",
                "message": "ok",
                "measured": "Paris",
                "bound": "exact",
                "details": {"golden": "Paris"},
            },
            {
                "name": "golden:b",
                "verdict": "failed",
                "message": "differs",
                "measured": "1, 2, 4",
                "bound": "exact",
                "details": {"golden": "1, 2, 3"},
            },
            {"name": "probe:b", "verdict": "passed", "message": "", "kind": "correctness"},
        ]
    }
    text = allure_cell.golden_diff(doc)
    assert "== golden:a [passed]" in text and "(identical)" in text
    assert "-1, 2, 3" in text and "+1, 2, 4" in text
    assert "probe:b" not in text


def check(name, summaries=None, measured=None):
    details = {"summaries": summaries} if summaries is not None else {}
    return {
        "name": name,
        "kind": "performance",
        "verdict": "passed",
        "message": "",
        "measured": measured,
        "details": details,
    }


def evidence_doc(cell, checks):
    return {"cell": cell, "checks": checks}


def test_a_drop_beyond_the_recorded_spread_is_a_regression():
    before = evidence_doc(
        "c",
        [
            check(
                "floor:output_throughput@default/c1",
                [
                    {"output_throughput": 100.0, "median_ttft_ms": 100.0},
                    {"output_throughput": 96.0, "median_ttft_ms": 103.0},
                    {"output_throughput": 98.0, "median_ttft_ms": 101.0},
                ],
            )
        ],
    )
    same = evidence_doc(
        "c",
        [
            check(
                "floor:output_throughput@default/c1",
                [
                    {"output_throughput": 97.0, "median_ttft_ms": 102.0},
                    {"output_throughput": 95.5, "median_ttft_ms": 104.0},
                    {"output_throughput": 99.0, "median_ttft_ms": 101.5},
                ],
            )
        ],
    )
    slow = evidence_doc(
        "c",
        [
            check(
                "floor:output_throughput@default/c1",
                [
                    {"output_throughput": 60.0, "median_ttft_ms": 400.0},
                    {"output_throughput": 61.0, "median_ttft_ms": 401.0},
                    {"output_throughput": 59.0, "median_ttft_ms": 402.0},
                ],
            )
        ],
    )
    assert nightly.regressions(nightly.compare_docs(before, same)) == []
    found = nightly.regressions(nightly.compare_docs(before, slow))
    assert {c.metric for c in found} == {"output_throughput", "median_ttft_ms"}
    tp = next(c for c in found if c.metric == "output_throughput")
    assert tp.band_source == "minimum 5%" and tp.previous == 98.0 and tp.current == 60.0
    assert "dropped from 98 to 60" in tp.describe()


def test_without_spread_the_default_band_applies_and_tails_get_more_room():
    before = evidence_doc("c", [check("floor:x", [{"output_throughput": 100.0, "p99_ttft_ms": 100.0}])])
    after = evidence_doc("c", [check("floor:x", [{"output_throughput": 91.0, "p99_ttft_ms": 120.0}])])
    comps = {c.metric: c for c in nightly.compare_docs(before, after)}
    assert comps["output_throughput"].band_source == "default 10%"
    assert not comps["output_throughput"].regressed  # -9% inside the 10% band
    assert not comps["p99_ttft_ms"].regressed  # +20% inside the 25% tail band
    worse = evidence_doc("c", [check("floor:x", [{"output_throughput": 85.0, "p99_ttft_ms": 130.0}])])
    assert {c.metric for c in nightly.regressions(nightly.compare_docs(before, worse))} == {
        "output_throughput",
        "p99_ttft_ms",
    }
    assert nightly.regressions(nightly.compare_docs(before, worse, default_pct=40)) == []


def test_improvements_counts_and_unknown_metrics_are_never_regressions():
    before = evidence_doc(
        "c",
        [
            check(
                "floor:x",
                [
                    {
                        "output_throughput": 50.0,
                        "median_itl_ms": 30.0,
                        "completed": 16,
                        "std_ttft_ms": 1.0,
                        "duration_s": 9,
                    }
                ],
            )
        ],
    )
    after = evidence_doc(
        "c",
        [
            check(
                "floor:x",
                [
                    {
                        "output_throughput": 90.0,
                        "median_itl_ms": 10.0,
                        "completed": 2,
                        "std_ttft_ms": 50.0,
                        "duration_s": 90,
                    }
                ],
            )
        ],
    )
    comps = nightly.compare_docs(before, after)
    assert {c.metric for c in comps} == {"output_throughput", "median_itl_ms"}
    assert nightly.regressions(comps) == []


def test_tiny_latency_moves_stay_inside_the_absolute_floor():
    before = evidence_doc("c", [check("floor:x", [{"median_itl_ms": 0.4}])])
    after = evidence_doc("c", [check("floor:x", [{"median_itl_ms": 1.9}])])
    assert nightly.regressions(nightly.compare_docs(before, after)) == []


def test_old_style_single_summary_is_compared_too():
    before = {
        "cell": "c",
        "checks": [
            {
                "name": "floor:output_throughput@c1",
                "kind": "performance",
                "measured": 100.0,
                "details": {"summary": {"output_throughput": 100.0}},
            }
        ],
    }
    after = {
        "cell": "c",
        "checks": [
            {
                "name": "floor:output_throughput@c1",
                "kind": "performance",
                "measured": 50.0,
                "details": {"summary": {"output_throughput": 50.0}},
            }
        ],
    }
    assert [c.metric for c in nightly.regressions(nightly.compare_docs(before, after))] == [
        "output_throughput"
    ]


def test_interactivity_of_sub_millisecond_tpot_is_noise():
    """1000 / TPOT swings wildly when TPOT is below timer resolution; 2 ms of TPOT bounds it."""
    before = evidence_doc("c", [check("floor:x", [{"median_interactivity": 50000.0}])])
    after = evidence_doc("c", [check("floor:x", [{"median_interactivity": 20000.0}])])
    assert nightly.regressions(nightly.compare_docs(before, after)) == []
    before = evidence_doc("c", [check("floor:x", [{"median_interactivity": 33.0}])])  # TPOT 30 ms
    after = evidence_doc("c", [check("floor:x", [{"median_interactivity": 25.0}])])  # TPOT 40 ms
    assert [c.metric for c in nightly.regressions(nightly.compare_docs(before, after))] == [
        "median_interactivity"
    ]
