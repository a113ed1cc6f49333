"""Broken and hostile bundles: each is rejected (or found unusable) with the finding that names why."""

from __future__ import annotations

from pathlib import Path

import pytest

from dayzero.submission.check import run_checks

from .submission_corpus.hostile import CASES, Case
from .submission_corpus.lab import Lab, make_lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def test_the_valid_bundle_the_corpus_starts_from_is_accepted(lab):
    report = lab.check(lab.bundle)
    assert report.accepted, "\n".join(report.lines())


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_bundle_is_rejected_with_its_finding(lab, case: Case, tmp_path):
    bundle = case.build(lab, tmp_path)
    report = lab.check(bundle, limits=case.limits)
    assert not report.accepted
    assert not [f for f in report.findings if f.requirement == "checker.internal"], report.lines()
    if case.requirement == "unusable":
        assert report.exit_code == 2 and report.unusable
        return
    assert report.exit_code == 1
    requirements = {f.requirement for f in report.findings}
    assert case.requirement in requirements, "\n".join(report.lines())
    finding = next(f for f in report.findings if f.requirement == case.requirement)
    assert finding.found and finding.expected and case.requirement in finding.line()


def test_nothing_of_a_hostile_bundle_lands_outside_the_extraction_directory(lab, tmp_path):
    for case in CASES:
        if not case.requirement.startswith("extract."):
            continue
        here = tmp_path / case.id
        (here / "deep" / "work").mkdir(parents=True)
        bundle = case.build(lab, here)
        run_checks(bundle, lab.ref, here / "deep" / "work", case.limits)
        written = {p.relative_to(here) for p in here.rglob("*")}
        outside = {p for p in written if p.parts[:2] != ("deep", "work") and p != bundle.relative_to(here)}
        assert outside <= {Path("deep")}, f"{case.id} wrote {outside}"
        links = [
            p
            for p in (here / "deep" / "work").rglob("*")
            if p.is_symlink() or not (p.is_file() or p.is_dir())
        ]
        assert not links, f"{case.id} left {links}"
    assert not Path("/tmp/dayzero-absolute.txt").exists()
