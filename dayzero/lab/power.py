"""Power readings on the hosts of a cell the client does not run on, while a phase runs.

The client samples its own host beside the measured requests (`loadgen.client.PowerSampler`).
Every other host of the cell (a multi-node server's ranks, prefill and decode hosts) is read
here: the host client's `power` action takes one window of readings (the same sampler: the device
tools' power commands every `interval` s, handed to it as data by `devices.power_tools`, RAPL's
counters at both ends, and why a tool gave nothing), and a
thread per host runs windows one after another until the phase ends, as `hostload` does for
foreign load. `checks.energy.merge_windows` turns one host's windows into one phase's readings.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from dayzero import devices
from dayzero.errors import CommandTimeout, InfrastructureError
from dayzero.lab.deploy import run_client
from dayzero.lab.transport import Transport

WINDOW_S = 2.0  # one client start per host per window: readings are lost only between windows


@contextmanager
def watching(transport: Transport, options: Mapping, window: float = WINDOW_S) -> Iterator[list[dict]]:
    """Windows of power readings on one host, taken while the block runs; a window that could not
    be taken says why (a lost reading is no verdict: that host's energy is then not measured)."""
    windows: list[dict] = []
    stop = threading.Event()
    spec = {"tools": devices.power_tools(), **options, "action": "power", "window": window}

    def loop() -> None:
        while not stop.is_set():
            try:
                windows.append(run_client(transport, spec, timeout=window + 30))
            except (InfrastructureError, CommandTimeout) as exc:
                windows.append({"errors": [f"power window: {exc}"]})
                stop.wait(window)

    thread = threading.Thread(target=loop, name=f"power-{transport.host.name}", daemon=True)
    thread.start()
    try:
        yield windows
    finally:
        stop.set()
        thread.join(window + 35)


@contextmanager
def watching_hosts(
    transports: Mapping[str, Transport], options: Mapping, window: float = WINDOW_S
) -> Iterator[dict[str, list[dict]]]:
    """`watching` every host at once: host name -> its windows."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(watching(t, options, window)) for name, t in transports.items()}
