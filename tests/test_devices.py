"""Device tools as plugins (`dayzero.devices`): found through their entry points by the catalogue's
`device_query`, asked by preflight, host load, power and containers, never named elsewhere."""

from __future__ import annotations

import ast
import json
import os
import textwrap
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from dayzero import devices
from dayzero.checks import energy
from dayzero.errors import ConfigError
from dayzero.evidence import host_entry
from dayzero.lab import devicemask, hostload, power
from dayzero.lab.lease import Lease
from dayzero.lab.preflight import gather
from dayzero.lab.transport.local import LocalTransport
from dayzero.spec import container
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Hardware, load_hardware
from dayzero.submission.schema import power_problem

from .test_engines import name_comparisons

PACKAGE = Path(__file__).resolve().parent.parent / "dayzero"
DATA = Path(__file__).parent / "data" / "devices"
POWER = Path(__file__).parent / "data" / "power"
# How tools and vendors are spelt where a name would be compared: every registered tool and
# vendor, and the record keys and short names a branch would use.
SPELLINGS = {"nvidia_smi", "amd_smi", "nvidia", "amd", "rocm", "tpu", "neuron"}


def _device_names() -> set[str]:
    tools = devices.registered().values()
    return {t.name.lower() for t in tools} | {t.vendor.lower() for t in tools} | SPELLINGS


@pytest.fixture(autouse=True)
def _fresh_registry():
    yield
    devices.registered.cache_clear()


def _registry(monkeypatch, *extra: EntryPoint) -> None:
    """dayzero's own tools and `extra`, as if another package had installed them."""
    own = list(devices.entry_points(group=devices.GROUP))
    monkeypatch.setattr(devices, "entry_points", lambda group: [*own, *extra])
    devices.registered.cache_clear()


# --- nobody else names a tool or a vendor -------------------------------------------------------


def test_no_vendor_or_tool_name_is_compared_outside_dayzero_devices():
    """Seen red on the code before the devices package (2a08e39): 22 places in 7 modules
    (lab/preflight 9, lab/hostload 3, spec/container 5, spec/matrix, submission/configuration 2,
    submission/pack, submission/schema)."""
    names = _device_names()
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "devices" not in path.relative_to(PACKAGE).parts[:1]
        for line, what in name_comparisons(path.read_text(), names)
    ]
    assert found == [], "ask the device tool (dayzero.devices) instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        'if vendor == "NVIDIA": pass',
        'query = {"nvidia-smi": "q", "amd-smi": "r"}.get(tool)',
        'ok = tool in ("neuron-ls", "x")',
        'if "nvidia_smi" in power: pass',
    ],
)
def test_the_checker_sees_each_form_of_a_device_branch(code):
    assert name_comparisons(code, _device_names())


def test_the_host_client_names_no_device_tool():
    """The client is shipped to hosts (stdlib only): it runs the power commands it is handed."""
    source = (PACKAGE / "loadgen" / "client.py").read_text()
    tools = {t.name for t in devices.registered().values()}
    named = {
        n.value
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and any(t in n.value for t in tools)
    }
    assert named == set()


# --- each tool reads its recorded output --------------------------------------------------------


def test_tpu_info_counts_chips_and_reads_hbm_where_a_workload_reports_it():
    tool = devices.get("tpu-info")
    static = (DATA / "tpu-info" / "static-v6e.txt").read_text()
    rows = tool.parse_memory(static)
    assert len(rows) == 4 and rows[0] == pytest.approx((31.25 * 1024, (31.25 - 18.45) * 1024))
    idle = static.split("TPU Runtime Utilization")[0]  # no workload: the chips, no memory
    assert tool.parse_memory(idle) == [(None, None)] * 4
    procs = (DATA / "tpu-info" / "process-v6e-8.txt").read_text()
    assert tool.parse_processes(procs) == [(799657, "python3")]
    assert tool.parse_device_processes(procs) == [(799657, "python3", j) for j in range(8)]
    assert tool.visible_env([0, 2]) == {"TPU_VISIBLE_CHIPS": "0,2"}


