"""The measurement phases of a cell run: performance floors, accuracy gate, speculative acceptance.

`dayzero.run.cell.measure` calls `run_all` once the deployment is ready. Every phase sends what
the request plan says (`dayzero.run.plan`) through the host client (`Endpoint.client`), keeps the
client's raw answer under its record name (`Endpoint.keep`), and turns it into checks with the
pure functions of `dayzero.checks`. The protocol (repetitions, prompts per concurrency, warm-up,
client processes) comes from the model card, so a CPU card can budget a short run and a B300
card the full one.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dayzero.checks import CheckResult
from dayzero.checks.accuracy import check_accuracy
from dayzero.checks.measurement import Measurement
from dayzero.checks.metrics import run_summary, saturation
from dayzero.checks.performance import check_floor
from dayzero.checks.speculative import check_acceptance, counters, sglang_accept_length, source_for
from dayzero.run import plan
from dayzero.run.plan import MeasurementPlan
from dayzero.spec.card import ModelCard
from dayzero.spec.matrix import Cell

LOAD_TIMEOUT = 3600.0


@dataclass
class Endpoint:
    """How phases reach the server: the host client, where raw records go, liveness, reporting."""

    url: str
    client: Callable[[dict, float], dict]
    keep: Callable[[str, dict], str]
    alive: Callable[[], None] = lambda: None
    say: Callable[[str], None] = print
    attach: Callable[[str, Any], None] = lambda name, data: None
    step: Callable[[str], Any] = field(default=lambda title: contextlib.nullcontext())


def collect(ep: Endpoint, m: MeasurementPlan, accelerators: int) -> tuple[list[tuple[str, dict]], int]:
    """Warm up, then N repetitions; more client processes when one saturates and the host has cores.

    Returns each repetition's (records file, raw answer) and the client processes the last one used.
    """
    protocol, concurrency = m.protocol, m.concurrency
    processes = protocol.processes(concurrency)
    answers: list[tuple[str, dict]] = []
    label = f"{m.workload.name}-c{concurrency}"
    for rep in range(m.runs):
        while True:
            spec = {
                "action": "load",
                "url": ep.url,
                "concurrency": concurrency,
                "processes": processes,
                "requests": m.requests(rep),
            }
            if rep == 0:
                spec["warmup"] = m.warmup()
            answer = ep.client(spec, LOAD_TIMEOUT)
            ep.alive()
            found = saturation(answer, protocol.saturation)
            cores = (answer.get("client") or {}).get("cpu_count") or 1
            # Half the host's cores at most: the server under test runs there too.
            more = min(processes * 2, max(1, cores // 2), concurrency)
            if found and protocol.client_processes is None and more > processes:
                ep.say(
                    f"{label}: client saturated with {processes} process(es) ({found[0]}); "
                    f"retrying with {more}"
                )
                processes = more
                continue
            break
        answers.append((ep.keep(m.phase(rep), answer), answer))
        summary = run_summary(answer["records"], accelerators, concurrency)
        ep.say(
            f"{label} run {rep + 1}/{m.runs}: {summary.get('output_throughput', 0):.1f} tok/s, "
            f"median TTFT {summary.get('median_ttft_ms')} ms, {summary['failed']} failed"
            + (" [INVALID: client saturated]" if found else "")
        )
    return answers, processes


def measure_workload(ep: Endpoint, m: MeasurementPlan, accelerators: int) -> Measurement:
    """Measure (talk to the server), then aggregate the raw answers (pure, as the checker does)."""
    answers, processes = collect(ep, m, accelerators)
    return m.measurement(answers, accelerators, processes)


def run_performance(
    card: ModelCard, cell: Cell, ep: Endpoint, accelerators: int, suites: Path
) -> Iterator[CheckResult]:
    for m in plan.measurements(card, cell, suites):
        with ep.step(f"performance: {m.workload.name} at concurrency {m.concurrency}"):
            measurement = measure_workload(ep, m, accelerators)
            for floor in m.floors:
                result = check_floor(floor, measurement)
                ep.attach(f"measured {floor.name}", {"verdict": result.verdict, "message": result.message})
                yield result


def _load(ep: Endpoint, concurrency: int, requests: list[dict]) -> dict:
    """One client run of `requests`, `concurrency` in flight; the server must still be alive after."""
    answer = ep.client(
        {"action": "load", "url": ep.url, "concurrency": concurrency, "requests": requests}, LOAD_TIMEOUT
    )
    ep.alive()
    return answer


def run_accuracy(card: ModelCard, cell: Cell, ep: Endpoint, suites: Path) -> Iterator[CheckResult]:
    for a in plan.accuracy(card, cell, suites):
        with ep.step(f"accuracy: {a.gate.eval} ({len(a.items)} questions)"):
            answer = _load(ep, a.concurrency, a.requests())
            ep.keep(a.phase, answer)
            result = check_accuracy(a.gate, a.items, answer["records"])
            ep.say(f"{a.gate.name}: {result.message}")
            yield result


def _read_counters(ep: Endpoint, kind: str, path: str):
    answer = ep.client({"action": "get", "url": ep.url + path, "timeout": 30}, 60)
    if answer.get("status") != 200:
        return None
    if kind == "sglang":
        try:
            return sglang_accept_length(json.loads(answer["body"]))
        except (ValueError, KeyError, IndexError, TypeError):
            return None
    return counters(kind, answer["body"])


def run_speculative(card: ModelCard, cell: Cell, ep: Endpoint, suites: Path) -> Iterator[CheckResult]:
    kind, path = source_for(card.engine.name)
    for sp in plan.speculative(card, cell, suites):
        name = sp.workload.name
        with ep.step(f"speculative acceptance: {name}"):
            before = _read_counters(ep, kind, path)
            answer = _load(ep, sp.concurrency, sp.requests())
            after = _read_counters(ep, kind, path)
            answer["counters"] = {"source": kind, "before": _plain(before), "after": _plain(after)}
            ep.keep(sp.phase, answer)
            result = check_acceptance(
                name,
                sp.workload.tag,
                kind,
                before,
                after,
                answer["records"],
                sp.rule.min_accept_length.get(name),
            )
            ep.say(f"{result.name}: {result.message}")
            yield result


def _plain(value):
    return value.__dict__ if hasattr(value, "__dict__") else value


def run_all(
    card: ModelCard, cell: Cell, ep: Endpoint, accelerators: int, suites: Path, into: list[CheckResult]
) -> list[CheckResult]:
    """Performance, then accuracy, then speculative acceptance (each only if the card asks).

    Checks are appended to `into` as they are made, so a later phase that raises (server died,
    host lost) leaves every earlier check in the evidence.
    """
    for phase in (
        run_performance(card, cell, ep, accelerators, suites),
        run_accuracy(card, cell, ep, suites),
        run_speculative(card, cell, ep, suites),
    ):
        for check in phase:
            into.append(check)
    return into
