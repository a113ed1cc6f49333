"""A replay of real nights: one real llama.cpp cell run night after night through `dayzero nightly`,
with a slowdown planted part-way, and the results store asked whether it found it.

    .venv/bin/python bench/history_replay.py [--nights 10] [--shift-at 5] [--out /tmp/replay]

Each night is `dayzero nightly` itself (pytest over the selected cell into a night folder, the
night ingested into the store, --no-report) on this machine's local inventory with the
contention check off (max_foreign_load 0: other load on a shared machine is noise here, not a
lab fault), under the e2e lock, with a short protocol (tests/submission_corpus/lab.py's relaxed
matrix: one repetition; only the mode's throughput and TPOT floors kept, no accuracy). From
night K on, the copied card's `vars.threads` goes from 2 to 1: llama-server decodes on one core,
and the recipe digest changes with it. Change points settle once five nights follow them, so
ten nights with the shift at the fifth are the shortest replay that can find it.

Exit 0 only when (a) no night exits 1 but the one that raises the alarm of (b) (the nightly's
verdict is its history's: an unchanged night exits 0, and the nights after the alarm say the
regression persists without failing again), (b) a night from K on raises a new alarm whose
night is K (its run K's) with the recipe digest its first candidate (raised at K where the step
stands out of the noise, a night or more later where it needs more evidence), and (c) the
whole-series search finds the change point at night K, attributed to the recipe; else 1, saying
why.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from dayzero.cache import cache_root, model_path, server_binary  # noqa: E402
from dayzero.history.store import open_store  # noqa: E402
from dayzero.history.trends import cell_changes  # noqa: E402
from tests.submission_corpus.lab import relaxed_matrix  # noqa: E402

LOCK = "/tmp/dayzero-e2e.lock"
CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
METRICS = ("output_throughput", "median_tpot_ms")


def short_matrix(dest: Path, model: str) -> Path:
    """The relaxed matrix, and in the cell's card only the throughput and TPOT floors, no accuracy."""
    relaxed_matrix(dest)
    card = dest / "models" / f"{model}.yaml"
    data = yaml.safe_load(card.read_text())
    data["floors"] = [f for f in data.get("floors", []) if f.get("metric") in METRICS]
    data.pop("accuracy", None)
    card.write_text(yaml.safe_dump(data, sort_keys=False))
    return card


def set_threads(card: Path, threads: str) -> None:
    data = yaml.safe_load(card.read_text())
    data.setdefault("vars", {})["threads"] = threads
    card.write_text(yaml.safe_dump(data, sort_keys=False))


def inventory(path: Path) -> Path:
    hosts = {
        "local": {
            "transport": "local",
            "address": "127.0.0.1",
            "hardware": "cpu",
            "accelerators": 1,
            "slots": 1,
            "max_foreign_load": 0,  # other engineers' load is this replay's noise, not a lab fault
            "workdir": str(cache_root() / "work"),
            "engine_setup": f'export PATH="{server_binary().parent}:$PATH"',
            "vars": {"model_root": str(model_path().parent)},
        }
    }
    path.write_text(yaml.safe_dump({"hosts": hosts}, sort_keys=False))
    return path


def night(root: Path, matrix: Path, hosts: Path, store: Path, cell: str, log: Path) -> int:
    """One `dayzero nightly` of the one cell, under the e2e lock; its output goes to `log`."""
    cmd = ["flock", LOCK, sys.executable, "-m", "dayzero.cli", "nightly", f"--hosts={hosts}"]
    cmd += [f"--matrix={matrix}", f"--root={root}", f"--store={store}", "-n", "0", "--no-report"]
    cmd += ["--suites-root", str(ROOT), "--", "-k", cell]
    with log.open("w") as out:
        return subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=os.environ).returncode


