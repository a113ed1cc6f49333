"""T-Head Zhenwu PPUs: their tool `ppu-smi` is known by name only.

No public documentation of its output was found (2026-12), so dayzero cannot count a PPU host's
accelerators or read their memory: preflight says so as a problem instead of trusting the
program's presence. T-Head's own package can register a `dayzero.devices` plugin of this name.
"""

from __future__ import annotations

from dayzero.devices.base import DeviceTool

TOOL = DeviceTool(
    name="ppu-smi",
    vendor="T-Head",
    refusal="ppu-smi's output is not known to dayzero (no public documentation): the accelerators "
    "of this kind cannot be counted; a vendor package registers its own dayzero.devices plugin",
)
