"""Teacher forcing (issue 39): each engine's scores of a golden read from its real answers
(tests/data/scoring: vLLM's and SGLang's, recorded from the embedded default's launches), judged
against the golden, and what breaks the judgement: a token the engine ranks low, a mean that
moved, scores that do not spell the golden, an engine that cannot score."""

from __future__ import annotations

import copy
import json

import pytest

from dayzero import engines
from dayzero.checks import FAILED, PASSED
from dayzero.checks.correctness import check_golden
from dayzero.checks.forced import continuation, entries, judge
from dayzero.checks.near_tie import steps
from dayzero.run import plan
from dayzero.spec.card import GoldenPolicy
from dayzero.spec.matrix import load_matrix

from .conftest import REPO

DATA = json.loads((REPO / "tests" / "data" / "scoring" / "code-probe.json").read_text())
ENGINES = ("vllm", "sglang")


def scored(engine: str, answers=None) -> list:
    return engines.get(engine).scored(answers if answers is not None else DATA[engine])


def verdict(engine: str, raw, **bounds):
    golden = DATA["goldens"][engine]
    return judge(golden["text"], steps(golden["steps"]), raw, **{"max_rank": 2, "mean_nats": 0.25, **bounds})


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engines_real_scores_of_its_golden_pass(engine):
    got = verdict(engine, scored(engine))
    assert got.ok, got.message
    d = got.details
    assert d["tokens"] == 64 and d["worst_rank"] <= 2
    assert abs(d["mean_logprob"] - d["golden_mean_logprob"]) < 0.05
    # the prompt's whole chat template was scored, the golden its last 64 tokens
    assert len(scored(engine)) > 64 and "<|im_start|>" in "".join(t for t, _, _ in scored(engine))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_token_the_engine_ranks_low_fails(engine):
    raw = scored(engine)
    raw[-10][2] = 3  # one golden token the engine's third choice
    got = verdict(engine, raw)
    assert not got.ok and "ranks 3 > 2" in got.message and got.details["worst_at"] == 54


@pytest.mark.parametrize("engine", ENGINES)
def test_a_mean_that_moved_fails(engine):
    raw = [[t, lp - 0.3, r] for t, lp, r in scored(engine)]  # every token 0.3 nats less likely
    got = verdict(engine, raw)
    assert not got.ok and "nats under the golden's" in got.message


def test_scores_that_do_not_spell_the_golden_fail():
    raw = scored("vllm")
    raw[-1][0] = " list"  # the scored text is not the golden's
    got = verdict("vllm", raw)
    assert not got.ok and "does not end with the golden's text" in got.message
    assert not verdict("vllm", [["x", 0.5, 1]]).ok  # a positive log-probability is malformed


def test_continuation_is_the_last_tokens_that_spell_the_text():
    raw = entries([["<s>", -1.0, 1], ["Hi", -0.1, 1], [" there", -0.2, 2]])
    assert [s.token for s in continuation(raw, "Hi there")] == ["Hi", " there"]
    assert continuation(raw, "i there") is None


def test_answers_without_scores_read_as_none():
    assert scored("vllm", [{"choices": []}]) is None
    broken = copy.deepcopy(DATA["sglang"])
    del broken[1]["choices"][0]["logprobs"]
    assert scored("sglang", broken) is None


def test_sglang_ranks_come_from_its_top_k():
    raw = scored("sglang")
    # where its own token is not among the top-5 it returned, the rank is 6 (past them)
    answers = copy.deepcopy(DATA["sglang"])
    lp = answers[1]["choices"][0]["logprobs"]
    n = len(answers[0]["choices"][0]["prompt_token_ids"])
    lp["top_logprobs"][n - 1] = {"x": 0.0, "y": -0.1, "z": -0.2, "w": -0.3, "v": -0.4}
    assert scored("sglang", answers)[-1][2] == 6 and raw[-1][2] == 1


def test_the_golden_check_holds_the_scores():
    golden = DATA["goldens"]["vllm"]
    policy = GoldenPolicy("exact")
    common = dict(golden_steps=golden["steps"], output_steps=golden["steps"])
    passed = check_golden(policy, "code", golden["text"], golden["text"], forced=scored("vllm"), **common)
    assert passed.verdict == PASSED and passed.details["teacher_forced"]["ok"] is True
    worse = scored("vllm")
    worse[-3][2] = 9
    failed = check_golden(policy, "code", golden["text"], golden["text"], forced=worse, **common)
    assert failed.verdict == FAILED and "ranks 9 > 2" in failed.message
    looser = check_golden(
        GoldenPolicy("exact", forced_max_rank=10),
        "code",
        golden["text"],
        golden["text"],
        forced=worse,
        **common,
    )
    assert looser.verdict == PASSED
    unscored = check_golden(
        policy, "code", golden["text"], golden["text"], forced_why="llama.cpp: no", **common
    )
    assert unscored.verdict == PASSED and unscored.details["teacher_forced"] == {
        "ok": None,
        "message": "not scored: llama.cpp: no",
    }


def test_each_engine_says_whether_it_scores_and_the_plan_follows():
    matrix = load_matrix(REPO / "matrix")
    texts = {"code": DATA["goldens"]["vllm"]["text"]}
    for cell_id, can in (
        ("smollm2-135m/cpu+vllm/low_latency/baseline", True),
        ("smollm2-135m/cpu+sglang/low_latency/baseline", True),
        ("smollm2-135m/cpu+llama.cpp/low_latency/baseline", False),
    ):
        cell = matrix.cell(cell_id)
        score_plan, why = plan.scores(matrix.card(cell), cell, texts)
        if can:
            (request,) = score_plan.requests()
            assert request["id"] == "code" and request["calls"] and not why
            assert request["calls"][0]["body"]["messages"][-1] == {
                "role": "assistant",
                "content": texts["code"],
            }
        else:
            assert (
                score_plan is None
                and "llama-server returns log-probabilities of generated tokens only" in why
            )
    assert plan.scores(matrix.card(cell), cell, None)[0] is None
