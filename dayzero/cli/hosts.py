"""`dayzero hosts check`: connect to every host of an inventory; print reachability and facts."""

from __future__ import annotations

import sys

from dayzero.cli.common import HOSTS
from dayzero.errors import DayzeroError
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser("hosts", help="lab hosts of an inventory", description=__doc__)
    hsub = p.add_subparsers(dest="hosts_command", required=True)
    h = hsub.add_parser("check", help="connect to each host; print reachability and facts")
    h.add_argument("--hosts", default=HOSTS, help=f"inventory (default: {HOSTS})")
    h.set_defaults(func=run_check)


def run_check(args) -> int:
    """Exit 1 if any host is unreachable or unfit."""
    from dayzero.lab.preflight import gather
    from dayzero.lab.transport import open_transport

    matrix = load_matrix(args.matrix)
    inventory = load_inventory(args.hosts, set(matrix.hardware))
    unfit = 0
    if inventory.slurm is not None:
        from dayzero.lab.slurm import print_check

        slurm_problems = print_check(inventory)
    for host in inventory.hosts:
        engines = {
            card.engine.name: card.engine.version_command
            for card in matrix.engine_cards.values()
            if host.hardware in card.hardware and card.engine.version_command
        }
        try:
            with open_transport(host, inventory) as transport:
                facts = gather(transport, matrix.hardware[host.hardware], engines, inventory.secrets)
        except DayzeroError as exc:
            print(f"{host.name:<16} UNREACHABLE  {exc}")
            unfit += 1
            continue
        state = "ok" if facts.healthy else "UNFIT"
        unfit += not facts.healthy
        print(
            f"{host.name:<16} {state:<11}  {host.hardware}: {facts.accelerators_seen} seen "
            f"(inventory {host.accelerators}), "
            f"memory {facts.memory_free_gb}/{facts.memory_total_gb} GB free, "
            f"disk {facts.disk_free_gb} GB free, cpus {facts.cpus}"
        )
        for engine, version in facts.engine_versions.items():
            print(f"{'':<16} engine {engine}: {version}")
        for problem in facts.problems:
            print(f"{'':<16} problem: {problem}")
    if inventory.hosts:
        print(f"\n{len(inventory.hosts) - unfit} of {len(inventory.hosts)} host(s) fit", file=sys.stderr)
    return 1 if unfit or (inventory.slurm is not None and slurm_problems) else 0
