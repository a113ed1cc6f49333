"""Google Cloud TPUs through `tpu-info` (the cloud-accelerator-diagnostics CLI).

Its static mode prints markdown tables: `TPU Chips` (one row a chip, the PID holding it) and,
only while a workload's libtpu serves runtime metrics, `TPU Runtime Utilization` with each
chip's `HBM Usage` as `used GiB / total GiB`. At preflight nothing of the cell runs yet, so the
chips are counted and their memory is known only where another workload reports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dayzero.devices.base import DeviceTool, once

HBM = re.compile(r"(\d+(?:\.\d+)?)\s*GiB\s*/\s*(\d+(?:\.\d+)?)\s*GiB")


def tables(output: str) -> dict[str, list[list[str]]]:
    """Each titled table's rows (cells stripped), the header and rule lines left out."""
    out: dict[str, list[list[str]]] = {}
    title, header_seen = "", False
    for line in output.splitlines():
        text = line.strip()
        if not text.startswith("|"):
            if text:
                title, header_seen = text, False
            continue
        cells = [c.strip() for c in text.strip("|").split("|")]
        if all(set(c) <= set("-: ") for c in cells):
            continue
        if not header_seen:
            header_seen = True
            continue
        out.setdefault(title, []).append(cells)
    return out


@dataclass(frozen=True)
class TpuInfo(DeviceTool):
    def parse_memory(self, output: str) -> list[tuple[float | None, float | None]]:
        """A row per chip of `TPU Chips`; (total, free) MiB from `HBM Usage` where printed."""
        found = tables(output)
        chips = found.get("TPU Chips", [])
        hbm = [HBM.search(" ".join(row)) for row in found.get("TPU Runtime Utilization", [])]
        if len(hbm) == len(chips) and all(hbm):
            return [(float(m[2]) * 1024, (float(m[2]) - float(m[1])) * 1024) for m in hbm if m]
        return [(None, None) for _ in chips]

    def parse_device_processes(self, output: str) -> list[tuple[int, str, int | None]]:
        """`tpu-info --process`: the `TPU Process Info` table (chip, PID, process name); a chip's
        index is its device path's number (`/dev/vfio/3`, `/dev/accel3`)."""
        rows = []
        for row in tables(output).get("TPU Process Info", []):
            if len(row) >= 2 and row[1].isdigit():
                number = re.search(r"(\d+)$", row[0])
                where = int(number.group(1)) if number else None
                rows.append((int(row[1]), row[2] if len(row) > 2 else "", where))
        return once(rows)

    def container_flags(self, runtime: str, accelerators: int | None) -> tuple[str, ...]:
        """Cloud TPU containers run privileged on the host network."""
        return ("--privileged",)


TOOL = TpuInfo(
    name="tpu-info",
    vendor="Google",
    memory_query="tpu-info",
    driver_query="tpu-info --version 2>&1 | grep -i 'libtpu version' | sed -n 1p",
    process_query="tpu-info --process",
    visible_variable="TPU_VISIBLE_CHIPS",
)
