"""A measurement from its raw records: the repetitions' summaries, saturation and anti-gaming findings.

`aggregate` is pure: the live run calls it on the answers it just received, the submission
checker on the answers a bundle holds, so both get the very same measurement from the same records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dayzero.checks.compliance import compliance_findings
from dayzero.checks.intervals import Interval, figure_intervals
from dayzero.checks.metrics import (
    client_stats,
    completed,
    input_tokens,
    latencies,
    output_tokens,
    run_summary,
    saturation,
)
from dayzero.checks.server_latency import ServerGap, phase_gap
from dayzero.spec.card import Compliance, SaturationLimits


@dataclass(frozen=True)
class Measurement:
    """One workload at one concurrency, repeated: the summaries floors are evaluated on."""

    workload: str
    concurrency: int
    summaries: tuple[dict, ...]
    invalid: tuple[str, ...] = ()  # saturation findings: the numbers are the client's, not the server's
    compliance: tuple[str, ...] = ()  # anti-gaming findings: the numbers look faster than the server is
    records: tuple[str, ...] = ()  # raw record files
    client: dict = field(default_factory=dict)
    server_gap: ServerGap = ServerGap(None, reason="not computed")  # client TTFT vs the engine's
    # each summary key's interval from the raw records (`checks.intervals`); empty where the
    # measurement was built from summaries alone
    intervals: Mapping[str, Interval] = field(default_factory=dict)

    def values(self, key: str) -> list[float]:
        return [s[key] for s in self.summaries if s.get(key) is not None]

    @property
    def failed_requests(self) -> int:
        return sum(s.get("failed", 0) for s in self.summaries)


def aggregate(
    workload: str,
    concurrency: int,
    answers: Sequence[tuple[str, Mapping]],
    *,
    accelerators: int,
    exact_output: bool,
    limits: SaturationLimits,
    rules: Compliance,
    client: Mapping,
    metrics: Sequence[Mapping | None] = (),
    queues: bool = False,
) -> Measurement:
    """(records file, client answer) per repetition, in order -> the measurement.

    Anti-gaming findings over all repetitions' records go with the measurement, so every floor
    evaluated on it fails when the server games it; `client` describes how the load was sent
    (processes, prompts per run, tag) and is kept with each run's client statistics. `metrics`
    are the repetitions' /metrics snapshots (aligned with `answers`), `queues` whether requests
    could wait for a server slot: both for the client-versus-server TTFT gap.
    """
    invalid, records = [], []
    for rep, (_, answer) in enumerate(answers):
        invalid += [f"run {rep + 1}: {f}" for f in saturation(answer, limits)]
        records += answer["records"]
    summaries = tuple(run_summary(answer["records"], accelerators, concurrency) for _, answer in answers)
    return Measurement(
        workload,
        concurrency,
        summaries,
        invalid=tuple(invalid),
        compliance=tuple(compliance_findings(records, exact_output, rules)),
        records=tuple(rel for rel, _ in answers),
        client={"runs": [client_stats(answer) for _, answer in answers], **client},
        server_gap=phase_gap([answer for _, answer in answers], metrics, queues),
        intervals=figure_intervals(
            [answer["records"] for _, answer in answers], summaries, latencies, COUNTS, completed
        ),
    )


# What one completed request counts towards each rate (`metrics.THROUGHPUTS`).
COUNTS = {
    "request_throughput": lambda r: 1.0,
    "output_throughput": output_tokens,
    "total_token_throughput": lambda r: input_tokens(r) + output_tokens(r),
}
