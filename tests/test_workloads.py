"""Workloads as data, the protocol, the accuracy gate and speculative acceptance: pure parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from dayzero.checks.accuracy import check_accuracy, extract_answer, load_eval, request_for
from dayzero.checks.speculative import check_acceptance, counters
from dayzero.engines.prometheus import SpecCounters, parse_prometheus
from dayzero.errors import ConfigError
from dayzero.spec import card as model_card
from dayzero.spec.card import AccuracyGate, Protocol
from dayzero.spec.matrix import load_matrix
from dayzero.spec.workloads import load_workload, resolve

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "suites" / "workloads"
EVALS = ROOT / "suites" / "evals"


def card(**data):
    base = {"model": "m", "engine": {"name": "llama.cpp"}, "modes": {"x": {"concurrency": 4}}}
    return model_card.parse(ROOT / "m.yaml", {**base, **data})


def test_random_workload_has_exact_lengths_and_fixed_seeds():
    w = load_workload(WORKLOADS, "r", {"from": "random", "isl": 64, "osl": 32, "vocab": [100, 200]})
    a, b = w.requests(5), w.requests(5)
    assert a == b  # same seed, same requests, on every machine
    assert all(len(r["prompt"]) == 64 and r["input_len"] == 64 and r["max_tokens"] == 32 for r in a)
    assert all(100 <= t < 200 for r in a for t in r["prompt"])
    assert all(r["extra"]["ignore_eos"] for r in a) and w.exact_output
    # repetitions and warm-up draw other prompts, so no prompt cache is pre-filled for them
    assert w.requests(5, repetition=1)[0]["prompt"] != a[0]["prompt"]
    assert w.requests(5, warmup=True)[0]["prompt"] != a[0]["prompt"]
    # and so do measurements at other concurrencies on the same server (its prompt cache)
    assert w.requests(5, salt=4)[0]["prompt"] != a[0]["prompt"]
    assert w.requests(5, salt=4) == w.requests(5, salt=4)


def test_range_ratio_draws_lengths_in_range():
    w = load_workload(WORKLOADS, "r", {"from": "random", "isl": 100, "osl": 50, "range_ratio": 0.5})
    reqs = w.requests(50)
    assert all(50 <= r["input_len"] <= 100 and 25 <= r["max_tokens"] <= 50 for r in reqs)
    assert len({r["input_len"] for r in reqs}) > 1


def test_chat_workloads_ship_code_and_prose_prompts():
    code, prose = load_workload(WORKLOADS, "chat-code"), load_workload(WORKLOADS, "chat-prose")
    assert code.tag == "code" and prose.tag == "prose"
    assert len(code.prompts) >= 16 and len(prose.prompts) >= 16
    reqs = code.requests(30)
    assert len(reqs) == 30 and all(r["kind"] == "chat" and r["tag"] == "code" for r in reqs)
    assert sum("```" in r["prompt"] for r in reqs) > 20
    assert not code.exact_output and "ignore_eos" not in reqs[0]["extra"]


def test_agentic_sessions_share_a_long_prefix():
    w = load_workload(WORKLOADS, "agentx", {"turns": 3, "max_tokens": 16})
    sessions = w.requests(10)
    assert len(sessions) == 4  # ceil(10 requests / 3 turns)
    prefixes = {s["messages"][0]["content"] for s in sessions}
    assert len(prefixes) == 1 and len(prefixes.pop()) > 2000
    assert all(len(s["turns"]) == 3 and s["turns"][0]["max_tokens"] == 16 for s in sessions)
    assert len({s["turns"][0]["content"] for s in sessions}) == 4


def test_random_prompts_are_the_draws_of_randrange_as_recorded_runs_have_them():
    """Runs recorded before the prompts were drawn the fast way hold randrange's tokens: the
    checker rebuilds them and must get the same ones (seeded Random, randint then randrange)."""
    import math
    import random

    spec = {"from": "random", "isl": 48, "osl": 16, "range_ratio": 0.5, "vocab": [100, 49000], "seed": 7}
    w = load_workload(WORKLOADS, "r", spec)
    for repetition in (0, 2):
        rng = random.Random(7 + repetition * 7_919)
        for r in w.requests(6, repetition=repetition):
            n_in = rng.randint(math.ceil(48 * 0.5), 48)
            assert r["max_tokens"] == rng.randint(math.ceil(16 * 0.5), 16)
            assert r["prompt"] == [rng.randrange(100, 49000) for _ in range(n_in)]
    with pytest.raises(ConfigError, match="vocab"):
        load_workload(WORKLOADS, "r", {**spec, "vocab": [5, 5]}).requests(1)


def test_card_workloads_refine_suites_files_and_default_is_random():
    c = card(workloads={"short": {"from": "random", "isl": 16, "osl": 8}})
    assert resolve(c, "short", WORKLOADS).requests(1)[0]["input_len"] == 16
    default = resolve(c, "default", WORKLOADS, max_tokens=48)
    assert default.kind == "random" and default.requests(1)[0]["max_tokens"] == 48


def test_bad_workload_names_the_problem():
    with pytest.raises(ConfigError, match="no workload 'nope'"):
        load_workload(WORKLOADS, "nope")
    with pytest.raises(ConfigError, match="isl"):
        load_workload(WORKLOADS, "r", {"from": "random", "isl": 0})


def test_protocol_follows_the_field_unless_the_card_budgets_it():
    p = Protocol()
    assert p.num_prompts(1) == 16 and p.num_prompts(8) == 40 and p.num_prompts(8, override=12) == 12
    assert p.warmup_requests(8) == 8 and p.repetitions == 3
    assert p.processes(64) == 1 and p.processes(600) == 3
    q = card(protocol={"repetitions": 1, "warmup": 20, "client_processes": 2}).protocol
    assert q.repetitions == 1 and q.warmup_requests(4) == 20 and q.processes(4) == 2


def test_the_shipped_matrix_budgets_the_cpu_cells():
    matrix = load_matrix(ROOT / "matrix")
    c = matrix.cards["smollm2-135m"]
    for name in c.workloads:
        resolve(c, name, WORKLOADS)  # every card workload loads


# --- accuracy ------------------------------------------------------------------------------------


def test_eval_set_is_shipped_with_integer_answers():
    evalset = load_eval(EVALS, "gsm8k-mini")
    assert len(evalset.items) >= 50 and len(evalset.shots) >= 2
    assert all(isinstance(i.answer, int) for i in evalset.items)
    assert len({i.id for i in evalset.items}) == len(evalset.items)
    req = request_for(evalset, evalset.items[0], AccuracyGate("gsm8k-mini", 0.5, 4))
    assert req["prompt"].count("Question:") == len(evalset.shots) + 1 and req["extra"]["stop"] == ["\n"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" 3 x 4 = 12", 12),
        ("She has 1,250 dollars left.\n#### 1250", 1250),
        ("First 2 + 3 = 5, so the answer is 7.", 7),
        ("no idea", None),
        ("-4", -4),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_accuracy_gate_needs_threshold_and_zero_errors():
    evalset = load_eval(EVALS, "gsm8k-mini")
    items = evalset.items[:4]
    good = [{"id": i.id, "text": f" = {i.answer}", "error": None} for i in items]
    gate = AccuracyGate("gsm8k-mini", 0.5, 4)
    assert check_accuracy(gate, items, good).passed
    half = good[:2] + [{"id": i.id, "text": " = -1", "error": None} for i in items[2:]]
    r = check_accuracy(gate, items, half)
    assert r.passed and r.measured == 0.5
    low = check_accuracy(AccuracyGate("gsm8k-mini", 0.75, 4), items, half)
    assert not low.passed and "accuracy 0.500 below threshold 0.75" in low.message
    errored = good[:3] + [{"id": items[3].id, "text": "", "error": "HTTP 500: x"}]
    r = check_accuracy(gate, items, errored)
    assert not r.passed and "1 request error(s) (0 allowed)" in r.message


# --- speculative -----------------------------------------------------------------------------------

METRICS = """# HELP llamacpp:spec_decode_num_drafts_total Speculative: verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 10
llamacpp:spec_decode_num_draft_tokens_total 40
llamacpp:spec_decode_num_accepted_tokens_total 15
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 9
vllm:spec_decode_num_drafts_total{engine="0",model_name="x"} 3
vllm:spec_decode_num_drafts_total{engine="1",model_name="x"} 4
"""


def test_prometheus_counters_are_summed_over_labels():
    values = parse_prometheus(METRICS)
    assert values["vllm:spec_decode_num_drafts_total"] == 7
    assert counters("llama.cpp", METRICS) == SpecCounters(10, 40, 15)
    assert counters("llama.cpp", "llamacpp:tokens_predicted_total 5\n") is None
    assert counters("vllm", METRICS) == SpecCounters(7, 0, 0)  # each engine reads its own series
    assert counters("an engine nobody registered", METRICS) is None


def test_acceptance_length_is_the_diff_around_the_run():
    before, after = SpecCounters(10, 40, 15), SpecCounters(30, 120, 55)
    records = [{"timings": {"draft_n": 80, "draft_n_accepted": 40}, "error": None}]
    r = check_acceptance("chat-code", "code", "llama.cpp", before, after, records, bound=1.5)
    assert r.passed and r.kind == "health" and r.measured == 3.0  # 1 + 40 / 20
    assert r.details["acceptance_rate"] == 0.5 and r.details["timings"]["acceptance_rate"] == 0.5
    assert r.message.startswith("code: accept length 3.000")
    low = check_acceptance("chat-prose", "prose", "llama.cpp", before, before, [], bound=1.2)
    assert not low.passed and "no drafts made" in low.message and "below 1.2" in low.message
    none = check_acceptance("w", "code", "llama.cpp", None, None, [], bound=None)
    assert not none.passed and "counters could not be read" in none.message


def test_sglang_acceptance_unread_is_failed_never_a_since_start_average():
    """SGLang's /server_info average is cumulative since start: no longer read. Without counters
    on both sides of the run the check fails (issue 11 item 5: fail closed)."""
    r = check_acceptance("w", "code", "sglang", None, None, [], bound=None)
    assert not r.passed and r.measured is None and "could not be read" in r.message
    half = check_acceptance("w", "code", "sglang", SpecCounters(4, 12, 4), None, [], bound=None)
    assert not half.passed
