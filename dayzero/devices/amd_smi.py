"""AMD Instinct GPUs through `amd-smi` (ROCm's system management CLI)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from dayzero.devices.base import DeviceTool, PowerReading, PowerSample, once, watts

# ROCm's "Running ROCm Docker containers" and SGLang's AMD GPU page: kfd + dri, the video group,
# unconfined seccomp for memory mapping.
ROCM_FLAGS = (
    "--device",
    "/dev/kfd",
    "--device",
    "/dev/dri",
    "--group-add",
    "video",
    "--cap-add",
    "SYS_PTRACE",
    "--security-opt",
    "seccomp=unconfined",
)


def socket_power(text: str) -> dict[str, float]:
    """`amd-smi metric --power` (one reading) -> {"gpu<n>": socket watts}; N/A is absent."""
    out: dict[str, float] = {}
    gpu = None
    for line in text.splitlines():
        head = re.match(r"\s*GPU:\s*(\d+)\s*$", line)
        if head:
            gpu = f"gpu{head.group(1)}"
            continue
        field = re.match(r"\s*SOCKET_POWER:\s*(.+?)\s*$", line)
        if field and gpu is not None:
            reading = watts(field.group(1))
            if reading is not None:
                out[gpu] = reading
    return out


@dataclass(frozen=True)
class AmdSmi(DeviceTool):
    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """`amd-smi metric --mem-usage --json`: total_vram and free_vram per GPU, MiB."""
        data = json.loads(output)
        rows: list[tuple[float | None, float | None]] = []
        for gpu in data if isinstance(data, list) else data.get("gpu_data", []):
            mem = gpu.get("mem_usage", gpu)
            total = mem.get("total_vram", {}).get("value")
            free = mem.get("free_vram", {}).get("value")
            if total is not None and free is not None:
                rows.append((float(total), float(free)))
        return rows

    def parse_device_processes(self, output: str) -> list[tuple[int, str, int | None]]:
        """`amd-smi process --json`: each GPU's (`gpu`) process list; "No running processes
        detected" is none."""
        text = output.strip()
        if not text.startswith(("[", "{")):
            return []
        data = json.loads(text)
        rows = []
        for gpu in data if isinstance(data, list) else [data]:
            index = gpu.get("gpu")
            for entry in gpu.get("process_list", []):
                info = entry.get("process_info", entry)
                if isinstance(info, dict) and str(info.get("pid", "")).isdigit():
                    where = int(index) if str(index).isdigit() else None
                    rows.append((int(info["pid"]), str(info.get("name", "")), where))
        return once(rows)

    def container_flags(self, runtime: str, accelerators: int | None) -> tuple[str, ...]:
        return ROCM_FLAGS

    def power_samples(self, value) -> list[PowerSample]:
        return [PowerSample(float(r["t"]), socket_power(r["text"])) for r in value]


TOOL = AmdSmi(
    name="amd-smi",
    vendor="AMD",
    memory_query="amd-smi metric --mem-usage --json",
    driver_query="amd-smi version 2>&1 | sed -n 1p",
    process_query="amd-smi process --json",
    power=PowerReading(("amd-smi", "metric", "--power"), "amd_smi", "reads"),
    source="amd-smi",
    power_rank=20,
    visible_variable="HIP_VISIBLE_DEVICES",
)
