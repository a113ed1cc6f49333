"""`dayzero site`: a static results site from the history store (grid across labs, a page per
cell, per night and per lab's benchmark card), for any web server or object store to host.

Where each lab publishes its reports: `--evidence-url` and `--allure-url`, each a template for
every lab or `LAB=TEMPLATE` for one (repeatable), with the fields {lab} {cell} {slug} {run}
{controller} {night} {file}, e.g. --allure-url 'lab-a=https://a.example/nightly/{night}/allure-report/index.html'.
Without one, a run's files are linked relatively where this machine holds them. Vendor runs'
reproduction is judged against the matrix (--matrix)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dayzero.cli.history import ENV, default_store


def add(sub) -> None:
    p = sub.add_parser(
        "site",
        help="write a static results site from the history store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", help="folder to write the site into (index.html, cells/, nights/, cards/)")
    p.add_argument("--store", default=None, help=f"SQLite file or postgresql:// DSN (default: ${ENV})")
    p.add_argument("--evidence-url", action="append", default=[], metavar="[LAB=]TEMPLATE")
    p.add_argument("--allure-url", action="append", default=[], metavar="[LAB=]TEMPLATE")
    p.set_defaults(func=run)


def run(args) -> int:
    from dayzero import site
    from dayzero.errors import ConfigError
    from dayzero.history.store import open_store
    from dayzero.site import links
    from dayzero.spec.matrix import load_matrix

    published = site.Links(
        links.parse(args.evidence_url, "--evidence-url"), links.parse(args.allure_url, "--allure-url")
    )
    matrix = load_matrix(args.matrix) if Path(args.matrix).is_dir() else None
    target = args.store or default_store()
    if "://" not in target and not Path(target).is_file():  # opening would make an empty one
        raise ConfigError(target, "", "no history store here (dayzero history ingest makes it; --store)")
    with open_store(target) as store:
        written = site.write(store, Path(args.out), published, matrix)
    print(f"{Path(args.out) / 'index.html'}: {len(written)} page(s)")
    if matrix is None:
        print(f"no matrix at {args.matrix}: vendor runs' reproduction not judged")
    return 0
