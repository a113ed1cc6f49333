"""The engine's own account of a run, read from its server log: one parser per engine.

A parser turns a log into a `ServerAccount`: the launch facts the server printed (slots, threads,
model, listen address, devices) and one `Served` per request it finished, with its own token
counts and timings. The cross-check (`dayzero.submission.engine_account`) holds the client's
raw records to this second account; in a cell of several launches (`engine_launches`) the
non-endpoint ranks' logs (`rank_parser_for`) and the router's (`router`) are read as well.
"""

from __future__ import annotations

from collections.abc import Callable

from dayzero.submission.engine_logs import llamacpp, sglang
from dayzero.submission.engine_logs.account import Served, ServerAccount

__all__ = ["Served", "ServerAccount", "parser_for", "rank_parser_for"]


def parser_for(engine: str) -> Callable[[str], ServerAccount] | None:
    return {"llama.cpp": llamacpp.parse, "sglang": sglang.parse}.get(engine)


def rank_parser_for(engine: str) -> Callable[[str], ServerAccount] | None:
    """The parser of a non-endpoint rank's log (ranks 1..N-1 of a multi-node server): its `listen`
    is where the rank says it listens, `ready` that the log is such a rank's at all."""
    return {"llama.cpp": llamacpp.parse_rpc_server, "sglang": sglang.parse_rank}.get(engine)
