"""Evidence: one JSON document per cell run, validated by a schema shipped in the package.

Statuses in the acceptance table and vendor submissions derive from evidence, never from
hand-typed text. Evidence is written even when a run breaks, so nothing measured is lost.
`build` makes the document from what a cell run gathered (pure); `write` validates and stores it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import jsonschema

from dayzero import atomic
from dayzero.checks import INCONCLUSIVE, CheckResult
from dayzero.checks import claims as claim_checks
from dayzero.errors import ConfigError
from dayzero.lab.lease import Lease
from dayzero.lab.preflight import HostFacts
from dayzero.redact import redact, redact_env, redact_tree
from dayzero.spec import yamlfile
from dayzero.spec.card import Claim
from dayzero.spec.matrix import Cell
from dayzero.spec.recipe import Recipe
from dayzero.spec.shell import join

EVIDENCE_DIR = "evidence"
SCHEMA_VERSION = 1


def validate(doc: dict) -> None:
    yamlfile._validator("evidence").validate(doc)  # one validator, built once: a store ingests 10^5


def slug(cell_id: str) -> str:
    return cell_id.replace("/", "__")


def path_of(reports_dir: Path, cell_id: str, run_id: str) -> Path:
    """Where one run's evidence of one cell is kept."""
    return Path(reports_dir) / EVIDENCE_DIR / f"{slug(cell_id)}__{run_id}.json"


def write(reports_dir: Path, doc: dict) -> Path:
    validate(doc)
    path = path_of(reports_dir, doc["cell"], doc["run"]["id"])
    return atomic.write_json(path, doc)  # readers never see half a document


def launches_json(recipe: Recipe, secrets: Iterable[str]) -> list[dict]:
    """The rendered launches as evidence keeps them: commands and environment with secrets masked."""
    return [
        {
            "role": lc.role,
            "rank": lc.rank,
            "host": lc.host,
            "port": lc.port,
            "endpoint": lc.endpoint,
            "ready": lc.ready,  # how it was known ready: http health, tcp port, or running
            "command": redact(lc.command, secrets),
            "env": redact_env(lc.env),
            **({"container": join(lc.container)} if lc.container else {}),  # the docker run prefix
            **({"srun": join(lc.step)} if lc.step else {}),  # the step's srun flags: pyxis's image
        }
        for lc in recipe.launches
    ]


def host_entry(lease: Lease, facts: HostFacts | None, held: Mapping[str, str]) -> dict:
    """What evidence keeps of a host: its inventory claims, the facts preflight saw (driver
    version included) and when the cell held it."""
    host = lease.host
    seen = {k: v for k, v in facts.__dict__.items() if k not in ("host", "problems")} if facts else {}
    return {
        "name": host.name,
        "hardware": host.hardware,
        "accelerators": host.accelerators,
        "facts": seen,
        "lease": {"slot": lease.slot, **({"devices": list(lease.devices)} if lease.devices else {}), **held},
    }


def build(
    cell: Cell,
    checks: Sequence[CheckResult],
    hosts: Sequence[Lease],
    facts: Mapping[str, HostFacts],
    *,
    held: Mapping[str, str],
    run: Mapping[str, str],
    recipe: Recipe | None,
    engine: Mapping[str, str],
    records: Sequence[str],
    logs: Sequence[str],
    verdict: str,
    error: str = "",
    secrets: Iterable[str] = (),
    claims: Iterable[Claim] = (),
    readiness: Mapping[str, float] | None = None,
) -> dict:
    """The evidence document of one cell run, from whatever it gathered before it ended (pure).

    `facts` maps a host name to its preflight facts; `held` is when the hosts were held;
    `records` and `logs` are paths relative to the reports folder. Every text passes `redact`:
    an error message may quote a secret. `claims` (the card's claims for this cell) are answered
    from the document's own checks and hosts.
    """
    secrets = tuple(secrets)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "cell": cell.id,
        "model": cell.model,
        "hardware": cell.hardware,
        "mode": cell.mode,
        "strategy": cell.strategy,
        "options": list(cell.options),
        "source": "dayzero",
        "run": dict(run),
        "recipe": {
            "digest": recipe.digest if recipe else "",
            "launches": launches_json(recipe, secrets) if recipe else [],
        },
        "engine": dict(engine),
        "hosts": [host_entry(lease, facts.get(lease.host.name), held) for lease in hosts],
        "checks": [c.to_json() for c in checks],
        "records": sorted(records),
        "logs": list(logs),
        # a run whose floors were inconclusive (and nothing failed) is no pass: never green
        "verdict": "inconclusive"
        if verdict == "passed" and any(c.verdict == INCONCLUSIVE for c in checks)
        else verdict,
    }
    if error:
        doc["error"] = error
    if answered := claim_checks.evaluate_all(claims, doc):
        doc["claims"] = answered
    if readiness:  # launch to ready, and the deadline it had (a cell that never started has none)
        doc["readiness"] = dict(readiness)
    return redact_tree(doc, secrets)


def iter_evidence(reports_dir: Path) -> Iterator[tuple[Path, dict]]:
    for path in sorted((Path(reports_dir) / EVIDENCE_DIR).glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            validate(doc)
        except (ValueError, jsonschema.ValidationError) as exc:
            raise ConfigError(path, "", f"not valid evidence: {str(exc).splitlines()[0]}") from None
        yield path, doc
