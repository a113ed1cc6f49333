"""Reports at lab size: acceptance table, nightly comparison, the single-file Allure report and a
submission check, for 1k and 10k evidence documents, each next to its floor in the same run.

    .venv/bin/python bench/reports.py [--sizes 1000 10000] [--submission 1000 ...]

Evidence: a matrix of CPU cells (model cards shaped like the embedded SmolLM2 card, 4 cells each)
and, per cell, what a run writes: raw records, a server log and a schema-valid evidence document
made by the harness's own code paths (the submission corpus's synthetic run: request plan,
measurement phases, checks, `evidence.build`). Up to `--real` cells are run that way; the rest
reuse one of those runs' records under their own cell (the documents are still distinct, valid
and written by `evidence.write`), which keeps generation at 10k within a minute.

Floors measured in the same run, so each figure reads as a ratio:
- acceptance and nightly: reading and schema-validating every evidence document
  (`evidence.iter_evidence`), which any report of them must do;
- Allure results: the same pytest run with one plain passing test per cell and no attachments
  (what allure-pytest costs by itself) against one test per cell that attaches the cell's story
  as a run does (`run.cell`: the evidence file, then `report.allure_cell.attach_story`);
- Allure report: `allure generate` (single file, our config) of those plain results against ours;
- submission check: extracting the bundle (tar) against `check_bundle`.

Raw figures go to reports/bench/reports.json; speeds are machine-dependent: read ratios.
"""

# ruff: noqa: E501 - markdown table rows read best on one line
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from bench.collection import MODES, write_matrix  # noqa: E402
from bench.common import load_average, machine, write_result  # noqa: E402
from dayzero import __version__, evidence  # noqa: E402
from dayzero.report import allure_build  # noqa: E402
from dayzero.report.acceptance import write_acceptance  # noqa: E402
from dayzero.report.nightly import compare_nights  # noqa: E402
from dayzero.spec.goldens import golden_path  # noqa: E402
from dayzero.spec.matrix import Matrix, load_matrix  # noqa: E402
from dayzero.submission.bundle import Reference  # noqa: E402
from dayzero.submission.check import check_bundle, known_commit_in  # noqa: E402
from dayzero.submission.pack import Harness, pack  # noqa: E402
from tests.submission_corpus.lab import VENDOR, head_commit  # noqa: E402
from tests.submission_corpus.synthetic import SYSTEM, run_cell  # noqa: E402
from tests.submission_corpus.tarkit import make_key, write_allowed_signers  # noqa: E402

HARDWARE = ("cpu",)
STRATEGIES = ("baseline", "ngram_spec")
PER_CARD = len(HARDWARE) * len(MODES) * len(STRATEGIES)
GOLDENS = ROOT / "suites" / "goldens"
RUN_ID = "20261201T000000Z-00001"
CELL_SPAN_S = 60  # each synthetic cell run is dated within a minute after the previous one


def timed(fn, *args, **kw) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return round(time.perf_counter() - t0, 3), out


def write_goldens(matrix: Matrix, goldens: Path) -> Path:
    """Every generated cell gets the embedded default's golden of its mode and strategy."""
    for cell in matrix.cells:
        source = GOLDENS / "smollm2-135m" / f"{cell.hardware}+llama.cpp" / cell.mode / f"{cell.strategy}.json"
        golden = json.loads(source.read_text())
        target = golden_path(goldens, cell.id)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({**golden, "cell": cell.id}))
    return goldens


def generate(root: Path, n: int, real: int) -> tuple[Matrix, Path]:
    """n cells' evidence under root/reports; the first `real` cells by the synthetic run."""
    mdir = write_matrix(root, n, HARDWARE, STRATEGIES)
    matrix = load_matrix(mdir)
    reports = root / "reports"
    goldens = write_goldens(matrix, root / "goldens")
    cells = [c for c in matrix.cells if c.supported]
    start = time.time() - CELL_SPAN_S * (min(real, n) + 10)
    made: list[dict] = []
    for cell in cells[:real]:
        path = run_cell(matrix, cell, reports, goldens, RUN_ID, start)
        made.append(json.loads(path.read_text()))
        start = evidence_time(made[-1]) + 1
    for i, cell in enumerate(cells[real:]):
        doc = dict(made[i % len(made)])
        doc.update(cell=cell.id, model=cell.model, mode=cell.mode, strategy=cell.strategy)
        evidence.write(reports, doc)
    return matrix, reports


def evidence_time(doc: dict) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(doc["run"]["finished"]).timestamp()


# --- Allure ------------------------------------------------------------------------------------

