"""pyxis on a Slurm cluster: a kind that says `container: pyxis` runs each role's srun step with
`--container-image` (the kind's image, else the card's) and the model root and workdir mounted.
There is no pyxis/enroot here: these tests check what is rendered, from the recipe to the srun
line a dry run prints, the evidence and the checker."""

from __future__ import annotations

import shlex

import pytest

from dayzero.errors import ConfigError, InfrastructureError
from dayzero.evidence import launches_json
from dayzero.lab.slurm import Allocation, Slurm, node_host
from dayzero.lab.transport.base import CommandResult, RemoteProcess, Transport
from dayzero.run.preview import dry_run_text
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import hosts_needed, render, templates
from dayzero.submission.provenance import launch_problem

from .conftest import REPO, run_pytest, write_yaml
from .test_dry_run_preview import one_line

B300 = "kimi-k3.1-pro/b300/balanced/dflash"
GB300 = "kimi-k3.1-pro/gb300/balanced/baseline"
MI355X = "kimi-k3.1-pro/mi355x/balanced/dflash"
LAB_IMAGE = "registry.lab.example#sglang:b300"
MOUNTS = "--container-mounts=/models:/models,/scratch/dayzero:/scratch/dayzero"


def cluster_inventory(tmp_path, matrix, **slurm):
    data = {
        "partition": "gpu",
        "container": "pyxis",
        "hardware": {
            "b300": {"gres": "gpu:nvidia_b300:8", "container_image": LAB_IMAGE},
            "gb300": {"gres": "gpu:gb300:4"},
            "mi355x": {"gres": "gpu:mi355x:8", "container": "none"},
        },
        "workdir": "/scratch/dayzero",
        "engine_setup": "source /opt/sglang/activate",
        "vars": {"model_root": "/models"},
        **slurm,
    }
    return load_inventory(write_yaml(tmp_path / "slurm.yaml", {"slurm": data}), set(matrix.hardware))


def recipe_on_nodes(matrix, inv, cell_id):
    cell = matrix.cell(cell_id)
    kind = inv.slurm.for_hardware(cell.hardware)
    nodes = [node_host(inv.slurm, kind, f"n{i}", f"10.0.0.{i}") for i in range(1, 3)]
    return render(matrix, cell, nodes[: hosts_needed(matrix.card(cell), cell)])


