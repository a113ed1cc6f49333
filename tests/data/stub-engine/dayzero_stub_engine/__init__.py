"""The stub server's engine: what a vendor's engine package looks like, and the engine of the
fast tier's stub cells (`engine.name: stub`).

The stub (tools/devlab/stub.py) prints llama-server's /metrics series (`llamacpp:` counters,
speculative ones included) and serves `/health`; it writes no request log dayzero reads, so its
bundles are not accounted (the submission checker says so), and lint has no parser for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from dayzero.engines import Engine
from dayzero.engines.llamacpp import ENGINE as LLAMA_CPP
from dayzero.engines.prometheus import SpecCounters, Totals


class Stub(Engine):
    name = "stub"
    display = "stub"
    metrics_prefix = LLAMA_CPP.metrics_prefix

    def serves_metrics(self, argv: Sequence[str]) -> bool:
        return "--metrics" in argv

    def totals(self, text: str) -> Totals | None:
        return LLAMA_CPP.totals(text)

    def spec_counters(self, text: str) -> SpecCounters | None:
        return LLAMA_CPP.spec_counters(text)


ENGINE = Stub()