def test_neuron_ls_json_output():
    tool = devices.get("neuron-ls")
    text = (DATA / "neuron-ls" / "json-output-trn2-48xlarge.json").read_text()
    assert tool.parse_memory(text) == [(96 * 1024.0, 96 * 1024.0)] * 2  # 103079215104 B = 96 GiB
    assert tool.parse_processes(text) == [(113985, "neuron-bench")]
    assert tool.parse_device_processes(text) == [(113985, "neuron-bench", 0), (113985, "neuron-bench", 15)]
    # its mask takes NeuronCore ids, not device indices: no share is leased by index
    assert tool.visible_env([2, 3]) == {} and devicemask.claim("neuron-ls", 2) == 0
    assert tool.container_flags("docker", 2) == ("--device", "/dev/neuron0", "--device", "/dev/neuron1")


def test_power_readings_are_parsed_by_their_own_tool():
    nvidia, amd, cpu = devices.get("nvidia-smi"), devices.get("amd-smi"), devices.get("nproc")
    csv_text = (POWER / "nvidia-smi-power.csv").read_text()
    assert nvidia.joules(csv_text) == pytest.approx({"gpu0": 500.0, "gpu1": 62.75})
    reads = [{"t": t, "text": (POWER / "amd-smi-metric.txt").read_text()} for t in (0.0, 2.0)]
    assert amd.joules(reads) == pytest.approx({"gpu0": 280.0})
    before = json.loads((POWER / "rapl-before.json").read_text())
    after = json.loads((POWER / "rapl-after.json").read_text())
    assert sum(cpu.joules({"before": before, "after": after}).values()) > 0
    assert [t.name for t in devices.power_readers()][-1] == "nproc"  # the host's own counters last
    # the order the client reads them in, and names them absent, whatever order the installer
    # wrote the entry points in (setuptools sorts them by name): docs/reports.md's reason
    assert [t["name"] for t in devices.power_tools()] == ["nvidia-smi", "amd-smi"]


