"""`dayzero lint`: every rendered command of every supported cell, read by its engine's own parser.

A recipe that its engine refuses (an unknown flag, an ambiguous prefix, a bad choice, a missing
value) fails at launch, after the lab has been leased. Lint renders each role of each cell with
placeholder hosts (multi-node args, PD roles and routers included) and hands the argv lists to
the pinned engine's parser: SGLang's and the SGLang router's own argparse parsers in the engines
virtualenv (tools/build-sglang; one subprocess for all commands, importing SGLang takes
seconds; the router fronts llama-server workers too), llama-server's and rpc-server's own
`--help` tables. A finding names the cell, role and ranks, the flag, what the parser said and
the card line that added the flag. An engine, launcher or version lint
cannot read is a `LintError` (exit 2), never a pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dayzero.errors import DayzeroError
from dayzero.lab import cache as llama_engine
from dayzero.spec import llama_help, parser_cache, yamlfile
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.matrix import Cell, Matrix, ModelCard
from dayzero.spec.recipe import MissingValue, Recipe, hosts_needed, placeholder_hosts, render

ENGINE_SCRIPT = resources.files("dayzero.spec").joinpath("engine_argv.py")  # run in the engines venv
SGLANG_LAUNCHERS = (("sglang", "serve"), ("-m", "sglang.launch_server"))
ROUTER_LAUNCHERS = (("-m", "sglang_router.launch_router"),)
LLAMA_PROGRAMS = {  # llama.cpp programs read by their own --help table
    "llama-server": llama_engine.server_binary,
    "rpc-server": llama_engine.rpc_server_binary,  # ranks 1..N-1 of a multi-node role
}


class LintError(DayzeroError):
    """Lint cannot read a command at all: unknown engine, launcher or version, or no parser."""


@dataclass(frozen=True)
class Finding:
    cell: str
    role: str
    ranks: tuple[int, ...]
    flag: str
    kind: str  # unknown | ambiguous | bad choice | missing value | bad value | ...
    message: str
    file: str
    line: int | None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        ranks = ",".join(map(str, self.ranks))
        return f"{where}: {self.cell} {self.role}[{ranks}]: {self.flag}: {self.kind} ({self.message})"


@dataclass(frozen=True)
class NeedsData:
    """A supported cell that cannot render: a value its recipe needs is still null."""

    cell: str
    message: str


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    needs_data: tuple[NeedsData, ...]
    commands: int


def engines_python() -> Path:
    """The engines virtualenv's interpreter (tools/build-sglang), outside dayzero's own."""
    env = os.environ.get("DAYZERO_ENGINES_PYTHON")
    return Path(env) if env else llama_engine.engines_venv() / "bin" / "python"


def _pin(card: ModelCard, field: str) -> tuple[str, str] | None:
    value = getattr(card.engine, field)
    if not value:
        return None
    name, sep, version = value.partition("==")
    if not sep:
        raise LintError(f"{card.path}: engine.{field} {value!r} pins no version (write name==version)")
    return name.strip(), version.strip()


def parser_of(card: ModelCard, argv: Sequence[str]) -> tuple[str, int]:
    """Which parser reads this command, and where its arguments start."""
    engine = card.engine.name
    if engine == "llama.cpp" and argv and Path(argv[0]).name in LLAMA_PROGRAMS:
        return Path(argv[0]).name, 1
    for launchers, kind in ((ROUTER_LAUNCHERS, "sglang_router"), (SGLANG_LAUNCHERS, "sglang")):
        if engine != "sglang" and kind == "sglang":  # the SGLang router fronts any engine's workers
            break
        for head in launchers:
            for start in range(len(argv) - len(head) + 1):
                if tuple(argv[start : start + len(head)]) == head:
                    return kind, start + len(head)
    raise LintError(f"{card.path}: no parser known for engine {engine!r} command {' '.join(argv[:4])!r}")


def _sources(card: ModelCard, cell: Cell, role: str) -> list[tuple[list, Sequence]]:
    """The card's argv lists that build a role's command, as (path in the card, list)."""
    data = card.raw
    mode = data["modes"][cell.mode]
    out: list[tuple[list, Sequence]] = [(["recipe", "command"], data["recipe"]["command"])]
    if "roles" in mode:
        spec = mode["roles"][role]
        for key in ("command", "args"):
            out.append((["modes", cell.mode, "roles", role, key], spec.get(key) or ()))
    out.append((["hardware", cell.hardware, "args"], data["hardware"][cell.hardware].get("args") or ()))
    out.append((["modes", cell.mode, "args"], mode.get("args") or ()))
    layers = [("strategies", cell.strategy)] + [("options", o) for o in cell.options]
    for group, name in layers:
        out.append(([group, name, "args"], data[group][name].get("args") or ()))
    out.append((["engine", "multinode_args"], card.engine.multinode_args))
    if card.engine.worker:
        out.append((["engine", "worker", "command"], card.engine.worker.argv))
    return out


def line_of_flag(card: ModelCard, cell: Cell, role: str, flag: str) -> int | None:
    """The card line that added `flag` to this role's command (the first list that holds it)."""
    for path, values in _sources(card, cell, role):
        for i, value in enumerate(values):
            if str(value) == flag or str(value).startswith(flag + "="):
                return yamlfile.line_of(card.path, [*path, i])
    return None


