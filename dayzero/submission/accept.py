"""`dayzero submission accept`: re-check a bundle and, only if accepted, add its evidence to the reports.

The evidence is copied with `source: <vendor>`, the check date and the bundle's sha256, and its
raw records and logs are kept under reports/submissions/<vendor>/<bundle>/ next to the bundle and
the verdict, so the acceptance table derives Verified from evidence like any other, and anyone
can re-check what it rests on. Nothing is typed by hand.

Identity: every key an accepted raw records file is known by (`dayzero.submission.identity`: its
canonical content and its requests' timing fingerprints, however re-encoded) is kept in
reports/submissions/index.json with the vendor and cell it came from; the same run again from
another vendor, or from the same vendor for another cell, is a replay and is rejected.

Everything is prepared (and serialised) before the first byte is written; each file is then
written atomically (a temporary name, then a rename), the index last, so a crash leaves either
the previous state or a complete submission whose index entry is simply missing.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path

from dayzero import atomic, evidence
from dayzero.submission import identity
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.check import Report, run_checks
from dayzero.submission.extract import DEFAULT_LIMITS, Limits
from dayzero.submission.identity import INDEX, SUBMISSIONS_DIR, load_index


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


def _store_bundle(s: Subject, bundle: Path, verdict: str, dest: Path) -> None:
    """The bundle, its files and the verdict, staged beside `dest` and renamed into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        for name in s.bundle.files:
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(s.bundle.path(name), stage / name)
        shutil.copyfile(bundle, stage / "bundle.tar.gz")
        (stage / "verdict.md").write_text(verdict)
        if dest.exists():  # the same bundle accepted again: the same content, keep the first copy
            shutil.rmtree(stage)
        else:
            os.replace(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def accept(
    bundle: Path, ref: Reference, reports_dir: Path, limits: Limits = DEFAULT_LIMITS
) -> tuple[Report, list[Path]]:
    """(report, evidence files written); nothing is written unless the check accepts the bundle."""
    reports_dir = Path(reports_dir)
    with tempfile.TemporaryDirectory(prefix="dayzero-accept-") as tmp:
        report, subject = run_checks(Path(bundle), ref, Path(tmp), limits, reports_dir)
        if not report.accepted or subject is None:
            return report, []
        index = load_index(reports_dir)
        # Prepare everything first: a document that cannot be copied or serialised stops here.
        stored = f"{SUBMISSIONS_DIR}/{report.vendor}/{report.sha256[:16]}"
        documents = {}
        for _, doc in sorted(subject.evidence.items()):
            name = f"{evidence.slug(doc['cell'])}__{report.vendor}__{doc['run']['id']}.json"
            text = json.dumps(accepted_evidence(doc, report, stored), indent=2, sort_keys=True) + "\n"
            documents[reports_dir / evidence.EVIDENCE_DIR / name] = text.encode()
        for key, entry in identity.index_entries(subject, report.vendor, report.sha256).items():
            index.setdefault(key, entry)
        index_text = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
        verdict = report.to_markdown()

        _store_bundle(subject, Path(bundle), verdict, reports_dir / stored)
        for path, data in documents.items():
            atomic.write_bytes(path, data)
        atomic.write_bytes(reports_dir / INDEX, index_text)
    return report, sorted(documents)
