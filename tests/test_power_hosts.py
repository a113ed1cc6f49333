"""Power beside a phase on every host of the cell, not only where the client runs: the client's
`power` action (one window of readings), windows merged per host, each host's energy or why it
is not measured, and the phase's record naming every host.

The host client runs here through the local transport (stdlib Python, well under a second); no
engine, no sshd."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dayzero.checks.energy import from_hosts, merge_windows
from dayzero.checks.sweep import energy
from dayzero.lab import power
from dayzero.lab.deploy import run_client
from dayzero.lab.transport.local import LocalTransport
from dayzero.run.phases import Endpoint, collect
from dayzero.run.plan import MeasurementPlan
from dayzero.spec.card import Protocol
from dayzero.spec.inventory import Host
from dayzero.spec.workloads import Workload

DATA = Path(__file__).parent / "data" / "power"
HOST = Host(name="local", hardware="cpu", transport="local", address="127.0.0.1")
NVIDIA = (DATA / "nvidia-smi-power.csv").read_text()


def rapl(name: str) -> dict:
    return json.loads((DATA / f"rapl-{name}.json").read_text())


# --- the host side: the client's power action ---------------------------------------------------


def test_the_power_action_says_rapl_is_absent_here(tmp_path):
    """This VM has no /sys/class/powercap at all: the reason says so, not only "not readable"."""
    answer = run_client(LocalTransport(HOST), {"action": "power", "interval": 0.05, "window": 0.1}, 30)
    assert answer["t1"] >= answer["t0"] and answer["interval"] == 0.05
    if not os.path.exists("/sys/class/powercap"):
        assert "no RAPL on this host: /sys/class/powercap does not exist" in answer["absent"]
    empty = run_client(
        LocalTransport(HOST), {"action": "power", "interval": 0.05, "window": 0.1, "rapl": str(tmp_path)}, 30
    )
    assert f"no RAPL on this host: no intel-rapl zone under {tmp_path}" in empty["absent"]


def test_the_power_action_reads_rapl_zones_at_both_ends(tmp_path):
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("1000000\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    spec = {"action": "power", "interval": 0.05, "window": 0.1, "rapl": str(tmp_path)}
    answer = run_client(LocalTransport(HOST), spec, 30)
    assert answer["rapl"]["before"]["intel-rapl:0"]["energy_uj"] == "1000000"
    assert not any("RAPL" in a for a in answer["absent"])


# --- windows of one host, merged (pure) -------------------------------------------------------------


def test_windows_merge_into_one_phase_of_readings():
    header = NVIDIA.splitlines()[0]
    rows = NVIDIA.splitlines()[1:]
    windows = [
        {"t0": 10.0, "t1": 12.0, "interval": 0.5, "rapl": {"before": rapl("before"), "after": {}},
         "nvidia_smi": "\n".join([header, *rows[:2]]) + "\n", "absent": ["amd-smi not found"], "errors": []},
        {"t0": 12.1, "t1": 14.0, "interval": 0.5, "rapl": {"before": {}, "after": rapl("after")},
         "nvidia_smi": "\n".join([header, *rows[2:]]) + "\n", "absent": ["amd-smi not found"],
         "errors": ["nvidia-smi exited 9: busy"]},
    ]  # fmt: skip
    merged = merge_windows(windows)
    assert (merged["t0"], merged["t1"], merged["interval"]) == (10.0, 14.0, 0.5)
    assert merged["nvidia_smi"] == NVIDIA.rstrip("\n") + "\n"
    assert merged["rapl"] == {"before": rapl("before"), "after": rapl("after")}
    assert merged["absent"] == ["amd-smi not found"] and merged["errors"] == ["nvidia-smi exited 9: busy"]
    assert merge_windows([]) is None


# --- energy over every host of the cell (pure) -----------------------------------------------------


def test_every_host_measured_sums_their_energy_over_the_phase():
    hosts = {
        "gpu-a": {"t0": 0.0, "t1": 1.0, "nvidia_smi": NVIDIA},  # 562.75 J over 1 s
        "cpu-b": {"t0": 5.0, "t1": 7.0, "rapl": {"before": rapl("before"), "after": rapl("after")}},
    }
    cpu_b = from_hosts({"cpu-b": hosts["cpu-b"]}, 40, 2.0, 1)
    got = from_hosts(hosts, output_tokens=100, seconds=1.0, accelerators=2)
    # each host's mean watts over the phase's seconds: RAPL's 20 J in 2 s is 10 W, 10 J in 1 s
    assert cpu_b["joules"] == 20.0
    assert got["joules"] == pytest.approx(562.75 + 10.0)
    assert got["joules_per_token"] == pytest.approx(5.7275)
    assert got["source"] == "nvidia-smi, RAPL"
    assert got["hosts"] == {"gpu-a": "nvidia-smi", "cpu-b": "RAPL"}


def test_a_host_without_a_tool_is_not_measured_naming_the_host_and_why():
    absent = {"t0": 0, "t1": 1, "absent": ["no RAPL on this host: /sys/class/powercap does not exist"]}
    got = from_hosts({"gpu-a": {"t0": 0.0, "t1": 1.0, "nvidia_smi": NVIDIA}, "rank1": absent}, 100, 1.0, 2)
    assert "joules_per_token" not in got
    assert got["not_measured"] == "rank1: no RAPL on this host: /sys/class/powercap does not exist"
    assert got["hosts"] == {"gpu-a": "nvidia-smi", "rank1": "not measured"}
    nothing = from_hosts({"a": None}, 10, 1.0, 1)
    assert nothing["not_measured"] == "a: no power sampler ran beside the phase"


def test_a_sweep_points_energy_counts_the_other_hosts_records():
    answer = {
        "records": [
            {"send": 100.0, "end": 101.0, "first": 100.1, "usage": {"completion_tokens": 40}, "error": None}
        ],
        "power": {"t0": 5.0, "t1": 7.0, "rapl": {"before": rapl("before"), "after": rapl("after")}},
        "power_host": "h0",
        "power_hosts": {"h1": {"t0": 0, "t1": 2, "absent": ["nvidia-smi not found"]}},
    }
    got = energy([answer], accelerators=1)
    assert got["not_measured"] == "h1: nvidia-smi not found" and got["hosts"] == {
        "h0": "RAPL",
        "h1": "not measured",
    }
    answer["power_hosts"]["h1"] = {
        "t0": 0,
        "t1": 2,
        "rapl": {"before": rapl("before"), "after": rapl("after")},
    }
    assert energy([answer], accelerators=1)["joules_per_token"] == 1.0  # 2 x 20 J / 40 tokens


# --- the controller side: every host sampled while the phase runs -----------------------------------


def test_every_other_host_is_sampled_in_windows_while_the_block_runs():
    transports = {"a": LocalTransport(HOST), "b": LocalTransport(HOST)}
    with power.watching_hosts(transports, {"interval": 0.05}, window=0.2) as seen:
        time.sleep(0.6)
    assert set(seen) == {"a", "b"}
    for windows in seen.values():
        assert windows and all("absent" in w for w in windows)
        assert all(x["t1"] <= y["t0"] for x, y in zip(windows, windows[1:], strict=False))


def test_a_phase_with_power_keeps_every_hosts_readings_in_its_record():
    workload = Workload("w", "random", {"isl": 4, "osl": 2, "vocab": [10, 100]})
    m = MeasurementPlan(workload, 1, Protocol(min_prompts=1), power={"interval": 0.5})
    specs, kept = [], {}

    def client(spec, timeout):
        specs.append(spec)
        return {"records": [], "power": {"t0": 0, "t1": 1, "absent": ["amd-smi not found"]}}

    def watch(options):
        from contextlib import nullcontext

        assert options == {"interval": 0.5}
        return nullcontext({"rank1": [{"t0": 0, "t1": 1, "absent": ["nvidia-smi not found"], "errors": []}]})

    ep = Endpoint(
        url="http://x",
        client=client,
        keep=lambda phase, answer: kept.setdefault(phase, answer) and phase,
        say=lambda message: None,
        host="rank0",
        power_watch=watch,
    )
    (_, answer), *_ = collect(ep, m, 1)[0]
    assert answer["power_host"] == "rank0"
    assert answer["power_hosts"]["rank1"]["absent"] == ["nvidia-smi not found"]
    assert kept[m.phase(0)] is answer


def test_a_cells_endpoint_reads_power_on_every_host_but_the_clients(monkeypatch):
    from types import SimpleNamespace

    from dayzero.run import cell as cell_run
    from dayzero.spec.matrix import load_matrix

    matrix = load_matrix(Path(__file__).resolve().parents[1] / "matrix")
    cell = matrix.cell("smollm2-135m/cpu+llama.cpp/rpc_split/baseline")
    transports = {
        name: SimpleNamespace(host=SimpleNamespace(name=name, max_foreign_load=0.0))
        for name in ("rank0", "rank1", "rank2")
    }
    recipe = SimpleNamespace(endpoint=SimpleNamespace(host="rank0"), launches=(), digest="d")
    dep = SimpleNamespace(url="http://x", transports=transports, recipe=recipe, check_alive=lambda: None)
    ctx = SimpleNamespace(matrix=matrix, reports_dir=Path("."), say=print, run_id="r", goldens_dir=Path("."))
    seen = {}
    monkeypatch.setattr(cell_run.power, "watching_hosts", lambda t, options: seen.update(t=t, o=options))
    ep = cell_run.endpoint(ctx, cell_run.target(ctx, cell), dep)
    ep.power_watch({"interval": 0.5})
    assert ep.host == "rank0" and sorted(seen["t"]) == ["rank1", "rank2"] and seen["o"] == {"interval": 0.5}