def test_a_pyxis_step_runs_the_kinds_image_else_the_cards_with_the_model_root_mounted(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    inv = cluster_inventory(tmp_path, matrix)
    (b300,) = recipe_on_nodes(matrix, inv, B300).launches
    assert b300.step == (f"--container-image={LAB_IMAGE}", MOUNTS, "--no-container-mount-home")
    assert b300.container == () and b300.command.startswith("sglang serve"), "the command stays the engine's"
    gb300 = recipe_on_nodes(matrix, inv, GB300).launches
    card_image = matrix.card(matrix.cell(GB300)).hardware["gb300"].image
    assert len(gb300) == 2 and {lc.step[0] for lc in gb300} == {f"--container-image={card_image}"}
    (mi355x,) = recipe_on_nodes(matrix, inv, MI355X).launches
    assert mi355x.step == () and mi355x.container == (), "the kind's container: none wins over the cluster's"


def test_a_pyxis_kind_without_an_image_of_its_own_needs_the_cards(tmp_path, matrix_dir):
    path = matrix_dir / "models" / "kimi-k3.1-pro.yaml"
    path.write_text(path.read_text().replace('image: "lmsysorg/sglang:kimi-k3.1-cu130", ', ""))
    matrix = load_matrix(matrix_dir)
    with pytest.raises(ConfigError, match=r"hardware\.gb300\.image"):
        recipe_on_nodes(matrix, cluster_inventory(tmp_path, matrix), GB300)


class Recording(Transport):
    """A login host that records what it is asked to start."""

    def __init__(self, host):
        self.host, self.started = host, []

    def run(self, command, *, timeout, stdin=None):
        return CommandResult(command, 0, "", "")

    def put(self, local, remote): ...

    def get(self, remote, local): ...

    def start(self, command, *, env, log_path, setup="", cwd=None, step=()):
        self.started.append(command)
        return RemoteProcess(self.host.name, 1, log_path)


def test_the_pyxis_flags_go_on_the_roles_srun_step_before_its_task(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    inv = cluster_inventory(tmp_path, matrix)
    (lc,) = recipe_on_nodes(matrix, inv, B300).launches
    login = Recording(inv.slurm.login)
    alloc = Allocation("42", "dayzero:r:c", ("n1",), "gpu:nvidia_b300:8")
    Slurm(inv.slurm, login).launch(alloc, "n1", lc.command, log_path="/l", env=dict(lc.env), step=lc.step)
    argv = shlex.split(login.started[0])
    task = argv.index("bash")
    assert argv[:5] == ["srun", "--jobid", "42", "--nodelist", "n1"]
    assert argv[task - 3 : task] == list(lc.step) and argv[task + 1] == "-c"
    assert argv[task + 2].endswith(f"exec {lc.command}")


def test_a_host_that_is_no_slurm_node_refuses_srun_flags(tmp_path):
    from dayzero.lab.transport.local import LocalTransport
    from dayzero.spec.inventory import Host

    with pytest.raises(InfrastructureError, match="need a Slurm node"):
        LocalTransport(Host("h", "cpu", transport="local")).start(
            "sleep 1", env={}, log_path=str(tmp_path / "l"), step=("--container-image=x",)
        )


def test_dry_run_on_a_slurm_inventory_shows_the_job_and_the_whole_srun_line(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    inv = cluster_inventory(tmp_path, matrix)
    text = dry_run_text(matrix, inv, matrix.cell(B300))
    flat = one_line(text)  # each wrapped command (one flag a line) on one line
    job = next(line for line in flat.splitlines() if line.strip().startswith("sbatch"))
    assert "--gres gpu:nvidia_b300:8" in job and f"--job-name 'dayzero:<run>:{B300}'" in job
    srun = next(line for line in flat.splitlines() if line.strip().startswith("srun "))
    assert f"'--container-image={LAB_IMAGE}' {MOUNTS} --no-container-mount-home bash -c" in srun
    assert "   source /opt/sglang/activate\n" in text, "the engine_setup, shown (issue 45 item 3)"
    assert "exec sglang serve" in text
    switch = "/scratch/dayzero/jobs/leases/slot-<i>/owner.json"
    assert switch in text and "dayzero-watchdog $$" in text, "the step's switch on the node"


def test_pytest_dry_run_with_the_example_slurm_inventory_prints_srun_lines():
    """`pytest -m b300 --dry-run --hosts hosts/slurm.example.yaml`: no controller is asked."""
    result = run_pytest("-q", "-m", "b300 and balanced", "--dry-run", "--hosts", "hosts/slurm.example.yaml")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    sruns = [line for line in one_line(result.stdout).splitlines() if line.strip().startswith("srun --jobid")]
    assert sruns and all("--container-image=registry.lab.example#sglang:b300" in s for s in sruns), sruns
    assert "module load" not in result.stdout and (REPO / "hosts" / "slurm.example.yaml").exists()


def test_evidence_keeps_the_steps_image_and_the_checker_holds_it_to_the_cards(tmp_path, matrix_dir):
    matrix = load_matrix(matrix_dir)
    cell = matrix.cell(GB300)
    recipe = recipe_on_nodes(matrix, cluster_inventory(tmp_path, matrix), GB300)
    kept = launches_json(recipe, ())
    image = matrix.card(cell).hardware["gb300"].image
    assert kept[0]["srun"].startswith(f"--container-image={image} ") and "container" not in kept[0]
    t = templates(matrix.card(cell), cell)[0]
    assert launch_problem(t.argv, t.env, kept[0], image) == ""
    lab = launches_json(recipe_on_nodes(matrix, cluster_inventory(tmp_path, matrix), B300), ())[0]
    (tb,) = templates(matrix.card(matrix.cell(B300)), matrix.cell(B300))
    card_b300 = matrix.card(matrix.cell(B300)).hardware["b300"].image
    assert "the container runs image registry.lab.example" in launch_problem(tb.argv, tb.env, lab, card_b300)
