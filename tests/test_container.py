"""Containers: a host that says `container: docker|podman` runs the card's image in the cookbook's
`docker run` form, with its vendor's device flags; the engine argv inside stays what lint parses."""

from __future__ import annotations

import shlex

import pytest
import yaml

from dayzero.errors import ConfigError
from dayzero.run.preview import dry_run_text
from dayzero.spec import container, lint
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import digest, hosts_needed, render
from dayzero.submission.provenance import launch_problem

from .conftest import write_yaml
from .test_dry_run_preview import one_line
from .test_lint import needs_parsers

B300 = "kimi-k3.1-pro/b300/balanced/dflash"
MI355X = "kimi-k3.1-pro/mi355x/balanced/dflash"
GB300 = "kimi-k3.1-pro/gb300/balanced/baseline"

# the device flags each vendor of the hardware catalogue gets, from its container guide
DEVICES = {
    "NVIDIA": ["--gpus", "all"],
    "AMD": ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"],
    "Google": ["--privileged"],
    "AWS": ["--device", "/dev/neuron0", "--device", "/dev/neuron1"],
    "any": [],
}


def inventory(tmp_path, matrix, runtime: str = "docker", **defaults):
    hosts = {
        f"{hw}-{i}": {"hardware": hw, "address": f"10.0.{n}.{i}", "accelerators": 8}
        for n, hw in enumerate(("b300", "gb300", "mi355x"))
        for i in range(2)
    }
    data = {"defaults": {"container": runtime, "vars": {"model_root": "/models"}, **defaults}, "hosts": hosts}
    return load_inventory(write_yaml(tmp_path / "hosts.yaml", data), set(matrix.hardware))


def launches(matrix, inv, cell_id):
    cell = matrix.cell(cell_id)
    return render(
        matrix, cell, inv.for_hardware(cell.hardware)[: hosts_needed(matrix.card(cell), cell)]
    ).launches


def contains(argv: list[str], part: list[str]) -> bool:
    return any(argv[i : i + len(part)] == part for i in range(len(argv) - len(part) + 1))


@pytest.mark.parametrize(
    "cell_id, image, devices",
    [
        (B300, "lmsysorg/sglang:kimi-k3.1", DEVICES["NVIDIA"]),
        (GB300, "lmsysorg/sglang:kimi-k3.1-cu130", DEVICES["NVIDIA"]),
        (MI355X, "lmsysorg/sglang:kimi-k3.1-rocm720-mi35x", DEVICES["AMD"]),
    ],
)
def test_a_docker_host_runs_the_cards_image_in_the_cookbooks_form(
    tmp_path, matrix_dir, cell_id, image, devices
):
    matrix = load_matrix(matrix_dir)
    bare = launches(matrix, inventory(tmp_path, matrix, "none"), cell_id)
    for lc, plain in zip(launches(matrix, inventory(tmp_path, matrix), cell_id), bare, strict=True):
        argv = shlex.split(lc.command)
        assert argv[:3] == ["docker", "run", "--rm"]
        assert contains(argv, devices)
        for part in (["--ipc=host"], ["--network", "host"], ["--shm-size", "32g"], ["-v", "/models:/models"]):
            assert contains(argv, part), part
        assert all(contains(argv, ["-e", name]) for name, _ in lc.env)  # values stay in the exports
        assert "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK" in dict(lc.env)
        assert argv[len(lc.container) - 1] == image and lc.container[-1] == image
        # the engine argv inside is exactly the bare-metal one: what lint parses
        assert lc.argv == plain.argv and argv[len(lc.container) :] == list(plain.argv)
        assert lc.engine_command == plain.command and plain.container == ()
        parser, start = lint.parser_of(matrix.card(matrix.cell(cell_id)), lc.argv)
        assert (parser.kind, start) == ("sglang", 2)


@pytest.mark.parametrize("vendor", sorted(DEVICES))
def test_device_flags_for_every_vendor_of_the_catalogue(vendor):
    flags = list(container.device_flags("docker", vendor, 16))
    assert contains(flags, DEVICES[vendor]) if DEVICES[vendor] else flags == []
    if vendor == "AWS":
        assert flags.count("--device") == 16  # one /dev/neuron<N> per accelerator


