"""A single-file report's attachments past the budget: the bulkiest kinds are left out, in order."""

from __future__ import annotations

import json
from pathlib import Path

from dayzero.report.allure_budget import within_budget


def results_dir(root: Path) -> Path:
    """Two cells, each with raw records (3 KB), a full server log (2 KB) and facts (1 KB)."""
    results = root / "allure-results"
    results.mkdir()
    for cell in ("a", "b"):
        attachments = []
        for name, ext, size in (
            (f"raw records: perf-{cell}.json", "json", 3000),
            (f"server log (full): {cell}.log", "txt", 2000),
            ("environment facts", "json", 1000),
        ):
            source = f"{cell}-{len(attachments)}-attachment.{ext}"
            (results / source).write_text("x" * size)
            attachments.append({"name": name, "source": source, "type": "text/plain"})
        step = {"name": "measure", "attachments": attachments[:1], "steps": []}
        doc = {"name": cell, "attachments": attachments[1:], "steps": [step]}
        (results / f"{cell}-result.json").write_text(json.dumps(doc))
    (results / "environment.properties").write_text("k=v\n")
    return results


def test_results_within_the_budget_are_built_as_they_are(tmp_path):
    results = results_dir(tmp_path)
    trimmed = within_budget(results, tmp_path / "staging", budget=12_000)
    assert trimmed.results == results and trimmed.dropped_bytes == 0
    assert not (tmp_path / "staging").exists()


def test_raw_records_go_first_then_full_logs_and_the_rest_stays(tmp_path):
    results = results_dir(tmp_path)
    trimmed = within_budget(results, tmp_path / "staging", budget=7_000)  # 12 000 bytes written
    assert trimmed.results == tmp_path / "staging"
    assert trimmed.dropped == {
        "raw records: ": 2,
        "server log (full): ": 0,
        "evidence": 0,
        "metric summary": 0,
    }
    assert trimmed.dropped_bytes == 6000 and "2 raw records" in trimmed.describe()
    note = json.loads((trimmed.results / "a-0-attachment.json").read_text())
    assert "left out" in note["omitted"]
    assert (trimmed.results / "a-1-attachment.txt").read_text() == "x" * 2000
    assert (trimmed.results / "environment.properties").read_text() == "k=v\n"
    assert (results / "a-0-attachment.json").read_text() == "x" * 3000  # the run's files untouched

    tighter = within_budget(results, tmp_path / "staging", budget=3_000)
    assert tighter.dropped == {
        "raw records: ": 2,
        "server log (full): ": 2,
        "evidence": 0,
        "metric summary": 0,
    }
    assert "left out" in (tighter.results / "b-1-attachment.txt").read_text()
    assert (tighter.results / "b-2-attachment.json").read_text() == "x" * 1000
