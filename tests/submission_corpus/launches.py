"""Forgeries of a cell of several launches: one launch's log dropped, duplicated or swapped.

Each starts from a real bundle's cell (rpc_split: llama-server and its rpc-server; routed: two
llama-server workers and the router) and is re-signed by the vendor, so only the checker's own
reading of each launch's log can catch it. `duplicated` and `swapped` also move the listen
address in the logs they touch to the launch they now claim to be, as a careful forger would.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from dayzero.submission.engine_account import launch_flags, log_name

from .hostile import Members, edit_json

Forgery = Callable[[Members, str, int, int], Members]


def _launches(members: Members, evidence: str) -> tuple[list[dict], dict[str, str]]:
    doc = json.loads(members[evidence])
    logs = {rel.rsplit("/", 1)[-1]: rel for rel in doc["logs"]}
    return doc["recipe"]["launches"], logs


def _address(launch: dict) -> str:
    flags = launch_flags(launch["command"])
    return f"{flags['host']}:{flags['port']}"


def _as(members: Members, log: str, source: dict, target: dict) -> bytes:
    """A launch's log as if another launch had written it (its listen address moved)."""
    return members[log].replace(_address(source).encode(), _address(target).encode())


def dropped(members: Members, evidence: str, victim: int, _other: int) -> Members:
    """The victim launch's log left out of the bundle and of the evidence's list."""
    launches, logs = _launches(members, evidence)
    log = logs[log_name(launches[victim])]
    rest = {k: v for k, v in members.items() if k != log}
    return edit_json(rest, evidence, lambda doc: doc["logs"].remove(log))


def duplicated(members: Members, evidence: str, victim: int, other: int) -> Members:
    """The victim launch's log replaced by another launch's, re-addressed to the victim."""
    launches, logs = _launches(members, evidence)
    source, target = launches[other], launches[victim]
    return {**members, logs[log_name(target)]: _as(members, logs[log_name(source)], source, target)}


def swapped(members: Members, evidence: str, victim: int, other: int) -> Members:
    """Two launches' logs exchanged, each re-addressed to the launch it now claims to be."""
    launches, logs = _launches(members, evidence)
    a, b = launches[victim], launches[other]
    la, lb = logs[log_name(a)], logs[log_name(b)]
    return {**members, la: _as(members, lb, b, a), lb: _as(members, la, a, b)}


FORGERIES: dict[str, Forgery] = {"dropped": dropped, "duplicated": duplicated, "swapped": swapped}
