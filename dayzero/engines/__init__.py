"""Serving engines as plugins: one module per engine, found through the `dayzero.engines` entry points.

dayzero's own (llama.cpp, SGLang with its router, vLLM) are registered in its pyproject.toml
exactly as a vendor's package registers theirs:

    [project.entry-points."dayzero.engines"]
    my-engine = "my_package.engine:ENGINE"    # an instance of dayzero.engines.Engine

The entry point's name is the `engine.name` model cards use. Two packages claiming one name is
an error naming both, never a silent pick. A plugin that fails to load (its import raises, or
it is not an engine of its name) is named once on stderr and skipped: the cells of every other
engine run; asking for its own engine is an error that says why it did not load.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points

from dayzero import plugins
from dayzero.engines.base import DISAGGREGATED, RANK, ROUTER, SERVER, ArgvParser, Engine
from dayzero.errors import DayzeroError

GROUP = "dayzero.engines"


class EngineError(DayzeroError):
    """An engine name nobody registered, or an entry point that is not an engine."""


__all__ = [
    "DISAGGREGATED",
    "RANK",
    "ROUTER",
    "SERVER",
    "ArgvParser",
    "Engine",
    "EngineError",
    "find",
    "get",
    "load_failure",
    "registered",
    "router_of",
]


@cache
def _loaded() -> tuple[dict[str, Engine], dict[str, str]]:
    """(every engine installed that loads, by name; why each one that did not load failed)."""
    out, failed = plugins.load(
        entry_points(group=GROUP),
        GROUP,
        Engine,
        EngineError,
        "engine",
        "its cells cannot run, the others are not affected",
    )
    if not out:
        raise EngineError(f"no engine is registered ({GROUP} entry points): reinstall dayzero (tools/setup)")
    return out, failed  # type: ignore[return-value]


def registered() -> dict[str, Engine]:
    """Every engine installed that loads, by name (loaded once per process)."""
    return _loaded()[0]


registered.cache_clear = _loaded.cache_clear  # tests reload the registry


def load_failure(name: str) -> str:
    """Why the plugin registered under `name` did not load ('' where it did, or none is)."""
    return _loaded()[1].get(name, "")


def router_of(argv) -> Engine | None:
    """The engine whose router this launch is (a router fronts any engine's workers), or None."""
    for engine in registered().values():
        if any(p.fronts_any_engine and p.start(argv) is not None for p in engine.parsers):
            return engine
    return None


def find(name: str | None) -> Engine | None:
    """The engine of that card name, or None (a bundle may name one this install lacks)."""
    return registered().get(name) if isinstance(name, str) else None


def find_or_plain(name: str) -> Engine:
    """The engine of that card name, or, where none is registered, a plain one of that name: its
    cells launch, answer and are measured by the client, while its counters and log are not read
    (not measured, so never Verified). Lint and the submission checker refuse such an engine."""
    found = find(name)
    if found is not None:
        return found
    if why := load_failure(name):  # installed but broken: its cells fail, saying why
        raise EngineError(why)
    plain = Engine()
    plain.name = plain.display = name
    return plain


def get(name: str) -> Engine:
    """The engine of that card name; an unknown one is an error naming those installed."""
    engine = find(name)
    if engine is None and (why := load_failure(name)):
        raise EngineError(why)
    if engine is None:
        known = ", ".join(sorted(registered()))
        raise EngineError(
            f"unknown engine {name!r} (installed: {known}); an engine is added by a package's "
            f"{GROUP} entry point"
        )
    return engine
