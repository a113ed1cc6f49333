"""The two tiers of dayzero's own tests: the fast tier (`-m "not e2e"`: pure code, the stub
engine, in-process fakes; minutes) and the e2e tier (`-m e2e`: real llama-server, SGLang,
sshd, Slurm, podman, Chromium). `pytest tests` runs the fast tier first, so that a failure of
plain code shows within minutes, not after an hour of engines.
"""

from __future__ import annotations

import pytest


def is_e2e(item: pytest.Item) -> bool:
    return item.get_closest_marker("e2e") is not None


class FastFirst:
    @pytest.hookimpl(trylast=True)  # after pytest grouped the items by their fixtures' params
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items.sort(key=is_e2e)  # stable: each tier keeps pytest's order


def configure(config: pytest.Config) -> None:
    config.pluginmanager.register(FastFirst(), "dayzero-fast-first")
