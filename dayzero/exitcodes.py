"""Every exit status dayzero returns, with what it means: the one list (the README's table is
checked against it).

A run of the suites (`pytest -m ...`) keeps pytest's statuses 0-5, with the meanings below, and
adds `LAB_FAULT`: a nightly job must tell "the product failed" from "the lab failed" without
reading the log, since only the first is news for the recipe's authors. The `dayzero` verbs
return `CLI_EXIT_STATUSES`.
"""

from __future__ import annotations

OK = 0
TESTS_FAILED = 1
INTERRUPTED = 2
INTERNAL_ERROR = 3
USAGE_ERROR = 4
NO_TESTS_RAN = 5
LAB_FAULT = 6
INCONCLUSIVE = 7

# A run of the suites: name -> (status, meaning).
EXIT_STATUSES: dict[str, tuple[int, str]] = {
    "OK": (OK, "every selected cell that ran passed (or none ran, with --allow-empty)"),
    "TESTS_FAILED": (
        TESTS_FAILED,
        "a product failure: at least one cell failed (a check, or its recipe did not come up)",
    ),
    "INTERRUPTED": (INTERRUPTED, "interrupted (Ctrl-C, SIGTERM); the cells that ran kept their evidence"),
    "INTERNAL_ERROR": (INTERNAL_ERROR, "internal error: a bug in dayzero or in a pytest plugin"),
    "USAGE_ERROR": (
        USAGE_ERROR,
        "usage error: an unknown option or marker, a matrix or inventory that does not load",
    ),
    "NO_TESTS_RAN": (
        NO_TESTS_RAN,
        "no selected cell ran (no host of its hardware, all unsupported, nothing matched); one line says why",
    ),
    "LAB_FAULT": (
        LAB_FAULT,
        "no product failure, but at least one cell broken by a lab fault "
        "(host unreachable, engine missing, lease wait ran out)",
    ),
    "INCONCLUSIVE": (
        INCONCLUSIVE,
        "no product failure, but at least one floor inconclusive: its interval straddles the bound "
        "after the protocol's budget (never green; wins over a lab fault)",
    ),
}

# The `dayzero` verbs (`dayzero lint`, `hosts check`, `submission check`, ...): name -> (status, meaning).
CLI_EXIT_STATUSES: dict[str, tuple[int, str]] = {
    "OK": (0, "done: clean, accepted, written"),
    "FINDINGS": (1, "the verb's answer is no: findings, a refused bundle, an unfit host, a failed check"),
    "BAD_INPUT": (2, "bad input: an unknown argument, or a matrix, inventory or file that does not load"),
    "INTERRUPTED": (130, "interrupted (Ctrl-C)"),
}
