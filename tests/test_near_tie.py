"""Goldens by log-probabilities (dayzero.checks.near_tie, check_golden): equal tokens pass, a
near-tie at the first divergence passes and says so, anything else fails; a forged output cannot
make a wrong answer a near-tie because the golden's side is the maintainers' recording."""

from __future__ import annotations

import random

from dayzero.checks.correctness import check_golden
from dayzero.checks.near_tie import compare_steps, flip_tolerated_share, spelled, steps
from dayzero.report.acceptance import golden_flags
from dayzero.spec.card import GoldenPolicy

# The measured tie (transformers, bf16): after "The rainbow", " consists" -0.849, " is" -0.974.
GOLDEN = [
    ["The", -0.01, [["The", -0.01], ["A", -4.9]]],
    [" rainbow", -0.2, [[" rainbow", -0.2], [" sky", -2.3]]],
    [" consists", -0.849, [[" consists", -0.849], [" is", -0.974], [" has", -3.099]]],
    [" of", -0.05, [[" of", -0.05], [" mainly", -3.5]]],
]
NEAR_TIE = [
    ["The", -0.02, [["The", -0.02], ["A", -4.7]]],
    [" rainbow", -0.21, [[" rainbow", -0.21], [" sky", -2.2]]],
    [" is", -0.90, [[" is", -0.90], [" consists", -0.93], [" has", -3.0]]],
    [" a", -0.4, [[" a", -0.4], [" made", -2.0]]],
]
EXACT = GoldenPolicy("exact")


def _check(golden_steps, output_steps, policy=EXACT):
    return check_golden(
        policy,
        "colors",
        spelled(steps(golden_steps)),
        spelled(steps(output_steps)),
        golden_steps=golden_steps,
        output_steps=output_steps,
    )


def test_equal_tokens_pass_with_their_drift():
    result = _check(GOLDEN, [[t, lp + 0.01, top] for t, lp, top in GOLDEN])
    assert result.passed and result.details["comparison"] == "tokens and log-probabilities"
    assert result.details["max_drift_nats"] == 0.01 and "divergence" not in result.details


def test_a_near_tie_at_the_first_divergence_passes_and_says_where():
    result = _check(GOLDEN, NEAR_TIE)
    assert result.passed, result.message
    d = result.details["divergence"]
    assert (d["position"], d["golden_token"], d["output_token"]) == (2, " consists", " is")
    assert "near-tie tolerated at token 2" in result.message
    doc = {"checks": [result.to_json()], "recipe": {"digest": ""}, "engine": {"version": ""}}
    assert golden_flags(doc) == [
        "golden:colors passed on a near-tie at token 2: golden ' consists' (-0.849), this run ' is' (-0.900)"
    ]


def test_a_divergence_outside_the_top_k_or_the_bound_fails():
    wrong = [*NEAR_TIE[:2], [" purple", -0.3, [[" purple", -0.3], [" consists", -3.0]]], NEAR_TIE[3]]
    result = _check(GOLDEN, wrong)
    assert not result.passed and "top-3 does not hold ' purple'" in result.message
    # in each other's top-k, but far apart under the reference: no near-tie
    far = [dict_ for dict_ in NEAR_TIE]
    far[2] = [" is", -0.9, [[" is", -0.9], [" consists", -0.95]]]
    golden = [*GOLDEN[:2], [" consists", -0.1, [[" consists", -0.1], [" is", -2.6]]], GOLDEN[3]]
    result = _check(golden, far)
    assert not result.passed and "2.500 nats below its choice" in result.message


def test_a_forged_output_cannot_call_a_wrong_answer_a_near_tie():
    """The bundle's side claims the tie; the maintainers' golden says " purple" is far below."""
    golden = [*GOLDEN[:2], [" consists", -0.1, [[" consists", -0.1], [" purple", -4.0]]], GOLDEN[3]]
    forged = [*NEAR_TIE[:2], [" purple", -0.70, [[" purple", -0.70], [" consists", -0.71]]], NEAR_TIE[3]]
    assert not _check(golden, forged).passed


def test_log_probabilities_that_do_not_spell_the_output_are_not_used():
    result = check_golden(
        EXACT,
        "colors",
        spelled(steps(GOLDEN)),
        "The rainbow is purple",
        golden_steps=GOLDEN,
        output_steps=NEAR_TIE,
    )
    assert not result.passed
    assert result.details["comparison"] == "text"
    assert result.details["why_text"] == "the output's log-probabilities do not spell its text"


def test_same_tokens_with_moved_log_probabilities_fail():
    """A broken engine that happens to pick the golden's greedy tokens still moves their numbers."""
    moved = [[t, lp - 1.5 if i == 3 else lp, top] for i, (t, lp, top) in enumerate(GOLDEN)]
    result = _check(GOLDEN, moved)
    assert not result.passed and "drift 1.500 > 1.0 nats" in result.message


def test_a_shorter_output_is_a_divergence():
    result = _check(GOLDEN, GOLDEN[:3])
    assert not result.passed and "the output has 3 tokens, the golden 4" in result.message


STOP = ["<|im_end|>", -0.359, [["<|im_end|>", -0.359], [" I", -2.609], [" You", -3.984]]]


