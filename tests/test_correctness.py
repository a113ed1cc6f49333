"""Golden policies and probe checks, on texts like the ones llama.cpp returns."""

from __future__ import annotations

import pytest

from dayzero.checks.correctness import (
    check_golden,
    check_probe,
    compare,
    printable_ratio,
    repetition_ratio,
)
from dayzero.spec.card import GoldenPolicy, Probe

SINGLE = "The capital of France is Paris."
BATCHED = "The capital of France is Paris, a city known for art."


def test_exact_policy_shows_a_diff():
    ok, message = compare(GoldenPolicy("exact"), SINGLE, BATCHED)
    assert not ok and "-The capital of France is Paris." in message
    assert compare(GoldenPolicy("exact"), SINGLE, SINGLE)[0]


@pytest.mark.parametrize("n, expected", [(4, True), (6, True), (7, False), (8, False)])
def test_first_n_tokens(n, expected):
    # "The capital of France is Paris" then "." versus ",": the texts agree on 6 tokens only
    ok, message = compare(GoldenPolicy("first_n_tokens", n=n), SINGLE, BATCHED)
    assert ok is expected
    assert f"first {n} tokens" in message


def test_similarity_policy_threshold():
    assert compare(GoldenPolicy("similarity", min_ratio=0.6), SINGLE, BATCHED)[0]
    ok, message = compare(GoldenPolicy("similarity", min_ratio=0.95), SINGLE, BATCHED)
    assert not ok and "< 0.95" in message


def test_contains_policy():
    assert compare(GoldenPolicy("contains"), "Paris", BATCHED)[0]
    assert not compare(GoldenPolicy("contains"), "Lyon", BATCHED)[0]


def test_missing_golden_fails_and_says_so():
    result = check_golden(GoldenPolicy("exact"), "capital", None, SINGLE)
    assert not result.passed and "no golden" in result.message


def test_probe_expectations_printable_and_repetition():
    probe = Probe("capital", "?", expect_contains=("Paris",))
    assert check_probe(probe, SINGLE, None).passed
    assert "missing ['Paris']" in check_probe(probe, "Lyon.", None).message
    assert "request failed" in check_probe(probe, "", "HTTP 500").message
    looping = "Paris is nice. " * 30
    assert repetition_ratio(looping) >= 0.25 and not check_probe(probe, looping, None).passed
    assert printable_ratio("\x00\x01\x02ab") < 0.85
    assert not check_probe(probe, "Paris\x00\x00\x00\x00\x00\x00", None).passed


def test_golden_provenance_is_kept_and_another_recipe_or_engine_is_flagged_not_failed():
    provenance = {"recipe_digest": "aaaa", "engine_version": "b100", "host": "h1"}
    same = check_golden(
        GoldenPolicy("exact"),
        "capital",
        SINGLE,
        SINGLE,
        provenance,
        recipe_digest="aaaa",
        engine_version="b100",
    )
    assert same.passed and same.details["golden_provenance"] == provenance
    assert "provenance_differs" not in same.details
    other = check_golden(
        GoldenPolicy("exact"),
        "capital",
        SINGLE,
        SINGLE,
        provenance,
        recipe_digest="bbbb",
        engine_version="b200",
    )
    assert other.passed  # the policy decides what may differ; provenance is a flag
    assert other.details["provenance_differs"] == [
        "golden recorded under recipe aaaa, this run bbbb",
        "golden recorded under engine b100, this run b200",
    ]
    assert "recipe aaaa, this run bbbb" in other.message
    # an unknown engine version is never compared
    unknown = check_golden(
        GoldenPolicy("exact"),
        "capital",
        SINGLE,
        SINGLE,
        provenance,
        recipe_digest="aaaa",
        engine_version="unknown",
    )
    assert "provenance_differs" not in unknown.details


def test_an_output_missing_the_golden_passes_on_an_alternate_recording_naming_it():
    """The cpu cells' greedy output turned at a near-tie on an AVX2-only CPU (the goldens were
    recorded on another): an alternate recording of the same recipe is met, and says where."""
    why = {"host": "lab1", "why": "AMD EPYC, AVX2 only"}
    alternates = [("The rainbow is a beautiful", why)]
    strict = GoldenPolicy("exact")
    result = check_golden(
        strict, "colors", "The rainbow consists of", "The rainbow is a beautiful", alternates=alternates
    )
    assert result.verdict == "passed" and "AMD EPYC, AVX2 only" in result.message
    assert result.details["alternate"]["provenance"] == why
    assert (
        check_golden(
            strict, "colors", "The rainbow consists of", "The rainbow is a", alternates=alternates
        ).verdict
        == "failed"
    )
    plain = check_golden(
        strict, "colors", "The rainbow consists of", "The rainbow consists of", alternates=alternates
    )
    assert plain.verdict == "passed" and "alternate" not in plain.details


def test_an_alternate_is_kept_only_for_the_goldens_own_recipe_and_once(tmp_path):
    from dayzero.errors import DeploymentError
    from dayzero.run.cell import add_alternate
    from dayzero.spec.goldens import Golden, load_golden, save_golden

    provenance = {
        "engine_version": "sglang 0.5.23",
        "recorded_at": "2026-12-04T01:00:00+00:00",
        "recipe_digest": "d1",
    }
    save_golden(
        tmp_path, Golden("m/cpu/a/b", {"policy": "exact"}, provenance, {"colors": "The rainbow consists"})
    )
    mine = {**provenance, "recorded_at": "2026-12-04T23:00:00+00:00", "why": "AVX2 only"}
    add_alternate(tmp_path, "m/cpu/a/b", {"colors": "The rainbow is"}, mine)
    add_alternate(tmp_path, "m/cpu/a/b", {"colors": "The rainbow is"}, mine)  # the same again: kept once
    add_alternate(tmp_path, "m/cpu/a/b", {"colors": "The rainbow consists"}, mine)  # the golden's own
    golden = load_golden(tmp_path, "m/cpu/a/b")  # schema-valid
    assert golden.alternatives("colors") == (("The rainbow is", mine),) and golden.alternatives("code") == ()
    with pytest.raises(DeploymentError, match="recipe_digest is 'd1'.*record the golden again"):
        add_alternate(tmp_path, "m/cpu/a/b", {"colors": "x"}, {**mine, "recipe_digest": "d2"})
    with pytest.raises(DeploymentError, match="no golden"):
        add_alternate(tmp_path, "m/cpu/x/y", {"colors": "x"}, mine)
