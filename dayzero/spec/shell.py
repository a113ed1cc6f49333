"""Shell quoting for commands that run on hosts: every value goes through `quote`."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping


def quote(value: str) -> str:
    """shlex.quote, except a leading `~/` stays unquoted so the host's shell expands it."""
    value = str(value)
    if value.startswith("~/"):
        return "~/" + shlex.quote(value[2:])
    return shlex.quote(value)


def join(argv: Iterable[str]) -> str:
    return " ".join(quote(a) for a in argv)


def exports(env: Mapping[str, str]) -> str:
    """`export K=V; ...` lines: sshd drops `environment=` unless AcceptEnv allows it."""
    return "".join(f"export {k}={quote(v)}; " for k, v in env.items())
