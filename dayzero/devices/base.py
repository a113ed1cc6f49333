"""The protocol every device tool implements: what dayzero asks a host's accelerators.

A device tool is the program a hardware kind's catalogue entry names (`device_query`): it counts
the accelerators and their memory, reports the driver's version and the compute processes of
other jobs, may read power beside a phase (the host client runs it as data: it names no tool),
and knows how a container and a leased share of a host are handed its accelerators. Parsers are
pure; commands are shell text run by a transport. A tool that cannot be read says why
(`refusal`) instead of degrading silently to "the program is present".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PowerSample:
    t: float  # seconds (any common origin)
    watts: Mapping[str, float]  # device -> W; a device without a reading is absent


@dataclass(frozen=True)
class PowerReading:
    """What the host client runs every interval and how it keeps the output, as data.
    `lines`: stdout lines gathered under one `header` (a CSV printed without its header);
    `reads`: one {t, text} per run (a report printed whole each time)."""

    argv: tuple[str, ...]
    key: str  # the reading's key in a phase's power record (the evidence keeps it)
    style: str  # "lines" or "reads"
    header: str = ""

    def to_json(self, name: str) -> dict:
        argv = list(self.argv)
        return {"name": name, "argv": argv, "key": self.key, "style": self.style, "header": self.header}


def watts(text: str) -> float | None:
    """`72.45 W`, `72.45` -> 72.45; `[N/A]`, `N/A`, `[Not Supported]` -> None."""
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)\s*(?:W)?\s*$", text or "")
    return float(match.group(1)) if match else None


def once(rows: Iterable) -> list:
    """The rows in their order, each once (a process listed on each accelerator it holds)."""
    return list(dict.fromkeys(rows))


def integrate(samples: Sequence[PowerSample]) -> dict[str, float]:
    """Device -> joules over the samples' span (trapezoids between consecutive readings)."""
    out: dict[str, float] = {}
    for a, b in zip(samples, samples[1:], strict=False):
        for device in a.watts.keys() & b.watts.keys():
            out[device] = out.get(device, 0.0) + (a.watts[device] + b.watts[device]) / 2 * (b.t - a.t)
    return out


@dataclass(frozen=True)
class DeviceTool:
    """One device tool; subclasses override the parsers of what their commands print."""

    name: str  # the catalogue's `device_query` and the entry point's name
    vendor: str  # the catalogue's vendor whose accelerators this tool reads
    memory_query: str | None = None  # prints what `parse_memory` reads
    driver_query: str | None = None  # prints the driver's version (first line kept)
    no_driver: str | None = None  # the driver fact of a device without one (the CPU's "none (cpu)")
    process_query: str | None = None  # prints what `parse_processes` reads
    power: PowerReading | None = None  # read beside a phase by the host client
    source: str = ""  # how a phase's energy names readings of this tool (`checks.energy`)
    # where the tool's power readings come among the tools' (lower first: the client reads them in
    # that order and a phase's energy takes the first with readings; the host's own counters last)
    power_rank: int = 100
    visible_variable: str | None = None  # the runtime's mask of visible accelerators
    is_host: bool = False  # the host itself is the one accelerator (its memory is the host's)
    cpu: bool = False  # the accelerator is the host's CPU: no kind publishes its bandwidth
    refusal: str = ""  # a tool known by name whose output dayzero cannot read: why

    # --- accelerators and memory --------------------------------------------------------------
    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """(total MiB, free MiB) per accelerator (None where the tool does not say). Pure."""
        return []

    # --- other jobs ----------------------------------------------------------------------------
    def parse_processes(self, output: str) -> list[tuple[int, str]]:
        """(pid, name) of every compute process on the accelerators, each once. Pure."""
        return once((pid, name) for pid, name, _ in self.parse_device_processes(output))

    def parse_device_processes(self, output: str) -> list[tuple[int, str, int | None]]:
        """(pid, name, accelerator index) per accelerator each compute process holds: how a
        lease of a share tells its own accelerators' processes from a neighbour cell's. The index
        is None where the tool does not say which (counted on every share): so it is for a tool
        that reads only `parse_processes`. Pure."""
        if type(self).parse_processes is DeviceTool.parse_processes:
            return []
        return [(pid, name, None) for pid, name in self.parse_processes(output)]

    # --- containers and leases -----------------------------------------------------------------
    def container_flags(self, runtime: str, accelerators: int | None) -> tuple[str, ...]:
        """The flags that hand the host's accelerators to a container of `runtime`."""
        raise ValueError(
            f"no container device flags are known for vendor {self.vendor!r}; run it with container: none"
        )

    def visible_env(self, indices: Iterable[int]) -> dict[str, str]:
        """The environment that shows a process only these accelerators (a leased share)."""
        if not self.visible_variable:
            return {}
        return {self.visible_variable: ",".join(str(i) for i in indices)}

    # --- power ---------------------------------------------------------------------------------
    @property
    def record_key(self) -> str | None:
        """Where a phase's power record keeps this tool's readings (None: it reads none)."""
        return self.power.key if self.power else None

    def power_samples(self, value) -> list[PowerSample]:
        """The samples kept under `power.key` in a phase's power record."""
        return []

    def joules(self, value) -> dict[str, float]:
        """Device -> joules over the readings kept under `power.key`."""
        return integrate(self.power_samples(value)) if value else {}

    def merge_power(self, values: Sequence) -> object | None:
        """One host's windows of readings (each window's value under `power.key`) as one phase's."""
        present = [v for v in values if v]
        if not present or self.power is None:
            return None
        if self.power.style == "lines":
            texts = [v.splitlines() for v in present]
            return "\n".join([texts[0][0], *(line for t in texts for line in t[1:])]) + "\n"
        return [r for v in present for r in v]

    def power_problem(self, value, where: str) -> str:
        """What is wrong with a bundle's readings under `power.key` ('' where nothing is)."""
        if self.power is None:
            return ""
        if self.power.style == "lines":
            if not isinstance(value, str):
                return f"{where}: {self.name}'s output as text"
            try:
                self.power_samples(value)
            except ValueError as exc:
                return f"{where}: {str(exc)[:200]}"
            return ""
        if not isinstance(value, list):
            return f"{where}: a list of {{t, text}} readings"
        for i, read in enumerate(value):
            t = read.get("t") if isinstance(read, dict) else None
            if not isinstance(t, int | float) or isinstance(t, bool):
                return f"{where}/{i}.t: a number of seconds"
            if not isinstance(read.get("text"), str):
                return f"{where}/{i}.text: {self.name}'s output as text"
        return ""
