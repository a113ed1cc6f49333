"""Apple silicon Macs through `sysctl`: unified memory, one GPU that is the host's own."""

from __future__ import annotations

from dataclasses import dataclass

from dayzero.devices.base import DeviceTool


@dataclass(frozen=True)
class Sysctl(DeviceTool):
    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """`<hw.memsize bytes> <free bytes>` (free: vm_stat's free and inactive pages)."""
        parts = output.split()
        if len(parts) < 2:
            return []
        return [(int(parts[0]) / 2**20, int(parts[1]) / 2**20)]


TOOL = Sysctl(
    name="sysctl",
    vendor="Apple",
    memory_query="echo $(sysctl -n hw.memsize) $(vm_stat | awk '/page size of/ {s=$8} "
    '/Pages (free|inactive)/ {gsub(/\\./, "", $3); n+=$3} END {print n*s}\')',
    no_driver="none (macOS)",
    is_host=True,
)
