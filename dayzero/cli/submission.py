"""`dayzero submission pack | check | accept | audit`: vendor submissions from the command line."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from dayzero.errors import ConfigError
from dayzero.escape import escape
from dayzero.spec.matrix import load_matrix

ALLOWED_SIGNERS = "submissions/allowed_signers"


def cmd_pack(args) -> int:
    from dayzero.submission.pack import pack

    system = None
    if args.system:
        try:
            system = yaml.safe_load(Path(args.system).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(args.system, "", f"not a readable system description: {exc}") from None
        if not isinstance(system, dict):
            raise ConfigError(args.system, "", "expected a mapping (system_name, hardware, engines, hosts)")
    out = Path(args.output or f"submission-{args.vendor}.tar.gz")
    pack(
        Path(args.reports),
        out,
        args.vendor,
        Path(args.key),
        load_matrix(args.matrix),
        cells=args.cell or None,
        system=system,
        allow_dirty=args.allow_dirty,
    )
    print(out)
    return 0


def _report_out(report, markdown: str | None) -> None:
    """One line per finding, then the verdict, all on stdout (what a vendor's script reads)."""
    for line in report.lines():
        print(line)
    if markdown:
        Path(markdown).write_text(report.to_markdown())
    for note in report.notes:
        print(f"note: {escape(note)}", file=sys.stderr)
    print(report.summary())


CRASHED = 3  # the checker itself failed: neither accepted nor rejected


def crash_guard(func):
    """A checker error is "crashed" (exit 3, with the error on stderr), never read as "rejected"."""

    def run(args) -> int:
        try:
            return func(args)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported, with its own exit code
            error = escape(f"{type(exc).__name__}: {exc}", limit=500)
            print(f"{escape(Path(args.bundle).name)}: crashed: {error}", file=sys.stderr)
            return CRASHED

    run.__name__ = func.__name__
    return run


@crash_guard
def cmd_check(args) -> int:
    from dayzero.submission.check import check_bundle, reference

    if args.reports and not Path(args.reports).is_dir():  # nothing to refuse a replay against: no "accepted"
        raise ConfigError(
            args.reports, "--reports", "no such directory (the lab's reports, where `accept` adds evidence)"
        )
    ref = reference(args.matrix, args.goldens, args.allowed_signers)
    report = check_bundle(Path(args.bundle), ref, reports_dir=Path(args.reports) if args.reports else None)
    _report_out(report, args.markdown)
    return report.exit_code


@crash_guard
def cmd_accept(args) -> int:
    from dayzero.report.acceptance import write_acceptance
    from dayzero.submission.accept import accept
    from dayzero.submission.check import reference

    ref = reference(args.matrix, args.goldens, args.allowed_signers)
    report, written = accept(Path(args.bundle), ref, Path(args.reports))
    _report_out(report, args.markdown)
    if report.accepted:
        for path in written:
            print(f"accepted: {escape(str(path))}")
        print(f"acceptance table: {write_acceptance(ref.matrix, Path(args.reports))}")
    return report.exit_code


def cmd_audit(args) -> int:
    """A seeded sample of accepted vendor cells, each with what a re-run must reproduce."""
    from dayzero import evidence
    from dayzero.report.reproduction import audit

    matrix = load_matrix(args.matrix)
    docs = [doc for _, doc in evidence.iter_evidence(Path(args.reports))]
    items = audit(docs, args.sample, args.seed)
    print(
        f"audit: {len(items)} accepted vendor cell(s) drawn with seed {args.seed}, each with its origin "
        "and who reproduced it (a party's own run, never the vendor's relabelled); a re-run of each "
        "recipe on the same hardware kind must reproduce every floor below"
    )
    for item in items:
        for line in item.lines(matrix, docs):
            print(escape(line))
    return 0


def add(verbs) -> None:
    parser = verbs.add_parser(
        "submission", help="vendor submissions: pack, check, accept signed bundles", description=__doc__
    )
    sub = parser.add_subparsers(dest="submission_command", required=True)

    p = sub.add_parser(
        "pack", help="pack the latest evidence per cell, raw records and logs into a signed bundle"
    )
    p.add_argument("cell", nargs="*", help="cells to pack (default: every cell with evidence)")
    p.add_argument("--vendor", required=True, help="vendor name: the signing identity in allowed_signers")
    p.add_argument("--key", required=True, help="the vendor's SSH private key (ssh-keygen -Y sign)")
    p.add_argument("--reports", default="reports", help="reports directory of the run (default: reports)")
    p.add_argument("--system", help="YAML/JSON system description: drivers, engine images and digests, ...")
    p.add_argument(
        "--allow-dirty", action="store_true", help="pack from a modified harness (the checker reports it)"
    )
    p.add_argument("-o", "--output", help="bundle path (default: submission-<vendor>.tar.gz)")
    p.set_defaults(func=cmd_pack)

    for name, func, text in (
        (
            "check",
            cmd_check,
            "check a bundle: one line per finding; exit 0 accepted, 1 rejected, 2 unusable, 3 crashed",
        ),
        ("accept", cmd_accept, "check a bundle and, if accepted, add its evidence to the reports"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("bundle")
        p.add_argument("--allowed-signers", default=ALLOWED_SIGNERS, help=f"(default: {ALLOWED_SIGNERS})")
        p.add_argument("--goldens", default="suites/goldens", help="golden outputs (default: suites/goldens)")
        p.add_argument("--markdown", help="also write the verdict as Markdown to this file")
        if name == "accept":
            p.add_argument("--reports", default="reports", help="reports directory to add the evidence to")
        else:
            p.add_argument(
                "--reports",
                help="the lab's reports directory: also refuse what accept would (records accepted before)",
            )
        p.set_defaults(func=func)

    p = sub.add_parser(
        "audit", help="draw a seeded sample of accepted vendor cells to re-run, with what to reproduce"
    )
    p.add_argument("--reports", default="reports", help="reports directory holding the accepted evidence")
    p.add_argument("--sample", type=int, default=5, help="how many cells to draw (default: 5)")
    p.add_argument("--seed", type=int, default=0, help="the draw's seed: the same seed draws the same cells")
    p.set_defaults(func=cmd_audit)
