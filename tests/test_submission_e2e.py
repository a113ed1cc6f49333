"""A vendor submission from a real cpu run: packed, checked clean, accepted into the table.

The run is real (llama-server, SmolLM2, the four cpu cells through `pytest -m cpu`), once per
module, against a copy of the matrix whose floor bounds a loaded machine cannot miss (see
`relaxed_matrix`); the checker then recomputes every claim of that run from its raw records.
The corpus of hostile bundles is replayed on the real bundle as well.
"""

from __future__ import annotations

import json
import re

import pytest

from dayzero.submission.accept import accept
from dayzero.submission.recompute import recompute_all
from dayzero.submission.schema import load_subject

from .conftest import needs_engine, run_pytest
from .submission_corpus.hostile import CASES, Case
from .submission_corpus.lab import VENDOR, Lab, lab_from_run, relaxed_matrix

pytestmark = [pytest.mark.e2e, needs_engine]
CPU_CELLS = [
    "smollm2-135m/cpu+llama.cpp/high_throughput/baseline",
    "smollm2-135m/cpu+llama.cpp/high_throughput/ngram_spec",
    "smollm2-135m/cpu+llama.cpp/low_latency/baseline",
    "smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec",
]


@pytest.fixture(scope="module")
def real_lab(tmp_path_factory) -> Lab:
    root = tmp_path_factory.mktemp("real-cpu-run")
    matrix = relaxed_matrix(root / "matrix")
    reports = root / "reports"
    result = run_pytest("-m", "cpu", "-q", "-rA", f"--reports={reports}", f"--matrix={matrix}", timeout=3600)
    assert result.returncode == 0, result.stdout[-4000:]
    return lab_from_run(root, reports, matrix)


def normalise(markdown: str) -> str:
    markdown = re.sub(r"sha256 `[0-9a-f]{64}`", "sha256 `<sha256>`", markdown)
    markdown = re.sub(r"SHA256:[A-Za-z0-9+/=]+", "SHA256:<key>", markdown)
    markdown = re.sub(r"@ [0-9a-f]{40}", "@ <commit>", markdown)
    return re.sub(r"checked: \S+", "checked: <date>", markdown)


SNAPSHOT = """# Submission check: ACCEPTED

- bundle: `bundle.tar.gz` (sha256 `<sha256>`)
- vendor: acme
- signature: Good "dayzero" signature for acme with ED25519 key SHA256:<key>
- harness: {version} @ <commit> (clean)
- checked: <date>
- findings: 0

## Cells

| cell | findings |
|---|---|
{cells}
"""


def test_real_bundle_packs_checks_clean_and_every_claim_is_recomputed(real_lab):
    report = real_lab.check(real_lab.bundle)
    assert report.accepted, "\n".join(report.lines())
    assert sorted(report.cells) == CPU_CELLS
    cells = "\n".join(f"| `{c}` | 0 |" for c in report.cells)
    assert normalise(report.to_markdown()) == SNAPSHOT.format(version=real_lab.harness.version, cells=cells)

    from dayzero.submission.extract import extract

    bundle, findings = extract(real_lab.bundle, real_lab.root / "extracted")
    subject, findings = load_subject(bundle)
    assert findings == []
    recomputed = recompute_all(subject, real_lab.ref)
    for name, doc in subject.evidence.items():
        claimed = {c["name"] for c in doc["checks"]}
        assert claimed == set(recomputed[name].checks) == set(recomputed[name].required)
        kinds = {c["name"].split(":")[0] for c in doc["checks"]}
        assert {"probe", "golden", "floor", "accuracy"} <= kinds
    # every phase has the server's own counters around it, and they are not vacuous
    from dayzero.checks.server_metrics import phase_totals
    from dayzero.run.records import metrics_for

    assert {metrics_for(rel) for rel in subject.records} == set(subject.metrics)
    for rel, snapshots in subject.metrics.items():
        assert phase_totals("llama.cpp", snapshots).generated > 0, rel
    system = json.loads((bundle.root / "submission.json").read_text())["system"]
    assert system["engines"][0]["version"].startswith("llama-cpp-python")
    assert system["engines"][0]["image_digest"].startswith("sha256:")
    assert system["hosts"][0]["name"] == "local" and system["controller"]["cpus"]


def test_real_bundle_is_accepted_into_the_acceptance_table(real_lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(real_lab.bundle, real_lab.ref, reports)
    assert report.accepted and len(written) == len(CPU_CELLS)
    from dayzero.report.acceptance import write_acceptance

    table = write_acceptance(real_lab.matrix, reports).read_text()
    for cell in CPU_CELLS:
        row = next(line for line in table.splitlines() if f"`{cell}`" in line)
        assert "| Verified |" in row and f"| {VENDOR} (checked {report.checked[:10]}) |" in row, row


REAL_CASES = [c for c in CASES if not c.synthetic_only]


@pytest.mark.parametrize("case", REAL_CASES, ids=[c.id for c in REAL_CASES])
def test_hostile_variants_of_the_real_bundle_are_rejected(real_lab, case: Case, tmp_path):
    report = real_lab.check(case.build(real_lab, tmp_path), limits=case.limits)
    assert not report.accepted
    assert not [f for f in report.findings if f.requirement == "checker.internal"], report.lines()
    if case.requirement == "unusable":
        assert report.exit_code == 2
    else:
        assert case.requirement in {f.requirement for f in report.findings}, "\n".join(report.lines())
