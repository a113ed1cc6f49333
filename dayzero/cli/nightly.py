"""`dayzero nightly`: the matrix on an inventory (xdist), each night judged by its history, reported."""

from __future__ import annotations

import os

from dayzero.cli.common import HOSTS


def add(sub) -> None:
    p = sub.add_parser(
        "nightly",
        help="run the matrix on an inventory (xdist), judge the night by its history, build the report",
        description=__doc__,
    )
    p.add_argument("--hosts", default=HOSTS, help=f"inventory (default: {HOSTS})")
    p.add_argument("--matrix", dest="nightly_matrix", help="matrix directory (default: matrix)")
    p.add_argument("--root", default="reports/nightly", help="nightly root (default: reports/nightly)")
    p.add_argument("-m", dest="markers", default="", help="marker expression, e.g. b300 (default: all)")
    p.add_argument("-n", dest="workers", default="auto", help="xdist workers (default: auto = host slots)")
    p.add_argument(
        "--band",
        type=float,
        default=10.0,
        help="the previous-night comparison's band in %% without spread (10; display only)",
    )
    p.add_argument(
        "--store",
        default=os.environ.get("DAYZERO_HISTORY"),
        help="results store: SQLite file or postgresql:// DSN (default: $DAYZERO_HISTORY, else "
        "ROOT/history.sqlite)",
    )
    p.add_argument("--suites-root", default=".", help="where pytest runs: the repository (default: .)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dayzero.report.nightly import run_nightly

    return run_nightly(args)
