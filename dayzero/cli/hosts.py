"""`dayzero hosts check`: connect to every host of an inventory, all at once (a jump host once
for the hosts behind it); print reachability and facts, and the vars its cells need that the
inventory does not set (`dayzero.run.host_vars`)."""

from __future__ import annotations

import sys

from dayzero.cli.common import HOSTS
from dayzero.errors import DayzeroError
from dayzero.lab.preflight import HostFacts
from dayzero.lab.transport.base import CONNECT_TIMEOUT_S
from dayzero.run.host_vars import SLURM_NODES, missing_vars
from dayzero.spec.inventory import Host, load_inventory
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser("hosts", help="lab hosts of an inventory", description=__doc__)
    hsub = p.add_subparsers(dest="hosts_command", required=True)
    h = hsub.add_parser("check", help="connect to each host; print reachability and facts")
    h.add_argument("--hosts", default=HOSTS, help=f"inventory (default: {HOSTS})")
    h.add_argument(
        "--connect-timeout",
        type=float,
        default=CONNECT_TIMEOUT_S,
        help=f"seconds a host has to answer (default: {CONNECT_TIMEOUT_S:g})",
    )
    h.add_argument(
        "--weights",
        action="store_true",
        help="also check the model files of every card serving the host's kind (a checkpoint's shards: "
        "hashed once, then read) and print the revision and shard checksums a card does not pin yet",
    )
    h.set_defaults(func=run_check)


def _value(value, unit: str = "") -> str:
    """A fact as printed: `unknown` where it could not be read (never Python's None)."""
    return "unknown" if value is None else f"{value}{unit}"


def facts_line(host: Host, facts: HostFacts) -> str:
    """What a reachable host said about itself, each fact it did not say as `unknown`."""
    return (
        f"{host.hardware}: {_value(facts.accelerators_seen)} seen (inventory {host.accelerators}), "
        f"memory {_value(facts.memory_free_gb)}/{_value(facts.memory_total_gb, ' GB')} free, "
        f"disk {_value(facts.disk_free_gb, ' GB')} free, cpus {_value(facts.cpus)}"
    )


def _problem(text: str) -> str:
    """One problem under its host, a multi-line message kept in the column."""
    return f"{'':<16} problem: " + text.strip().replace("\n", "\n" + " " * 26)


def _cards_of(host: Host, matrix, weights: bool) -> list:
    """The cards whose model files `--weights` checks on the host."""
    return [c for c in matrix.cards.values() if host.hardware in c.hardware] if weights else []


def _probe(host: Host, matrix, inventory, args) -> HostFacts:
    """One host's facts, or why it gave none: run on every host at once."""
    from dayzero.lab.preflight import gather
    from dayzero.lab.transport import open_transport

    engines = {
        card.engine.name: card.engine.version_command
        for card in matrix.engine_cards.values()
        if host.hardware in card.hardware and card.engine.version_command
    }
    files = [f for c in _cards_of(host, matrix, args.weights) for f in c.model_files]
    try:
        with open_transport(host, inventory, args.connect_timeout) as transport:
            return gather(
                transport, matrix.hardware[host.hardware], engines, inventory.secrets, model_files=files
            )
    except DayzeroError as exc:
        return HostFacts(host.name, False, problems=(str(exc),))


def run_check(args) -> int:
    """Exit 1 if any host is unreachable or unfit, or lacks a var a cell of its hardware needs."""
    from dayzero.lab import weights
    from dayzero.lab.fanout import each

    matrix = load_matrix(args.matrix)
    inventory = load_inventory(args.hosts, matrix.hardware)
    missing = missing_vars(matrix, inventory, matrix.cells)
    unfit = 0
    if inventory.slurm is not None:
        from dayzero.lab.slurm import print_check

        slurm_problems = print_check(inventory)
        for m in missing:
            if SLURM_NODES in m.hosts:
                print(f"slurm problem: {m.line()}")
                slurm_problems += 1

    probed = each(inventory.hosts, lambda h: _probe(h, matrix, inventory, args), "dayzero-hosts-check")
    for host, facts in zip(inventory.hosts, probed, strict=True):
        if isinstance(facts, Exception):
            raise facts
        lacking = [
            f"{m.field} missing: {m.card} uses {{{m.name}}} in {m.where} "
            "(set it under defaults.vars or the host's vars)"
            for m in missing
            if host.name in m.hosts
        ]
        cards = _cards_of(host, matrix, args.weights)
        unfit += not facts.healthy or bool(lacking)
        if not facts.reachable:
            why = "; ".join(p.removeprefix("unreachable: ") for p in facts.problems)
            print(f"{host.name:<16} {'UNREACHABLE':<11}  {why}")
        else:
            state = "ok" if facts.healthy and not lacking else "UNFIT"
            print(f"{host.name:<16} {state:<11}  {facts_line(host, facts)}")
            for engine, version in facts.engine_versions.items():
                print(f"{'':<16} engine {engine}: {version}")
            for problem in facts.problems:
                print(_problem(problem))
            start = 0
            for c in cards:  # trust on first use: what this host read, for the card's maintainers
                seen = facts.model_files[start : start + len(c.model_files)]
                start += len(c.model_files)
                for line in weights.pin_lines(c.model, c.model_files, seen):
                    print(f"{'':<16} {line}")
        for problem in lacking:
            print(_problem(problem))
    if inventory.hosts:
        print(f"\n{len(inventory.hosts) - unfit} of {len(inventory.hosts)} host(s) fit", file=sys.stderr)
    return 1 if unfit or (inventory.slurm is not None and slurm_problems) else 0
