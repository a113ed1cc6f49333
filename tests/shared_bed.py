"""A testbed shared by the tests of a session (the SSH testbed, the Slurm cluster): started on
first use, checked after each test, replaced when a test left it unhealthy, so that a test that
breaks it fails alone and the next one gets a fresh bed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Generic, TypeVar

import pytest

Bed = TypeVar("Bed")


class Shared(Generic[Bed]):
    """The session's bed: `.bed` starts one (in a folder of its own under `root`) if none runs."""

    def __init__(self, root: Path, start: Callable[[Path], Bed], stop: Callable[[Bed], None]) -> None:
        self.root, self._start, self._stop = root, start, stop
        self.starts = 0
        self._bed: Bed | None = None

    @property
    def bed(self) -> Bed:
        if self._bed is None:
            self.starts += 1
            self._bed = self._start(self.root / f"bed-{self.starts}")
        return self._bed

    def stop(self) -> None:
        if self._bed is not None:
            bed, self._bed = self._bed, None
            self._stop(bed)


def lend(
    shared: Shared[Bed],
    unhealthy: Callable[[Bed], list[str]],
    *,
    lock: Callable[[], AbstractContextManager],
    grace: float,
    what: str,
    broken: Callable[[Bed], list[str]] = lambda bed: [],
    spent: bool = False,
) -> Iterator[Bed]:
    """A function fixture's body: the bed for one test under `lock`, then `grace` s for it to be
    healthy again (none while `broken` says it cannot be); otherwise the bed is stopped (the next
    test starts a fresh one) and this test fails naming what it left. A test that breaks the bed
    on purpose (kills its controller) takes it `spent`: the bed is stopped after it, unchecked."""
    with lock():
        bed = shared.bed
        yield bed
        if spent:
            shared.stop()
            return
        deadline = time.monotonic() + grace
        while (left := unhealthy(bed)) and not broken(bed) and time.monotonic() < deadline:
            time.sleep(1)
        if left:
            shared.stop()
            pytest.fail(f"the test left the shared {what} unhealthy (replaced): {left}", pytrace=False)
