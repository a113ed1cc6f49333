"""Physics: a phase's speed against the roofline of the hardware that claims it (issue 23 item 3).

Agreement is not plausibility: a vendor who rewrites records, server log and `/metrics` together
agrees with every account, at any speed. So each phase's speed from its raw records
(`dayzero.checks.roofline.speed`: the median time per output token, and the output tokens over
the phase's span at the batch it ran) is held to the ceiling of the cell's hardware for the cell's
model (`dayzero.checks.roofline.Ceiling`: the kind's published peaks in `matrix/hardware.yaml`, or
on the cpu kind each host's bandwidth as preflight measured it, times the accelerators serving the
cell, and the card's active weights); beyond it by more than the kind's margin, the phase is
"implausible". Speculative strategies (the card's `roofline.speculative`) raise the memory bound by
the tokens per step the phase's own counters show.

A kind without figures is not checked and the checker says so (`not_checked`), never silently.
"""

from __future__ import annotations

import math

from dayzero import engines
from dayzero.checks.roofline import Ceiling, above, speed
from dayzero.checks.server_metrics import phase_totals
from dayzero.checks.speculative import from_snapshots
from dayzero.run.records import is_records_file, metrics_for
from dayzero.spec.card import ActiveWeights, ModelCard
from dayzero.spec.matrix import Cell, Hardware
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.cellview import Unrecomputable
from dayzero.submission.engine_metrics import client_account, decode_side
from dayzero.submission.findings import Finding, short
from dayzero.submission.recompute import accelerators

REQUIREMENT = "physics.roofline"
SERVER_TIME = "physics.server-time"


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def cell_ceiling(hw: Hardware, weights: ActiveWeights | None, count: int, hosts: list[dict]) -> Ceiling | str:
    """The ceiling for `count` accelerators of `hw` serving `weights`, or why there is none: a
    "not checked: ..." note, or (a measured kind whose hosts lack their measurement) a reason to
    refuse, naming the host."""
    if weights is None:
        return "not checked: the card states no active parameters"
    if hw.peak is None or not (hw.peak.memory_bandwidth_gbs or hw.measured):
        return f"not checked: no peak figures for {hw.name}"
    if hw.measured:
        total = 0.0
        for host in hosts:
            value = (host.get("facts") or {}).get("memory_bandwidth_gbs")
            if not (_number(value) and value > 0):
                return (
                    f"host {short(host.get('name'), 60)}: memory bandwidth {short(value, 40)} "
                    "in its facts, not a measured figure"
                )
            total += value
        if not hosts:
            return "no host with a measured memory bandwidth"
    else:
        total = hw.peak.memory_bandwidth_gbs * count
    compute = [hw.peak.compute_tflops[d] for d in weights.compute_dtypes if d in hw.peak.compute_tflops]
    return Ceiling(total, weights.bytes, weights.parameters, max(compute) * count if compute else None)


def tokens_per_step(s: Subject, rel: str, card: ModelCard) -> float | None:
    """At most how many tokens one decode step emitted in the phase, from its /metrics snapshots:
    1 + accepted / drafts (every step without a draft emits one). None: counters not readable."""
    doc = s.metrics.get(metrics_for(rel))
    if not isinstance(doc, dict):
        return None
    kind = card.engine.name
    before, after = from_snapshots(kind, doc.get("before")), from_snapshots(kind, doc.get("after"))
    if before is None or after is None:
        return None
    delta = after - before
    if not all(_number(v) for v in (delta.drafts, delta.accepted, delta.draft_tokens)):
        return None
    if delta.drafts <= 0:
        return 1.0
    accepted = min(delta.accepted, delta.draft_tokens) if delta.draft_tokens > 0 else delta.accepted
    return 1 + max(accepted, 0.0) / delta.drafts


def _drafts(cell: Cell, weights: ActiveWeights) -> bool:
    return cell.strategy in weights.speculative or bool(set(cell.options) & set(weights.speculative))


