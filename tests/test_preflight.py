"""Preflight reads each vendor's device tool; a failing host is unfit, with the reason."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from dayzero.lab.preflight import gather, parse_device_memory
from dayzero.lab.transport.local import LocalTransport
from dayzero.loadgen.client import ISA_FLAGS, parse_machine
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Hardware

NVIDIA = "183359 183000\n183359 182900\n"
AMD = json.dumps(
    [
        {
            "gpu": i,
            "mem_usage": {
                "total_vram": {"value": 294896, "unit": "MB"},
                "free_vram": {"value": 294000, "unit": "MB"},
            },
        }
        for i in range(8)
    ]
)
ROCM = json.dumps(
    {
        f"card{i}": {"VRAM Total Memory (B)": str(288 * 2**30), "VRAM Total Used Memory (B)": str(2**30)}
        for i in range(8)
    }
)


def test_parse_each_vendor_tool():
    assert parse_device_memory("nvidia-smi", NVIDIA) == [(183359.0, 183000.0), (183359.0, 182900.0)]
    assert len(parse_device_memory("amd-smi", AMD)) == 8
    rocm = parse_device_memory("rocm-smi", ROCM)
    assert len(rocm) == 8 and rocm[0][0] - rocm[0][1] == 1024
    assert parse_device_memory("nproc", "24000 22000") == [(24000.0, 22000.0)]


def fake_tool(tmp_path, monkeypatch, name: str, output: str, rc: int = 0) -> None:
    """A stand-in for a vendor tool we have no hardware for: prints a recorded output."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "out.txt").write_text(output)
    script = bindir / name
    script.write_text(f"#!/bin/sh\ncat {bindir}/out.txt\nexit {rc}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


B300 = Hardware("b300", "NVIDIA", 288, 8, "nvidia-smi")


@pytest.fixture
def host(tmp_path):
    """The contention check off: its one-second sample is no fact under test here (test_hostload.py
    holds preflight's sample) and cost each of these tests that second."""
    return Host(
        name="gpu1", hardware="b300", transport="local", accelerators=2, workdir=str(tmp_path / "w"),
        max_foreign_load=0,
    )  # fmt: skip


def test_healthy_gpu_host(tmp_path, monkeypatch, host):
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", NVIDIA)
    facts = gather(LocalTransport(host), B300, {"sh": "sh -c 'echo 1.2.3'"})
    assert facts.healthy, facts.problems
    assert facts.accelerators_seen == 2 and facts.engine_versions == {"sh": "1.2.3"}
    assert facts.disk_free_gb > 0


def test_missing_accelerator_and_busy_memory(tmp_path, monkeypatch, host):
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", "183359 20000\n")
    facts = gather(LocalTransport(host), B300, {})
    assert not facts.healthy
    assert any("sees 1 accelerator(s), inventory says 2" in p for p in facts.problems)
    assert any("accelerator memory busy" in p for p in facts.problems)


def test_a_leased_share_is_judged_on_its_own_accelerators(tmp_path, monkeypatch, host):
    """Accelerators 0 and 1 full (a neighbour cell's engine), 2 and 3 free: a lease of 2 and 3
    is fit, a lease of 1 and 2 is not; the facts stay the host's. A lease of every accelerator
    is judged on the host, as before leases had indices."""
    eight = replace(host, accelerators=4)
    fake_tool(
        tmp_path, monkeypatch, "nvidia-smi", "183359 20000\n183359 20000\n183359 183000\n183359 183000\n"
    )
    facts = gather(LocalTransport(eight), B300, {}, leased=(2, 3))
    assert facts.healthy, facts.problems
    assert (facts.memory_total_gb, facts.memory_free_gb) == (716.2, 396.5)
    (problem,) = gather(LocalTransport(eight), B300, {}, leased=(1, 2)).problems
    assert problem == "accelerator memory busy on leased accelerators 1,2: 198.2 of 358.1 GB free"
    (problem,) = gather(LocalTransport(eight), B300, {}, leased=(0, 1, 2, 3)).problems
    assert problem == "accelerator memory busy: 396.5 of 716.2 GB free"
    (problem,) = gather(LocalTransport(replace(eight, accelerators=8)), B300, {}, leased=(7,)).problems[-1:]
    assert problem == "nvidia-smi sees no accelerator 7, which the lease claimed"


def test_device_tool_failure_and_missing_engine(tmp_path, monkeypatch, host):
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", "NVIDIA-SMI has failed", rc=9)
    facts = gather(LocalTransport(host), B300, {"sglang": "no-such-sglang --version"})
    assert any("device tool `nvidia-smi` failed" in p for p in facts.problems)
    assert any("engine sglang not usable" in p for p in facts.problems)


def test_unreachable_host_is_reported_not_raised(tmp_path, host):
    class Down(LocalTransport):
        def run(self, command, *, timeout, stdin=None):
            from dayzero.errors import InfrastructureError

            raise InfrastructureError("connection refused")

    facts = gather(Down(host), B300, {})
    assert not facts.reachable and "connection refused" in facts.problems[0]


def test_driver_version_comes_from_the_device_tool(tmp_path, monkeypatch, host):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\ncase "$*" in *driver_version*) echo 580.65.06; echo 580.65.06;; '
        f"*) printf '{NVIDIA}';; esac\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    facts = gather(LocalTransport(host), B300, {})
    assert facts.healthy, facts.problems
    assert facts.driver_version == "580.65.06"


def test_driver_version_of_a_cpu_host_and_of_an_unreadable_tool(tmp_path, monkeypatch, host):
    cpu = Hardware("cpu", "any", 0, 1, "nproc")
    assert gather(LocalTransport(host), cpu, {}).driver_version == "none (cpu)"
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", "NVIDIA-SMI has failed", rc=9)
    facts = gather(LocalTransport(host), B300, {})
    assert facts.driver_version == "unknown" and not facts.healthy


def test_preflight_names_the_machine_the_host_is(tmp_path, monkeypatch, host):
    """Which near-ties an engine turns depends on the CPU's kernels: evidence names the machine."""
    fake_tool(tmp_path, monkeypatch, "nvidia-smi", NVIDIA)
    facts = gather(LocalTransport(host), B300, {})
    assert facts.machine["arch"] == os.uname().machine and facts.machine["cpu"]
    assert set(facts.machine["isa"]) <= set(ISA_FLAGS)


def test_the_machine_is_read_from_cpuinfo():
    x86 = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2 fma f16c bmi2\n"
    assert parse_machine("x86_64\n", x86) == {
        "arch": "x86_64",
        "cpu": "AMD EPYC 7B13",
        "isa": ["avx2", "fma", "f16c"],
    }
    arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve\nCPU part\t: 0xd40\n"
    assert parse_machine("aarch64", arm) == {"arch": "aarch64", "cpu": "", "isa": ["asimd", "sve"]}
    assert parse_machine("x86_64", "")["isa"] == []
