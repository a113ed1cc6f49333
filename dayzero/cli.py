"""`dayzero` command line: inspect the matrix, print recipes, record goldens, build tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dayzero.errors import ConfigError, DayzeroError
from dayzero.spec import mamba
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import Cell, Matrix, load_matrix
from dayzero.spec.recipe import MissingValue, hosts_needed, placeholder_hosts, render
from dayzero.submission import commands as submission_commands


def _select(matrix: Matrix, args) -> list[Cell]:
    cells = list(matrix.cells)
    if getattr(args, "cell", None):
        try:
            return [matrix.cell(c) for c in args.cell]
        except KeyError as exc:
            raise SystemExit(f"dayzero: unknown cell {exc.args[0]!r} (see `dayzero matrix`)") from None
    for attr in ("model", "hardware", "mode", "strategy", "status"):
        wanted = getattr(args, attr, None)
        if wanted:
            key = "published" if attr == "status" else attr
            cells = [c for c in cells if getattr(c, key) == wanted]
    return cells


def cmd_matrix(args) -> int:
    matrix = load_matrix(args.matrix)
    cells = _select(matrix, args)
    width = max((len(c.id) for c in cells), default=10)
    for c in cells:
        reason = f"  ({c.reason})" if c.reason else ""
        print(f"{c.id:<{width}}  {c.published:<11}  nodes={c.nodes}{reason}")
    print(f"\n{len(cells)} cell(s)", file=sys.stderr)
    return 0


def cmd_recipe(args) -> int:
    matrix = load_matrix(args.matrix)
    cells = _select(matrix, args)
    if not cells:
        raise SystemExit("dayzero: no cell matches; try `dayzero matrix`")
    inventory = load_inventory(args.hosts, set(matrix.hardware)) if args.hosts else None
    for cell in cells:
        print(f"# {cell.id}  [{cell.published}]")
        if not cell.supported:
            print(f"# unsupported: {cell.reason}\n")
            continue
        n = hosts_needed(matrix.card(cell), cell)
        hosts = (
            list(inventory.for_hardware(cell.hardware)[:n])
            if inventory
            else placeholder_hosts(matrix, cell, n)
        )
        if len(hosts) < n:
            print(f"# needs {n} {cell.hardware} host(s); {args.hosts} has {len(hosts)}\n")
            continue
        try:
            recipe = render(matrix, cell, hosts)
        except MissingValue as exc:
            print(f"# needs data: {exc}\n")
            continue
        card = matrix.card(cell)
        for lc in recipe.launches:
            print(f"# {lc.role}[{lc.rank}] on {lc.host}")
            print(lc.shell)
            if card.mamba_ratio and "--model-path" in lc.argv:
                print(f"# mamba ratio: {mamba.describe(lc.argv, card.mamba_ratio)}")
        print()
    return 0


def cmd_lint(args) -> int:
    """Parse every rendered command with its engine's own parser: 0 clean, 1 findings, 2 unreadable."""
    from dayzero.spec import lint

    matrix = load_matrix(args.matrix)
    try:
        return lint.main(matrix, _select(matrix, args))
    except lint.LintError as exc:
        print(f"dayzero lint: {exc}", file=sys.stderr)
        return 2


def cmd_golden_record(args) -> int:
    from dayzero.run.cell import RunContext, new_run_id, run_cell
    from dayzero.spec.goldens import golden_path

    matrix = load_matrix(args.matrix)
    inventory = load_inventory(args.hosts, set(matrix.hardware))
    ctx = RunContext(
        matrix,
        inventory,
        Path(args.reports),
        Path(args.goldens),
        new_run_id(),
        say=lambda m: print(f"[dayzero] {m}", file=sys.stderr),
    )
    try:
        for cell in _select(matrix, args):
            if not cell.supported:
                continue
            outcome = run_cell(ctx, cell, record_goldens=True)
            if outcome.error:
                print(f"{cell.id}: not recorded: {outcome.error}", file=sys.stderr)
                return 1
            print(f"{cell.id}: golden written to {golden_path(ctx.goldens_dir, cell.id)}")
    finally:
        ctx.close()
    return 0


def cmd_hosts_check(args) -> int:
    """Connect to every host, print reachability and facts; exit 1 if any host is unfit."""
    from dayzero.lab.preflight import gather
    from dayzero.lab.transport import open_transport

    matrix = load_matrix(args.matrix)
    inventory = load_inventory(args.hosts, set(matrix.hardware))
    unfit = 0
    for host in inventory.hosts:
        engines = {
            card.engine.name: card.engine.version_command
            for card in matrix.cards.values()
            if host.hardware in card.hardware and card.engine.version_command
        }
        try:
            with open_transport(host, inventory) as transport:
                facts = gather(transport, matrix.hardware[host.hardware], engines, inventory.secrets)
        except DayzeroError as exc:
            print(f"{host.name:<16} UNREACHABLE  {exc}")
            unfit += 1
            continue
        state = "ok" if facts.healthy else "UNFIT"
        unfit += not facts.healthy
        print(
            f"{host.name:<16} {state:<11}  {host.hardware}: {facts.accelerators_seen} seen "
            f"(inventory {host.accelerators}), "
            f"memory {facts.memory_free_gb}/{facts.memory_total_gb} GB free, "
            f"disk {facts.disk_free_gb} GB free, cpus {facts.cpus}"
        )
        for engine, version in facts.engine_versions.items():
            print(f"{'':<16} engine {engine}: {version}")
        for problem in facts.problems:
            print(f"{'':<16} problem: {problem}")
    print(f"\n{len(inventory.hosts) - unfit} of {len(inventory.hosts)} host(s) fit", file=sys.stderr)
    return 1 if unfit else 0