def _implausible(
    rel: str, kind: str, what: str, how: str, measured: float, ceiling: float, margin: float, why: str
):
    """A finding when `measured` tok/s `what` ("per stream", "at batch 4") beats the ceiling by
    more than the margin; `how` says how it was measured, `why` what the ceiling rests on."""
    if measured <= ceiling * margin:
        return []
    return [
        Finding(
            rel,
            REQUIREMENT,
            f"implausible: above the roofline of {kind} by {above(measured, ceiling):.0%}: "
            f"{measured:.1f} tok/s {what} ({how})",
            f"at most {margin:g}x {ceiling:.1f} tok/s {what} ({why})",
        )
    ]


def phase_findings(
    s: Subject, rel: str, kind: str, margin: float, base: Ceiling, spec: bool, card, evidence: dict
) -> list:
    answer = s.records.get(rel)
    if not isinstance(answer, dict) or not isinstance(answer.get("records"), list):
        return []
    ceiling = base
    if spec:
        factor = tokens_per_step(s, rel, card)
        if factor is None:
            return [
                Finding(
                    rel,
                    "physics.speculative",
                    "no readable speculative counters around the phase",
                    "the tokens per step a speculative phase's /metrics snapshots show",
                )
            ]
        ceiling = Ceiling(
            base.bandwidth_gbs, base.weights_bytes, base.active_parameters, base.compute_tflops, factor
        )
    measured = speed(answer["records"])
    why = (
        f"{ceiling.bandwidth_gbs:g} GB/s over {ceiling.weights_bytes / 1e6:.1f} MB of active weights a step"
        + (f", {ceiling.tokens_per_step:.2f} tokens a step" if spec else "")
        + (f", {ceiling.compute_tflops:g} TFLOPS" if ceiling.compute_tflops else "")
    )
    out = []
    if measured.per_stream is not None:
        out += _implausible(
            rel,
            kind,
            "per stream",
            f"median {measured.tpot_ms:.3f} ms a token",
            measured.per_stream,
            ceiling.per_stream,
            margin,
            why,
        )
    if measured.aggregate is not None and not out:
        out += _implausible(
            rel,
            kind,
            f"at batch {measured.batch}",
            "output tokens over the phase's span",
            measured.aggregate,
            ceiling.aggregate(measured.batch),
            margin,
            why,
        )
    return out + server_time_findings(s, rel, evidence, kind, margin, ceiling, why)


def server_time_findings(
    s: Subject, rel: str, evidence: dict, kind: str, margin: float, ceiling: Ceiling, why: str
) -> list[Finding]:
    """The server's own time for the phase's requests (its /metrics difference, summed over its
    requests) bounded below: a request that generated n tokens took at least n - 1 decode steps
    (its first token comes with the prompt), none faster than the ceiling per stream times the
    margin. A server account below that is not one of this hardware's."""
    doc = s.metrics.get(metrics_for(rel))
    found = engines.find(evidence["engine"]["name"])
    if not isinstance(doc, dict) or found is None or not found.accounted:
        return []  # engine_metrics' or engine_account's finding
    engine = found.name
    totals = phase_totals(engine, decode_side(evidence, doc))
    client, problem = client_account(s.records[rel], engine)
    if totals is None or problem or totals.generated is None:
        return []  # engine_metrics' findings
    decode_tokens = max(totals.generated - client["requests"], 0)
    least = decode_tokens / (ceiling.per_stream * margin)
    if totals.server_s >= least:
        return []
    return [
        Finding(
            metrics_for(rel),
            SERVER_TIME,
            f"implausible: {totals.server_s:.4f} s of server time for the phase's requests"
            f" ({totals.generated:g} tokens generated in {client['requests']} requests)",
            f"at least {least:.4f} s: {decode_tokens:g} decode steps at no more than {margin:g}x"
            f" {ceiling.per_stream:.1f} tok/s per stream on {kind} ({why})",
        )
    ]


