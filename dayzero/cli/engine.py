"""`dayzero engine`: build llama-server and fetch the SmolLM2 model (cached)."""

from __future__ import annotations


def add(sub) -> None:
    p = sub.add_parser(
        "engine", help="build llama-server and fetch the SmolLM2 model (cached)", description=__doc__
    )
    p.add_argument("--print-paths", action="store_true", help="print the cached paths and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from dayzero import cache

    return cache.main(["--print-paths"] if args.print_paths else [])
