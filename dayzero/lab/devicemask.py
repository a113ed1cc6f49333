"""A leased share of a host's accelerators: how many a cell claims and the mask it runs under.

A mode that states its parallel sizes (`parallel: {tp: 2}`) uses that many accelerators, so a
cell of it leases that many of a host's by index and several such cells share one host, each
engine started with its vendor runtime's visible-devices variable (`CUDA_VISIBLE_DEVICES=2,3`).
A cell whose mode states none uses (and claims) every accelerator of its hosts and runs as the
host shows them. A host that is its own one accelerator (a cpu host, device tool `nproc`) has
nothing to claim: its slots alone say how many cells share it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dayzero import devices
from dayzero.lab.lease import Lease
from dayzero.spec.recipe import Recipe


def _variable(tool: str) -> str | None:
    """The runtime's mask of visible accelerators for the device tool (`DeviceTool.visible_env`)."""
    device = devices.registered().get(tool)
    return device.visible_variable if device else None


def claim(tool: str, used: int | None) -> int | None:
    """How many accelerators a cell claims on each of its hosts: None where the tool's host is
    its own accelerator, 0 (every one) where the mode states no size or no mask is known for the
    tool (its engine would see them all), else the mode's `used`, which a host caps at its own
    count (TP16 over two nodes of 8 takes both whole; each role of a PD cell of TP2 takes 2)."""
    device = devices.registered().get(tool)
    if device is not None and device.is_host:
        return None
    if not used or _variable(tool) is None:
        return 0
    return used


def masked(recipe: Recipe, leases: Sequence[Lease], tool: str) -> Recipe:
    """The recipe with each launch on a host leased in part given the mask of its accelerators
    (a lease of all of them leaves the launch as the host shows them)."""
    share = {
        lease.host.name: ",".join(str(j) for j in lease.devices)
        for lease in leases
        if lease.devices and len(lease.devices) < (lease.host.accelerators or 0)
    }
    variable = _variable(tool)
    if not share or variable is None:
        return recipe
    launches = tuple(
        replace(lc, env=(*((k, v) for k, v in lc.env if k != variable), (variable, share[lc.host])))
        if lc.host in share
        else lc
        for lc in recipe.launches
    )
    return replace(recipe, launches=launches)
