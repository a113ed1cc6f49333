"""Weights as a lab has them: the card's model files under `{model_root}`, checked by preflight on
every host of a cell; a missing or mismatched file is a lab fault (broken) naming host and path.
No engine starts here: preflight stops the cell before any launch."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

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


def place(tmp_path, body: bytes = BODY, shards: dict[str, bytes] | None = None):
    """The index file and the shards it names (one small fake shard unless given)."""
    path = tmp_path / "models" / "org" / "Model" / "model.safetensors.index.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    for name, data in (shards or {"model-00001-of-00002.safetensors": b"shard one"}).items():
        (path.parent / name).write_bytes(data)
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
    shard = {"model-00001-of-00002.safetensors": hashlib.sha256(b"shard one").hexdigest()}
    assert facts.model_files == (
        {
            "role": "weights",
            "path": INDEX,
            "size": len(BODY),
            "sha256": SHA,
            "revision": None,
            "shards": shard,
        },
    )
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


# --- a checkpoint's shards: trust on first use, then enforced ---------------------------------------

SHARDS = {f"model-0000{k}-of-00003.safetensors": f"fake shard {k}".encode() * (k + 1) for k in (1, 2, 3)}
SUMS = {name: hashlib.sha256(data).hexdigest() for name, data in SHARDS.items()}
MAP = json.dumps(
    {"weight_map": {f"layer{k}.weight": name for k, name in enumerate(sorted(SHARDS) * 2)}}
).encode()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def checkpoint(tmp_path, shards=SHARDS, revision: str | None = COMMIT):
    """A fake multi-shard checkpoint as `hf download --local-dir` leaves it: the index, its shards
    and the revision huggingface_hub records under .cache/huggingface/download/."""
    index = place(tmp_path, MAP, shards)
    if revision:
        meta = index.parent / ".cache" / "huggingface" / "download" / f"{index.name}.metadata"
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(f"{revision}\netag\n1733400000.0\n")
    return index


def indexed(**fields) -> list[dict]:
    return [{"path": INDEX, "revision": None, **fields}]


def read_on_host(tmp_path, **fields) -> tuple[list, str]:
    """The shard check as preflight runs it on a host (its shell and python), without the rest."""
    wanted = weights.resolve(
        [ModelFile(INDEX, fields.get("revision"), shards=fields.get("shards", {}))],
        {"model_root": str(tmp_path / "models")},
    )
    command = weights.shard_command(wanted, sys.executable)
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True)
    return wanted, out.stdout


def test_a_first_download_is_trusted_and_printed_for_the_maintainers_to_pin(tmp_path):
    """Through preflight: no problem, the host's revision and shard checksums kept as facts."""
    index = checkpoint(tmp_path)
    ctx = context(tmp_path, indexed())
    (host,) = ctx.inventory.hosts
    card = ctx.matrix.card(ctx.matrix.cells[0])
    with open_transport(host, ctx.inventory) as t:
        facts = gather(t, ctx.matrix.hardware["cpu"], {}, model_files=card.model_files)
    assert facts.problems == ()
    (seen,) = facts.model_files
    assert seen["revision"] == COMMIT and seen["shards"] == SUMS
    lines = weights.pin_lines("m", card.model_files, facts.model_files)
    assert lines[:3] == [
        f"to pin in m's card, model_files[0] ({INDEX}):",
        f"  revision: {COMMIT}",
        "  shards:",
    ]
    assert lines[3:] == [f"    {n}: {d}" for n, d in sorted(SUMS.items())]
    kept = json.loads((index.parent / weights.SIDECAR).read_text())
    assert {n: v[2] for n, v in kept.items()} == SUMS  # hashed once, then read from here


def test_pinned_shards_and_revision_pass_and_print_nothing_more_to_pin(tmp_path):
    checkpoint(tmp_path)
    wanted, out = read_on_host(tmp_path, revision=COMMIT, shards=SUMS)
    assert weights.shard_problems(wanted, out) == []
    facts = [weights.shard_facts(wanted, out)[0]]
    assert weights.pin_lines("m", [w.file for w in wanted], facts) == []


def test_a_changed_shard_is_hashed_again_not_read_from_the_first_use(tmp_path):
    checkpoint(tmp_path)
    read_on_host(tmp_path)  # first use: hashed and kept
    name, changed = edit_shard(tmp_path)
    checkpoint(tmp_path, changed)
    wanted, out = read_on_host(tmp_path, revision=COMMIT, shards=SUMS)
    (problem,) = weights.shard_problems(wanted, out)
    assert (
        f"shard {name} has sha256 {hashlib.sha256(changed[name]).hexdigest()}, the card says {SUMS[name]}"
        in problem
    )


def edit_shard(tmp_path):
    name = sorted(SHARDS)[1]
    return name, {**SHARDS, name: SHARDS[name].upper()}


OTHER = "fedcba9876543210fedcba9876543210fedcba98"
FIRST_TWO = {k: v for k, v in SHARDS.items() if not k.startswith("model-00003")}


@pytest.mark.parametrize(
    "shards, revision, pinned, expected",
    [
        (edit_shard(None)[1], COMMIT, {}, "shard model-00002-of-00003.safetensors has sha256 "),
        (FIRST_TWO, COMMIT, {}, "shard model-00003-of-00003.safetensors is missing"),
        (SHARDS, OTHER, {}, f"was downloaded at revision {OTHER}, the card says {COMMIT}"),
        (
            SHARDS,
            COMMIT,
            {"extra.safetensors": "0" * 64},
            "shard extra.safetensors, which the card pins, is not",
        ),
    ],
    ids=["checksum", "missing", "revision", "unknown-pin"],
)
def test_pinned_identity_is_enforced_naming_the_shard(tmp_path, shards, revision, pinned, expected):
    checkpoint(tmp_path, shards, revision)
    wanted, out = read_on_host(tmp_path, revision=COMMIT, shards={**SUMS, **pinned})
    found = weights.shard_problems(wanted, out)
    assert len(found) == 1, found
    assert expected in found[0] and str(tmp_path / "models/org/Model") in found[0]


def test_a_shard_the_card_does_not_pin_is_refused_once_it_pins_any(tmp_path):
    checkpoint(tmp_path)
    wanted, out = read_on_host(tmp_path, revision=COMMIT, shards=dict(list(SUMS.items())[:2]))
    assert weights.shard_problems(wanted, out) == [
        f"weights checkpoint {tmp_path / 'models/org/Model'}: shard model-00003-of-00003.safetensors "
        "is not pinned by the card"
    ]


def test_the_submission_checker_holds_a_vendor_s_shards_to_the_card_s_pins():
    from dayzero.submission.configuration import model_file_problem

    want = ModelFile(INDEX, COMMIT, shards=SUMS)
    held = {"path": INDEX, "revision": COMMIT, "shards": dict(SUMS)}
    assert model_file_problem(want, [held]) == ""
    name = sorted(SUMS)[0]
    forged = {**held, "shards": {**SUMS, name: "f" * 64}}
    assert f"shard {name} is not the card's pin" in model_file_problem(want, [forged])
