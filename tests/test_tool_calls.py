"""Tool-call and reasoning conformance: the shipped suite, the checks on raw answers, and the phase
over a real run with the stub engine (a server whose tool-call arguments break the schema)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil

import pytest

from dayzero.checks import FAILED, NOT_MEASURED, PASSED
from dayzero.checks.tool_calls import (
    agreement,
    answers,
    check_arguments,
    check_finish_reason,
    check_reasoning,
    check_tool_calls,
    check_trigger,
    load_suite,
    request_for,
)
from dayzero.errors import ConfigError
from dayzero.run import plan
from dayzero.run.cell import RunContext, new_run_id, run_cell
from dayzero.spec.card import ToolCallRule, tool_rules_for
from dayzero.spec.goldens import load_golden
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import templates

from .conftest import REPO, write_yaml
from .stub_cells import stub_card, stub_inventory, stub_matrix

SUITES = REPO / "suites"
RULE = ToolCallRule("tool-use", concurrency=1, min_trigger_f1=0.75)


def call(name: str, arguments: str) -> dict:
    return {"id": "call_1", "name": name, "arguments": arguments}


def rec(case: str, *calls: dict, finish: str | None = None, **more) -> dict:
    finish = finish or ("tool_calls" if calls else "stop")
    return {"id": case, "text": "", "error": None, "finish_reason": finish, "tool_calls": list(calls), **more}


def good_answers() -> list[dict]:
    """What a conforming server answers to the shipped suite."""
    return [
        rec("weather", call("get_weather", '{"city": "Paris"}')),
        rec("currency", call("convert_currency", '{"amount": 250, "from": "USD", "to": "EUR"}')),
        rec("time_tokyo", call("get_time", '{"city": "Tokyo"}')),
        rec(
            "weather_two_cities",
            call("get_weather", '{"city": "Berlin"}'),
            call("get_weather", '{"city": "Madrid"}'),
        ),
        rec(
            "weather_and_time",
            call("get_weather", '{"city": "London", "unit": "celsius"}'),
            call("get_time", '{"city": "New York"}'),
        ),
        rec("capital", text="Rome"),
        rec("poem", text="The sea..."),
        rec(
            "meeting",
            call(
                "create_event",
                json.dumps(
                    {
                        "title": "Design review",
                        "start": "2026-12-10T15:00",
                        "attendees": [{"name": "Ana", "email": "ana@example.com"}, {"name": "Li"}],
                        "reminder": {"minutes_before": 15},
                    }
                ),
            ),
        ),
    ]


def test_the_shipped_suite_covers_single_parallel_none_and_nested_calls():
    suite = load_suite(SUITES / "tools", "tool-use")
    assert {c.kind for c in suite.cases} == {"single", "parallel", "none", "nested"}
    req = request_for(suite, suite.cases[0], RULE)
    assert req["kind"] == "chat" and req["extra"]["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in req["extra"]["tools"]] == list(suite.cases[0].tools)
    checks = check_tool_calls(RULE, suite, good_answers(), answers(good_answers()), "ref")
    assert [(c.name, c.verdict) for c in checks] == [
        ("tools:finish_reason@tool-use", PASSED),
        ("tools:arguments@tool-use", PASSED),
        ("tools:trigger@tool-use", PASSED),
    ]


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ('{"city": 5}', "break its schema at city: 5 is not of type 'string'"),
        ('{"town": "Paris"}', "break its schema"),
        ('{"city": "Paris", "unit": "kelvin"}', "at unit: 'kelvin' is not one of"),
        ('{"city": "Par', "arguments are not JSON"),
    ],
)
def test_arguments_that_break_the_schema_fail(arguments, why):
    suite = load_suite(SUITES / "tools", "tool-use")
    answered = good_answers()
    answered[0] = rec("weather", call("get_weather", arguments))
    result = check_arguments(suite, answered, 1.0)
    assert result.verdict == FAILED and why in result.message, result.message
    assert result.measured == round(7 / 8, 4)


def test_nested_arguments_are_validated_inside_arrays_and_objects():
    suite = load_suite(SUITES / "tools", "tool-use")
    answered = good_answers()
    bad = {"title": "x", "start": "y", "attendees": [{"email": "no-name@example.com"}]}
    answered[-1] = rec("meeting", call("create_event", json.dumps(bad)))
    result = check_arguments(suite, answered, 1.0)
    assert result.verdict == FAILED and "at attendees/0" in result.message


def test_a_tool_not_offered_and_a_call_under_stop_fail():
    suite = load_suite(SUITES / "tools", "tool-use")
    answered = good_answers()
    answered[0] = rec("weather", call("get_stock_price", '{"city": "Paris"}'))
    assert "not one of the offered tools" in check_arguments(suite, answered, 1.0).message
    answered = good_answers()
    answered[1]["finish_reason"] = "stop"  # a call a client following finish_reason never runs
    result = check_finish_reason(suite, answered, 1.0)
    assert result.verdict == FAILED and result.measured == round(5 / 6, 4)
    assert result.details["wrong"] == {"currency": "finish_reason 'stop'"}
    assert check_finish_reason(suite, answered, 0.8).verdict == PASSED  # the card's threshold


def test_trigger_agreement_is_precision_recall_f1_against_the_reference():
    reference = {"a": ["f"], "b": ["f"], "c": [], "d": [], "e": ["g"]}
    got = {"a": ["f"], "b": [], "c": ["f"], "d": [], "e": ["g", "g"]}
    stats = agreement(reference, got)  # tp a,e; fn b; fp c; tn d
    assert (stats["tp"], stats["fp"], stats["fn"], stats["tn"]) == (2, 1, 1, 1)
    assert stats["precision"] == round(2 / 3, 4) and stats["recall"] == round(2 / 3, 4)
    assert stats["f1"] == round(2 / 3, 4) and stats["disagree"] == ["b", "c"]
    suite = load_suite(SUITES / "tools", "tool-use")
    ref = answers(good_answers())
    answered = good_answers()
    answered[5] = rec("capital", call("get_weather", '{"city": "Rome"}'))  # calls where ref did not
    answered[0] = rec("weather", text="It is sunny.")  # and does not where it did
    result = check_trigger(suite, answered, ref, "ref/cell", 0.9)
    assert result.verdict == FAILED and result.measured == round(2 * (5 / 6) ** 2 / (5 / 3), 4)
    assert "disagree on capital, weather" in result.message
    missing = check_trigger(suite, answered, None, "ref/cell", 0.9)
    assert (
        missing.verdict == NOT_MEASURED and "not recorded on the reference cell ref/cell" in missing.message
    )


def test_reasoning_must_come_back_in_its_own_field():
    suite = load_suite(SUITES / "tools", "tool-use")
    answered = [dict(r, reasoning="Let me think.") for r in good_answers()]
    assert check_reasoning(suite, answered, 1.0, ("<think>",)).verdict == PASSED
    answered[6] = dict(answered[6], reasoning="", text="<think>the sea</think> The sea...")
    result = check_reasoning(suite, answered, 1.0, ("<think>",))
    assert result.verdict == FAILED and result.details == {
        "missing": ["poem"],
        "leaked": ["poem"],
        "markers": ["<think>"],
    }


def test_a_suite_naming_an_unknown_tool_is_refused(tmp_path):
    write_yaml(
        tmp_path / "bad.yaml",
        {
            "tools": {"f": {"parameters": {"type": "object"}}},
            "cases": [{"id": "x", "kind": "single", "prompt": "p", "tools": ["g"], "expect": "call"}],
        },
    )
    with pytest.raises(ConfigError, match=r"cases\[0\].*expected tools among \['f'\]"):
        load_suite(tmp_path, "bad")


def test_the_cards_run_the_suite_where_they_should():
    matrix = load_matrix(REPO / "matrix")
    sgl = matrix.cell("smollm2-135m/cpu+sglang/low_latency/baseline")
    assert tool_rules_for(matrix.card(sgl), sgl) == []  # no SGLang tool parser fits SmolLM2
    for cell in (c for c in matrix.cells if c.model == "smollm2-135m" and c.engine == "llama.cpp"):
        rules = tool_rules_for(matrix.card(cell), cell)
        # the deterministic mode only, once: ngram_spec's greedy output is the baseline's
        assert len(rules) == (cell.mode == "low_latency" and cell.strategy == "baseline"), cell.id
        template = any("--chat-template-file" in t.argv for t in templates(matrix.card(cell), cell))
        assert template == (cell.mode == "low_latency"), f"{cell.id}: serves the tool template"
    for cell in (c for c in matrix.cells if c.model == "kimi-k3.1-pro" and c.supported):
        (rule,) = tool_rules_for(matrix.card(cell), cell)
        assert rule.reasoning and rule.concurrency == matrix.card(cell).mode(cell.mode).concurrency
        assert list(plan.tool_calls(matrix.card(cell), cell, SUITES))[0].phase == "tools-tool-use"


def test_the_tool_template_the_card_checks_is_the_one_the_repository_ships():
    """Preflight holds every host's copy to the card's size and sha256; tools/build-engine copies
    the repository's file: a template edited without its card entry would fail every host."""
    card = load_matrix(REPO / "matrix").cards["smollm2-135m"]
    (entry,) = [f for f in card.model_files if f.path.endswith("/smollm2-135m-tools.jinja")]
    shipped = (REPO / "matrix" / "models" / "templates" / "smollm2-135m-tools.jinja").read_bytes()
    assert (entry.size, entry.sha256) == (len(shipped), hashlib.sha256(shipped).hexdigest())


