"""The engine's own account of a run, read from its server log: what every engine's log parser returns.

A parser (`Engine.parse_log`) turns a log into a `ServerAccount`: the launch facts the server
printed (slots, threads, model, listen address, devices) and one `Served` per request it
finished, with its own token counts and timings. The cross-check
(`dayzero.submission.engine_account`) holds the client's raw records to this second account; in
a cell of several launches (`engine_launches`) the non-endpoint ranks' logs
(`Engine.parse_rank_log`) and a router's (`Engine.parse_router_log`) are read as well.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Served:
    """One request as the server accounts for it (times in seconds since the server started)."""

    task: int
    slot: int
    start_s: float
    prompt_evaluated: int  # prompt tokens computed for it (cached ones excluded)
    generated: int
    total_s: float  # the server's own prompt + generation time for it
    prompt: int | None = None  # all its prompt tokens, cached included, where the log says (SGLang)
    room: int | None = None  # SGLang prefill/decode: the bootstrap room both halves of a request share


@dataclass(frozen=True)
class ServerAccount:
    engine: str
    slots: int | None = None
    threads: int | None = None
    model: str | None = None
    listen: str | None = None  # host:port
    devices: tuple[str, ...] = ()  # accelerator devices the engine used; () on a cpu build
    served: tuple[Served, ...] = ()  # per request, where the engine logs them
    requests: int | None = None  # requests served, where only a count is logged (else len(served))
    ready: bool = False  # the log says the server came up
    # the launch arguments as the log prints them (name -> canonical value), where it does (vLLM)
    args: tuple[tuple[str, str], ...] | None = None

    @property
    def count(self) -> int:
        return len(self.served) if self.requests is None else self.requests
