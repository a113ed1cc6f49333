"""The run's tally (pure): what counts as a run that tested nothing, and the lines it prints."""

from __future__ import annotations

from dayzero import exitcodes
from dayzero.run.tally import (
    BROKEN,
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    UNSUPPORTED,
    WOULD_RUN,
    cell_outcome,
    exit_status,
    tally,
)

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


DEAD = "needs 1 healthy b300 host(s), 0 left; quarantined for run r: b300-01: cannot connect: no answer"


def test_lab_faults_are_listed_apart_once_per_cause_naming_the_cells():
    """A dead host breaks every cell of its hardware with one line: listed once, cells named."""
    cells = [f"m/b300/ll/s{i}" for i in range(7)] + ["m/cpu/ll/a", "m/cpu/ll/b"]
    outcomes = [(BROKEN, DEAD)] * 7 + [(PASSED, ""), (BROKEN, "lab1: host contended: load 3.0 on 2 cores")]
    t = tally(outcomes, "lab.yaml", "matrix", cells=cells)
    assert t.summary()[0] == "9 of 9 selected cells ran (8 broken, 1 passed)"
    assert t.lab_fault_lines() == [
        f"broken: lab fault: {DEAD}",
        "  7 cell(s): m/b300/ll/s0, m/b300/ll/s1, m/b300/ll/s2, m/b300/ll/s3, m/b300/ll/s4 and 2 more",
        "broken: lab fault: lab1: host contended: load 3.0 on 2 cores",
        "  1 cell(s): m/cpu/ll/b",
    ]
    assert t.summary()[-4:] == t.lab_fault_lines()
    assert not [line for line in t.summary() if "Traceback" in line or ".py" in line]
    assert tally([(PASSED, "")], "i", "m").lab_fault_lines() == []


def test_a_lab_fault_breaks_a_cell_unless_it_already_failed_as_a_product():
    assert cell_outcome(None, "call", "failed", "", DEAD) == (BROKEN, DEAD)
    setup = cell_outcome(None, "setup", "passed", "")
    broken = cell_outcome(setup, "call", "failed", "", DEAD)
    assert broken == (BROKEN, DEAD)
    assert cell_outcome(broken, "teardown", "passed", "") == (BROKEN, DEAD)
    assert cell_outcome(None, "setup", "failed", "", DEAD) == (BROKEN, DEAD), "a lab fault in setup too"
    failed = cell_outcome(setup, "call", "failed", "")
    assert cell_outcome(failed, "teardown", "failed", "", DEAD) == (FAILED, ""), "the product failure stays"


def test_exit_status_tells_lab_faults_from_product_failures():
    pytest_failed = exitcodes.TESTS_FAILED
    assert exit_status(pytest_failed, product_failures=0, lab_faults=3) == exitcodes.LAB_FAULT == 6
    assert exit_status(pytest_failed, product_failures=1, lab_faults=3) == 1, "a product failure anywhere"
    assert exit_status(pytest_failed, product_failures=1, lab_faults=0) == 1
    for status in (0, 2, 3, 4, 5):  # passed, interrupted, internal error, usage error, empty
        assert exit_status(status, product_failures=0, lab_faults=2) == status


def test_an_inconclusive_floor_is_never_green_and_never_a_product_failure():
    failed = exitcodes.TESTS_FAILED
    assert exit_status(failed, 0, 0, inconclusive=1) == exitcodes.INCONCLUSIVE == 7
    assert exit_status(failed, 0, 2, inconclusive=1) == 7, "inconclusive wins over a lab fault"
    assert exit_status(failed, 1, 0, inconclusive=1) == 1, "a product failure wins"


def test_every_run_status_has_one_name_and_a_meaning():
    codes = [code for code, _ in exitcodes.EXIT_STATUSES.values()]
    assert sorted(codes) == list(range(8)) and len(set(codes)) == len(codes)
    assert all(meaning for _, meaning in exitcodes.EXIT_STATUSES.values())
    assert exitcodes.EXIT_STATUSES["LAB_FAULT"][0] == exitcodes.LAB_FAULT
