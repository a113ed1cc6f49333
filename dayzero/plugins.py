"""Plugins found through entry points: the loader engines and device tools share.

A package registers its plugin under a group (`dayzero.engines`, `dayzero.devices`) by name.
Two packages claiming one name is an error naming both, never a silent pick. A plugin that fails
to load (its import raises, or it is not what the group expects under its name) is named once on
stderr and skipped: every other plugin of the group still loads.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib.metadata import EntryPoint

from dayzero.errors import DayzeroError


def load(
    found: Iterable[EntryPoint],
    group: str,
    expected: type,
    error: type[DayzeroError],
    noun: str,
    consequence: str,
) -> tuple[dict[str, object], dict[str, str]]:
    """(every plugin of `group` among the entry points `found` that loads, by name; why each one
    that did not load failed).
    A plugin must be an instance of `expected` whose `name` is its entry point's; `consequence`
    ends the line that names a failed one."""
    out: dict[str, object] = {}
    failed: dict[str, str] = {}
    origin: dict[str, str] = {}
    for ep in found:
        if ep.name in origin and origin[ep.name] != ep.value:
            raise error(
                f"{noun} {ep.name!r} is registered twice ({group} entry points): "
                f"{origin[ep.name]} and {ep.value}"
            )
        origin[ep.name] = ep.value
        try:
            plugin = ep.load()
        except Exception as exc:  # a vendor's plugin: whatever its import raises, the others run
            failed[ep.name] = (
                f"{group} entry point {ep.name!r} = {ep.value} failed to load: {type(exc).__name__}: {exc}"
            )
            continue
        if not isinstance(plugin, expected) or getattr(plugin, "name", None) != ep.name:
            kind = f"{expected.__module__.rsplit('.', 1)[0]}.{expected.__name__}"
            failed[ep.name] = (
                f"{group} entry point {ep.name!r} = {ep.value}: expected a {kind} named {ep.name!r}, "
                f"got {plugin!r}"
            )
            continue
        out[ep.name] = plugin
    for why in failed.values():
        print(f"dayzero: {why}; {consequence}", file=sys.stderr)
    return out, failed
