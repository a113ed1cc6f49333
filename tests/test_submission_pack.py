"""`pack` names the real cause of each refusal (issue 45 item 5): a bundle of broken runs only
packed without a word, and a `--system` kind no run used was blamed on the file's missing
catalogue fields ("'accelerator' is a required property"). The placeholder digest and the
description that replaces a collected fact are tests/test_submission.py's."""

from __future__ import annotations

import json
import shutil

import pytest

from dayzero.submission.pack import PackError

from .submission_corpus.lab import Lab, make_lab
from .submission_corpus.synthetic import SYSTEM


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def test_pack_refuses_broken_runs_only_naming_each_cell_and_its_fault(lab, tmp_path):
    reports = tmp_path / "reports"
    shutil.copytree(lab.reports, reports)
    for path in sorted((reports / "evidence").glob("*.json")):
        doc = json.loads(path.read_text())
        doc.update(verdict="broken", error="lab fault: b300-01: cannot connect: connection refused")
        path.write_text(json.dumps(doc))
    with pytest.raises(PackError) as err:
        lab.pack(reports, tmp_path / "b.tar.gz", system=SYSTEM)
    message = str(err.value)
    assert message.startswith("nothing to submit: the latest run of every cell packed is broken"), message
    assert "smollm2-135m/cpu+llama.cpp/low_latency/baseline: lab fault: b300-01: cannot connect" in message
    assert "--system" not in message
    one = next(iter(sorted((reports / "evidence").glob("*.json"))))
    doc = json.loads(one.read_text())
    one.write_text(json.dumps({**doc, "verdict": "failed"}))  # one cell measured: a bundle to judge
    assert lab.pack(reports, tmp_path / "c.tar.gz", system=SYSTEM).exists()


def test_pack_refuses_a_kind_or_engine_no_run_used_naming_it(lab, tmp_path):
    with pytest.raises(PackError) as err:
        lab.pack(lab.reports, tmp_path / "b.tar.gz", system={**SYSTEM, "hardware": {"b300": {"driver": "x"}}})
    assert str(err.value) == (
        "--system FILE describes what no run packed used: hardware 'b300' (the runs packed used cpu) "
        "(remove it there, or pack evidence of it)"
    )
    vllm = {**SYSTEM, "engines": [*SYSTEM["engines"], {"name": "vllm", "version": "0.11"}]}
    with pytest.raises(PackError, match=r"engine 'vllm' \(the runs packed ran llama\.cpp\)"):
        lab.pack(lab.reports, tmp_path / "c.tar.gz", system=vllm)


def test_pack_refuses_a_placeholder_image_digest_for_runs_that_recorded_no_image(lab, tmp_path):
    """Issue 45: an accepted bundle described a cpu run, which ran in no container, with an image
    digest of zeros (0 findings)."""
    zeros = {"engines": [{**SYSTEM["engines"][0], "image_digest": "sha256:" + "0" * 64}]}
    with pytest.raises(PackError) as err:
        lab.pack(lab.reports, tmp_path / "b.tar.gz", system=zeros)
    said = "engines llama.cpp image_digest 'sha256:" + "0" * 64 + "': give a digest of what ran, "
    assert said in str(err.value)
    assert "not a placeholder of zeros (its runs recorded no image)" in str(err.value)
