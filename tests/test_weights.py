"""Weights as a lab has them: the card's model files under `{model_root}`, checked by preflight on
every host of a cell; a missing or mismatched file is a lab fault (broken) naming host and path.
No engine starts here: preflight stops the cell before any launch."""

from __future__ import annotations

import hashlib
import json

import pytest

from dayzero.errors import InfrastructureError
from dayzero.lab import weights
from dayzero.lab.preflight import gather
from dayzero.lab.transport import open_transport
from dayzero.run.cell import RunContext, run_cell
from dayzero.spec.card import ModelFile
from dayzero.spec.matrix import load_matrix

from .conftest import fake_card, one_card_context

BODY = b'{"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}}\n'
SHA = hashlib.sha256(BODY).hexdigest()
INDEX = "{model_root}/org/Model/model.safetensors.index.json"


def files(**index) -> list[dict]:
    return [{"path": INDEX, "revision": "abc123", "size": len(BODY), "sha256": SHA, **index}]


def context(tmp_path, model_files: list[dict]) -> RunContext:
    card = fake_card(["sleep", "600"], port=18650)
    card["model_files"] = model_files
    host = {"vars": {"model_root": str(tmp_path / "models")}}
    return one_card_context(tmp_path, card, host, name="node7", lease_wait=10)


def place(tmp_path, body: bytes = BODY):
    path = tmp_path / "models" / "org" / "Model" / "model.safetensors.index.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def problems_on_host(tmp_path, model_files: list[dict]) -> list[str]:
    ctx = context(tmp_path, model_files)
    (host,) = ctx.inventory.hosts
    card = ctx.matrix.card(ctx.matrix.cells[0])
    with open_transport(host, ctx.inventory) as t:
        return list(gather(t, ctx.matrix.hardware["cpu"], {}, model_files=card.model_files).problems)


def test_the_card_names_its_files_under_model_root_with_a_revision(matrix_dir):
    matrix = load_matrix(matrix_dir)
    kimi = matrix.card(matrix.cell("kimi-k3.1-pro/b300/balanced/dflash"))
    assert kimi.weights.startswith("{model_root}/") and kimi.ready_deadline >= 1800
    assert {f.role for f in kimi.model_files} == {"weights", "draft"}
    assert all(f.path.startswith("{model_root}/") for f in kimi.model_files)
    smol = matrix.card(matrix.cell("smollm2-135m/cpu+llama.cpp/low_latency/baseline"))
    gguf, template = smol.model_files  # the GGUF, and the chat template its tool phase serves
    assert gguf.path == smol.weights and gguf.sha256 and gguf.size  # the GGUF itself, checksummed
    assert template.role == "chat_template" and template.sha256 and template.size
    sgl = matrix.card(matrix.cell("smollm2-135m/cpu+sglang/low_latency/baseline"))
    (st,) = sgl.model_files  # an engine's entry names its own weights' files
    assert st.path.startswith(sgl.weights + "/") and st.size


def test_a_file_outside_model_root_or_without_revision_is_refused(tmp_path):
    from dayzero.errors import ConfigError

    with pytest.raises(ConfigError, match="model_files"):
        context(tmp_path, files(path="/abs/model.gguf"))
    with pytest.raises(ConfigError, match="revision"):
        context(tmp_path, [{"path": INDEX}])


def test_files_resolve_under_each_hosts_model_root():
    f = ModelFile(INDEX, "r1")
    (w,) = weights.resolve([f], {"model_root": "/srv/models"})
    assert w.path == "/srv/models/org/Model/model.safetensors.index.json"
    (w,) = weights.resolve([f], {})
    assert w.path == INDEX  # a host without a model root reports it missing


def test_the_file_present_with_its_size_and_checksum_passes(tmp_path):
    place(tmp_path)
    assert problems_on_host(tmp_path, files()) == []


def test_preflight_keeps_each_model_files_size_and_checksum_as_a_fact(tmp_path):
    """What the submission checker holds a vendor's weights to: the file by checksum, not name."""
    place(tmp_path)
    ctx = context(tmp_path, files())
    (host,) = ctx.inventory.hosts
    card = ctx.matrix.card(ctx.matrix.cells[0])
    with open_transport(host, ctx.inventory) as t:
        facts = gather(t, ctx.matrix.hardware["cpu"], {}, model_files=card.model_files)
    assert facts.model_files == ({"role": "weights", "path": INDEX, "size": len(BODY), "sha256": SHA},)
    assert json.loads(json.dumps(facts.__dict__))["model_files"][0]["sha256"] == SHA


@pytest.mark.parametrize(
    "body, index, expected",
    [
        (None, {}, "weights file {path} (revision abc123) is missing on node7"),
        (BODY + b" ", {}, f"has {len(BODY) + 1} bytes, the card says {len(BODY)} on node7"),
        (BODY.upper(), {}, f"has sha256 {hashlib.sha256(BODY.upper()).hexdigest()}, the card says {SHA}"),
        (BODY.upper(), {"sha256": None}, ""),  # no checksum known yet: size only
    ],
    ids=["missing", "size", "checksum", "size-only"],
)
def test_a_missing_or_mismatched_file_is_a_host_problem_naming_its_path(tmp_path, body, index, expected):
    path = (
        place(tmp_path, body)
        if body is not None
        else tmp_path / "models/org/Model/model.safetensors.index.json"
    )
    found = problems_on_host(tmp_path, files(**index))
    if not expected:
        assert found == []
        return
    (problem,) = found
    assert expected.format(path=path) in problem and str(path) in problem


def test_a_cell_whose_host_lacks_the_weights_is_broken_naming_host_and_path(tmp_path):
    """End to end on the local host: preflight finds the index file missing, the host is
    quarantined, the cell is broken (a lab fault), nothing is launched and the lease is freed."""
    ctx = context(tmp_path, files())
    with pytest.raises(InfrastructureError) as caught:
        run_cell(ctx, ctx.matrix.cells[0])
    message = str(caught.value)
    assert "node7" in message and str(tmp_path / "models/org/Model/model.safetensors.index.json") in message
    (path,) = (tmp_path / "reports" / "evidence").glob("*.json")
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "broken" and "is missing on node7" in doc["error"]
    assert "readiness" not in doc, "nothing was launched"
    assert not list((tmp_path / "work" / "leases").glob("slot-*")), "lease released"
