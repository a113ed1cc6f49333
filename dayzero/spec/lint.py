"""`dayzero lint`: every rendered command of every supported cell, read by its engine's own parser.

A recipe that its engine refuses (an unknown flag, an ambiguous prefix, a bad choice, a missing
value) fails at launch, after the lab has been leased. Lint renders each role of each cell with
placeholder hosts (multi-node args, PD roles and routers included) and hands the argv lists to
the pinned engine's own parsers, which its module names (`Engine.parsers`): SGLang's and the
SGLang router's argparse parsers in the engines virtualenv (tools/build-sglang), vLLM's in its
own (tools/build-vllm) -- one subprocess per virtualenv for all commands, importing an engine
takes seconds; the SGLang router fronts any engine's workers -- and llama-server's and
rpc-server's own `--help` tables. A finding names the cell, role and ranks, the flag, what the
parser said and the card line that added the flag. An engine, launcher or version lint cannot
read is a `LintError` (exit 2), never a pass.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

from dayzero import engines
from dayzero.engines import ArgvParser
from dayzero.errors import DayzeroError
from dayzero.spec import parser_cache, yamlfile
from dayzero.spec.inventory import Host, Inventory
from dayzero.spec.matrix import Cell, Matrix, ModelCard
from dayzero.spec.recipe import MissingValue, Recipe, hosts_needed, placeholder_hosts, render


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
    unreadable: tuple[str, ...] = ()  # a card's commands lint could not read (a LintError each)


def _pin(card: ModelCard, field: str) -> tuple[str, str] | None:
    value = getattr(card.engine, field)
    if not value:
        return None
    name, sep, version = value.partition("==")
    if not sep:
        raise LintError(f"{card.path}: engine.{field} {value!r} pins no version (write name==version)")
    return name.strip(), version.strip()


def parser_of(card: ModelCard, argv: Sequence[str]) -> tuple[ArgvParser, int]:
    """Which parser reads this command (one of the cell's engine's own, or a router that fronts
    any engine's workers), and where its arguments start."""
    try:
        engine = engines.get(card.engine.name)
    except DayzeroError as exc:
        raise LintError(f"{card.path}: engine.name: {exc}") from None
    fronts = [
        p for e in engines.registered().values() if e is not engine for p in e.parsers if p.fronts_any_engine
    ]
    for parser in (*engine.parsers, *fronts):
        start = parser.start(argv)
        if start is not None:
            return parser, start
    raise LintError(f"{card.path}: no parser known for engine {engine.name!r} command {' '.join(argv[:4])!r}")


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


@functools.cache
def _entry_keys(path: str, mtime_ns: int, engine: str) -> frozenset[str]:
    """The keys the card's `engines:` entry for `engine` replaces (read once per version of the file)."""
    entries = yaml.safe_load(Path(path).read_text()).get("engines") or {}
    return frozenset(entries.get(engine) or ())


def line_of_flag(card: ModelCard, cell: Cell, role: str, flag: str) -> int | None:
    """The card line that added `flag` to this role's command (the first list that holds it):
    in the card's `engines:` entry where that entry replaced the key, else at the top level."""
    entry = _entry_keys(str(card.path), card.path.stat().st_mtime_ns, card.engine.name)
    for path, values in _sources(card, cell, role):
        for i, value in enumerate(values):
            if str(value) == flag or str(value).startswith(flag + "="):
                where = ["engines", card.engine.name, *path] if path[0] in entry else path
                return yamlfile.line_of(card.path, [*where, i])
    return None


def _pinned(card: ModelCard, parser: ArgvParser) -> str:
    """The version of the parser's package the card pins (its engine field `parser.pin[0]`)."""
    field, package = parser.pin
    pin = _pin(card, field)
    if pin is None:
        raise LintError(f"{card.path}: engine.{field} is not set: lint reads commands at a pinned version")
    name, version = pin
    if name != package and name not in parser.builds:
        known = ", ".join((package, *parser.builds))
        raise LintError(f"{card.path}: engine.{field}: no parser for {name!r} (known: {known})")
    return version


def _check_versions(card: ModelCard, seen: dict[str, str], parsers: Iterable[ArgvParser]) -> None:
    for parser in parsers:
        version, package = _pinned(card, parser), parser.pin[1]
        if seen.get(package) != version:
            raise LintError(
                f"{card.path}: engine.{parser.pin[0]} pins {package}=={version}; the environment "
                f"({parser.python()}) has {seen.get(package) or 'none'}: run {parser.setup_hint}"
            )


def _run_engine(python: Path, commands: list[dict], script: Traversable, packages: Sequence[str]) -> dict:
    """The engine's parsers' answers to `commands`, from the interpreter `python` running `script`:
    those read before (`parser_cache`, same venv and script) come back from the cache; the rest,
    if any, from one subprocess."""
    if not python.exists():
        raise LintError(f"no engine virtualenv at {python.parent.parent}: run tools/setup")
    path = parser_cache.cache_dir() / f"{parser_cache.key(python, script.read_bytes())}.json"
    known = parser_cache.load(path)
    results = dict(known.get("results", {}))
    missing = [c for c in commands if parser_cache.command_key(c) not in results]
    if missing or any(p not in known.get("versions", {}) for p in packages):
        reply = _parse_in_venv(python, script, missing or commands, packages)
        results.update(zip(map(parser_cache.command_key, missing or commands), reply["results"], strict=True))
        known = {"versions": {**known.get("versions", {}), **reply["versions"]}, "results": results}
        parser_cache.store(path, known)
    answers = [results[parser_cache.command_key(c)] for c in commands]
    return {"versions": known["versions"], "results": answers}


def _parse_in_venv(python: Path, script: Traversable, commands: list[dict], packages: Sequence[str]) -> dict:
    with resources.as_file(script) as path:
        done = subprocess.run(
            # -P: the script's folder (dayzero/engines, which has an `sglang` and a `vllm`) not on
            # sys.path, or it would shadow the engines themselves
            [str(python), "-P", str(path)],
            input=json.dumps({"commands": commands, "packages": sorted(packages)}),
            capture_output=True,
            text=True,
            timeout=300,
        )
    if done.returncode != 0:
        raise LintError(f"the engines' parser failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def lint_recipes(
    matrix: Matrix, recipes: Iterable[tuple[Cell, Recipe]], unreadable: list[str] | None = None
) -> list[Finding]:
    """Parse every launch of these rendered recipes; findings grouped over a role's ranks. A card
    lint cannot read raises a LintError, or, where `unreadable` is given, is added to it and the
    other cards are read all the same (one card's pin never hides another's findings)."""
    failed: dict[str, str] = {}  # card path -> why it could not be read (the first reason)

    def fail(card: ModelCard, exc: DayzeroError) -> None:
        if unreadable is None:
            raise LintError(str(exc)) from None
        failed.setdefault(str(card.path) + card.engine.name, str(exc))

    # (cell, card, role, rank, parser, program, argv): `program` is what the parser reads the argv
    # as: a program's own name (llama-server, rpc-server) or the parser's kind
    jobs: list[tuple[Cell, ModelCard, str, int, ArgvParser, str, tuple[str, ...]]] = []
    for cell, recipe in recipes:
        card = matrix.card(cell)
        try:
            for launch in recipe.launches:
                parser, start = parser_of(card, launch.argv)
                program = Path(launch.argv[0]).name if parser.read is not None else parser.kind
                argv = tuple(launch.argv[start:])
                jobs.append((cell, card, launch.role, launch.rank, parser, program, argv))
        except LintError as exc:
            fail(card, exc)
    answers: dict[tuple[str, tuple[str, ...]], list[dict]] = {}
    in_venv: dict[tuple[Path, Traversable], list[ArgvParser]] = {}
    for parser in {j[4].kind: j[4] for j in jobs if j[4].read is None}.values():
        in_venv.setdefault((parser.python(), parser.script), []).append(parser)
    for (python, script), parsers in in_venv.items():
        kinds = {p.kind for p in parsers}
        wanted = sorted({(j[5], j[6]) for j in jobs if j[4].kind in kinds})
        packages = sorted({p.pin[1] for p in parsers})
        try:
            reply = _run_engine(python, [{"parser": k, "argv": list(a)} for k, a in wanted], script, packages)
        except LintError as exc:
            for j in jobs:
                if j[4].kind in kinds:
                    fail(j[1], exc)
            continue
        answers.update(zip(wanted, reply["results"], strict=True))
        for card in {id(j[1]): j[1] for j in jobs}.values():
            used = {j[4].kind: j[4] for j in jobs if j[1] is card and j[4].kind in kinds}
            try:
                _check_versions(card, reply["versions"], used.values())
            except LintError as exc:
                fail(card, exc)
    for _, card, _, _, parser, program, argv in jobs:
        if parser.read is not None and (program, argv) not in answers:
            try:
                answers[(program, argv)] = parser.read(_pinned(card, parser), argv, program)
            except DayzeroError as exc:
                fail(card, exc)
    if unreadable is not None:
        unreadable.extend(failed.values())
    grouped: dict[tuple, list[int]] = {}
    for cell, card, role, rank, _, program, argv in jobs:
        for f in answers.get((program, argv), ()):
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
    unreadable: list[str] = []
    findings = lint_recipes(matrix, rendered, unreadable)
    commands = sum(len(r.launches) for _, r in rendered)
    return Report(tuple(findings), tuple(needs), commands, tuple(unreadable))


def refusals(
    matrix: Matrix, cells: Iterable[Cell], hosts_for: HostsFor | None = None
) -> dict[str, list[str]]:
    """Cell id -> why its commands would be refused (findings, or a null value); clean cells absent."""
    report = lint_matrix(matrix, cells, hosts_for)
    if report.unreadable:
        raise LintError("; ".join(report.unreadable))
    out: dict[str, list[str]] = {}
    for f in report.findings:
        out.setdefault(f.cell, []).append(str(f))
    for n in report.needs_data:
        out.setdefault(n.cell, []).append(f"needs data: {n.message}")
    return out


def main(matrix: Matrix, cells: Iterable[Cell] | None = None, out=None, err=None) -> int:
    """Print the report, every card's findings; 0 clean, 1 findings, 2 a card lint could not read
    (after the others' findings)."""
    out = out or sys.stdout
    report = lint_matrix(matrix, cells)
    for f in report.findings:
        print(f, file=out)
    for why in report.unreadable:
        print(f"dayzero lint: {why}", file=err or sys.stderr)
    for n in report.needs_data:
        print(f"needs data: {n.cell}: {n.message}", file=out)
    print(
        f"{report.commands} command(s) parsed, {len(report.findings)} finding(s), "
        f"{len(report.needs_data)} cell(s) needing data",
        file=out,
    )
    return 2 if report.unreadable else 1 if report.findings else 0