def series_table(store, cell: str) -> dict[str, list]:
    names = [n for n, _ in store.series_names(cell) if n.split("@")[0] in METRICS]
    return {n: store.series(cell, n) for n in sorted(names)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=10, help="nights to run (default 10)")
    ap.add_argument("--shift-at", type=int, default=5, help="first slowed night, 0-based (default 5)")
    ap.add_argument("--cell", default=CELL, help=f"the one cell run each night (default {CELL})")
    ap.add_argument(
        "--out", default="/tmp/dayzero-replay", help="working folder (default /tmp/dayzero-replay)"
    )
    args = ap.parse_args(argv)
    if not 0 < args.shift_at < args.nights:
        ap.error(f"--shift-at {args.shift_at} must lie inside the {args.nights} nights")
    out = Path(args.out).resolve()
    if out.exists() and any(out.iterdir()):
        ap.error(f"--out {out} is not empty: a replay starts from no history")
    out.mkdir(parents=True, exist_ok=True)
    card = short_matrix(out / "matrix", args.cell.split("/")[0])
    hosts, root, store_path = inventory(out / "hosts.yaml"), out / "nightly", out / "history.sqlite"
    start, codes = time.monotonic(), []
    for i in range(args.nights):
        set_threads(card, "1" if i >= args.shift_at else "2")
        t0 = time.monotonic()
        code = night(root, out / "matrix", hosts, store_path, args.cell, out / f"night-{i:02d}.log")
        codes.append(code)
        print(f"night {i}: threads {'1' if i >= args.shift_at else '2'}, exit {code}, "
              f"{time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
        # exit 1 (a floor failed, or the history raised an alarm) is still a night: its evidence counts
        if len(list(root.glob("nights/*/evidence/*.json"))) != i + 1:
            print(f"night {i} left no evidence (exit {code}): see {out / f'night-{i:02d}.log'}")
            return 1
    with open_store(str(store_path)) as store:
        table = series_table(store, args.cell)
        found = cell_changes(store, args.cell)
        runs = [p.run_id for p in next(iter(table.values()), [])]
    print(f"\n{args.nights} nights in {time.monotonic() - start:.0f} s; cell {args.cell}")
    names = list(table)
    print("night  threads  " + "  ".join(f"{n:>34}" for n in names) + "  recipe")
    for i, run in enumerate(runs):
        values = [next((p for p in table[n] if p.run_id == run), None) for n in names]
        recipe = next(p.facts.get("recipe", "?") for p in values if p)
        cols = "  ".join(f"{p.value:>34.4g}" if p else f"{'-':>34}" for p in values)
        print(f"{i:>5}  {'1' if i >= args.shift_at else '2':>7}  {cols}  {recipe[:12]}")
    print("\nchange points:")
    hit = []
    for c in found:
        at = runs.index(c.run_id) if c.run_id in runs else -1
        print(f"  night {at}: {c.describe()}")
        if at == args.shift_at and c.series.split("@")[0] in METRICS and "recipe" in c.changed:
            hit.append(c)
    if not found:
        print("  (none)")
    said = [json.loads(p.read_text()) for p in sorted(root.glob("nights/*/regressions.json"))]
    print("\nnightly verdicts:")
    raised = []
    for i, (code, r) in enumerate(zip(codes, said, strict=False)):
        h = r.get("history", {})
        print(
            f"  night {i}: exit {code}, {len(h.get('new', []))} new, {len(h.get('persist', []))} persisting"
        )
        for a in h.get("new", []):
            print(f"    NEW {a['message']}")
            first = (a.get("candidates") or [{}])[0]
            if i >= args.shift_at and a["run_id"] == runs[args.shift_at] and first.get("fact") == "recipe":
                raised.append((i, a))
    summary = {
        "cell": args.cell,
        "shift_at": args.shift_at,
        "exit_codes": codes,
        "changes": [c.to_json() for c in found],
        "alarms": [a for r in said for a in r.get("history", {}).get("new", [])],
    }
    (out / "replay.json").write_text(json.dumps(summary, indent=2))
    # the night the planted step's alarm is raised exits 1 (it may wait for evidence: the alarm
    # still names night K); every other night exits 0
    loud = {i for i, _ in raised[:1]}
    wrong = [i for i, code in enumerate(codes) if (code == 1) != (i in loud)]
    fails = []
    if wrong:
        exits = [codes[i] for i in wrong]
        fails.append(f"nights {wrong} exited {exits} (only the alarm's night {sorted(loud)} should)")
    if not raised:
        fails.append(f"no alarm of night {args.shift_at} raised with the recipe ranked first")
    if not hit:
        fails.append(
            f"no change point of {' or '.join(METRICS)} at night {args.shift_at} attributed to the recipe"
        )
    if not fails:
        at = raised[0][0]
        print(f"\nOK: only night {at} exited 1, raising the alarm of night {args.shift_at} with the recipe "
              f"first ({at - args.shift_at} night(s) late); {len(hit)} change point(s) there")  # fmt: skip
        return 0
    print("\nFAIL: " + "; ".join(fails))
    return 1


if __name__ == "__main__":
    sys.exit(main())
