"""What a parser makes of a server log: the server's own account of a run, and of each request.

Its own module so that the parsers and the package that picks one (`parser_for`) both name it.
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

    @property
    def count(self) -> int:
        return len(self.served) if self.requests is None else self.requests
