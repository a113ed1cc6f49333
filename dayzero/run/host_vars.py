"""The inventory's share of a recipe: a placeholder a selected cell needs (`{model_root}`) that
neither its card nor the hosts that would run it set.

Found before anything renders, so the error names the inventory and the field to add, once per
field, instead of a traceback that blames the card (`pytest --dry-run`) or one broken cell per
host (a run). `dayzero hosts check` asks the same of every cell its hosts could run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dayzero.spec.inventory import Inventory
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import host_vars_needed

SLURM_NODES = "<slurm nodes>"  # the hosts of a Slurm cluster: its nodes share `slurm.vars`


@dataclass(frozen=True)
class MissingVar:
    inventory: Path
    field: str  # vars.model_root, or slurm.vars.model_root
    hardware: str
    hosts: tuple[str, ...]  # the hosts of that hardware that lack it (SLURM_NODES for a cluster)
    card: str  # the first card that needs it there, and where it uses it
    where: str

    @property
    def name(self) -> str:
        return self.field.rsplit(".", 1)[1]

    def line(self) -> str:
        """One line: the inventory, the field, who lacks it, who needs it and where to set it."""
        if self.hosts == (SLURM_NODES,):
            who, fix = f"the Slurm cluster's {self.hardware} nodes", "set it under slurm.vars"
        else:
            who = f"{self.hardware} host(s) {', '.join(self.hosts)}"
            fix = "set it under defaults.vars or each host's vars"
        return (
            f"{self.inventory}: {self.field}: missing for {who}; {self.card} uses {{{self.name}}} "
            f"in {self.where}: {fix}"
        )


def missing_vars(matrix: Matrix, inventory: Inventory, cells: Iterable[Cell]) -> list[MissingVar]:
    """Each var some cell needs and some of its hardware's hosts lack, by field and hardware."""
    lacking: dict[tuple[str, str], dict[str, None]] = {}  # (field, hardware) -> hosts, ordered
    first: dict[tuple[str, str], tuple[str, str]] = {}  # (field, hardware) -> (card, where)
    for cell in cells:
        if not cell.supported:
            continue
        card = matrix.card(cell)
        needed = host_vars_needed(card, cell)
        if not needed:
            continue
        holders = [(h.name, "vars", h.var) for h in inventory.for_hardware(cell.hardware)]
        cluster = inventory.slurm
        if cluster is not None and cluster.for_hardware(cell.hardware):
            holders.append((SLURM_NODES, "slurm.vars", dict(cluster.vars)))
        for host, prefix, given in holders:
            for name, where in needed.items():
                if name not in given:
                    key = (f"{prefix}.{name}", cell.hardware)
                    lacking.setdefault(key, {})[host] = None
                    first.setdefault(key, (Path(card.path).name, where))
    return [
        MissingVar(inventory.path, field, hardware, tuple(hosts), *first[field, hardware])
        for (field, hardware), hosts in sorted(lacking.items())
    ]
