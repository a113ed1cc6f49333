"""A test host behind a network that can vanish: its own network namespace, reached by a veth pair.

The loopback testbed cannot lose its network: every 127.0.0.x is this machine's own interface,
and a firewall rule there also cuts the controller from itself. Here the host lives in a network
namespace (`ip netns`) with one veth end (`10.213.<k>.2`) and the controller reaches it through
the other (`10.213.<k>.1`). `cut` drops every packet on the host's veth end in both directions
(iptables DROP inside the namespace: no RST, no ICMP; what a dead switch does), while the host's
own traffic (client to engine on its address) goes on over its loopback. `mend` removes the rules.

sshd runs inside the namespace (`sshd_wrapper`); the rest is `devlab.testbed`, so the inventory,
keys and stop are a testbed's. Root only (namespaces, veth, iptables). Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PREFIX = "10.213"


class NetnsError(Exception):
    """The namespace could not be made (not root, no `ip`/`iptables`): the message says which."""


@dataclass(frozen=True)
class NetnsHost:
    """A network namespace `name`, its veth pair, and the host's address inside it."""

    name: str
    outside: str  # the veth end in the controller's namespace
    inside: str  # the veth end in the host's namespace
    index: int

    @property
    def address(self) -> str:
        return f"{PREFIX}.{self.index}.2"

    @property
    def gateway(self) -> str:
        return f"{PREFIX}.{self.index}.1"

    def run(self, *argv: str) -> None:
        """A command inside the namespace."""
        _ip("netns", "exec", self.name, *argv)

    def cut(self) -> None:
        """Drop every packet on the host's veth, both ways, from now on (no reset, no ICMP)."""
        for rule in self._rules():
            self.run("iptables", "-I", *rule)

    def mend(self) -> None:
        for rule in self._rules():
            self.run("iptables", "-D", *rule)

    def _rules(self) -> list[tuple[str, ...]]:
        return [("INPUT", "-i", self.inside, "-j", "DROP"), ("OUTPUT", "-o", self.inside, "-j", "DROP")]

    def sshd_wrapper(self, directory: Path) -> Path:
        """An executable that runs sshd inside the namespace: `testbed.start(..., sshd=it)`."""
        path = Path(directory) / f"sshd-in-{self.name}"
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        path.write_text(f'#!/bin/sh\nexec ip netns exec {self.name} {sshd} "$@"\n')
        path.chmod(0o755)
        return path

    def delete(self) -> None:
        """Remove the namespace (its veth pair goes with it); processes still in it are killed."""
        pids = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True).stdout
        for pid in pids.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True)


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise NetnsError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


def create(index: int) -> NetnsHost:
    """Namespace `dz-ns<index>` with `10.213.<index>.2/30` inside; index 1..250 (one per test)."""
    if os.geteuid() != 0:
        raise NetnsError("network namespaces need root")
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            raise NetnsError(f"{tool} is missing: apt-get install -y iproute2 iptables")
    host = NetnsHost(f"dz-ns{index}", f"dzo{index}", f"dzi{index}", index)
    host.delete()  # a namespace of the same name left by a killed run
    try:
        _ip("netns", "add", host.name)
        _ip("link", "add", host.outside, "type", "veth", "peer", "name", host.inside)
        _ip("link", "set", host.inside, "netns", host.name)
        _ip("addr", "add", f"{host.gateway}/30", "dev", host.outside)
        _ip("link", "set", host.outside, "up")
        host.run("ip", "addr", "add", f"{host.address}/30", "dev", host.inside)
        host.run("ip", "link", "set", host.inside, "up")
        host.run("ip", "link", "set", "lo", "up")
    except BaseException:
        host.delete()
        raise
    return host
