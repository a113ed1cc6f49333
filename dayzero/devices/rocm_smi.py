"""AMD GPUs through `rocm-smi`, the tool older ROCm hosts have instead of amd-smi."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dayzero.devices.amd_smi import ROCM_FLAGS
from dayzero.devices.base import DeviceTool


@dataclass(frozen=True)
class RocmSmi(DeviceTool):
    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """`rocm-smi --showmeminfo vram --json`: bytes per card."""
        rows: list[tuple[float | None, float | None]] = []
        for card in json.loads(output).values():
            total = int(card.get("VRAM Total Memory (B)", 0)) / 2**20
            used = int(card.get("VRAM Total Used Memory (B)", 0)) / 2**20
            rows.append((total, total - used))
        return rows

    def container_flags(self, runtime: str, accelerators: int | None) -> tuple[str, ...]:
        return ROCM_FLAGS


TOOL = RocmSmi(
    name="rocm-smi",
    vendor="AMD",
    memory_query="rocm-smi --showmeminfo vram --json",
    driver_query="rocm-smi --showdriverversion 2>&1 | grep -i version | sed -n 1p",
    visible_variable="HIP_VISIBLE_DEVICES",
)
