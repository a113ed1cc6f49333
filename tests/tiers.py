"""The two tiers of dayzero's own tests: the fast tier (`-m "not e2e"`: pure code, the stub
engine, in-process fakes; minutes) and the e2e tier (`-m e2e`: real llama-server, SGLang,
sshd, Slurm, podman, Chromium). `pytest tests` runs the fast tier first, so that a failure of
plain code shows within minutes, not after an hour of engines.

Under pytest-xdist (`pytest tests -n 2`, the README's test command) the fast tier is spread
over every worker, and the e2e tier then runs on one worker alone, in pytest's order, once
every fast test has ended: its engines measure on a quiet machine, one at a time, as they do
without xdist (`FastThenSerial`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

E2E_LIST = "dayzero_e2e_list"  # workerinput key: where a worker writes its e2e tests' node ids


def is_e2e(item: pytest.Item) -> bool:
    return item.get_closest_marker("e2e") is not None


class FastFirst:
    @pytest.hookimpl(trylast=True)  # after pytest grouped the items by their fixtures' params
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        items.sort(key=is_e2e)  # stable: each tier keeps pytest's order
        path = getattr(config, "workerinput", {}).get(E2E_LIST)
        if path:  # an xdist worker tells the controller which of its tests are e2e
            ids = [item.nodeid for item in items if is_e2e(item)]
            Path(path).write_text(json.dumps(ids), encoding="utf-8")


def fast_then_serial(path: Path):
    """The xdist scheduler of `pytest tests -n N` (built lazily: xdist is imported only when the
    run uses it)."""
    from xdist.scheduler import LoadScheduling

    class FastThenSerial(LoadScheduling):
        """Fast tests over every worker; when the last has ended, every e2e test, in order, to
        one worker, and the others shut down."""

        e2e: list[int] | None = None  # the e2e tier's indices, held back until the fast tier ends

        def schedule(self) -> None:
            if self.collection is not None or not self.collection_is_completed:
                super().schedule()
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = next(iter(self.node2collection.values()))
            if self.maxschedchunk is None:
                self.maxschedchunk = len(self.collection)
            e2e_ids = set(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else set()
            tiers = [[], []]  # fast, e2e: each in pytest's order
            for i, nodeid in enumerate(self.collection):
                tiers[nodeid in e2e_ids].append(i)
            self.pending[:], self.e2e = tiers
            for node in self.nodes:
                self.check_schedule(node)

        def check_schedule(self, node, duration: float = 0) -> None:
            if self.pending or not self.e2e:
                super().check_schedule(node, duration)
                return
            # The fast tier is all sent. A worker runs its last test only once it is sent the next
            # or told to stop: every worker but one is told to stop, and when they have left, the
            # one left runs its last fast test and then the whole e2e tier.
            first, *others = self.nodes
            for other in others:
                if not other.shutting_down:
                    other.shutdown()
            if not others:
                self.pending[:], self.e2e = self.e2e, []
                self._send_tests(first, len(self.pending))
                first.shutdown()

        def remove_node(self, node):
            crashed = super().remove_node(node)
            if self.e2e and len(self.nodes) == 1:
                self.check_schedule(self.nodes[0])
            return crashed

        @property
        def tests_finished(self) -> bool:
            return not self.e2e and super().tests_finished

        @property
        def has_pending(self) -> bool:
            return bool(self.e2e) or super().has_pending

    return FastThenSerial


class Distributed:
    """The controller's side of `pytest tests -n N`."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="dayzero-tiers-")) / "e2e.json"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput[E2E_LIST] = str(self.path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        if config.getvalue("dist") != "load":
            return None  # an explicit --dist is the caller's choice
        return fast_then_serial(self.path)(config, log)

    def pytest_unconfigure(self) -> None:
        self.path.unlink(missing_ok=True)
        os.rmdir(self.path.parent)


def configure(config: pytest.Config) -> None:
    config.pluginmanager.register(FastFirst(), "dayzero-fast-first")
    if hasattr(config, "workerinput"):
        # xdist's worker variables would reach every pytest run a test starts (the main job, the
        # interrupt and lab runs): each would take itself for an xdist worker (no live progress on
        # its terminal, its run id from the worker's). A test's run is a run of its own.
        for name in [n for n in os.environ if n.startswith("PYTEST_XDIST_")]:
            del os.environ[name]
    distributed = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if distributed:
        config.pluginmanager.register(Distributed(), "dayzero-fast-then-serial")
