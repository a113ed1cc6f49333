"""Evidence: one JSON document per cell run, validated by a schema shipped in the package.

Statuses in the acceptance table and vendor submissions derive from evidence, never from
hand-typed text. Evidence is written even when a run breaks, so nothing measured is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema

from dayzero.errors import ConfigError
from dayzero.spec import yamlfile

EVIDENCE_DIR = "evidence"


def validate(doc: dict) -> None:
    jsonschema.Draft202012Validator(yamlfile.schema("evidence")).validate(doc)


def slug(cell_id: str) -> str:
    return cell_id.replace("/", "__")


def write(reports_dir: Path, doc: dict) -> Path:
    validate(doc)
    path = Path(reports_dir) / EVIDENCE_DIR / f"{slug(doc['cell'])}__{doc['run']['id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)  # atomic: readers never see half a document
    return path


def iter_evidence(reports_dir: Path) -> Iterator[tuple[Path, dict]]:
    for path in sorted((Path(reports_dir) / EVIDENCE_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            validate(doc)
        except (ValueError, jsonschema.ValidationError) as exc:
            raise ConfigError(path, "", f"not valid evidence: {str(exc).splitlines()[0]}") from None
        yield path, doc