def cmd_acceptance(args) -> int:
    from dayzero.report.acceptance import write_acceptance

    print(write_acceptance(load_matrix(args.matrix), Path(args.reports), max_age_days=args.stale_after))
    return 0


def cmd_report(args) -> int:
    """Acceptance table and the single-file Allure 3 report, from what a run left in --reports."""
    import time

    from dayzero.report import allure_build
    from dayzero.report.acceptance import write_acceptance

    reports = Path(args.reports)
    table = write_acceptance(load_matrix(args.matrix), reports, max_age_days=args.stale_after)
    print(f"acceptance: {table} and {table.with_suffix('.html')}")
    started = time.monotonic()
    index = allure_build.build(
        reports,
        Path(args.output) if args.output else None,
        history=Path(args.history) if args.history else None,
        name=args.name,
        allure=args.allure,
        near=Path(args.matrix).resolve().parent,
    )
    size = index.stat().st_size / 2**20
    print(f"report: {index} ({size:.1f} MiB, built in {time.monotonic() - started:.1f}s)")
    return 0


def cmd_nightly(args) -> int:
    from dayzero.report.nightly import run_nightly

    return run_nightly(args)


def cmd_engine(args) -> int:
    from dayzero.lab import cache as engine

    return engine.main(["--print-paths"] if args.print_paths else [])


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("cell", nargs="*", help="cell id(s), e.g. smollm2-135m/cpu/low_latency/baseline")
    p.add_argument("--model")
    p.add_argument("--hardware")
    p.add_argument("--mode")
    p.add_argument("--strategy")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dayzero", description=__doc__)
    parser.add_argument("--matrix", default="matrix", help="matrix directory (default: matrix)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("matrix", help="list cells with their published status")
    _add_filters(p)
    p.add_argument("--status", choices=["verified", "pending", "unsupported"])
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser(
        "recipe", help="print a cell's launch commands (by id or --hardware/--mode/--strategy)"
    )
    _add_filters(p)
    p.add_argument("--hosts", help="render with the hosts of this inventory instead of <node0>...")
    p.set_defaults(func=cmd_recipe)

    p = sub.add_parser(
        "lint",
        help="parse every cell's commands with the engine's own parser (0 clean, 1 findings, 2 unreadable)",
    )
    _add_filters(p)
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("golden", help="golden outputs")
    gsub = p.add_subparsers(dest="golden_command", required=True)
    g = gsub.add_parser(
        "record", help="run cells' probes and record their outputs as goldens, with provenance"
    )
    _add_filters(g)
    g.add_argument("--hosts", default="hosts/local.yaml")
    g.add_argument("--goldens", default="suites/goldens")
    g.add_argument("--reports", default="reports")
    g.set_defaults(func=cmd_golden_record)

    p = sub.add_parser("hosts", help="lab hosts of an inventory")
    hsub = p.add_subparsers(dest="hosts_command", required=True)
    h = hsub.add_parser("check", help="connect to each host; print reachability and facts")
    h.add_argument("--hosts", default="hosts/local.yaml", help="inventory (default: hosts/local.yaml)")
    h.set_defaults(func=cmd_hosts_check)

    p = sub.add_parser(
        "acceptance", help="write reports/acceptance.md and .html from evidence and the matrix"
    )
    p.add_argument("--reports", default="reports")
    p.add_argument("--stale-after", type=float, default=30.0, help="days before evidence is Stale (30)")
    p.set_defaults(func=cmd_acceptance)

    p = sub.add_parser(
        "report", help="build the acceptance table and the single-file Allure 3 HTML report (with history)"
    )
    p.add_argument("--reports", default="reports", help="a run's reports dir (default: reports)")
    p.add_argument("--output", help="report directory (default: <reports>/allure-report)")
    p.add_argument("--history", help="Allure history file (default: <reports>/allure-history.jsonl)")
    p.add_argument("--name", default="dayzero", help="report title")
    p.add_argument("--stale-after", type=float, default=30.0, help="days before evidence is Stale (30)")
    p.add_argument("--allure", help="where Allure 3 is installed (default: $DAYZERO_ALLURE, tools/allure)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "nightly",
        help="run the matrix on an inventory (xdist), compare with the previous night, build the report",
    )
    p.add_argument("--hosts", default="hosts/local.yaml", help="inventory (default: hosts/local.yaml)")
    p.add_argument("--matrix", dest="nightly_matrix", help="matrix directory (default: matrix)")
    p.add_argument("--root", default="reports/nightly", help="nightly root (default: reports/nightly)")
    p.add_argument("-m", dest="markers", default="", help="marker expression, e.g. b300 (default: all)")
    p.add_argument("-n", dest="workers", default="auto", help="xdist workers (default: auto = host slots)")
    p.add_argument("--band", type=float, default=10.0, help="default noise band in %% without spread (10)")
    p.add_argument("--suites-root", default=".", help="where pytest runs: the repository (default: .)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    p.set_defaults(func=cmd_nightly)

    p = sub.add_parser("submission", help="vendor submissions: pack, check, accept signed bundles")
    submission_commands.add_commands(p)

    from dayzero.run import importers

    p = sub.add_parser("import", help="hold a sglang/vllm benchmark result against a cell's floors")
    importers.add_arguments(p)

    p = sub.add_parser("engine", help="build llama-server and fetch the SmolLM2 model (cached)")
    p.add_argument("--print-paths", action="store_true")
    p.set_defaults(func=cmd_engine)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"dayzero: {exc}", file=sys.stderr)
        return 2
    except DayzeroError as exc:
        print(f"dayzero: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
