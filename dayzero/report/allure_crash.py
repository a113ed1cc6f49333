"""The Allure result of a cell whose xdist worker died: written by the controller, from the evidence.

allure-pytest writes a test's result in the worker that ran it; a worker killed mid-cell writes
none, and the cell would be missing from the report. The controller writes it instead, named
as allure-pytest names the cell's item (full name, test case id, history id), labelled as
`allure_cell.label_cell` labels a cell, status broken with the infrastructure category.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path

from allure_commons.logger import AllureFileLogger
from allure_commons.model2 import Attachment, Label, Link, Parameter, Status, StatusDetails, TestResult
from allure_commons.utils import md5

from dayzero.redact import redact
from dayzero.report.allure_cell import CATEGORY_LABEL, INFRASTRUCTURE
from dayzero.spec.card import ModelCard, published_word
from dayzero.spec.matrix import Cell


def full_name(nodeid: str) -> str:
    """`suites/test_cells.py::test_cell[x]` -> `suites.test_cells#test_cell`, as allure-pytest has it."""
    path, _, test = nodeid.split("[", 1)[0].partition("::")
    return f"{path.removesuffix('.py').replace('/', '.')}#{test.replace('::', '.')}"


def _ms(iso: str) -> int | None:
    try:
        return int(datetime.fromisoformat(iso).timestamp() * 1000)
    except ValueError:
        return None


def write_crashed(
    results_dir: Path, nodeid: str, cell: Cell, card: ModelCard, doc: dict, evidence_path: Path, secrets=()
) -> None:
    """Write the broken result of `cell` (evidence `doc`) into `results_dir`."""
    logger = AllureFileLogger(results_dir)
    name = full_name(nodeid)
    labels = {
        "epic": cell.model,
        "feature": cell.hardware,
        "story": cell.mode,
        "parentSuite": cell.model,
        "suite": f"{cell.hardware} / {cell.mode}",
        "subSuite": "+".join((cell.strategy, *cell.options)),
        "published": published_word(cell),
        CATEGORY_LABEL: INFRASTRUCTURE,
        "framework": "pytest",
    }
    attachment = f"{uuid.uuid4()}-attachment.json"
    logger.report_attached_file(str(evidence_path), attachment)
    result = TestResult(
        uuid=str(uuid.uuid4()),
        name=cell.id,
        fullName=name,
        testCaseId=md5(name),
        historyId=md5(name, repr(cell)),  # allure-pytest hashes the item's parameter reprs
        status=Status.BROKEN,
        statusDetails=StatusDetails(message=redact(doc.get("error", ""), secrets)),
        start=_ms(doc["run"]["started"]),
        stop=_ms(doc["run"]["finished"]),
        labels=[Label(k, v) for k, v in labels.items()] + [Label("tag", m) for m in cell.markers],
        parameters=[
            Parameter("cell", repr(cell.id)),
            Parameter("lab host", repr(", ".join(h["name"] for h in doc["hosts"]) or "-"), excluded=True),
            Parameter("worker", repr(doc["run"]["worker"]), excluded=True),
            Parameter("run", repr(doc["run"]["id"]), excluded=True),
        ],
        links=[Link("link", Path(card.path).resolve().as_uri(), f"model card {Path(card.path).name}")],
        attachments=[Attachment(name="evidence", source=attachment, type="application/json")],
    )
    logger.report_result(result)
