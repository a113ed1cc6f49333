"""A Slurm cluster in an inventory: parsed into frozen records, errors name file, field and expectation."""

from __future__ import annotations

import pytest

from dayzero.errors import ConfigError
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix

from .conftest import REPO, write_yaml

KINDS = {"cpu", "b300", "gb300", "mi355x"}


def test_example_slurm_inventory_is_valid():
    inv = load_inventory(REPO / "hosts" / "slurm.example.yaml", set(load_matrix(REPO / "matrix").hardware))
    slurm = inv.slurm
    assert inv.hosts == () and slurm is not None
    assert slurm.login.transport == "ssh" and slurm.login.address == "login.lab.example"
    assert (slurm.partition, slurm.account, slurm.qos, slurm.max_jobs) == ("gpu", "inference-qa", "normal", 4)
    b300 = slurm.for_hardware("b300")
    assert b300.gres == "gpu:nvidia_b300:8" and b300.accelerators == 8 and b300.gres_type == "nvidia_b300"
    assert slurm.kind_of_gres("nvidia_b300") == "b300" and slurm.kind_of_gres("h100") is None
    assert slurm.for_hardware("gb300").partition == "nvl72" and slurm.container == "pyxis"
    assert slurm.setup in inv.secrets and slurm.engine_setup in inv.secrets
    assert "module load" not in repr(slurm), "setup may hold a secret: never in a traceback"


def test_slurm_defaults_and_hosts_beside_it(tmp_path):
    path = write_yaml(
        tmp_path / "s.yaml",
        {
            "slurm": {"partition": "debug", "hardware": {"cpu": {}, "b300": {"gres": "gpu:8"}}},
            "hosts": {"a": {"transport": "local", "hardware": "cpu"}},
        },
    )
    inv = load_inventory(path, KINDS)
    slurm = inv.slurm
    assert slurm.login.transport == "local" and slurm.time_limit == "1:00:00" and slurm.exclusive
    assert slurm.for_hardware("cpu").accelerators == 1 and slurm.for_hardware("cpu").gres == ""
    assert slurm.for_hardware("b300").accelerators == 8 and slurm.for_hardware("b300").gres_type is None
    assert [h.name for h in inv.hosts] == ["a"]


CPU = {"partition": "p", "hardware": {"cpu": {}}}


@pytest.mark.parametrize(
    "slurm, where, words",
    [
        ({"partition": None}, "slurm", "'partition' is a required property"),
        ({"hardware": {"b3000": {}}}, "slurm.hardware.b3000", "unknown hardware 'b3000'"),
        ({"hardware": {"b300": {"gres": "8 gpus"}}}, "slurm.hardware.b300.gres", "does not match"),
        ({"time_limit": "1h"}, "slurm.time_limit", "does not match"),
        ({"max_jobs": 0}, "slurm.max_jobs", "minimum of 1"),
        ({"container": "docker"}, "slurm.container", "expected one of"),
        ({"login": {"transport": "ssh"}}, "slurm.login", "needs 'address'"),
        ({"nodes": 2}, "slurm", "unknown field 'nodes' (line"),
        ({"partiton": "p"}, "slurm", "unknown field 'partiton' (did you mean 'partition'?)"),
    ],
)
def test_slurm_errors_name_file_and_field(tmp_path, slurm, where, words):
    slurm = {k: v for k, v in {**CPU, **slurm}.items() if v is not None}  # None: leave the field out
    path = write_yaml(tmp_path / "s.yaml", {"slurm": slurm})
    with pytest.raises(ConfigError) as err:
        load_inventory(path, KINDS)
    msg = str(err.value)
    assert msg.startswith(f"{path}: {where}:") and words in msg, msg


def test_inventory_needs_hosts_or_slurm(tmp_path):
    path = write_yaml(tmp_path / "s.yaml", {"description": "nothing"})
    with pytest.raises(ConfigError, match=r"s.yaml: <root>: expected 'hosts', 'slurm'"):
        load_inventory(path, KINDS)


def test_a_run_says_when_slurm_serves_a_kind_whose_ssh_hosts_then_stand_idle(tmp_path):
    """Issue 45: Slurm silently won over 4 B300 SSH hosts of the same inventory."""
    from dayzero.lab.slurm_pool import unused_hosts

    from .conftest import run_pytest

    hosts = {f"b300-0{i}": {"address": f"10.0.0.{i}", "hardware": "b300", "accelerators": 8} for i in (1, 2)}
    path = write_yaml(
        tmp_path / "lab.yaml",
        {
            "defaults": {"vars": {"model_root": "/models"}},
            "slurm": {
                "partition": "gpu",
                "hardware": {"b300": {"gres": "gpu:b300:8"}},
                "vars": {"model_root": "/m"},
            },
            "hosts": {**hosts, "c": {"transport": "local", "hardware": "cpu"}},
        },
    )
    line = "b300: served by Slurm partition gpu; its SSH host(s) b300-01, b300-02 are not used"
    assert [x.partition(" (")[0] for x in unused_hosts(load_inventory(path, KINDS))] == [line]
    result = run_pytest("-m", "b300", "--hosts", str(path), "--dry-run", f"--reports={tmp_path / 'out'}")
    said = f"[dayzero] {line} (remove slurm.hardware.b300 to use them)"
    assert said in result.stdout, result.stdout[-3000:]
    quiet = run_pytest("-m", "cpu", "--hosts", str(path), "--dry-run", f"--reports={tmp_path / 'out'}")
    assert "served by Slurm" not in quiet.stdout, "said only where a selected cell is of the kind"