# -- a real run of the phase, with the stub engine ------------------------------------------------


MINI = {
    "tools": {
        "get_weather": {
            "description": "weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        }
    },
    "cases": [
        {
            "id": "w1",
            "kind": "single",
            "prompt": "Weather in Oslo?",
            "tools": ["get_weather"],
            "expect": "call",
        },
        {
            "id": "w2",
            "kind": "single",
            "prompt": "Weather in Rome?",
            "tools": ["get_weather"],
            "expect": "call",
        },
    ],
}


def _stub_run(tmp_path, monkeypatch, arguments: str, record: bool = False):
    suites = tmp_path / "suites"
    if not (suites / "workloads").exists():
        shutil.copytree(SUITES / "workloads", suites / "workloads")
    write_yaml(suites / "tools" / "mini.yaml", MINI)
    monkeypatch.setenv("DAYZERO_SUITES", str(suites))
    card = stub_card(model="tooly")
    card["recipe"]["port"] = random.randint(20000, 29000)  # ours alone: other runs use the stub too
    card["recipe"]["command"] += ["--tool-arguments", arguments]
    card["probes"] = [{"id": "hello", "prompt": "Say hello.", "max_tokens": 4}]
    ref = "tooly/cpu/low_latency/baseline"  # goldens not recorded yet: not measured, not failed
    card["goldens"] = {"reference": ref, "policy": {"policy": "similarity", "min_ratio": 0.5}}
    card["tool_calls"] = [{"suite": "mini", "when": {"mode": "low_latency"}, "max_tokens": 16}]
    matrix = load_matrix(stub_matrix(tmp_path, card))
    inventory = load_inventory(stub_inventory(tmp_path, ttft=0.01), set(matrix.hardware))
    ctx = RunContext(
        matrix, inventory, tmp_path / "reports", tmp_path / "goldens", new_run_id(), say=lambda m: None
    )
    try:
        return run_cell(ctx, matrix.cell("tooly/cpu/low_latency/baseline"), record_goldens=record)
    finally:
        ctx.close()


def test_a_server_whose_tool_arguments_break_the_schema_fails_the_cell(tmp_path, monkeypatch):
    """The stub engine answers every tool request with a call; its arguments are planted."""
    good = _stub_run(tmp_path / "good", monkeypatch, '{"city": "Oslo"}')
    by_name = {c.name: c for c in good.checks}
    assert by_name["tools:arguments@mini"].verdict == PASSED
    assert by_name["tools:finish_reason@mini"].verdict == PASSED
    assert by_name["tools:trigger@mini"].verdict == NOT_MEASURED  # nothing recorded yet
    assert good.verdict == "passed"

    bad = _stub_run(tmp_path / "bad", monkeypatch, '{"city": 5}')
    result = next(c for c in bad.checks if c.name == "tools:arguments@mini")
    assert result.verdict == FAILED and "5 is not of type 'string'" in result.message
    assert bad.verdict == "failed"
    doc = json.loads(bad.evidence_path.read_text())
    assert any(c["name"] == "tools:arguments@mini" and c["verdict"] == FAILED for c in doc["checks"])
    kept = [r for r in doc["records"] if r.endswith("/tools-mini.json")]
    assert kept, doc["records"]
    (rec_,) = [r for r in json.loads((tmp_path / "bad" / "reports" / kept[0]).read_text())["records"][:1]]
    assert rec_["tool_calls"] == [
        {"id": rec_["tool_calls"][0]["id"], "name": "get_weather", "arguments": '{"city": 5}'}
    ]


def test_golden_record_keeps_the_tool_answers_and_the_next_run_agrees(tmp_path, monkeypatch):
    assert _stub_run(tmp_path, monkeypatch, '{"city": "Oslo"}', record=True).verdict == "passed"
    golden = load_golden(tmp_path / "goldens", "tooly/cpu/low_latency/baseline")
    assert golden.tool_calls == {"mini": {"w1": ["get_weather"], "w2": ["get_weather"]}}
    again = _stub_run(tmp_path, monkeypatch, '{"city": "Oslo"}')
    trigger = next(c for c in again.checks if c.name == "tools:trigger@mini")
    assert trigger.verdict == PASSED and trigger.measured == 1.0
