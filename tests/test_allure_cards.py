"""The benchmark cards in the Allure report: report-level attachments Allure 3 reads from a
`*-globals.json` file, written when the report is built; and each cell with sweeps linking its card."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dayzero.report import allure_build, allure_cards

REPO = Path(__file__).resolve().parents[1]


def cards_in(reports: Path, *names: str) -> None:
    for name in names:
        model, kind = name.split("/")
        folder = reports / "cards" / model
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{kind}.html").write_text(f"<html><body><h1>card {model} {kind}</h1></body></html>")
        (folder / f"{kind}.md").write_text(f"# card {model} {kind}\n")


def test_every_card_becomes_a_global_attachment_html_and_markdown(tmp_path):
    results = tmp_path / "allure-results"
    cards_in(tmp_path, "smollm2-135m/cpu", "kimi-k3.1-pro/b300")
    written = allure_cards.write_globals(results, tmp_path / "cards")
    doc = json.loads((results / allure_cards.GLOBALS).read_text())
    names = [(a["name"], a["type"]) for a in doc["attachments"]]
    assert names == [
        ("benchmark card: kimi-k3.1-pro on b300", "text/html"),
        ("benchmark card: kimi-k3.1-pro on b300 (markdown)", "text/markdown"),
        ("benchmark card: smollm2-135m on cpu", "text/html"),
        ("benchmark card: smollm2-135m on cpu (markdown)", "text/markdown"),
    ]
    for a in doc["attachments"]:
        assert "-attachment." in a["source"]  # Allure reads only such names as attachments
    html = results / doc["attachments"][2]["source"]
    assert html.read_text() == (tmp_path / "cards" / "smollm2-135m" / "cpu.html").read_text()
    assert results / allure_cards.GLOBALS in written


def test_a_card_gone_since_the_last_build_is_no_longer_attached(tmp_path):
    results = tmp_path / "allure-results"
    cards_in(tmp_path, "a/cpu", "b/cpu")
    allure_cards.write_globals(results, tmp_path / "cards")
    shutil.rmtree(tmp_path / "cards" / "b")
    allure_cards.write_globals(results, tmp_path / "cards")
    doc = json.loads((results / allure_cards.GLOBALS).read_text())
    assert [a["name"] for a in doc["attachments"]] == [
        "benchmark card: a on cpu",
        "benchmark card: a on cpu (markdown)",
    ]
    assert len(list(results.glob(allure_cards.PREFIX + "*-attachment.*"))) == 2


def test_no_cards_no_globals_file(tmp_path):
    results = tmp_path / "allure-results"
    results.mkdir()
    assert allure_cards.write_globals(results, tmp_path / "cards") == []
    assert not (results / allure_cards.GLOBALS).exists()


def test_the_report_build_attaches_the_cards(tmp_path, monkeypatch):
    """`allure_build.build` hands Allure a results folder holding the cards' globals file."""
    results = tmp_path / "allure-results"
    results.mkdir()
    (results / "x-result.json").write_text(json.dumps({"uuid": "x", "name": "cell", "status": "passed"}))
    cards_in(tmp_path, "m/cpu")
    cli = tmp_path / "allure" / allure_build.ALLURE_CLI
    cli.parent.mkdir(parents=True)
    cli.write_text("")
    seen = {}

    def fake_allure(argv, **kw):
        folder = Path(argv[3])
        seen["globals"] = json.loads((folder / allure_cards.GLOBALS).read_text())
        out = Path(json.loads(Path(argv[5]).read_text())["output"])
        out.mkdir(parents=True)
        (out / "index.html").write_text("report")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(allure_build.subprocess, "run", fake_allure)
    monkeypatch.setattr(allure_build.shutil, "which", lambda name: "/usr/bin/node")
    allure_build.build(tmp_path, allure=tmp_path / "allure")
    assert [a["name"] for a in seen["globals"]["attachments"]][0] == "benchmark card: m on cpu"


def test_a_cell_with_sweeps_links_its_card_from_the_report():
    doc = {"cell": "smollm2-135m/cpu+llama.cpp/high_throughput/baseline", "model": "smollm2-135m",
           "hardware": "cpu", "checks": [{"name": "sweep:conc@random-64-32"}]}  # fmt: skip
    assert allure_cards.card_href(doc) == "../cards/smollm2-135m/cpu.html"
    assert allure_cards.card_href({**doc, "checks": [{"name": "floor:x@w/c1"}]}) is None


@pytest.mark.e2e
def test_allure_3_shows_the_cards_as_global_attachments(tmp_path):
    """The pinned Allure 3 puts the card into the single-file report (node, a few seconds)."""
    if (
        shutil.which("node") is None
        or not (REPO / allure_build.ALLURE_DIR / allure_build.ALLURE_CLI).is_file()
    ):
        pytest.skip("Allure 3 is not installed here (tools/setup installs it)")
    results = tmp_path / "allure-results"
    results.mkdir()
    (results / "x-result.json").write_text(
        json.dumps({"uuid": "x", "historyId": "x", "name": "cell", "status": "passed", "start": 1, "stop": 2})
    )
    cards_in(tmp_path, "m/cpu")
    (tmp_path / "cards" / "m" / "cpu.html").write_text("<html><body>CARD-MARKER-4711</body></html>")
    index = allure_build.build(tmp_path, near=REPO)
    text = index.read_text()
    # the awesome report's globals widget, base64 in the single file: both attachments, found
    widget = re.search(r'globals\.json","([A-Za-z0-9+/=]+)"', text).group(1)
    found = json.loads(base64.b64decode(widget))["attachments"]
    assert [(a["name"], a["missed"]) for a in found] == [
        ("benchmark card: m on cpu", False),
        ("benchmark card: m on cpu (markdown)", False),
    ]
    assert base64.b64encode(b"<html><body>CARD-MARKER-4711</body></html>").decode()[:24] in text