def test_a_stop_token_one_side_scores_and_the_other_does_not_is_no_divergence():
    """One server of SGLang 0.5.23 leaves the stop token out of the streamed log-probabilities;
    the same engine behind its prefill/decode router sends it with the last chunk, some runs
    (measured 2026-12-07: "The capital of France is Paris." in 8 steps against the golden's 7,
    the eighth `<|im_end|>`); vLLM always sends it. A last step the text does not print is the
    stop token: where only one side has it, the printed tokens are compared."""
    text = spelled(steps(GOLDEN))
    for golden_steps, output_steps in ((GOLDEN, [*GOLDEN, STOP]), ([*GOLDEN, STOP], GOLDEN)):
        result = check_golden(
            EXACT, "colors", text, text, golden_steps=golden_steps, output_steps=output_steps
        )
        assert result.passed, result.message
        assert result.details["comparison"] == "tokens and log-probabilities"
        assert result.details["compared_tokens"] == len(GOLDEN)
    both = check_golden(
        EXACT, "colors", text, text, golden_steps=[*GOLDEN, STOP], output_steps=[*GOLDEN, STOP]
    )
    assert both.passed and both.details["compared_tokens"] == len(GOLDEN) + 1  # compared like any other


def test_a_printed_token_past_the_golden_is_still_a_divergence():
    """Only an unprinted last step is let go: an output that goes on past the golden's end fails."""
    more = [*GOLDEN, [" light", -0.3, [[" light", -0.3], [" the", -2.0]]]]
    result = _check(GOLDEN, more)
    assert not result.passed and "the output has 5 tokens, the golden 4" in result.message


def test_first_n_tokens_compares_the_tokens_that_spell_the_first_n_words():
    policy = GoldenPolicy("first_n_tokens", n=2)
    wrong_late = [*GOLDEN[:3], [" purple", -0.3, [[" purple", -0.3]]]]
    assert _check(GOLDEN, wrong_late, policy).passed  # beyond the first two words
    assert not _check(GOLDEN, wrong_late).passed
    assert not _check(GOLDEN, GOLDEN[:1], policy).passed  # stopped before the second word


def test_without_log_probabilities_the_text_policy_decides_and_says_so():
    result = check_golden(
        EXACT, "colors", "The rainbow", "The rainbow", golden_steps=None, output_steps=NEAR_TIE
    )
    assert result.passed and result.details["why_text"].startswith("the golden has no log-probabilities")


def test_malformed_steps_are_none():
    assert steps([["a", 0.5, []]]) is None  # a log-probability above 0
    assert steps([["a", -0.1, [["b", "x"]]]]) is None
    assert steps([["a", float("nan"), []]]) is None
    assert steps("x") is None and steps(None) is None
    assert steps([]) == ()  # an empty answer: no tokens, compared as such


def test_random_flips_at_non_ties_never_pass():
    """A single-token flip to any alternative the golden holds more than the bound below its
    choice fails, whatever the forged output claims; the share of flips that pass is the share
    of near-ties in the golden."""
    rng = random.Random(7)
    passed = tried = 0
    for _ in range(300):
        golden = [
            [f"t{i}", -rng.uniform(0, 0.5), [[f"t{i}", -0.1], [f"u{i}", -rng.uniform(0.0, 4.0)]]]
            for i in range(6)
        ]
        for step in golden:
            step[1] = step[2][0][1]
        at = rng.randrange(6)
        alt, alt_lp = golden[at][2][1]
        forged = [list(s) for s in golden]
        forged[at] = [alt, -0.1, [[alt, -0.1], [golden[at][0], -0.1]]]
        tried += 1
        result = compare_steps(steps(golden), steps(forged))
        tie = golden[at][1] - alt_lp <= 0.5
        assert result.ok == tie
        passed += result.ok
    tolerated, flips = flip_tolerated_share(steps(GOLDEN))
    assert (tolerated, flips) == (1, 4)
    assert 0 < passed < tried


def test_a_call_decided_at_a_first_token_near_tie_is_left_out_of_the_trigger_agreement():
    """vLLM on two CPUs: `<` (the call) -2.484 against `B` -2.609 for the two-city weather case."""
    from dayzero.checks.tool_calls import first_token_ties

    reference = {"two_cities": [], "capital": []}
    ref_steps = {
        "two_cities": [["B", -2.5, [["B", -2.5], ["<", -2.6]]]],
        "capital": [["The", -0.4, [["The", -0.4], ["<", -4.0]]]],
    }
    records = [
        {
            "id": "two_cities",
            "tool_calls": [{"name": "get_weather"}],
            "logprobs": [["<", -2.48, [["<", -2.48], ["B", -2.6]]]],
        },
        {
            "id": "capital",
            "tool_calls": [{"name": "x"}],
            "logprobs": [["<", -0.3, [["<", -0.3], ["The", -0.31]]]],
        },
    ]
    ties = first_token_ties(reference, records, ref_steps)
    assert list(ties) == ["two_cities"]  # capital's call is no near-tie under the reference's recording
    assert ties["two_cities"]["golden_token"] == "B" and ties["two_cities"]["output_token"] == "<"
    assert first_token_ties(reference, records, None) == {}