def _subject_cells(s: Subject, ref: Reference):
    """(evidence file, document, cell, hardware, card) for each evidence of a known cell."""
    for name, doc in sorted(s.evidence.items()):
        try:
            cell = ref.matrix.cell(doc["cell"])
        except KeyError:
            continue  # completeness reports an unknown cell
        yield name, doc, cell, ref.matrix.hardware[cell.hardware], ref.matrix.card(cell)


def check_roofline(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, doc, cell, hw, card in _subject_cells(s, ref):
        try:
            count = accelerators(doc)
        except Unrecomputable:
            continue  # recompute reports hosts that do not say how many accelerators served
        ceiling = cell_ceiling(hw, card.roofline, count, doc["hosts"])
        if isinstance(ceiling, str):
            if not ceiling.startswith("not checked"):
                out.append(
                    Finding(
                        name,
                        "physics.host-bandwidth",
                        ceiling,
                        f"the memory bandwidth preflight measured on every host ({hw.name} publishes none)",
                    )
                )
            continue
        spec = _drafts(cell, card.roofline)
        phases = [rel for rel in doc.get("records", []) if is_records_file(rel)]
        for rel in phases:
            out += phase_findings(s, rel, hw.name, hw.peak.margin, ceiling, spec, card, doc)
        factors = [tokens_per_step(s, rel, card) for rel in phases] if spec else [1.0]
        if factors and None not in factors:  # unreadable counters: physics.speculative's finding
            fastest = Ceiling(
                ceiling.bandwidth_gbs,
                ceiling.weights_bytes,
                ceiling.active_parameters,
                ceiling.compute_tflops,
                max(factors),
            )
            out += request_time_findings(s, doc, hw.name, hw.peak.margin, fastest)
    return out


LOG_TOLERANCE_S = 0.002  # the logs round to 0.01 ms; the clocks tick differently
SHOWN = 3  # requests named per log; the rest counted


def request_time_findings(s: Subject, doc: dict, kind: str, margin: float, ceiling: Ceiling) -> list[Finding]:
    """Each request a server log accounts for (llama.cpp's and SGLang's per-request lines) took at
    least its generated tokens less the first, one decode step each, at no more than the ceiling
    per stream (the cell's most tokens a step) times the margin: a log's own time for a request
    below that is not this hardware's."""
    engine = engines.find(doc["engine"]["name"])
    if engine is None or not engine.accounted:
        return []
    rate = ceiling.per_stream * margin
    out = []
    for log in doc.get("logs") or []:
        if not (isinstance(log, str) and s.bundle.has(log)):
            continue  # engine_account's and engine_launches' findings
        served = engine.parse_log(s.bundle.path(log).read_text(errors="replace")).served
        short_ones = [r for r in served if r.total_s + LOG_TOLERANCE_S < max(r.generated - 1, 0) / rate]
        more = f" ({len(short_ones) - SHOWN} more such requests)" if len(short_ones) > SHOWN else ""
        for i, r in enumerate(short_ones[:SHOWN]):
            steps = max(r.generated - 1, 0)
            out.append(
                Finding(
                    log,
                    SERVER_TIME,
                    f"implausible: task {r.task} served {r.generated} tokens in {r.total_s:.4f} s"
                    + (more if i == SHOWN - 1 else ""),
                    f"at least {steps / rate:.4f} s: {steps} decode steps at no more than"
                    f" {margin:g}x {ceiling.per_stream:.1f} tok/s per stream on {kind}",
                )
            )
    return out


def not_checked(s: Subject, ref: Reference) -> list[str]:
    """What physics could not judge in this bundle, one line each: said, never silently passed."""
    notes = []
    for _, doc, _, hw, card in _subject_cells(s, ref):
        reason = cell_ceiling(hw, card.roofline, 1, doc["hosts"])
        if isinstance(reason, str) and reason.startswith("not checked"):
            notes.append(f"{doc['cell']}: {reason}")
    return sorted(set(notes))


CHECKS = (check_roofline,)
