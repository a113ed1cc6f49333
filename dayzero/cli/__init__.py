"""`dayzero` command line: inspect the matrix, print recipes, record goldens, build tables.

One module per verb, each with `add(subparsers)` (its parser, help and `func`) and the function
it runs; this module only builds the parser and maps errors to exit codes.
"""

from __future__ import annotations

import argparse
import sys

from dayzero import __version__
from dayzero.cli import (
    acceptance,
    card,
    engine,
    fit,
    floors,
    golden,
    history,
    hosts,
    import_,
    lint,
    matrix,
    nightly,
    recipe,
    report,
    site,
    submission,
)
from dayzero.errors import ConfigError, DayzeroError

VERBS = (
    matrix,
    recipe,
    lint,
    fit,
    floors,
    golden,
    hosts,
    acceptance,
    card,
    report,
    nightly,
    history,
    site,
    submission,
    import_,
    engine,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dayzero", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--version", action="version", version=f"dayzero {__version__}")
    parser.add_argument("--matrix", default="matrix", help="matrix directory (default: matrix)")
    sub = parser.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        verb.add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:  # every error of the file, one line each
        for line in str(exc).splitlines():
            print(f"dayzero: {line}", file=sys.stderr)
        return 2
    except DayzeroError as exc:
        print(f"dayzero: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
