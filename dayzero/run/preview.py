"""What a cell would run, as text for a person: `pytest --dry-run` and `dayzero recipe`.

One function shows a rendered recipe (`launch_text`), with every secret masked: a recipe's
secret env is resolved at render time, so the rendered shell holds the value itself. A dry run
shows each role as its host runs it, readable: where (the SSH path, jump hosts included), the
host's engine_setup (its secret-named assignments masked), the exports, the command one flag a
line. A cell that a Slurm cluster of the inventory serves shows its job's `sbatch` line and each
role's `srun` line, its step's script and the step's dead man's switch each apart, not quoted
into one another, on placeholder nodes: a dry run asks no controller.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence

from dayzero.lab import slurm
from dayzero.lab.pool import no_host_reason
from dayzero.lab.transport.base import watch_loop
from dayzero.redact import inside, redact
from dayzero.run import records
from dayzero.spec import mamba
from dayzero.spec.card import claims_for, published_word
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import Launch, MissingValue, Recipe, hosts_needed, placeholder_hosts, render
from dayzero.spec.shell import quote

WIDTH = 100  # a command longer than this is shown one flag a line
STEP, WATCHDOG = '"$STEP"', '"$WATCHDOG"'  # what a Slurm role's srun line and step show in place


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


def wrapped(*parts: Sequence[str], width: int = WIDTH, keep: frozenset[str] = frozenset()) -> list[str]:
    """A command, given as parts (a program and its flags: `docker run ...`, then `sglang serve
    ...`), as shell lines: one line if it fits `width`, else one flag (with its value) a line,
    each part's leading words on a line of their own; each line but the last ended by ` \\`.
    The same command either way. `keep`: words shown as they are (a `"$STEP"`). Pure."""
    shown = [[w if w in keep else quote(w) for w in part] for part in parts]
    if len(" ".join(w for part in shown for w in part)) <= width:
        return [" ".join(w for part in shown for w in part)]
    groups: list[list[str]] = []
    for raw, part in zip(parts, shown, strict=True):
        lead = next((i for i, w in enumerate(raw) if w.startswith("-")), len(raw))
        groups.append(part[:lead] or part[:1])
        for i in range(max(lead, 1), len(raw)):
            flag, prev = raw[i].startswith("-"), raw[i - 1]
            is_value = not flag and prev.startswith("-") and "=" not in prev and len(groups[-1]) == 1
            if is_value or (not flag and not groups[-1][0].startswith("-")):
                groups[-1].append(part[i])
            else:
                groups.append([part[i]])
    lines = [" ".join(g) for g in groups]
    return [lines[0] + " \\", *("    " + x + " \\" for x in lines[1:-1]), "    " + lines[-1]]


def statements(text: str) -> list[str]:
    """Shell text split at each `; ` outside quotes and `$(...)`: the same script a statement a
    line (a newline ends a statement as `;` does). Pure."""
    out, depth, quoted, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quoted:
            quoted = "" if ch == quoted else quoted
        elif ch in "'\"":
            quoted = ch
        elif text.startswith("$(", i):
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif text.startswith("; ", i) and not depth and not text.startswith(";;", i - 1):
            out.append(text[start:i])
            start = i + 2
    return [*out, text[start:]]


def ssh_path(host: Host, inventory: Inventory) -> str:
    """How the controller reaches a host: `user@address:port`, then each jump host the same way."""
    if host.transport == "local":
        return "this machine (transport local)"
    from dayzero.lab.transport.ssh.config import resolve_target

    target, hops = resolve_target(host, inventory), []
    while target is not None:
        hops.append(f"{target.user}@{target.hostname}:{target.port}")
        target = target.jump
    return " via ".join(hops)


def _shown(inventory: Inventory, lines: list[str], indent: str) -> str:
    """Lines for the terminal, indented, secrets masked: the inventory's setup lines are shown,
    their secret-named assignments masked (`redact.inside`), not hidden whole."""
    return "\n".join(indent + x for x in redact("\n".join(lines), inside(inventory.secrets)).split("\n"))


def _script(setup: str, cwd: str, lc: Launch, run: str = "") -> list[str]:
    """A role's script as its host's shell runs it: cd, setup, one export a line, the command
    (after `run`, e.g. `exec`) one flag a line."""
    exports = [f"export {k}={quote(v)}" for k, v in lc.env]
    ran = [run] if run else []
    command = wrapped([*ran, *lc.container], lc.argv) if lc.container else wrapped([*ran, *lc.argv])
    return [f"cd {quote(cwd)}", *setup.splitlines(), *exports, *command]


def ssh_text(inventory: Inventory, cell: Cell, recipe: Recipe, indent: str) -> str:
    """Each role of an SSH (or local) cell: how the host is reached (jump hosts included), the
    port it serves, then its script with the host's engine_setup."""
    lines = []
    for lc in recipe.launches:
        host = inventory.host(lc.host)
        cwd = f"{host.workdir.rstrip('/')}/{records.cell_folder('<run>', cell.id)}"  # Deployment.run_dir
        lines.append(
            f"# {lc.role}[{lc.rank}] on {lc.host}: {ssh_path(host, inventory)}; serves port {lc.port}"
        )
        lines.append(f"#   in its own process group (setsid), its log {lc.role}-{lc.rank}.log beside it:")
        lines += _script(host.engine_setup, cwd, lc)
    return _shown(inventory, lines, indent)


