"""Bounds on the physical figures a vendor states (issue 42, item 4): from the hardware catalogue
where it has the figure, from a named physical limit where it does not; every finding names it."""

from __future__ import annotations

from dayzero.spec.matrix import load_matrix
from dayzero.submission.figures import host_bounds, phase_bounds

from .conftest import REPO


def hardware(kind: str):
    return load_matrix(REPO / "matrix").hardware[kind]


def host(**facts) -> dict:
    return {"name": "gpu0", "accelerators": 8, "facts": facts}


def test_a_gpu_hosts_memory_and_device_count_are_bounded_by_the_catalogue():
    h200 = hardware("h200")  # 143771 MiB an accelerator, 8 a node
    honest = host(memory_total_gb=round(8 * 143771 / 1024, 1), memory_free_gb=1000.0, accelerators_seen=8)
    assert list(host_bounds(h200, honest)) == []
    found = dict(host_bounds(h200, host(memory_total_gb=4000.0, accelerators_seen=16)))
    assert found["host gpu0: memory_total_gb 4000.0"].startswith("0 to 1123.21 GB: 8 x 143771 MiB")
    assert found["host gpu0: accelerators_seen 16"] == "0 to 8: h200's accelerators per node (catalogue)"


def test_a_published_kinds_bandwidth_and_a_cpu_hosts_measured_one_are_bounded():
    assert dict(host_bounds(hardware("h100"), host(memory_bandwidth_gbs=50_000.0))) == {
        "host gpu0: memory_bandwidth_gbs 50000.0": "more than 0 and at most 40200 GB/s: 1.5x 3350 GB/s"
        " x 8 accelerators (h100's published peak)"
    }
    cpu = {"name": "local", "accelerators": 1, "facts": {"memory_bandwidth_gbs": -3.0, "cpus": 0}}
    found = dict(host_bounds(hardware("cpu"), cpu))
    assert set(found) == {"host local: memory_bandwidth_gbs -3.0", "host local: cpus 0"}


def test_a_clients_cpu_time_is_at_most_its_cores_for_the_phases_span():
    phase = {"start": 100.0, "end": 110.0, "client": {"cpu_count": 2}, "client_cpu_s": 21.5}
    assert [found for found, _ in phase_bounds(phase, 60.0)] == ["client_cpu_s 21.5"]
    assert list(phase_bounds({**phase, "client_cpu_s": 19.0}, 60.0)) == []