def _check_versions(card: ModelCard, seen: dict[str, str], kinds: set[str]) -> None:
    wanted = []
    if "sglang" in kinds:
        wanted.append(("package", "sglang"))
    if "sglang_router" in kinds:
        wanted.append(("router_package", "sglang-router"))
    for field, default_name in wanted:
        pin = _pin(card, field)
        if pin is None:
            raise LintError(
                f"{card.path}: engine.{field} is not set: lint reads commands at a pinned version"
            )
        name, version = pin
        if name != default_name:
            raise LintError(f"{card.path}: engine.{field}: no parser for {name!r} (known: {default_name})")
        if seen.get(name) != version:
            raise LintError(
                f"{card.path}: engine.{field} pins {name}=={version}; the engines venv "
                f"({engines_python()}) has {seen.get(name) or 'none'}: run tools/build-sglang"
            )


def _run_engine(commands: list[dict]) -> dict:
    """The engines' parsers' answers to `commands`: those read before (`parser_cache`, same venv
    and script) come back from the cache; the rest, if any, from one subprocess."""
    python = engines_python()
    if not python.exists():
        raise LintError(f"no engines virtualenv at {python.parent.parent}: run tools/build-sglang")
    path = parser_cache.cache_dir() / f"{parser_cache.key(python, ENGINE_SCRIPT.read_bytes())}.json"
    known = parser_cache.load(path)
    results = dict(known.get("results", {}))
    missing = [c for c in commands if parser_cache.command_key(c) not in results]
    if missing or "versions" not in known:
        reply = _parse_in_venv(python, missing or commands)
        results.update(zip(map(parser_cache.command_key, missing or commands), reply["results"], strict=True))
        known = {"versions": reply["versions"], "results": results}
        parser_cache.store(path, known)
    answers = [results[parser_cache.command_key(c)] for c in commands]
    return {"versions": known["versions"], "results": answers}


