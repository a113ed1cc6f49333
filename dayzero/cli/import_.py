"""`dayzero import`: hold an existing sglang/vllm benchmark run against a cell's floors."""

from __future__ import annotations

import json
from pathlib import Path

from dayzero import engines
from dayzero.cli.common import unknown_cell
from dayzero.run.importers import evaluate, mismatches, parse, read_runs
from dayzero.spec.card import floors_for
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import parallel_accelerators
from dayzero.spec.workloads import suites_dir


def add(sub) -> None:
    p = sub.add_parser(
        "import", help="hold a sglang/vllm benchmark result against a cell's floors", description=__doc__
    )
    p.add_argument(
        "file", type=Path, help="results JSON (vllm --save-result) or JSON lines (sglang --output-file)"
    )
    p.add_argument("--cell", required=True, help="cell id whose floors the run is held against")
    p.add_argument(
        "--tool",
        choices=["auto", *sorted(n for n, e in engines.registered().items() if e.bench_tool)],
        default="auto",
        help="whose benchmark tool wrote the file: sglang (sglang.bench_serving), vllm (vllm bench "
        "serve) (default: auto, read from the file)",
    )
    p.add_argument("--run", type=int, default=-1, help="which run of a JSON lines file (default: the last)")
    p.add_argument(
        "--accelerators",
        type=int,
        help="accelerators that served the run (default: the hardware's per node x nodes)",
    )
    p.add_argument("--json", type=Path, help="also write the checks as JSON here")
    p.set_defaults(func=run)


def run(args) -> int:
    """Print one line per floor; exit 0 when every compared floor passes, 1 otherwise."""
    matrix = load_matrix(args.matrix)
    try:
        cell = matrix.cell(args.cell)
    except KeyError:
        raise unknown_cell(args.cell) from None
    runs = read_runs(args.file)
    try:
        chosen = runs[args.run]
    except IndexError:
        raise SystemExit(f"dayzero: {args.file} has {len(runs)} run(s), no run {args.run}") from None
    tool = None if args.tool == "auto" else engines.get(args.tool).bench_tool
    try:
        imported = parse(chosen, tool)
    except ValueError as exc:
        raise SystemExit(f"dayzero: {args.file}: {exc}") from None
    hw = matrix.hardware[cell.hardware]
    card = matrix.card(cell)
    used = parallel_accelerators(card, cell)
    accelerators = args.accelerators or used or (hw.accelerators_per_node or 1) * cell.nodes
    held = [f for f in floors_for(card, cell) if imported.concurrency in (None, f.concurrency)]
    wrong = mismatches(card, held, chosen, suites_dir(matrix_root=matrix.root) / "workloads")
    if wrong:
        raise SystemExit(f"dayzero: {args.file}: not a run of {cell.id}'s floors: {'; '.join(wrong)}")
    checks = evaluate(card, cell, imported, accelerators)
    print(
        f"{cell.id}: {imported.tool} run, concurrency {imported.concurrency}, {accelerators} accelerator(s)"
    )
    for note in imported.notes:
        print(f"  note: {note}")
    if imported.accept_length is not None:
        print(f"  accept length (as reported): {imported.accept_length}")
    if not checks:
        print("  no floor of this cell at the run's concurrency")
    for c in checks:
        print(f"  {c.verdict.upper():7} {c.name}: {c.message}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cell": cell.id,
                    "tool": imported.tool,
                    "concurrency": imported.concurrency,
                    "summary": imported.summary,
                    "notes": list(imported.notes),
                    "checks": [c.to_json() for c in checks],
                },
                indent=2,
            )
        )
    return 0 if checks and all(c.passed for c in checks) else 1
