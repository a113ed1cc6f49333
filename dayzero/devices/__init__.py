"""Device tools as plugins: one module per tool, found through the `dayzero.devices` entry points.

A hardware kind of the catalogue names its tool (`device_query`); preflight, host load, power and
containers ask that tool, never a vendor's name. dayzero's own are registered in its
pyproject.toml exactly as a vendor's package registers theirs:

    [project.entry-points."dayzero.devices"]
    my-smi = "my_package.device:TOOL"    # an instance of dayzero.devices.DeviceTool

The entry point's name is the catalogue's `device_query`. A plugin that fails to load is named
once on stderr and skipped (`dayzero.plugins`); asking for it says why it did not load.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.metadata import entry_points

from dayzero import plugins
from dayzero.devices.base import DeviceTool, PowerReading, PowerSample, integrate
from dayzero.errors import DayzeroError

GROUP = "dayzero.devices"

__all__ = [
    "DeviceError",
    "DeviceTool",
    "PowerReading",
    "PowerSample",
    "by_vendor",
    "closest",
    "get",
    "integrate",
    "power_readers",
    "power_tools",
    "registered",
]


class DeviceError(DayzeroError):
    """A device tool nobody registered, or an entry point that is not a device tool."""


@cache
def _loaded() -> tuple[dict[str, DeviceTool], dict[str, str]]:
    out, failed = plugins.load(
        entry_points(group=GROUP),
        GROUP,
        DeviceTool,
        DeviceError,
        "device tool",
        "its hosts cannot be preflighted, the others are not affected",
    )
    return out, failed  # type: ignore[return-value]


def registered() -> dict[str, DeviceTool]:
    """Every device tool installed that loads, by name (loaded once per process)."""
    return _loaded()[0]


registered.cache_clear = _loaded.cache_clear  # tests reload the registry


def closest(name: str) -> str:
    """' (did you mean X?)' for the registered tool nearest `name`, else ''."""
    near = difflib.get_close_matches(name, list(registered()), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def get(name: str) -> DeviceTool:
    """The device tool of that catalogue name; an unknown one names those installed."""
    tool = registered().get(name)
    if tool is not None:
        return tool
    if why := _loaded()[1].get(name):
        raise DeviceError(why)
    known = ", ".join(sorted(registered()))
    raise DeviceError(
        f"unknown device tool {name!r}{closest(name)} (installed: {known}); a device tool is added "
        f"by a package's {GROUP} entry point"
    )


def by_vendor(vendor: str) -> DeviceTool | None:
    """The first tool installed for the catalogue's `vendor` (their container flags agree)."""
    return next((t for t in registered().values() if t.vendor == vendor), None)


def power_readers() -> list[DeviceTool]:
    """Every tool whose readings a power record may hold, by `power_rank` (installers list entry
    points by name): accelerator tools first, then the host's own counters."""
    tools = [t for t in registered().values() if t.record_key]
    return sorted(tools, key=lambda t: (t.power_rank, t.name))


def power_tools() -> list[dict]:
    """What the host client runs beside a phase, as data (it is stdlib and names no tool)."""
    return [t.power.to_json(t.name) for t in power_readers() if t.power]
