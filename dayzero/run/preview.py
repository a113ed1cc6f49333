"""What a cell would run, as text for a person: `pytest --dry-run` and `dayzero recipe`.

One function shows a rendered recipe (`launch_text`), with every secret masked: a recipe's
secret env is resolved at render time, so the rendered shell holds the value itself. A cell that a
Slurm cluster of the inventory serves shows its job's `sbatch` line and each role's whole `srun`
line instead (pyxis's container flags included), on placeholder nodes: a dry run asks no controller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from dayzero.lab import slurm
from dayzero.lab.pool import no_host_reason
from dayzero.redact import redact
from dayzero.run import records
from dayzero.spec import mamba
from dayzero.spec.card import claims_for, published_word
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import Launch, MissingValue, Recipe, hosts_needed, placeholder_hosts, render
from dayzero.spec.shell import join


def launch_text(
    recipe: Recipe,
    secrets: Iterable[str] = (),
    indent: str = "",
    note: Callable[[Launch], str | None] = lambda launch: None,
) -> str:
    """Each launch as a comment naming where it runs, then the shell an operator would paste
    (then a comment `note` may add)."""
    secrets = tuple(secrets)
    lines = []
    for lc in recipe.launches:
        lines.append(f"{indent}# {lc.role}[{lc.rank}] on {lc.host} ({lc.address})")
        lines.append(f"{indent}{redact(lc.shell, secrets)}")
        if extra := note(lc):
            lines.append(f"{indent}# {extra}")
    return "\n".join(lines)


def hosts_for(matrix: Matrix, cell: Cell, inventory: Inventory | None) -> tuple[int, Sequence[Host]]:
    """(hosts the cell needs, the inventory's first that many of its hardware, or placeholders)."""
    needed = hosts_needed(matrix.card(cell), cell)
    if inventory is None:
        return needed, placeholder_hosts(matrix, cell, needed)
    cluster = inventory.slurm
    if cluster and (kind := cluster.for_hardware(cell.hardware)):
        return needed, [slurm.node_host(cluster, kind, f"node{i}", f"<node{i}>") for i in range(needed)]
    return needed, inventory.for_hardware(cell.hardware)[:needed]


def slurm_text(inventory: Inventory, cell: Cell, recipe: Recipe, indent: str, timeout: float) -> str:
    """A Slurm cell's job (`sbatch`) and each role as the srun step it runs as (its switch on the
    node watching the job slot's heartbeat included), secrets masked."""
    cluster = inventory.slurm
    kind = cluster.for_hardware(cell.hardware)
    name = f"dayzero:<run>:{cell.id}"  # slurm.job_name of the run
    lines = [f"{indent}# slurm job: {join(slurm.submit_argv(cluster, kind, len(recipe.hosts), name))}"]
    cwd = f"{cluster.workdir.rstrip('/')}/{records.cell_folder('<run>', cell.id)}"  # the deployment's run_dir
    for lc in recipe.launches:
        heartbeat = (f"{slurm.jobs_dir(cluster)}/leases/slot-<i>/owner.json", timeout)
        script = slurm.role_script(lc.command, dict(lc.env), cluster.engine_setup, cwd, heartbeat)
        lines.append(f"{indent}# {lc.role}[{lc.rank}] on {lc.host} ({lc.address})")
        lines.append(indent + slurm.srun_line("<job>", lc.host, script, lc.step))
    return redact("\n".join(lines), inventory.secrets)


def no_run(matrix: Matrix, inventory: Inventory, cell: Cell) -> str:
    """Why a supported cell would find no host(s) in the inventory (the same for every such cell:
    a run's summary counts cells by it), or "" when it would run."""
    needed, hosts = hosts_for(matrix, cell, inventory)
    if len(hosts) >= needed:
        return ""
    return no_host_reason(cell.hardware, inventory.path, needed, len(hosts))


def dry_run_text(matrix: Matrix, inventory: Inventory, cell: Cell, heartbeat_timeout: float = 120.0) -> str:
    """A cell under `--dry-run`: the host(s) it would use and the exact commands, or why none."""
    head = f"== {cell.id}  [{published_word(cell)}]"
    if not cell.supported:
        return f"{head}\n   unsupported: {cell.reason}"
    if why := no_run(matrix, inventory, cell):
        return f"{head}\n   no run: {why}"
    recipe = render(matrix, cell, hosts_for(matrix, cell, inventory)[1])
    if inventory.slurm and inventory.slurm.for_hardware(cell.hardware):
        return (
            f"{head}  recipe {recipe.digest}\n{slurm_text(inventory, cell, recipe, '   ', heartbeat_timeout)}"
        )
    return f"{head}  recipe {recipe.digest}\n{launch_text(recipe, inventory.secrets, indent='   ')}"


def claim_lines(matrix: Matrix, cell: Cell) -> list[str]:
    """The published claims this cell's recipe answers to, as comments beside its command."""
    lines = []
    for claim in claims_for(matrix.card(cell), cell):
        lines.append(f"# claim {claim.id}: {claim.text} (tolerance {claim.tolerance:.0%}; {claim.source})")
        if claim.needs:
            lines.append(f"#   needs data: {'; '.join(claim.needs)}")
    return lines


def recipe_text(
    matrix: Matrix,
    cell: Cell,
    inventory: Inventory | None,
    geometry: Mapping[str, float | None] | None = None,
) -> str:
    """A cell for `dayzero recipe`: a comment header, then its launches (a pasteable script), with
    the mamba ratio a card asks for (computed from `geometry` where given, else the card's)."""
    head = f"# {cell.id}  [{published_word(cell)}]"
    if not cell.supported:
        return f"{head}\n# unsupported: {cell.reason}\n"
    head += "".join(f"\n{line}" for line in claim_lines(matrix, cell))
    needed, hosts = hosts_for(matrix, cell, inventory)
    if len(hosts) < needed:
        return f"{head}\n# needs {needed} {cell.hardware} host(s); {inventory.path} has {len(hosts)}\n"
    try:
        recipe = render(matrix, cell, hosts, geometry=geometry)
    except MissingValue as exc:
        return f"{head}\n# needs data: {exc}\n"
    ratio = matrix.card(cell).mamba_ratio if geometry is None else geometry

    def mamba_note(lc: Launch) -> str | None:
        if ratio and "--model-path" in lc.argv:
            return f"mamba ratio: {mamba.describe(lc.argv, ratio)}"
        return None

    return f"{head}\n{launch_text(recipe, inventory.secrets if inventory else (), note=mamba_note)}\n"