def test_visible_devices_variable_per_tool():
    assert devices.get("nvidia-smi").visible_env((2, 3)) == {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert devices.get("amd-smi").visible_env([1]) == {"HIP_VISIBLE_DEVICES": "1"}
    assert devices.get("nproc").visible_env([0]) == {}


# --- the catalogue ------------------------------------------------------------------------------


def test_an_unknown_tool_in_the_catalogue_is_an_error_at_load(tmp_path):
    path = tmp_path / "hardware.yaml"
    path.write_text(
        "hardware:\n  x1: {vendor: X, memory_gb: 80, accelerators_per_node: 8, device_query: nvidia-sm}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_hardware(path)
    assert err.value.file == str(path) and err.value.path == "hardware.x1.device_query"
    assert "unknown device tool 'nvidia-sm' (did you mean 'nvidia-smi'?)" in err.value.message


def test_a_tool_known_by_name_only_is_refused_by_preflight_saying_why(tmp_path):
    host = Host(name="p1", hardware="ppu", transport="local", accelerators=8, workdir=str(tmp_path))
    facts = gather(LocalTransport(host), Hardware("ppu", "T-Head", None, 8, "ppu-smi"), {})
    assert not facts.healthy and facts.accelerators_seen is None
    assert any("ppu-smi's output is not known to dayzero" in p for p in facts.problems), facts.problems


def test_a_plugin_that_fails_to_load_is_named_and_skipped(monkeypatch, capsys):
    _registry(monkeypatch, EntryPoint("broken-smi", "vendor_not_installed.device:TOOL", devices.GROUP))
    assert "broken-smi" not in devices.registered() and "nvidia-smi" in devices.registered()
    assert "broken-smi" in capsys.readouterr().err
    with pytest.raises(devices.DeviceError, match="failed to load: ModuleNotFoundError"):
        devices.get("broken-smi")


# --- a vendor's tool, installed by entry point, used everywhere --------------------------------

TOY = """
from dataclasses import dataclass

from dayzero.devices import DeviceTool, PowerReading, PowerSample


@dataclass(frozen=True)
class ToySmi(DeviceTool):
    def parse_memory(self, output):
        return [tuple(float(x) for x in line.split()) for line in output.splitlines() if line.strip()]

    def parse_processes(self, output):
        return [(int(pid), name) for pid, name in (line.split() for line in output.splitlines() if line)]

    def power_samples(self, value):
        return [
            PowerSample(r["t"], {d: float(w) for d, w in (x.split() for x in r["text"].splitlines())})
            for r in value
        ]

    def container_flags(self, runtime, accelerators):
        return ("--device", "/dev/toy")


TOOL = ToySmi(
    name="toy-smi",
    vendor="Toy",
    memory_query="toy-smi memory",
    driver_query="toy-smi driver",
    process_query="toy-smi procs",
    power=PowerReading(("toy-smi", "power"), "toy_smi", "reads"),
    source="toy-smi",
    visible_variable="TOY_VISIBLE_CHIPS",
)
"""
PROGRAM = """#!/bin/sh
case "$1" in
  memory) printf '16384 16000\\n16384 16100\\n';;
  driver) echo 'toy-driver 1.2.3';;
  procs) echo '4242 burner';;
  power) printf 'chip0 100\\nchip1 50\\n';;
esac
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A vendor's package with its device tool, and the tool's program on PATH."""
    (tmp_path / "toy_vendor_device.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    _registry(monkeypatch, EntryPoint("toy-smi", "toy_vendor_device:TOOL", devices.GROUP))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "toy-smi").write_text(PROGRAM)
    (bindir / "toy-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    host = Host(
        name="toy1", hardware="toy", transport="local", accelerators=2, workdir=str(tmp_path / "w"),
        max_foreign_load=0,
    )  # fmt: skip
    return host


def test_a_device_tool_installed_by_entry_point_is_used_everywhere(toy, tmp_path):
    """The Done-when of issue 40 item 2: no dayzero file names the toy tool, yet the catalogue
    loads its kind, preflight counts its accelerators and reads its driver, host load finds the
    foreign process on them, power is read with its command and parsed by it, the evidence keeps
    what it saw, and containers and leases get its flags and mask."""
    catalogue = tmp_path / "hardware.yaml"
    catalogue.write_text(
        "hardware:\n  toy: {vendor: Toy, memory_gb: 16, accelerators_per_node: 2, device_query: toy-smi}\n"
    )
    kind = load_hardware(catalogue)["toy"]
    assert kind.device is devices.get("toy-smi")

    transport = LocalTransport(toy)
    facts = gather(transport, kind, {})  # preflight
    assert (facts.accelerators_seen, facts.memory_total_gb, facts.driver_version) == (
        2,
        32.0,
        "toy-driver 1.2.3",
    )
    assert facts.problems == ("accelerators busy: 1 foreign compute process(es): burner (pid 4242)",)
    assert hostload.compute_processes(transport, "toy-smi") == [(4242, "burner")]  # host load

    entry = host_entry(Lease(toy, 0, "run-1", str(tmp_path / "lease")), facts, {})  # the evidence
    assert entry["facts"]["accelerators_seen"] == 2 and entry["facts"]["driver_version"] == "toy-driver 1.2.3"

    with power.watching(transport, {"interval": 0.05}, window=0.3) as windows:  # power on a host
        deadline = time.monotonic() + 20
        while not any(w.get("toy_smi") for w in windows) and time.monotonic() < deadline:
            time.sleep(0.1)
    merged = energy.merge_windows(windows)
    assert merged and merged.get("toy_smi"), windows
    got = energy.host_energy(merged)
    assert got["source"] == "toy-smi" and got["joules"] > 0
    assert power_problem(merged) == ""
    assert power_problem({**merged, "toy_smi": "not a list"}) == "power.toy_smi: a list of {t, text} readings"

    assert container.device_flags("docker", "Toy", 2) == ("--device", "/dev/toy")
    assert devicemask.claim("toy-smi", 1) == 1
    assert kind.device.visible_env([1]) == {"TOY_VISIBLE_CHIPS": "1"}