def slurm_text(inventory: Inventory, cell: Cell, recipe: Recipe, indent: str, timeout: float) -> str:
    """A Slurm cell's job (`sbatch`) and each role as the srun step it runs as: the srun line, the
    step's script (`$STEP`) and its switch on the node watching the job slot's heartbeat
    (`$WATCHDOG`), each apart and wrapped, not quoted into one another; secrets masked."""
    cluster = inventory.slurm
    kind = cluster.for_hardware(cell.hardware)
    name = f"dayzero:<run>:{cell.id}"  # slurm.job_name of the run
    lines = [f"# slurm job, submitted on the login host {ssh_path(cluster.login, inventory)}:"]
    lines += wrapped(slurm.submit_argv(cluster, kind, len(recipe.hosts), name))
    cwd = f"{cluster.workdir.rstrip('/')}/{records.cell_folder('<run>', cell.id)}"  # the deployment's run_dir
    for lc in recipe.launches:
        heartbeat = (f"{slurm.jobs_dir(cluster)}/leases/slot-<i>/owner.json", timeout)
        script = slurm.role_script(lc.command, dict(lc.env), cluster.engine_setup, cwd, heartbeat)
        loop = watch_loop("$1", *heartbeat)
        watch = f"setsid bash -c {quote(loop)} dayzero-watchdog $$ > /dev/null 2>&1 < /dev/null &"
        if f"\n{watch}\n" not in script:  # what follows shows the step as role_script writes it
            raise AssertionError(f"role_script's switch line is not {watch!r}")
        srun = shlex.split(slurm.srun_line("<job>", lc.host, script, lc.step))
        lines.append(
            f"# {lc.role}[{lc.rank}] on {lc.host} ({lc.address}): a step of the job; serves port {lc.port}"
        )
        task = srun.index("bash")  # srun's flags, then the task: `bash -c "$STEP"`
        run_step = f"{' '.join(srun[task:-1])} {STEP}"  # shown whole
        lines += wrapped(srun[:task], [run_step], keep=frozenset({run_step}))
        lines.append("#   STEP, the step's script on the node:")
        step = _script(cluster.engine_setup, cwd, lc, "exec")
        step[0:1] = [f"mkdir -p {quote(cwd)} &&", f"    cd {quote(cwd)} || exit 1"]
        lines += [*step[:2], watch.replace(quote(loop), WATCHDOG), *step[2:]]
        lines.append("#   WATCHDOG, the dead man's switch over the step's process group ($1):")
        lines += statements(loop)
    return _shown(inventory, lines, indent)


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
    return f"{head}  recipe {recipe.digest}\n{ssh_text(inventory, cell, recipe, '   ')}"


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
