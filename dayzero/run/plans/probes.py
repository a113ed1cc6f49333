"""Probes and goldens: each probe's answer against the card's expectations, then against the
golden of the cell's golden cell (text, tokens, or the golden's own text scored by the engine
under test: teacher forcing)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from dayzero.checks import CheckResult
from dayzero.checks.correctness import check_golden, check_probe, golden_name, probe_name
from dayzero.run import plan
from dayzero.run.plan import ProbePlan
from dayzero.run.plans.base import CORRECTNESS, Source, Unrecomputable
from dayzero.spec.card import ModelCard, Probe
from dayzero.spec.matrix import Cell


def record_of(by_id: Mapping[str, dict], probe: Probe, phase: str) -> dict:
    if probe.id not in by_id:
        raise Unrecomputable(phase, f"no record for probe {probe.id}")
    return by_id[probe.id]


def forced(src: Source) -> dict[str, tuple[list | None, str]]:
    """Per probe, the engine's scores of the golden's text, or None and why not."""
    golden = src.golden
    score_plan, why = plan.scores(src.card, src.cell, golden.outputs if golden else None)
    if score_plan is None:
        return {p.id: (None, why) for p in src.card.probes}
    try:
        answer, _ = src.exchange(
            score_plan.phase, score_plan.concurrency, score_plan.requests(), action="requests", timeout=600
        )
    except Unrecomputable:
        return {p.id: (None, "no scoring records in the evidence") for p in src.card.probes}
    return score_plan.forced(answer["records"])


class Probes:
    family, stage = "probe", CORRECTNESS

    def plans(self, card: ModelCard, cell: Cell, suites: Path) -> Iterator[ProbePlan]:
        pp = plan.probes(card, cell)
        if pp.probes:
            yield pp

    def names(self, pp: ProbePlan) -> list[str]:
        return [probe_name(p.id) for p in pp.probes] + [golden_name(p.id) for p in pp.probes]

    def judge(self, pp: ProbePlan, src: Source) -> Iterator[CheckResult]:
        with src.step("correctness: probes and goldens"):
            answer, _ = src.exchange(pp.phase, pp.concurrency, pp.requests(), action="requests", timeout=600)
            by_id = {r.get("id"): r for r in answer["records"]}
            for p in pp.probes:
                record = record_of(by_id, p, pp.phase)
                yield check_probe(p, record.get("text") or "", record.get("error"))
            if src.recording:
                return
            golden = src.golden
            machine = (answer.get("client") or {}).get("machine")
            scores = forced(src)
            for p in pp.probes:
                record = record_of(by_id, p, pp.phase)
                scored, why = scores.get(p.id, (None, ""))
                result = check_golden(
                    pp.policy,
                    p.id,
                    golden.outputs.get(p.id) if golden else None,
                    record.get("text") or "",
                    golden.provenance if golden else None,  # compared with this run's recipe and engine
                    recipe_digest=src.recipe_digest,
                    engine_version=src.engine_version,
                    missing=pp.missing_verdict,
                    alternates=golden.alternatives(p.id) if golden else (),
                    # the maintainers' recording on the golden side, the answer's own log-probabilities
                    # on the other: a near-tie is one only where the golden says so too
                    golden_steps=golden.tokens.get(p.id) if golden else None,
                    output_steps=record.get("logprobs"),
                    machine=machine,
                    forced=scored,
                    forced_why=why,
                )
                yield replace(result, family="golden")


KIND = Probes()
