"""Transports run shell commands on a host; `open_transport` picks one from the inventory."""

from __future__ import annotations

from dayzero.lab.transport.base import (
    CONNECT_TIMEOUT_S,
    CONNECT_TRIES,
    CommandResult,
    RemoteProcess,
    Transport,
)
from dayzero.spec.inventory import Host, Inventory

__all__ = [
    "CONNECT_TIMEOUT_S",
    "CONNECT_TRIES",
    "CommandResult",
    "RemoteProcess",
    "Transport",
    "network_address",
    "open_transport",
]


def open_transport(
    host: Host, inventory: Inventory | None = None, connect_timeout: float = CONNECT_TIMEOUT_S
) -> Transport:
    if host.transport == "local":
        from dayzero.lab.transport.local import LocalTransport

        return LocalTransport(host)
    from dayzero.lab.transport.ssh import SSHTransport

    return SSHTransport(host, inventory, connect_timeout)


def network_address(host: Host, inventory: Inventory | None = None) -> str:
    """The address an engine binds to and clients reach: an inventory `address` may be an
    `ssh_config` alias, which only ssh understands, so for ssh hosts its HostName is used."""
    if host.transport in ("local", "slurm"):  # a Slurm node's address is its NodeAddr
        return host.address
    from dayzero.lab.transport.ssh import resolve_target

    return resolve_target(host, inventory).hostname
