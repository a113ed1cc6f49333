"""Container hosts with a real runtime: podman (Debian 12's 4.3.1, runc) runs an image built from
this machine's own files (`tests/container_image.py`) holding the real llama-server.

Preflight reads the engine's version inside the image (the host itself has no engine) and keeps
the image's resolved id; a cell's processes are its container's: teardown removes it even when
its engine ignores SIGTERM, and a crashed worker's cleanup (`kill_recorded`) does too.
Run under the e2e lock:
`flock /tmp/dayzero-e2e.lock .venv/bin/python -m pytest tests/test_container_runtime.py`.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest

from dayzero.cache import SMOLLM2_GGUF, model_path
from dayzero.errors import StillLoading
from dayzero.lab.deploy import Deployment
from dayzero.lab.preflight import gather
from dayzero.lab.transport import open_transport
from dayzero.run.cell import RunContext, run_cell
from dayzero.spec.recipe import render

from . import container_image
from .conftest import fake_card, one_card_context

pytestmark = pytest.mark.e2e  # real podman and llama-server: the e2e tier

VERSION = 'cat "$(dirname "$(command -v llama-server)")/../SOURCE"; llama-server --version 2>&1 | head -1'


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    if why := container_image.why_not():
        pytest.skip(why)
    ref = container_image.build(tmp_path_factory.mktemp("image"))
    if why := container_image.runs(ref):
        pytest.skip(f"podman cannot run containers here: {why}")
    return ref


def engine_card(image: str, port: int, command: list[str] | None = None) -> dict:
    card = fake_card(
        command
        or ["llama-server", "--model", "{weights}", "--host", "{bind}", "--port", "{port}", "-c", "256"],
        port,
    )
    card["engine"].update({"name": "llama.cpp", "version_command": VERSION})
    card["weights"] = "{model_root}/" + SMOLLM2_GGUF
    card["hardware"]["cpu"]["image"] = image
    return card


def context(tmp_path, card: dict, ready_deadline: float = 120.0) -> RunContext:
    """One local host that runs its engines in podman, and no engine_setup: the engine is only
    in the image."""
    host = {"container": "podman", "vars": {"model_root": str(model_path().parent)}}
    return one_card_context(tmp_path, card, host, ready_deadline=ready_deadline)


def image_id(ref: str) -> str:
    return subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_preflight_reads_the_engine_inside_the_image_not_on_the_host(tmp_path, image):
    ctx = context(tmp_path, engine_card(image, 18610))
    (host,) = ctx.inventory.hosts
    assert not shutil.which("llama-server"), "the host itself must have no engine for this test"
    with open_transport(host, ctx.inventory) as t:
        facts = gather(t, ctx.matrix.hardware["cpu"], {"llama.cpp": VERSION}, image=image)
    assert facts.healthy, facts.problems
    assert "llama-cpp-python 0.3.36" in facts.engine_versions["llama.cpp"]
    assert "version: 0.5.0-dev" in facts.engine_versions["llama.cpp"]
    assert "DAYZERO-IMAGE" not in facts.engine_versions["llama.cpp"]
    assert facts.image["ref"] == image and facts.image["id"] == image_id(image)
    assert any(d.startswith("localhost/dayzero-llama@sha256:") for d in facts.image["digests"])


def test_an_image_neither_present_nor_pullable_is_a_host_problem_naming_it(tmp_path, image):
    missing = "localhost/dayzero-nope:absent"
    ctx = context(tmp_path, engine_card(missing, 18611))
    (host,) = ctx.inventory.hosts
    with open_transport(host, ctx.inventory) as t:
        facts = gather(t, ctx.matrix.hardware["cpu"], {"llama.cpp": VERSION}, image=missing)
    assert not facts.healthy and facts.image is None
    (problem,) = facts.problems
    assert f"image {missing}: neither present nor pullable" in problem


def test_a_cell_runs_in_its_container_and_its_evidence_names_the_image(tmp_path, image):
    port = 18612
    ctx = context(tmp_path, engine_card(image, port))
    outcome = run_cell(ctx, ctx.matrix.cells[0])
    assert outcome.verdict == "passed", outcome.error
    doc = json.loads(outcome.evidence_path.read_text())
    assert doc["engine"]["image"]["id"] == image_id(image)
    assert "version: 0.5.0-dev" in doc["engine"]["version"]
    assert doc["hosts"][0]["facts"]["image"]["ref"] == image
    assert 0 < doc["readiness"]["ready_s"] < doc["readiness"]["deadline_s"] == 120
    (launch,) = doc["recipe"]["launches"]
    assert launch["container"].startswith(f"podman run --rm --name dayzero-server-0-{port}")
    assert not container_image.containers(f"dayzero-server-0-{port}"), "teardown removes the container"


def test_teardown_removes_a_container_whose_engine_ignores_sigterm(tmp_path, image):
    """`sleep` is PID 1 in its container: SIGTERM, proxied by `podman run`, does nothing; the
    client is SIGKILLed after its grace and the container would run on, holding the host."""
    port = 18613
    ctx = context(tmp_path, engine_card(image, port, ["sleep", "600"]), ready_deadline=3)
    with pytest.raises(StillLoading):  # alive at the deadline: broken, and torn down all the same
        run_cell(ctx, ctx.matrix.cells[0])
    assert not container_image.containers(f"dayzero-server-0-{port}")


def test_a_crashed_workers_cleanup_removes_the_container(tmp_path, image):
    """A controller that died mid-cell leaves the group and its container: `kill_recorded`
    (run/crash.py's cleanup) ends both."""
    port = 18600 + random.randint(14, 19)
    ctx = context(tmp_path, engine_card(image, port, ["sleep", "600"]))
    (host,) = ctx.inventory.hosts
    cell = ctx.matrix.cells[0]
    with open_transport(host, ctx.inventory) as t:
        dep = Deployment(render(ctx.matrix, cell, [host]), {"local": t}, "crashed")
        dep.start()
        name = f"dayzero-server-0-{port}"
        for _ in range(40):
            if container_image.containers(name):
                break
            subprocess.run(["sleep", "0.25"])
        assert container_image.containers(name), "the container started"
        killed = t.kill_recorded(dep.run_dir(dep.recipe.launches[0]), grace=1)
        assert killed == [dep.started[0].process.pgid]
        assert not container_image.containers(name)