STORY_TEST = """
import json, os, types
from pathlib import Path
import allure, pytest
from dayzero.report import allure_cell
from dayzero.spec.matrix import load_matrix

REPORTS = Path(os.environ["BENCH_REPORTS"])
MATRIX = load_matrix(Path(os.environ["BENCH_MATRIX"]))
CTX = types.SimpleNamespace(matrix=MATRIX, reports_dir=REPORTS, inventory=types.SimpleNamespace(secrets=()))
PATHS = sorted((REPORTS / "evidence").glob("*.json"))

@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_cell(path):
    doc = json.loads(path.read_text())
    cell = MATRIX.cell(doc["cell"])
    allure_cell.label_cell(cell, MATRIX.card(cell))  # as the run_cell_checked fixture does
    allure.attach.file(str(path), "evidence", allure.attachment_type.JSON)  # as run.cell does
    allure_cell.attach_story(CTX, doc, path)
"""

PLAIN_TEST = """
import pytest

@pytest.mark.parametrize("k", range(int(__import__("os").environ["BENCH_N"])))
def test_cell(k):
    pass
"""


def allure_results(work: Path, test: str, results: Path, env: dict) -> float:
    (work / "test_bench_allure.py").write_text(test)
    (work / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider -p no:randomly -p no:dayzero\n")
    shutil.rmtree(results, ignore_errors=True)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", f"--alluredir={results}", "test_bench_allure.py"],
        cwd=work,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        timeout=3600,
    )
    if p.returncode != 0:
        raise RuntimeError(f"allure results run failed: {p.stdout[-1500:]} {p.stderr[-800:]}")
    return round(time.perf_counter() - t0, 3)


def allure_report(reports: Path, timeout: float, budget: int = allure_build.BUDGET_BYTES) -> dict:
    said: list[str] = []
    try:
        seconds, index = timed(
            allure_build.build,
            reports,
            history=reports / "hist.jsonl",
            timeout=timeout,
            near=ROOT,
            budget=budget,
            say=said.append,
        )
    except allure_build.ReportError as exc:
        return {"built": False, "error": str(exc)[-600:]}
    return {"built": True, "s": seconds, "mib": round(index.stat().st_size / 2**20, 1), "left_out": said}


