"""AWS Trainium and Inferentia through `neuron-ls` (its `--json-output`, one object a device)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dayzero.devices.base import DeviceTool, once


@dataclass(frozen=True)
class NeuronLs(DeviceTool):
    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """`memory_size` in bytes per device; neuron-ls reports no free memory: free is total."""
        return [(float(d.get("memory_size", 0)) / 2**20,) * 2 for d in json.loads(output)]

    def parse_device_processes(self, output: str) -> list[tuple[int, str, int | None]]:
        """Each device's (`neuron_device`) `neuron_processes` ({pid, command})."""
        rows = []
        for device in json.loads(output):
            index = device.get("neuron_device")
            for proc in device.get("neuron_processes") or ():
                if str(proc.get("pid", "")).isdigit():
                    where = int(index) if str(index).isdigit() else None
                    rows.append((int(proc["pid"]), str(proc.get("command", "")).split(" ")[0], where))
        return once(rows)

    def container_flags(self, runtime: str, accelerators: int | None) -> tuple[str, ...]:
        """Neuron containers get each /dev/neuron<N> device (one per accelerator counted)."""
        if not accelerators:
            raise ValueError(
                "AWS Neuron devices are passed one by one: the host's accelerator count is needed"
            )
        return tuple(flag for i in range(accelerators) for flag in ("--device", f"/dev/neuron{i}"))


TOOL = NeuronLs(
    name="neuron-ls",
    vendor="AWS",
    memory_query="neuron-ls --json-output",
    driver_query="cat /sys/module/neuron/version 2>/dev/null || neuron-ls --version 2>&1 | sed -n 1p",
    process_query="neuron-ls --json-output",
    # No mask by device index: the runtime's NEURON_RT_VISIBLE_CORES takes NeuronCore ids (each
    # device's `neuroncore_ids` in neuron-ls's listing: device 15 of a trn2 is cores 60-63), so
    # devices 2,3 written as cores would be two cores of device 0, shared by two cells. Until the
    # mask is built from preflight's listing, a Neuron cell takes its hosts whole
    # (`dayzero.lab.devicemask.claim`).
    visible_variable=None,
)
