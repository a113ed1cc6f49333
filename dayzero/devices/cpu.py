"""The CPU's own: a host whose accelerator is itself (`nproc` in the catalogue).

Its memory is /proc/meminfo's (MemTotal, MemAvailable); its power is RAPL's cumulative
microjoule counters under /sys/class/powercap (`intel-rapl:<n>[:<m>]`), which the host client
reads at both ends of a phase on every host (`rapl` in the power record).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dayzero.devices.base import DeviceTool

NO_DRIVER = "none (cpu)"


def rapl_joules(before: Mapping[str, Mapping], after: Mapping[str, Mapping]) -> dict[str, float]:
    """Zone -> joules between two reads of each zone's {name, energy_uj, max_energy_range_uj};
    a counter that went down wrapped once at its range. Top-level zones (packages) only: a
    subzone (core, dram) is part of its package's count."""
    out = {}
    for zone, b in before.items():
        a = after.get(zone)
        if a is None or zone.count(":") > 1:
            continue
        delta = int(a["energy_uj"]) - int(b["energy_uj"])
        if delta < 0:
            delta += int(b["max_energy_range_uj"])
        out[str(b.get("name") or zone)] = delta / 1e6
    return out


def _microjoules(value) -> bool:
    """A RAPL counter as the client keeps it: the sysfs file's text, or a count."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value >= 0
    return isinstance(value, str) and value.isascii() and value.isdigit()


def _zones_problem(zones, where: str) -> str:
    if not isinstance(zones, dict):
        return f"{where}: an object of RAPL zones"
    for zone, z in zones.items():
        if not isinstance(z, dict):
            return f"{where}.{zone}: an object {{name, energy_uj, max_energy_range_uj}}"
        for key in ("energy_uj", "max_energy_range_uj"):
            if not _microjoules(z.get(key)):
                return f"{where}.{zone}.{key}: a count of microjoules"
        if not isinstance(z.get("name", ""), str | None):
            return f"{where}.{zone}.name: a string"
    return ""


@dataclass(frozen=True)
class Cpu(DeviceTool):
    @property
    def record_key(self) -> str | None:
        return "rapl"  # the host client reads the counters itself: a file tree, not a program

    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """`<MemTotal MiB> <MemAvailable MiB>`: the host is its one accelerator."""
        parts = output.split()
        return [(float(parts[0]), float(parts[1]))] if len(parts) >= 2 else []

    def container_flags(self, runtime: str, accelerators: int | None) -> tuple[str, ...]:
        return ()  # nothing to pass: the container runs on the host's cores

    def joules(self, value) -> dict[str, float]:
        return rapl_joules(value["before"], value["after"]) if value else {}

    def merge_power(self, values: Sequence) -> object | None:
        """The first window's counters at its start to the last one's at its end."""
        before, after = (values[0] or {}).get("before") if values else None, None
        if values:
            after = (values[-1] or {}).get("after")
        return {"before": before, "after": after} if before and after else None

    def power_problem(self, value, where: str) -> str:
        if not isinstance(value, dict):
            return f"{where}: an object {{before, after}}"
        for key in ("before", "after"):
            if problem := _zones_problem(value.get(key), f"{where}.{key}"):
                return problem
        return ""


TOOL = Cpu(
    name="nproc",
    vendor="any",
    memory_query="echo $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) "
    "$(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo)",
    no_driver=NO_DRIVER,
    source="RAPL",
    power_rank=1000,
    is_host=True,
    cpu=True,
)
