"""Synthetic nights for the history's tests and bench: schema-valid evidence with chosen levels.

A night's document carries one performance check whose summary holds the levels the history
follows, and the facts a change point is attributed to (engine, recipe digest, host, driver,
weights); `series_docs` makes one document per night of a value series.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from dayzero import evidence

START = dt.datetime(2026, 9, 1, 2, 0, tzinfo=dt.UTC)
CELL = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
WORKLOAD = "random-64-32/c1"


def night_doc(
    night: int,
    throughput: float,
    *,
    cell: str = CELL,
    ttft_ms: float = 50.0,
    recipe: str = "370a065910226f54",
    engine: str = "b4500",
    host: str = "local",
    driver: str = "none (cpu)",
    weights: str = "b179c9523d0e" * 4,
    vendor: str | None = None,
    accuracy: float | None = 0.9,
    lab: str | None = None,
    controller: str = "ci-1",
    run_id: str | None = None,
) -> dict:
    finished = START + dt.timedelta(days=night, minutes=5)
    summary = {"output_throughput": throughput, "median_ttft_ms": ttft_ms, "std_ttft_ms": 1.0, "completed": 8}
    checks = [
        {
            "name": f"floor:output_throughput@{WORKLOAD}",
            "kind": "performance",
            "verdict": "passed",
            "message": "ok",
            "measured": throughput,
            "details": {"summaries": [summary]},
        }
    ]
    if accuracy is not None:
        checks.append(
            {
                "name": "accuracy:gsm8k-mini",
                "kind": "correctness",
                "verdict": "passed",
                "message": "ok",
                "measured": accuracy,
            }
        )
    model, hardware, mode, strategy = cell.split("/")
    doc = {
        "schema_version": evidence.SCHEMA_VERSION,
        "cell": cell,
        "model": model,
        "hardware": hardware,
        "mode": mode,
        "strategy": strategy,
        "options": [],
        "source": vendor or "dayzero",
        "run": {
            "id": run_id or f"{finished:%Y%m%dT%H%M%SZ}-{night:05d}",
            "started": (finished - dt.timedelta(minutes=4)).isoformat(),
            "finished": finished.isoformat(),
            "by": "ci",
            "controller": controller,
            "worker": "master",
            "harness_version": "0.1.0",
        },
        "recipe": {"digest": recipe, "launches": []},
        "engine": {"name": "llama.cpp", "version": engine},
        "hosts": [
            {
                "name": host,
                "hardware": hardware.split("+")[0],
                "accelerators": 1,
                "facts": {
                    "driver_version": driver,
                    "model_files": [{"path": "m.gguf", "role": "weights", "sha256": weights}],
                },
            }
        ],
        "checks": checks,
        "verdict": "passed",
    }
    if lab:
        doc["run"]["lab"] = lab
    if vendor:
        doc["submission"] = {"vendor": vendor, "bundle_sha256": "0" * 64}
    return doc


def series_docs(values: Sequence[float], changes: dict[int, dict] | None = None, **fixed) -> list[dict]:
    """One document per night; `changes` maps a night to the facts it and later nights run with."""
    facts, out = dict(fixed), []
    for night, value in enumerate(values):
        facts.update((changes or {}).get(night, {}))
        out.append(night_doc(night, value, **facts))
    return out


def write_nights(root, docs: Sequence[dict]) -> list:
    """Each document under `root/nights/<its night>/evidence/`, as `dayzero nightly` lays them out."""
    paths = []
    for doc in docs:
        night = root / "nights" / doc["run"]["finished"][:19].replace("-", "").replace(":", "")
        paths.append(evidence.write(night, doc))
    return paths


def noisy_year(rng, nights: int, slowed: bool):
    """A cell's throughput and TTFT levels night by night (2% noise), and, if `slowed`, the night
    from which its throughput is 10% lower (else None): the history benches' series."""
    level = 100 * (1 + 0.02 * rng.standard_normal(nights))
    ttft = 50 * (1 + 0.02 * rng.standard_normal(nights))
    at = int(rng.integers(nights // 4, nights - 30)) if slowed else None
    if at is not None:
        level[at:] *= 0.9
    return level, ttft, at
