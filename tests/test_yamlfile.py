"""`spec.yamlfile.load` remembers a text it parsed and validated (the checker reads each golden
once a phase): what it gives is still the file as it is now, and a caller's edit of what it got
reaches neither the next caller nor the file's next reading."""

from __future__ import annotations

import json

import pytest

from dayzero.errors import ConfigError
from dayzero.spec import yamlfile

from .conftest import REPO

SHIPPED = REPO / "suites" / "goldens" / "smollm2-135m" / "cpu+vllm" / "high_throughput" / "baseline.json"


def golden(outputs: dict) -> dict:
    return {**json.loads(SHIPPED.read_text()), "outputs": outputs}


def test_a_file_read_again_is_what_it_is_now_and_a_callers_edit_stays_its_own(tmp_path):
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(golden({"p1": "Paris"})))
    first = yamlfile.load(path, "golden")
    first["outputs"]["p1"] = "edited by a caller"
    assert yamlfile.load(path, "golden")["outputs"] == {"p1": "Paris"}
    path.write_text(json.dumps(golden({"p1": "Lyon!"})))  # the same size, at once
    assert yamlfile.load(path, "golden")["outputs"] == {"p1": "Lyon!"}


def test_a_bad_file_is_refused_every_time_it_is_read(tmp_path):
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(golden({"p1": 3})))
    for _ in range(2):
        with pytest.raises(ConfigError, match="golden.json"):
            yamlfile.load(path, "golden")
