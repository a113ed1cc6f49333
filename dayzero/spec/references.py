"""A card's references checked when the matrix loads: workloads and recipe placeholders.

A floor, claim, sweep, SLO or acceptance entry naming a workload that is neither the card's
own (`workloads:`), `default`, nor a file of `suites/workloads/` would otherwise fail minutes into
a real engine's run; a placeholder one letter from a rendered value or a card var (`{weigths}`)
would be asked of every host's inventory. Both are the card's errors: file, path, line, and the
closest known name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from dayzero.errors import ConfigError
from dayzero.spec import yamlfile
from dayzero.spec.suggest import did_you_mean

DEFAULT_WORKLOAD = "default"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")
# The placeholders `render` fills itself; `role.<name>.*` and `secret.*` are its too, and a mode's
# `parallel` sizes (`dp`, `ep`, `pp`) where it states them.
RENDERED = frozenset({"host", "port", "rank", "nnodes", "dist_init_addr", "peers", "tp", "bind", "weights"})
LAUNCH_KEYS = ("weights", "engine", "recipe", "hardware", "modes", "strategies", "options")


def _where(path: Path, parts: list, prefix: list) -> tuple[str, str]:
    """(path as written, " (line N)") for a value of the card, an `engines:` entry's under it."""
    full = [*prefix, *parts]
    line = yamlfile.line_of(path, full)
    return yamlfile.format_path(full), f" (line {line})" if line else ""


def _workload_refs(data: Mapping) -> Iterable[tuple[list, str]]:
    """(path, name) of every workload the card's data names."""
    for section in ("floors", "claims", "sweeps"):
        for i, entry in enumerate(data.get(section) or ()):
            if "workload" in entry:
                yield [section, i, "workload"], entry["workload"]
    for i, entry in enumerate(data.get("speculative") or ()):
        for j, name in enumerate(entry.get("workloads") or ()):
            yield ["speculative", i, "workloads", j], name
    for name in data.get("slos") or {}:
        yield ["slos", name], name


def suite_workloads(suites: Path | None) -> set[str] | None:
    """The workload files a suites directory holds (None: no such directory, nothing to check)."""
    folder = suites / "workloads" if suites else None
    if not folder or not folder.is_dir():
        return None
    return {p.stem for p in folder.glob("*.yaml")}


def workload_errors(
    path: Path, data: Mapping, files: set[str] | None, overlay: Mapping | None = None, prefix: list = ()
) -> list[ConfigError]:
    """Every workload reference of a card's data (or an `engines:` entry's, `overlay`: the keys
    it replaces, written under `prefix`) that resolves to nothing."""
    if files is None:
        return []
    own = set(data.get("workloads") or {})
    known = own | files | {DEFAULT_WORKLOAD}
    errors = []
    for parts, name in _workload_refs(data):
        if name not in known:
            where, line = _where(path, parts, list(prefix) if parts[0] in (overlay or {}) else [])
            errors.append(
                ConfigError(
                    path,
                    where,
                    f"unknown workload {name!r}{line}{did_you_mean(name, known)}: expected one of the card's "
                    f"workloads ({', '.join(sorted(own)) or 'none'}), a suites/workloads file "
                    f"({', '.join(sorted(files))}) or {DEFAULT_WORKLOAD!r}",
                )
            )
    for name, entry in (data.get("workloads") or {}).items():
        base = (entry or {}).get("from")
        if base and base not in files:
            where, line = _where(path, ["workloads", name, "from"], [])
            errors.append(
                ConfigError(
                    path,
                    where,
                    f"no suites/workloads file {base!r}{line}{did_you_mean(base, files)}: "
                    f"expected one of {', '.join(sorted(files))}",
                )
            )
    return errors


def _strings(value, parts: list) -> Iterable[tuple[list, str]]:
    if isinstance(value, str):
        yield parts, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, [*parts, k])
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, [*parts, i])


def _known(data: Mapping) -> set[str]:
    """Every name a placeholder of the card may use without a host's vars."""
    known = set(RENDERED) | set(data.get("vars") or {})
    for entry in (data.get("hardware") or {}).values():
        known |= set((entry or {}).get("vars") or {})
    for mode in (data.get("modes") or {}).values():
        known |= set(mode.get("parallel") or {})
    return known


def placeholder_errors(
    path: Path, data: Mapping, overlay: Mapping | None = None, prefix: list = ()
) -> list[ConfigError]:
    """Placeholders of the launch sections that only a host could fill and are one typo from a
    rendered value or a card var (`{weigths}`): the card's error, not every inventory's. A name
    close to none (`{model_root}`) stays the inventory's to give."""
    known = _known(data)
    errors = []
    for key in LAUNCH_KEYS:
        for parts, text in _strings(data.get(key), [key]):
            for m in PLACEHOLDER.finditer(text):
                name = m.group(1)
                hint = did_you_mean(name, known)
                if name in known or name.startswith(("role.", "secret.")) or not hint:
                    continue
                where, line = _where(path, parts, list(prefix) if key in (overlay or {}) else [])
                errors.append(
                    ConfigError(
                        path,
                        where,
                        f"unknown placeholder {{{name}}}{line}{hint}: neither a value dayzero renders nor a "
                        "var of the card (a var only hosts set needs a name of its own)",
                    )
                )
    return errors