def _parse_in_venv(python: Path, commands: list[dict]) -> dict:
    with resources.as_file(ENGINE_SCRIPT) as script:
        done = subprocess.run(
            [str(python), str(script)],
            input=json.dumps({"commands": commands}),
            capture_output=True,
            text=True,
            timeout=300,
        )
    if done.returncode != 0:
        raise LintError(f"the engines' parser failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def _llama_version(card: ModelCard) -> str:
    pin = _pin(card, "package")
    if pin is None or pin[0] != "llama-cpp-python":
        raise LintError(f"{card.path}: engine.package must pin llama-cpp-python==<version> for llama.cpp")
    return pin[1]


def lint_recipes(matrix: Matrix, recipes: Iterable[tuple[Cell, Recipe]]) -> list[Finding]:
    """Parse every launch of these rendered recipes; findings grouped over a role's ranks."""
    jobs: list[tuple[Cell, ModelCard, str, int, str, list[str]]] = []
    for cell, recipe in recipes:
        card = matrix.card(cell)
        for launch in recipe.launches:
            kind, start = parser_of(card, launch.argv)
            jobs.append((cell, card, launch.role, launch.rank, kind, list(launch.argv[start:])))
    answers: dict[tuple[str, tuple[str, ...]], list[dict]] = {}
    python_jobs = sorted({(kind, tuple(argv)) for *_, kind, argv in jobs if kind not in LLAMA_PROGRAMS})
    if python_jobs:
        reply = _run_engine([{"parser": kind, "argv": list(argv)} for kind, argv in python_jobs])
        answers.update(zip(python_jobs, reply["results"], strict=True))
        for card in {id(c): c for _, c, *_ in jobs}.values():
            _check_versions(card, reply["versions"], {k for _, c, _, _, k, _ in jobs if c is card})
    for _, card, _, _, kind, argv in jobs:
        if kind in LLAMA_PROGRAMS:
            try:
                table = llama_help.table(LLAMA_PROGRAMS[kind](_llama_version(card)))
            except DayzeroError as exc:
                raise LintError(str(exc)) from None
            answers[(kind, tuple(argv))] = llama_help.check(table, argv, kind)
    grouped: dict[tuple, list[int]] = {}
    for cell, card, role, rank, kind, argv in jobs:
        for f in answers[(kind, tuple(argv))]:
            key = (cell, card, role, f["flag"], f["kind"], f["message"])
            grouped.setdefault(key, []).append(rank)
    return [
        Finding(
            cell.id,
            role,
            tuple(ranks),
            flag,
            kind,
            message,
            str(card.path),
            line_of_flag(card, cell, role, flag),
        )
        for (cell, card, role, flag, kind, message), ranks in grouped.items()
    ]


HostsFor = Callable[[Cell, int], Sequence[Host] | None]


def inventory_hosts(inventory: Inventory) -> HostsFor:
    """An inventory's first n hosts of the cell's hardware, or None when it has fewer."""

    def hosts(cell: Cell, n: int) -> Sequence[Host] | None:
        found = inventory.for_hardware(cell.hardware)
        return found[:n] if len(found) >= n else None

    return hosts


def lint_matrix(
    matrix: Matrix, cells: Iterable[Cell] | None = None, hosts_for: HostsFor | None = None
) -> Report:
    """Render every supported cell and parse every command. Hosts come from `hosts_for` (an
    inventory's) where it has them, else placeholders with the catalogue's accelerator counts."""
    rendered, needs = [], []
    for cell in matrix.cells if cells is None else cells:
        if not cell.supported:
            continue
        n = hosts_needed(matrix.card(cell), cell)
        hosts = (hosts_for and hosts_for(cell, n)) or placeholder_hosts(matrix, cell, n)
        try:
            rendered.append((cell, render(matrix, cell, hosts)))
        except MissingValue as exc:
            needs.append(NeedsData(cell.id, str(exc)))
    findings = lint_recipes(matrix, rendered)
    commands = sum(len(r.launches) for _, r in rendered)
    return Report(tuple(findings), tuple(needs), commands)


def refusals(
    matrix: Matrix, cells: Iterable[Cell], hosts_for: HostsFor | None = None
) -> dict[str, list[str]]:
    """Cell id -> why its commands would be refused (findings, or a null value); clean cells absent."""
    report = lint_matrix(matrix, cells, hosts_for)
    out: dict[str, list[str]] = {}
    for f in report.findings:
        out.setdefault(f.cell, []).append(str(f))
    for n in report.needs_data:
        out.setdefault(n.cell, []).append(f"needs data: {n.message}")
    return out


def main(matrix: Matrix, cells: Iterable[Cell] | None = None, out=None) -> int:
    """Print the report; 0 clean, 1 findings (LintError propagates: exit 2)."""
    out = out or sys.stdout
    report = lint_matrix(matrix, cells)
    for f in report.findings:
        print(f, file=out)
    for n in report.needs_data:
        print(f"needs data: {n.cell}: {n.message}", file=out)
    print(
        f"{report.commands} command(s) parsed, {len(report.findings)} finding(s), "
        f"{len(report.needs_data)} cell(s) needing data",
        file=out,
    )
    return 1 if report.findings else 0
