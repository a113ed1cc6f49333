"""`dayzero submission accept`: re-check a bundle and, only if accepted, add its evidence to the reports.

The evidence is copied with `source: <vendor>`, the check date and the bundle's sha256, and its
raw records and logs are kept under reports/submissions/<vendor>/<bundle>/ next to the bundle and
the verdict, so the acceptance table derives Verified from evidence like any other, and anyone
can re-check what it rests on. Nothing is typed by hand.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path

from dayzero import evidence
from dayzero.submission.bundle import Reference
from dayzero.submission.check import Report, run_checks
from dayzero.submission.extract import DEFAULT_LIMITS, Limits

SUBMISSIONS_DIR = "submissions"


def accepted_evidence(doc: dict, report: Report, stored: str) -> dict:
    """The vendor's evidence as the reports keep it: its source, when it was checked, where it lives."""
    out = copy.deepcopy(doc)
    out["source"] = report.vendor
    out["checked"] = report.checked
    out["submission"] = {
        "vendor": report.vendor,
        "bundle_sha256": report.sha256,
        "signer": report.signer,
        "verdict": f"{stored}/verdict.md",
    }
    out["records"] = [f"{stored}/{rel}" for rel in doc.get("records", [])]
    out["logs"] = [f"{stored}/{rel}" for rel in doc.get("logs", [])]
    evidence.validate(out)
    return out


def accept(
    bundle: Path, ref: Reference, reports_dir: Path, limits: Limits = DEFAULT_LIMITS
) -> tuple[Report, list[Path]]:
    """(report, evidence files written); nothing is written unless the check accepts the bundle."""
    reports_dir = Path(reports_dir)
    with tempfile.TemporaryDirectory(prefix="dayzero-accept-") as tmp:
        report, subject = run_checks(Path(bundle), ref, Path(tmp), limits)
        if not report.accepted or subject is None:
            return report, []
        stored = f"{SUBMISSIONS_DIR}/{report.vendor}/{report.sha256[:16]}"
        dest = reports_dir / stored
        for name in subject.bundle.files:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(subject.bundle.path(name), dest / name)
        shutil.copyfile(bundle, dest / "bundle.tar.gz")
        (dest / "verdict.md").write_text(report.to_markdown())
        written = []
        for _, doc in sorted(subject.evidence.items()):
            new = accepted_evidence(doc, report, stored)
            path = (
                reports_dir
                / evidence.EVIDENCE_DIR
                / (f"{evidence.slug(doc['cell'])}__{report.vendor}__{doc['run']['id']}.json")
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            partial.write_text(json.dumps(new, indent=2, sort_keys=True) + "\n")
            partial.replace(path)
            written.append(path)
    return report, written
