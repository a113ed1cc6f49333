"""A one-model matrix served by the load generator's stub server, for report and nightly tests.

The stub (`devlab.stub`, in tools/) is a stand-in engine on purpose: it is the cheap, exact way to
inject a fault a real engine cannot be told to produce on demand -- here a slower host (its
time to first token comes from the host's `vars`, outside the recipe, like a lab machine that
got slower overnight) and a server that echoes its environment into its log. Everything else
on the path is real: pytest, the plugin, leases, the local transport, the client, evidence,
Allure results, the report build.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .conftest import REPO, write_yaml

STUB_PORT = 18740
TOOLS = str(REPO / "tools")  # where `devlab.stub` lives (development tooling, not installed)


def stub_card(
    *, model: str = "stubby", env: dict | None = None, echo_env: bool = False, repetitions: int = 1
) -> dict:
    """A one-host stub cell, measured `repetitions` times (one by default: a stub's speed is no
    measurement; a test of the median over runs asks for more)."""
    serve = [sys.executable, "-m", "devlab.stub", "--port", "{port}", "--ttft", "{ttft}", "--metrics"]
    command = (
        ["sh", "-c", 'env; echo "setup: $DZ_SETUP_SEEN"; exec "$@"', "stub", *serve] if echo_env else serve
    )
    return {
        "model": model,
        "source": "https://example.invalid/recipes/stubby",
        "engine": {
            "name": "stub",
            "health_path": "/health",
            "bind": "127.0.0.1",
            "version_command": "echo stub 1.0",
        },
        "recipe": {"port": STUB_PORT, "command": command, "env": {"PYTHONPATH": TOOLS, **(env or {})}},
        "hardware": {"cpu": {"nodes": 1}},
        "modes": {
            "low_latency": {"concurrency": 1, "args": []},
            "high_throughput": {"concurrency": 4, "args": []},
        },
        "strategies": {"baseline": {}},
        "cells": [
            {"hardware": ["cpu"], "modes": ["low_latency", "high_throughput"], "strategies": ["baseline"]}
        ],
        "protocol": {"repetitions": repetitions},
        "floors": [
            {
                "metric": "output_throughput",
                "concurrency": "mode",
                "min": 1,
                "max_tokens": 8,
                "num_prompts": 8,
            }
        ],
    }


def stub_pair_card(*, model: str = "pair", port: int = STUB_PORT) -> dict:
    """A cell across two hosts whose phases take seconds: a stub worker on one host, started and
    ready first, then the stub endpoint on the other (mode `paired`, each bound to its host)."""
    card = stub_card(model=model)
    card["engine"]["bind"] = "{host}"
    serve = card["recipe"]["command"]
    card["recipe"]["command"] = [*serve[:3], "--host", "{bind}", *serve[3:]]
    card["recipe"]["port"] = port
    roles = {"worker": {}, "server": {"endpoint": True}}
    card["modes"] = {"paired": {"concurrency": 1, "args": [], "roles": roles}}
    card["cells"] = [{"hardware": ["cpu"], "modes": ["paired"], "strategies": ["baseline"]}]
    return card


def stub_matrix(root: Path, card: dict) -> Path:
    mdir = root / "matrix"
    (mdir / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "matrix" / "hardware.yaml", mdir / "hardware.yaml")
    write_yaml(mdir / "models" / f"{card['model']}.yaml", card)
    return mdir


def stub_inventory(root: Path, *, ttft: float = 0.1, setup: str = "", slots: int = 2) -> Path:
    host = {
        "transport": "local",
        "address": "127.0.0.1",
        "hardware": "cpu",
        "accelerators": 1,
        "slots": slots,
        "workdir": str(root / "work"),
        "vars": {"ttft": str(ttft)},
        # a stub's floors say nothing of this machine's load: no contention check, and so no
        # one-second load sample in each cell's preflight
        "max_foreign_load": 0,
    }
    if setup:
        host["engine_setup"] = setup
    return write_yaml(root / "hosts.yaml", {"hosts": {"stubhost": host}})
