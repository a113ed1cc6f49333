"""One call per host, all at once: a lab's dead hosts cost one connect timeout, not one each.

Daemon threads, waited for in short joins: Ctrl-C lands in the waiting thread at once, and a
dial still under way is abandoned (its socket goes with the process), never waited out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def each(items: Sequence[T], call: Callable[[T], R], name: str = "dayzero-fanout") -> list[R | Exception]:
    """`call(item)` for every item in threads of its own (one item too: this thread only waits,
    where Ctrl-C always lands at once); each result, or the exception it raised, in the order of
    `items`."""
    results: list[R | Exception] = [RuntimeError("not run")] * len(items)

    def run(i: int) -> None:
        results[i] = _one(call, items[i])

    threads = [
        threading.Thread(target=run, args=(i,), name=f"{name}-{i}", daemon=True) for i in range(len(items))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.1)
    return results


def _one(call: Callable[[T], R], item: T) -> R | Exception:
    try:
        return call(item)
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, per item
        return exc