def du_mib(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def allure_section(
    matrix: Matrix, reports: Path, work: Path, n: int, timeout: float, untrimmed: bool
) -> dict:
    plain_reports = work / "plain-reports"
    plain_reports.mkdir(parents=True, exist_ok=True)
    (work / "plain").mkdir(exist_ok=True)
    (work / "story").mkdir(exist_ok=True)
    out = {
        "plain_results_s": allure_results(
            work / "plain", PLAIN_TEST, plain_reports / allure_build.RESULTS, {"BENCH_N": str(n)}
        ),
        "story_results_s": allure_results(
            work / "story",
            STORY_TEST,
            reports / allure_build.RESULTS,
            {"BENCH_REPORTS": str(reports), "BENCH_MATRIX": str(matrix.root)},
        ),
    }
    out["story_results_mib"] = du_mib(reports / allure_build.RESULTS)
    out["plain_report"] = allure_report(plain_reports, timeout)
    out["story_report"] = allure_report(reports, timeout)
    if untrimmed:  # every attachment inline, as before the budget (allure_budget)
        out["untrimmed_report"] = allure_report(reports, timeout, budget=2**62)
    return out


# --- submission ------------------------------------------------------------------------------------


def submission_section(matrix: Matrix, reports: Path, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    key = make_key(work, VENDOR)
    allowed = write_allowed_signers(work / "allowed_signers", [(VENDOR, key)])
    harness = Harness(__version__, head_commit(), "")
    pack_s, bundle = timed(
        pack, reports, work / "bundle.tar.gz", VENDOR, key, matrix, system=SYSTEM, harness=harness
    )
    first = min(d["run"]["started"] for _, d in evidence.iter_evidence(reports))
    import datetime as dt

    committed = dt.datetime.fromisoformat(first).timestamp() - 3600
    ref = Reference(
        matrix,
        work.parent / "goldens",
        allowed,
        known_commit=known_commit_in(ROOT),
        commit_time=lambda c: committed,
    )

    def extract() -> int:
        with tempfile.TemporaryDirectory(dir=work) as tmp, tarfile.open(bundle, "r:gz") as tar:
            tar.extractall(tmp, filter="data")
            return sum(len(f.read_bytes()) for f in Path(tmp).rglob("*") if f.is_file())

    extract_s, _ = timed(extract)
    check_s, report = timed(check_bundle, bundle, ref)
    findings = [f.requirement for f in report.findings]
    return {
        "cells": len(list((reports / "evidence").glob("*.json"))),
        "bundle_mib": round(Path(bundle).stat().st_size / 2**20, 1),
        "pack_s": pack_s,
        "extract_s": extract_s,
        "check_s": check_s,
        "findings": len(findings),
        "finding_kinds": sorted(set(findings))[:10],
    }


# --- the bench ---------------------------------------------------------------------------------


def measure(n: int, real: int, tmp: Path, allure_timeout: float, submission: bool, untrimmed: bool) -> dict:
    root = tmp / f"n{n}"
    gen_s, (matrix, reports) = timed(generate, root, n, real)
    floor_s, docs = timed(lambda: sum(1 for _ in evidence.iter_evidence(reports)))
    assert docs == n, (docs, n)
    acceptance_s, _ = timed(write_acceptance, matrix, reports)
    previous = root / "previous"
    shutil.copytree(reports / "evidence", previous / "evidence")
    nightly_s, night = timed(compare_nights, previous, reports)
    row = {
        "cells": n,
        "generated_s": gen_s,
        "evidence_mib": du_mib(reports),
        "read_validate_s": floor_s,
        "acceptance_s": acceptance_s,
        "nightly_s": nightly_s,
        "nightly_compared": len(night["compared"]),
        "load_before_allure": load_average(),
    }
    row["allure"] = allure_section(matrix, reports, root / "allure", n, allure_timeout, untrimmed)
    if submission:
        row["submission"] = submission_section(matrix, reports, root / "submission")
    return row


def markdown(result: dict) -> str:
    lines = [
        f"reports, {result['date']} ({result['machine']}), load average {result['load_average_at_start']} -> {result['load_average_at_end']}",
        "",
        "| cells | read + validate evidence s (floor) | acceptance table s | nightly comparison s (comparisons) | allure-pytest results: plain s / with story s (MiB) | allure generate: plain s / ours s (report MiB) | every attachment inline s (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        a = r["allure"]
        ours = a["story_report"]
        ours_text = (
            f"{ours['s']} ({ours['mib']} MiB)" if ours["built"] else f"not built: {ours['error'][:120]}"
        )
        plain = a["plain_report"]
        plain_text = f"{plain['s']}" if plain["built"] else "not built"
        full = a.get("untrimmed_report")
        if full is None:
            full_text = "not tried"
        else:
            full_text = (
                f"{full['s']} ({full['mib']} MiB)" if full["built"] else f"not built: {full['error'][:160]}"
            )
        lines.append(
            f"| {r['cells']} | {r['read_validate_s']} | {r['acceptance_s']} | {r['nightly_s']} ({r['nightly_compared']}) | {a['plain_results_s']} / {a['story_results_s']} ({a['story_results_mib']} MiB) | {plain_text} / {ours_text} | {full_text} |"
        )
    subs = [r for r in result["rows"] if "submission" in r]
    if subs:
        lines += [
            "",
            "| bundle cells | bundle MiB | pack s | extract s (floor) | check s | findings |",
            "|---|---|---|---|---|---|",
        ]
        for r in subs:
            s = r["submission"]
            lines.append(
                f"| {s['cells']} | {s['bundle_mib']} | {s['pack_s']} | {s['extract_s']} | {s['check_s']} | {s['findings']} {s['finding_kinds']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument(
        "--real", type=int, default=1000, help="cells run by the synthetic run (the rest reuse)"
    )
    parser.add_argument(
        "--submission",
        type=int,
        nargs="*",
        default=[1000],
        help="pack and check at these sizes (at most --real: a bundle holds each run's files once)",
    )
    parser.add_argument("--allure-timeout", type=float, default=600)
    parser.add_argument(
        "--untrimmed",
        type=int,
        nargs="*",
        default=[1000],
        help="sizes also built with every attachment inline",
    )
    parser.add_argument("--keep", type=Path, help="generate under this folder and keep it")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "reports.json")
    args = parser.parse_args(argv)
    os.environ["DAYZERO_SUITES"] = str(ROOT / "suites")  # the goldens are generated elsewhere
    result = {**machine(), "load_average_at_start": load_average()}
    with tempfile.TemporaryDirectory(prefix="dz-reports-") as tmp:
        base = args.keep or Path(tmp)
        result["rows"] = []
        for n in args.sizes:
            submission = n in args.submission and n <= args.real
            untrimmed = n in args.untrimmed
            result["rows"].append(measure(n, args.real, base, args.allure_timeout, submission, untrimmed))
            print(json.dumps(result["rows"][-1]), flush=True)
    result["load_average_at_end"] = load_average()
    write_result(args.out, result)
    print(markdown(result))
    print(f"(raw: {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
