"""The compiled evidence check says what jsonschema says, on valid documents and on every
mutation of them: a field removed, retyped, or given a value of another kind, a key added."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from dayzero.history import valid
from dayzero.spec import yamlfile

from .history_nights import night_doc

SCHEMA = yamlfile.schema("evidence")
CHECK = valid.compile_schema(SCHEMA)
AUTHORITY = jsonschema.Draft202012Validator(SCHEMA)
ODD = [None, True, False, 0, 1, 1.0, 1.5, -3, "", "x", "bad\nline", "Lab A", [], ["x"], {}, {"a": 1}]


def rich_doc() -> dict:
    """A night's document with every optional part the schema describes."""
    doc = night_doc(0, 100.0, lab="lab-a", vendor="acme")
    doc["readiness"] = {"deadline_s": 60, "ready_s": 1.5}
    doc["claims"] = [
        {
            "claim": "c",
            "status": "reproduced",
            "published": 1.0,
            "unit": "per_user",
            "workload": "w",
            "reason": "r",
        }
    ]
    doc["hosts"][0]["facts"]["image"] = {"ref": "r", "id": "i", "digests": []}
    doc["engine"]["image"] = {"ref": "r", "id": "i", "digests": ["d"]}
    doc["records"], doc["logs"], doc["error"] = ["a.json"], ["b.log"], "none"
    return doc


def paths(doc, prefix=()):
    """Every (container, key) in the document, depth first."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield prefix + (key,)
        yield from paths(value, prefix + (key,))


def at(doc, path):
    for key in path[:-1]:
        doc = doc[key]
    return doc


def mutations(doc):
    for path in paths(doc):
        for odd in ODD:
            changed = copy.deepcopy(doc)
            at(changed, path)[path[-1]] = odd
            yield changed
        if isinstance(at(doc, path), dict):
            removed = copy.deepcopy(doc)
            del at(removed, path)[path[-1]]
            yield removed
            added = copy.deepcopy(doc)
            target = at(added, path)[path[-1]]
            if isinstance(target, dict):
                target["unknown_key"] = 1
                yield added


@pytest.mark.parametrize("doc", [night_doc(0, 100.0), rich_doc()], ids=["plain", "rich"])
def test_the_compiled_check_agrees_with_jsonschema_on_every_mutation(doc):
    assert CHECK(doc) and AUTHORITY.is_valid(doc)
    seen = {True: 0, False: 0}
    for changed in mutations(doc):
        said = AUTHORITY.is_valid(changed)
        assert CHECK(changed) == said, json.dumps(changed)[:400]
        seen[said] += 1
    assert seen[True] and seen[False] > 100  # both answers were asked for


def test_a_keyword_it_does_not_know_is_refused_at_compile_time():
    with pytest.raises(valid.Unsupported, match="format"):
        valid.compile_schema({"type": "string", "format": "date-time"})
    with pytest.raises(valid.Unsupported, match="anyOf"):
        valid.compile_schema({"properties": {"a": {"anyOf": [{"type": "string"}]}}})


def test_an_evidence_schema_the_compiler_cannot_read_sends_every_file_to_jsonschema(tmp_path, monkeypatch):
    from dayzero import evidence
    from dayzero.history import sources

    schema = yamlfile.schema("evidence")
    schema["properties"]["cell"]["format"] = "a keyword valid.py does not know"
    monkeypatch.setattr(sources.yamlfile, "schema", lambda name: schema)
    sources._check.cache_clear()
    try:
        path = evidence.write(tmp_path, night_doc(0, 100.0))
        assert sources._check() is None and sources.read_file(path).run[1] == night_doc(0, 1.0)["cell"]
    finally:
        sources._check.cache_clear()
