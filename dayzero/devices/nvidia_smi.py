"""NVIDIA GPUs through `nvidia-smi` (its `--query-gpu` and `--query-compute-apps` CSV)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from dataclasses import dataclass

from dayzero.devices.base import DeviceTool, PowerReading, PowerSample, once, watts

POWER_HEADER = "timestamp, index, power.draw [W]"
UUID = re.compile(r"(GPU|MIG)-[0-9a-fA-F-]+$")  # a GPU's uuid (a MIG instance's under MIG)


@dataclass(frozen=True)
class NvidiaSmi(DeviceTool):
    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """`memory.total,memory.free` in MiB, one GPU a line (commas removed by the query)."""
        rows: list[tuple[float | None, float | None]] = []
        for line in output.strip().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                rows.append((float(parts[0]), float(parts[1])))
        return rows

    def parse_device_processes(self, output: str) -> list[tuple[int, str, int | None]]:
        """`process_query`'s two CSVs: `index, uuid` per GPU, then `gpu_uuid, pid, process_name,
        used_memory` per process and GPU, joined on the uuid (a uuid of no GPU listed: index
        None). A line of pid first (`--query-compute-apps=pid,...`) has no GPU: None."""
        index_of: dict[str, int] = {}
        rows: list[tuple[int, str, str]] = []
        for line in output.strip().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and UUID.match(parts[1]):
                index_of[parts[1]] = int(parts[0])
            elif len(parts) >= 2 and UUID.match(parts[0]) and parts[1].isdigit():
                rows.append((int(parts[1]), parts[2] if len(parts) > 2 else "", parts[0]))
            elif parts[0].isdigit():
                rows.append((int(parts[0]), parts[1] if len(parts) > 1 else "", ""))
        return once((pid, name, index_of.get(uuid)) for pid, name, uuid in rows)

    def container_flags(self, runtime: str, accelerators: int | None) -> tuple[str, ...]:
        """NVIDIA Container Toolkit (`--gpus all`); podman reaches it through CDI."""
        return {"docker": ("--gpus", "all"), "podman": ("--device", "nvidia.com/gpu=all")}[runtime]

    def power_samples(self, value) -> list[PowerSample]:
        """`--query-gpu=timestamp,index,power.draw --format=csv[,nounits]` -> one sample per
        timestamp (every GPU printed at that time); `[N/A]` where the board has no reading."""
        rows = list(csv.reader(io.StringIO(value), skipinitialspace=True))
        if not rows:
            return []
        head = [h.strip().split(" [")[0] for h in rows[0]]
        if not {"timestamp", "index", "power.draw"} <= set(head):
            raise ValueError(f"nvidia-smi CSV without timestamp, index and power.draw columns: {rows[0]}")
        ti, ii, pi = head.index("timestamp"), head.index("index"), head.index("power.draw")
        by_time: dict[float, dict[str, float]] = {}
        for row in rows[1:]:
            if len(row) < len(head):
                continue  # a line cut short (the sampler was stopped mid-write)
            when = dt.datetime.strptime(row[ti].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            reading = watts(row[pi])
            by_time.setdefault(when, {})
            if reading is not None:
                by_time[when][f"gpu{row[ii].strip()}"] = reading
        return [PowerSample(t, w) for t, w in sorted(by_time.items())]

    def power_problem(self, value, where: str) -> str:
        if not isinstance(value, str):
            return f"{where}: nvidia-smi's CSV as text"
        try:
            self.power_samples(value)
        except (ValueError, csv.Error) as exc:
            return f"{where}: {str(exc)[:200]}"
        return ""


TOOL = NvidiaSmi(
    name="nvidia-smi",
    vendor="NVIDIA",
    memory_query="set -o pipefail; "
    "nvidia-smi --query-gpu=memory.total,memory.free --format=csv,noheader,nounits | tr -d ,",
    driver_query="nvidia-smi --query-gpu=driver_version --format=csv,noheader | sed -n 1p",
    process_query="nvidia-smi --query-gpu=index,uuid --format=csv,noheader; "
    "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits",
    power=PowerReading(
        ("nvidia-smi", "--query-gpu=timestamp,index,power.draw", "--format=csv,noheader"),
        "nvidia_smi",
        "lines",
        POWER_HEADER,
    ),
    source="nvidia-smi",
    power_rank=10,
    visible_variable="CUDA_VISIBLE_DEVICES",
)
