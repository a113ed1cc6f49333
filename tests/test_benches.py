"""The scale benches measure what they say: same cells on both sides, valid evidence (never speed)."""

from __future__ import annotations

import sys
import tarfile

from bench import collection, reports
from dayzero import evidence
from dayzero.spec.matrix import load_matrix
from dayzero.submission.extract import DEFAULT_LIMITS


def test_collection_compares_the_same_number_of_equally_marked_items(tmp_path):
    mdir = collection.write_matrix(tmp_path / "dz", 200)
    cells = load_matrix(mdir).cells
    assert len(cells) == 200 and {len(c.markers) for c in cells} == {4}
    plain = collection.write_plain(tmp_path / "plain", 200)
    text = plain.read_text()
    assert "(model, hw, mode, s)" in text  # four marks per item, as a cell has
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", plain.name]
    assert collection.collect(argv, plain.parent, 200) > 0  # raises unless exactly 200 are collected


def test_reports_bench_evidence_is_schema_valid_distinct_and_checks_clean(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYZERO_SUITES", str(reports.ROOT / "suites"))
    matrix, folder = reports.generate(tmp_path, 8, real=4)
    docs = [doc for _, doc in evidence.iter_evidence(folder)]  # validates every document
    assert sorted(d["cell"] for d in docs) == sorted(c.id for c in matrix.cells)
    assert all(d["verdict"] == "passed" for d in docs)

    real = tmp_path / "real"
    matrix, folder = reports.generate(real, 4, real=4)
    found = reports.submission_section(matrix, folder, real / "submission")
    assert found["cells"] == 4 and found["findings"] == 0, found
    with tarfile.open(real / "submission" / "bundle.tar.gz") as tar:
        per_cell = len(tar.getmembers()) / 4
    assert 1000 * per_cell <= DEFAULT_LIMITS.max_files, "an honest 1k-cell bundle would be refused"
