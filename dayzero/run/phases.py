"""The measurement phases of a cell run: performance floors, accuracy gate, speculative acceptance.

`dayzero.run.cell.measure` calls `run_all` once the deployment is ready. Every phase talks to the server
only through the host client (`Endpoint.client`), keeps the client's raw answer under a phase
name (`Endpoint.keep`), and turns it into checks with the pure functions of `dayzero.checks`.
The protocol (repetitions, prompts per concurrency, warm-up, client processes) comes from the
model card, so a CPU card can budget a short run and a B300 card the full one.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dayzero.checks import CheckResult
from dayzero.checks.accuracy import check_accuracy, load_eval, request_for
from dayzero.checks.performance import (
    Measurement,
    check_floor,
    client_stats,
    compliance_findings,
    phase_name,
    saturation,
    summarize,
)
from dayzero.checks.speculative import (
    check_acceptance,
    counters,
    sglang_accept_length,
    source_for,
)
from dayzero.spec.card import Floor, ModelCard, Protocol, floors_for, gates_for, rules_for
from dayzero.spec.matrix import Cell
from dayzero.spec.workloads import Workload, resolve

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


def _group(floors: list[Floor]) -> dict[tuple, list[Floor]]:
    """Floors that share a workload run share one measurement (e.g. throughput and p99 TTFT)."""
    groups: dict[tuple, list[Floor]] = {}
    for f in floors:
        key = (
            f.workload,
            f.concurrency,
            f.max_tokens if f.workload == "default" else 0,
            f.num_prompts,
            f.repetitions,
        )
        groups.setdefault(key, []).append(f)
    return groups


def measure_workload(
    ep: Endpoint,
    workload: Workload,
    concurrency: int,
    protocol: Protocol,
    accelerators: int,
    num_prompts: int | None = None,
    repetitions: int | None = None,
    variant: str = "",
) -> Measurement:
    """Warm up, then N repetitions; more client processes when one saturates and the host has cores.

    Anti-gaming findings (output lengths, token counts, EOS) over all repetitions' records go
    with the measurement, so every floor evaluated on it fails when the server games it.
    """
    n = protocol.num_prompts(concurrency, num_prompts)
    reps = repetitions or protocol.repetitions
    processes = protocol.processes(concurrency)
    summaries, files, invalid, clients, records = [], [], [], [], []
    label = f"{workload.name}-c{concurrency}"
    for rep in range(reps):
        while True:
            spec = {
                "action": "load",
                "url": ep.url,
                "concurrency": concurrency,
                "processes": processes,
                "requests": workload.requests(n, rep, salt=concurrency),
            }
            if rep == 0:
                spec["warmup"] = workload.requests(
                    protocol.warmup_requests(concurrency), warmup=True, salt=concurrency
                )
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
        files.append(ep.keep(phase_name(workload.name + variant, concurrency, rep), answer))
        summary = summarize(answer["records"], accelerators, concurrency)
        summaries.append(summary)
        clients.append(client_stats(answer))
        invalid += [f"run {rep + 1}: {f}" for f in found]
        records += answer["records"]
        ep.say(
            f"{label} run {rep + 1}/{reps}: {summary.get('output_throughput', 0):.1f} tok/s, "
            f"median TTFT {summary.get('median_ttft_ms')} ms, {summary['failed']} failed"
            + (" [INVALID: client saturated]" if found else "")
        )
    return Measurement(
        workload.name,
        concurrency,
        tuple(summaries),
        invalid=tuple(invalid),
        compliance=tuple(compliance_findings(records, workload.exact_output, protocol.compliance)),
        records=tuple(files),
        client={"runs": clients, "processes": processes, "prompts_per_run": n, "tag": workload.tag},
    )


def run_performance(
    card: ModelCard, cell: Cell, ep: Endpoint, accelerators: int, suites: Path
) -> Iterator[CheckResult]:
    protocol = card.protocol
    seen: dict[tuple[str, int], int] = {}
    for (name, concurrency, max_tokens, num_prompts, reps), floors in _group(floors_for(card, cell)).items():
        workload = resolve(card, name, suites / "workloads", max_tokens or 64)
        # two measurements of one workload at one concurrency (other length or repetitions)
        # keep their raw records apart
        k = seen[(name, concurrency)] = seen.get((name, concurrency), -1) + 1
        with ep.step(f"performance: {workload.name} at concurrency {concurrency}"):
            measurement = measure_workload(
                ep, workload, concurrency, protocol, accelerators, num_prompts, reps, f"-m{k}" if k else ""
            )
            for floor in floors:
                result = check_floor(floor, measurement)
                ep.attach(f"measured {floor.name}", {"verdict": result.verdict, "message": result.message})
                yield result


def run_accuracy(card: ModelCard, cell: Cell, ep: Endpoint, suites: Path) -> Iterator[CheckResult]:
    for gate in gates_for(card, cell):
        evalset = load_eval(suites / "evals", gate.eval)
        items = evalset.items[: gate.limit] if gate.limit else evalset.items
        with ep.step(f"accuracy: {gate.eval} ({len(items)} questions)"):
            spec = {
                "action": "load",
                "url": ep.url,
                "concurrency": gate.concurrency,
                "requests": [request_for(evalset, item, gate) for item in items],
            }
            answer = ep.client(spec, LOAD_TIMEOUT)
            ep.alive()
            ep.keep(f"accuracy-{gate.eval}", answer)
            result = check_accuracy(gate, items, answer["records"])
            ep.say(f"{gate.name}: {result.message}")
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
    for rule in rules_for(card, cell):
        for name in rule.workloads:
            workload = resolve(card, name, suites / "workloads")
            with ep.step(f"speculative acceptance: {name}"):
                before = _read_counters(ep, kind, path)
                spec = {
                    "action": "load",
                    "url": ep.url,
                    "concurrency": rule.concurrency,
                    "requests": workload.requests(rule.num_prompts),
                }
                answer = ep.client(spec, LOAD_TIMEOUT)
                ep.alive()
                after = _read_counters(ep, kind, path)
                answer["counters"] = {"source": kind, "before": _plain(before), "after": _plain(after)}
                ep.keep(f"spec-{name}", answer)
                result = check_acceptance(
                    name,
                    workload.tag,
                    kind,
                    before,
                    after,
                    answer["records"],
                    rule.min_accept_length.get(name),
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
