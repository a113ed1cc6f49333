"""Transports run shell commands on a host; `open_transport` picks one from the inventory."""

from __future__ import annotations

from dayzero.lab.transport.base import CommandResult, RemoteProcess, Transport
from dayzero.spec.inventory import Host, Inventory

__all__ = ["CommandResult", "RemoteProcess", "Transport", "open_transport"]


def open_transport(host: Host, inventory: Inventory | None = None) -> Transport:
    if host.transport == "local":
        from dayzero.lab.transport.local import LocalTransport

        return LocalTransport(host)
    from dayzero.lab.transport.ssh import SSHTransport

    return SSHTransport(host, inventory)