def test_every_vendor_in_the_hardware_catalogue_renders_or_says_why(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    vendors = {hw.vendor for hw in matrix.hardware.values()}
    assert vendors == {*DEVICES, "T-Head", "Apple"}  # Apple: the Mac `dayzero fit` sizes for
    for vendor in ("T-Head", "Apple"):
        with pytest.raises(ValueError, match=f"no container device flags are known for vendor '{vendor}'"):
            container.device_flags("docker", vendor, 8)
    with pytest.raises(ValueError, match="accelerator count"):
        container.device_flags("docker", "AWS", None)


def test_podman_reaches_nvidia_gpus_through_cdi(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    (lc,) = launches(matrix, inventory(tmp_path, matrix, "podman"), B300)
    argv = shlex.split(lc.command)
    assert argv[:2] == ["podman", "run"] and contains(argv, ["--device", "nvidia.com/gpu=all"])
    assert "--gpus" not in argv


def test_a_container_host_needs_the_cards_image(tmp_path, matrix_dir):
    path = matrix_dir / "models" / "kimi-k3.1-pro.yaml"
    card = yaml.safe_load(path.read_text())
    del card["hardware"]["b300"]["image"]
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    matrix = load_matrix(matrix_dir)
    with pytest.raises(ConfigError, match=r"hardware\.b300\.image"):
        launches(matrix, inventory(tmp_path, matrix), B300)
    assert launches(matrix, inventory(tmp_path, matrix, "none"), B300)  # bare metal needs none


def test_the_image_enters_the_recipe_digest(matrix_dir):
    path = matrix_dir / "models" / "kimi-k3.1-pro.yaml"
    before = digest(
        load_matrix(matrix_dir).card(load_matrix(matrix_dir).cell(B300)), load_matrix(matrix_dir).cell(B300)
    )
    path.write_text(
        path.read_text().replace(
            '"lmsysorg/sglang:kimi-k3.1"', '"lmsysorg/sglang:kimi-k3.1@sha256:' + "ab" * 32 + '"'
        )
    )
    matrix = load_matrix(matrix_dir)
    assert digest(matrix.card(matrix.cell(B300)), matrix.cell(B300)) != before


def test_dry_run_shows_the_whole_docker_line(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    text = dry_run_text(matrix, inventory(tmp_path, matrix), matrix.cell(MI355X))
    line = next(x for x in one_line(text).splitlines() if "docker run" in x)  # one flag a line, joined
    assert "--device /dev/kfd" in line and "lmsysorg/sglang:kimi-k3.1-rocm720-mi35x sglang serve" in line
    assert line.strip().startswith("docker run")
    assert "   export SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0\n" in text


def test_inventory_rejects_an_unknown_runtime(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    with pytest.raises(ConfigError, match="container"):
        inventory(tmp_path, matrix, "lxc")
    assert {h.container for h in inventory(tmp_path, matrix).hosts} == {"docker"}


def test_the_checker_reads_the_engine_argv_inside_a_container_and_checks_the_image(tmp_path, matrix_dir):
    from dayzero.spec.recipe import templates
    from dayzero.spec.shell import join

    matrix = load_matrix(matrix_dir)
    cell = matrix.cell(B300)
    (t,) = templates(matrix.card(cell), cell)
    (lc,) = launches(matrix, inventory(tmp_path, matrix), B300)
    launch = {"command": lc.command, "env": dict(lc.env), "container": join(lc.container)}
    image = matrix.card(cell).hardware["b300"].image
    assert launch_problem(t.argv, t.env, launch, image) == ""
    assert "image" in launch_problem(t.argv, t.env, launch, "lmsysorg/sglang:other")
    assert "arguments" in launch_problem(t.argv, t.env, {**launch, "container": ""}, image)


def test_evidence_keeps_the_whole_line_and_its_container_prefix(tmp_path, matrix_dir):
    from dayzero.evidence import launches_json

    matrix = load_matrix(matrix_dir)
    cell = matrix.cell(B300)
    recipe = render(matrix, cell, inventory(tmp_path, matrix).for_hardware("b300")[:1])
    (kept,) = launches_json(recipe, ())
    assert kept["command"].startswith(kept["container"] + " sglang serve")
    assert kept["container"].endswith(" lmsysorg/sglang:kimi-k3.1")
    bare = render(matrix, cell, inventory(tmp_path, matrix, "none").for_hardware("b300")[:1])
    assert "container" not in launches_json(bare, ())[0]


@needs_parsers
def test_lint_parses_the_engine_argv_of_a_containerised_recipe(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    inv = inventory(tmp_path, matrix)
    recipes = []
    for cell_id in (B300, MI355X, GB300):
        cell = matrix.cell(cell_id)
        recipes.append(
            (
                cell,
                render(
                    matrix, cell, inv.for_hardware(cell.hardware)[: hosts_needed(matrix.card(cell), cell)]
                ),
            )
        )
    assert all(lc.container for _, r in recipes for lc in r.launches)
    assert lint.lint_recipes(matrix, recipes) == []
