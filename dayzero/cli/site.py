"""`dayzero site`: a static results site from the history store (grid across labs, a page per
cell and per night), for any web server or object store to host."""

from __future__ import annotations

from pathlib import Path

from dayzero.cli.history import ENV, default_store


def add(sub) -> None:
    p = sub.add_parser("site", help="write a static results site from the history store", description=__doc__)
    p.add_argument("out", help="folder to write the site into (index.html, cells/, nights/)")
    p.add_argument("--store", default=None, help=f"SQLite file or postgresql:// DSN (default: ${ENV})")
    p.set_defaults(func=run)


def run(args) -> int:
    from dayzero import site
    from dayzero.history.store import open_store

    with open_store(args.store or default_store()) as store:
        written = site.write(store, Path(args.out))
    print(f"{Path(args.out) / 'index.html'}: {len(written)} page(s)")
    return 0
