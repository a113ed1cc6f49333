"""The run's tally (pure): what counts as a run that tested nothing, and the lines it prints."""

from __future__ import annotations

from dayzero.run.tally import ERROR, FAILED, PASSED, SKIPPED, UNSUPPORTED, WOULD_RUN, cell_outcome, tally

NO_B300 = "no host with hardware 'b300' in inventory hosts/local.yaml"


def test_a_run_whose_cells_were_all_skipped_or_unsupported_is_empty_and_says_why():
    t = tally([(SKIPPED, NO_B300)] * 16 + [(UNSUPPORTED, "")] * 4, "hosts/local.yaml", "matrix")
    assert t.empty and t.selected == 20
    assert t.why_empty() == f"dayzero: no cell ran of 20 selected: 16 skipped: {NO_B300}; 4 unsupported"
    assert t.summary() == [
        "0 of 20 selected cells ran",
        f"16 skipped: {NO_B300}",
        "4 unsupported",
        "inventory hosts/local.yaml; matrix matrix",
    ]


def test_one_cell_that_ran_makes_a_run_not_empty_whatever_its_verdict():
    for outcome in (PASSED, FAILED, ERROR):
        t = tally([(outcome, ""), (SKIPPED, "needs 2 cpu hosts; inventory i has 1")], "i", "m")
        assert not t.empty, outcome
        assert t.summary()[0] == f"1 of 2 selected cells ran (1 {outcome})"


def test_skip_reasons_are_counted_apart_most_first():
    t = tally([(SKIPPED, "b")] + [(SKIPPED, "a")] * 2 + [(SKIPPED, "")], "i", "m")
    assert t.summary()[1:4] == ["2 skipped: a", "1 skipped: b", "1 skipped: no reason given"]


def test_a_dry_run_counts_what_would_run():
    planned = tally([(WOULD_RUN, ""), (UNSUPPORTED, "")], "i", "m", dry_run=True)
    assert not planned.empty and planned.summary()[0] == "1 of 2 selected cells would run"
    nothing = tally([(UNSUPPORTED, "")], "i", "m", dry_run=True)
    assert nothing.why_empty() == "dayzero: no cell would run of 1 selected: 1 unsupported"


def test_nothing_selected_is_empty():
    t = tally([], "i", "m")
    assert t.empty and t.why_empty() == "dayzero: no cell ran: no cell of matrix m matches the selection"


def test_a_cells_outcome_over_its_setup_call_and_teardown_reports():
    def fold(*reports):
        outcome = None
        for when, result, reason in reports:
            outcome = cell_outcome(outcome, when, result, reason)
        return outcome

    assert fold(("setup", "passed", ""), ("call", "passed", ""), ("teardown", "passed", "")) == (PASSED, "")
    skipped = fold(("setup", "passed", ""), ("call", "skipped", "why"), ("teardown", "passed", ""))
    assert skipped == (SKIPPED, "why")
    assert fold(("setup", "passed", ""), ("call", "failed", ""), ("teardown", "passed", "")) == (FAILED, "")
    assert fold(("setup", "failed", ""), ("teardown", "passed", "")) == (ERROR, "")
    assert fold(("setup", "passed", ""), ("call", "passed", ""), ("teardown", "failed", "")) == (ERROR, "")


def test_a_cell_set_up_whose_call_never_reported_was_interrupted_not_passed():
    """Ctrl-C mid-cell: pytest logs the setup's pass and no call; the summary said "1 passed"
    beside a broken evidence document (seen in the two-host interrupt sweep)."""
    from dayzero.run.tally import INTERRUPTED

    outcome = cell_outcome(None, "setup", "passed", "")
    assert outcome == (INTERRUPTED, "")
    assert cell_outcome(outcome, "teardown", "passed", "") == (INTERRUPTED, "")
    t = tally([outcome], "i", "m")
    assert t.summary()[0] == "1 of 1 selected cells ran (1 interrupted)"
