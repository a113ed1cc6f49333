"""Power parsers on the tools' own output shapes (tests/data/power/README.md says where each is
from), energy integration, and cost per million tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dayzero.checks.energy import PowerSample, integrate, per_token
from dayzero.devices import nvidia_smi
from dayzero.devices.amd_smi import socket_power as amd_smi_power
from dayzero.devices.cpu import rapl_joules
from dayzero.report.cost import Price, per_million_tokens, prices
from dayzero.spec.matrix import load_matrix

nvidia_smi_csv = nvidia_smi.TOOL.power_samples  # each tool parses its own readings

DATA = Path(__file__).parent / "data" / "power"
REPO = Path(__file__).resolve().parents[1]


def test_amd_smi_metric_socket_power_and_na():
    assert amd_smi_power((DATA / "amd-smi-metric.txt").read_text()) == {"gpu0": 140.0}


def test_amd_smi_metric_power_on_eight_gpus():
    got = amd_smi_power((DATA / "amd-smi-metric-power-8gpu.txt").read_text())
    assert list(got) == [f"gpu{i}" for i in range(8)]
    assert sum(got.values()) == 734 + 652 + 376 + 234 + 219 + 295 + 367 + 434


def test_nvidia_smi_csv_units_na_and_a_cut_line():
    samples = nvidia_smi_csv((DATA / "nvidia-smi-power.csv").read_text())
    assert [len(s.watts) for s in samples] == [1, 2, 2, 0]  # [N/A] and the cut line read as absent
    assert samples[1].t - samples[0].t == pytest.approx(0.5)
    # trapezoids: gpu0 (300+500)/2*0.5 + (500+700)/2*0.5; gpu1 from its first reading on
    assert integrate(samples) == pytest.approx({"gpu0": 500.0, "gpu1": 62.75})


def test_nvidia_smi_csv_without_power_column_is_refused():
    with pytest.raises(ValueError, match="power.draw"):
        nvidia_smi_csv("timestamp, index, utilization.gpu [%]\n2026/12/04 01:00:00.000, 0, 5 %\n")


def test_rapl_counter_wraps_and_subzones_are_not_counted_twice():
    before = json.loads((DATA / "rapl-before.json").read_text())
    after = json.loads((DATA / "rapl-after.json").read_text())
    assert rapl_joules(before, after) == pytest.approx({"package-0": 10.0, "package-1": 10.0})


def test_joules_per_token_and_watts_per_accelerator():
    joules = integrate(
        [PowerSample(0, {"gpu0": 400, "gpu1": 400}), PowerSample(10, {"gpu0": 600, "gpu1": 600})]
    )
    got = per_token(joules, output_tokens=2000, seconds=10, accelerators=2)
    assert got == {"joules": 10000.0, "joules_per_token": 5.0, "watts_per_accelerator": 500.0}
    assert per_token({}, 0, 0, 1)["joules_per_token"] is None


def test_cost_per_million_tokens():
    # 2.50 per accelerator-hour at 1000 tok/s per accelerator: 3.6M tokens an hour
    assert per_million_tokens(Price(2.5), 1000) == pytest.approx(0.6944, abs=1e-4)
    assert per_million_tokens(Price(2.5), 0) is None
    assert per_million_tokens(None, 1000) is None


def test_the_catalogue_states_a_price_for_cpu_only():
    got = prices(load_matrix(REPO / "matrix"))
    assert set(got) == {"cpu"} and got["cpu"].currency == "USD"


def test_a_phases_energy_from_the_samplers_raw_output():
    from dayzero.checks.energy import from_power

    nvidia = (DATA / "nvidia-smi-power.csv").read_text()
    got = from_power({"t0": 0.0, "t1": 1.0, "nvidia_smi": nvidia}, output_tokens=100, accelerators=2)
    assert got == {
        "source": "nvidia-smi",
        "joules": 562.75,
        "joules_per_token": 5.6275,
        "watts_per_accelerator": 281.375,
    }
    rapl = {
        "before": json.loads((DATA / "rapl-before.json").read_text()),
        "after": json.loads((DATA / "rapl-after.json").read_text()),
    }
    assert from_power({"t0": 0, "t1": 2, "rapl": rapl}, 40, 1)["joules_per_token"] == 0.5
    amd = [
        {"t": 0, "text": (DATA / "amd-smi-metric.txt").read_text()},
        {"t": 2, "text": (DATA / "amd-smi-metric.txt").read_text()},
    ]
    assert from_power({"t0": 0, "t1": 2, "amd_smi": amd}, 28, 1)["joules_per_token"] == 10.0
    absent = {"t0": 0, "t1": 1, "absent": ["nvidia-smi not found"], "errors": []}
    assert from_power(absent, 10, 1) == {"not_measured": "nvidia-smi not found"}
    assert from_power(None, 10, 1) == {"not_measured": "no power sampler ran beside the phase"}


def test_nvidia_smi_csv_as_an_h200_printed_it():
    """Recorded on an idle H200 (driver 580.159.04): one GPU, every 500 ms, about 79 W."""
    samples = nvidia_smi_csv((DATA / "nvidia-smi-power-h200.csv").read_text())
    assert len(samples) == 6 and samples[0].watts == {"gpu0": 79.77} and samples[-1].watts == {"gpu0": 79.15}
    assert samples[-1].t - samples[0].t == pytest.approx(2.504, abs=1e-3)
    assert integrate(samples)["gpu0"] == pytest.approx(198.41, abs=0.01)  # ~79.2 W x 2.5 s


def test_amd_smi_on_a_real_radeon_recording_with_other_sections_and_wrapped_lists():
    """`amd-smi metric` as a user printed it (README: joular/powerjoular#67): the POWER section
    among USAGE (a list wrapped over three lines) and CLOCK, voltages in mV, one GPU."""
    assert amd_smi_power((DATA / "amd-smi-metric-radeon-powerjoular-67.txt").read_text()) == {"gpu0": 20.0}


def powercap_info_zones(text: str) -> dict[str, dict[str, str]]:
    """`powercap-info -p intel-rapl` output -> {sysfs zone dir: {file: value}} (zone `0:1` is the
    directory `intel-rapl:0:1`)."""
    zones: dict[str, dict[str, str]] = {}
    zone = None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        key, _, value = line.strip().partition(": ")
        if key.startswith("Zone "):
            zone = zones.setdefault(f"intel-rapl:{key.removeprefix('Zone ')}", {})
            depth = indent
        elif key.startswith("Constraint "):
            zone = None  # a constraint's name is not the zone's
        elif zone is not None and indent == depth + 2 and value:
            zone[key] = value
    return zones


def test_rapl_on_a_real_reading_through_the_clients_sysfs_reader_with_a_wrap(tmp_path):
    """A real laptop's zones (README: MangoHud#1776), laid out as /sys/class/powercap holds them
    and read by the host client's own reader; the second read is derived from it: package-0 drew
    240 kJ and wrapped at its real max_energy_range_uj, core drew 100 J; subzones not counted."""
    from dayzero.loadgen.client import rapl_zones

    real = powercap_info_zones((DATA / "rapl-powercap-info-mangohud-1776.txt").read_text())
    assert set(real) == {"intel-rapl:0", "intel-rapl:0:0", "intel-rapl:0:1"}
    assert real["intel-rapl:0"] == {
        "name": "package-0",
        "enabled": "1",
        "max_energy_range_uj": "262143328850",
        "energy_uj": "26963529117",
    }

    def lay_out(zones):
        root = tmp_path / "powercap"
        for zone, files in zones.items():
            for name in ("name", "energy_uj", "max_energy_range_uj"):
                (root / zone).mkdir(parents=True, exist_ok=True)
                (root / zone / name).write_text(files[name] + "\n")
        return str(root)

    before = rapl_zones(lay_out(real))
    package = real["intel-rapl:0"]
    wrapped = (int(package["energy_uj"]) + 240_000_000_000) - int(package["max_energy_range_uj"])
    assert 0 < wrapped < int(package["energy_uj"])  # the counter went down: it wrapped
    later = {
        **real,
        "intel-rapl:0": {**package, "energy_uj": str(wrapped)},
        "intel-rapl:0:0": {**real["intel-rapl:0:0"], "energy_uj": str(7980278886 + 100_000_000)},
    }
    after = rapl_zones(lay_out(later))
    assert before["intel-rapl:0"]["energy_uj"] == "26963529117"  # sysfs text, as the client keeps it
    assert rapl_joules(before, after) == pytest.approx({"package-0": 240_000.0})
