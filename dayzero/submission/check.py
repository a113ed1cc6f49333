"""`dayzero submission check`: run every family of checks on a bundle, answer one line per finding.

Exit codes: 0 accepted (no finding), 1 rejected (findings), 2 unusable input (not a readable
bundle, or the checker's own inputs missing). A check that raises is itself a finding, so a
hostile bundle can make the checker say no, never crash it into a yes.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import dayzero
from dayzero.errors import ConfigError
from dayzero.escape import escape
from dayzero.run.records import cell_folder
from dayzero.spec.matrix import load_matrix
from dayzero.submission import (
    antigaming,
    claims_answer,
    completeness,
    configuration,
    engine_account,
    engine_launches,
    engine_metrics,
    figures,
    identity,
    inputs,
    manifest,
    physics,
    provenance,
    recompute,
    schema,
    signature,
    snapshots,
    timeline,
)
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.extract import DEFAULT_LIMITS, Limits, UnusableBundle, extract
from dayzero.submission.findings import Finding, Group, grouped, short

FAMILIES = (
    manifest.CHECKS,
    signature.CHECKS,
    schema.CHECKS,
    completeness.CHECKS,
    recompute.CHECKS,
    claims_answer.CHECKS,
    antigaming.CHECKS,
    inputs.CHECKS,
    identity.CHECKS,
    configuration.CHECKS,
    provenance.CHECKS,
    timeline.CHECKS,
    engine_account.CHECKS,
    engine_launches.CHECKS,
    engine_metrics.CHECKS,
    physics.CHECKS,
    figures.CHECKS,
    snapshots.CHECKS,
)
ACCEPTED, REJECTED, UNUSABLE = "accepted", "rejected", "unusable"
EXIT = {ACCEPTED: 0, REJECTED: 1, UNUSABLE: 2}


@dataclass(frozen=True)
class Report:
    bundle: str
    sha256: str
    vendor: str
    cells: tuple[str, ...]
    findings: tuple[Finding, ...]
    checked: str
    signer: str = ""
    harness: str = ""
    unusable: str = ""
    cell_findings: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()  # what could not be checked (no finding), e.g. a kind without peak figures
    groups: tuple[Group, ...] = ()  # the findings, each cause with those that may follow from it

    @property
    def verdict(self) -> str:
        if self.unusable:
            return UNUSABLE
        return REJECTED if self.findings else ACCEPTED

    @property
    def accepted(self) -> bool:
        return self.verdict == ACCEPTED

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def lines(self) -> list[str]:
        """One line per finding; those that may follow from a cause folded (indented) under it."""
        if self.unusable:
            return [f"{escape(Path(self.bundle).name)}: unusable: {escape(self.unusable)}"]
        if self.groups:
            return [line for g in self.groups for line in g.lines()]
        return [f.line() for f in self.findings]

    def summary(self) -> str:
        """The one stderr line: verdict, counts and the vendor the bundle names (escaped)."""
        return (
            f"{escape(Path(self.bundle).name)}: {self.verdict} ({len(self.findings)} finding(s), "
            f"{len(self.cells)} cell(s), vendor {escape(self.vendor or '-')})"
        )

    def to_markdown(self) -> str:
        def md(value: str, limit: int = 300) -> str:
            return escape(value, "markdown", limit)

        def code(value: str) -> str:
            return escape(value, "code", 300)

        out = [
            f"# Submission check: {self.verdict.upper()}",
            "",
            f"- bundle: `{code(Path(self.bundle).name)}` (sha256 `{code(self.sha256 or '-')}`)",
            f"- vendor: {md(self.vendor or '-')}",
            f"- signature: {md(self.signer or 'not verified')}",
            f"- harness: {md(self.harness or '-')}",
            f"- checked: {md(self.checked)}",
            f"- findings: {len(self.findings)}",
        ]
        if self.unusable:
            out += ["", f"Unusable input: {md(self.unusable)}", ""]
            return "\n".join(out)
        if self.cells:
            per_cell = dict(self.cell_findings)
            out += ["", "## Cells", "", "| cell | findings |", "|---|---|"]
            out += [f"| `{code(c)}` | {per_cell.get(c, 0)} |" for c in self.cells]
        if self.notes:
            out += ["", "## Not checked", ""] + [f"- {md(n)}" for n in self.notes]
        if self.findings:
            out += ["", "## Findings", "", "| file | requirement | found | expected |", "|---|---|---|---|"]
            follows = {f for g in self.groups for f in g.consequences}  # marked as following the cause above
            out += [
                f"| `{code(f.file or '<bundle>')}` | {'↳ ' if f in follows else ''}{md(f.requirement)} "
                f"| {md(f.found)} | {md(f.expected)} |"
                for f in self.findings
            ]
        out.append("")
        return "\n".join(out)


def run_family(checks, s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for check in checks:
        try:
            out += check(s, ref)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - a hostile bundle must not crash the checker
            out.append(
                Finding(
                    "",
                    "checker.internal",
                    f"{check.__name__}: {type(exc).__name__}: {short(str(exc))}",
                    "no checker error",
                )
            )
    return out


def cell_of_file(s: Subject) -> dict[str, str]:
    """Which cell a bundle file belongs to, for the per-cell counts of the verdict."""
    owner = {}
    for name, doc in s.evidence.items():
        owner[name] = doc["cell"]
        prefix = cell_folder(doc["run"]["id"], doc["cell"]) + "/"
        for other in s.bundle.files:
            if other.startswith(prefix):
                owner[other] = doc["cell"]
    return owner


def run_checks(
    path: Path,
    ref: Reference,
    workdir: Path,
    limits: Limits = DEFAULT_LIMITS,
    reports_dir: Path | None = None,
) -> tuple[Report, Subject | None]:
    """Extract into `workdir` and check; the subject stays readable there (accept copies from it).
    With the lab's reports, also what `accept` refuses: records accepted before (a replay)."""
    checked = dt.datetime.fromtimestamp(ref.now(), dt.UTC).isoformat(timespec="seconds")
    try:
        bundle, findings = extract(Path(path), Path(workdir), limits)
    except UnusableBundle as exc:
        return Report(str(path), "", "", (), (), checked, unusable=str(exc)), None
    if findings:  # hostile members: nothing else is read
        return Report(str(path), bundle.sha256, "", (), tuple(findings), checked), None
    subject, findings = schema.load_subject(bundle)
    for family in FAMILIES:
        findings += run_family(family, subject, ref)
    if reports_dir is not None and not findings:
        findings += identity.replays(subject, subject.vendor, identity.known_runs(Path(reports_dir)))
    owner = cell_of_file(subject)
    groups = grouped(findings, owner)
    findings = [f for g in groups for f in (g.cause, *g.consequences)]
    cells = tuple(completeness.claimed_cells(subject))
    signed = not any(f.requirement.startswith("signature.") for f in findings)
    report = Report(
        str(path),
        bundle.sha256,
        subject.vendor,
        cells,
        tuple(findings),
        checked,
        signer=signature.signer(subject, ref) if signed else "",
        harness=describe_harness(subject),
        cell_findings=tuple((c, sum(1 for f in findings if owner.get(f.file) == c)) for c in cells),
        notes=tuple(physics.not_checked(subject, ref)),
        groups=tuple(groups),
    )
    return report, subject


def describe_harness(s: Subject) -> str:
    harness = (s.submission or {}).get("harness") or {}
    if not harness:
        return ""
    state = "clean" if harness.get("clean") and not harness.get("status") else "dirty"
    return f"{harness.get('version', '?')} @ {harness.get('commit') or '?'} ({state})"


def check_bundle(
    path: Path, ref: Reference, limits: Limits = DEFAULT_LIMITS, reports_dir: Path | None = None
) -> Report:
    with tempfile.TemporaryDirectory(prefix="dayzero-check-") as tmp:
        return run_checks(path, ref, Path(tmp), limits, reports_dir)[0]


def harness_root(near: Path | None = None) -> Path:
    """The git checkout the harness runs from: the one holding `near` (the matrix) or the working
    directory; an installed package has no checkout of its own, and a venv's enclosing repository
    must not be taken for one, so the package's own tree counts only when it is a checkout."""
    for start in (near, Path.cwd()):
        if start is not None:
            for folder in (Path(start).resolve(), *Path(start).resolve().parents):
                if (folder / ".git").exists() and (folder / "matrix").is_dir():
                    return folder
    return Path(dayzero.__file__).resolve().parents[1]


@cache
def _commit_known(root: str, commit: str) -> bool:
    result = subprocess.run(
        ["git", "-C", root, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, timeout=30
    )
    return result.returncode == 0


def known_commit_in(root: Path) -> Callable[[str], bool] | None:
    """Commits of the maintainers' checkout, when the checker runs from one."""
    if not (Path(root) / ".git").exists():
        return None
    return lambda commit: _commit_known(str(root), commit)


@cache
def _commit_time(root: str, commit: str) -> float | None:
    result = subprocess.run(
        ["git", "-C", root, "show", "-s", "--format=%ct", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    text = result.stdout.strip()
    return float(text) if result.returncode == 0 and text.isdigit() else None


def commit_time_in(root: Path) -> Callable[[str], float | None] | None:
    """When a commit of the maintainers' checkout was made: no run can predate its harness."""
    if not (Path(root) / ".git").exists():
        return None
    return lambda commit: _commit_time(str(root), commit)


@cache
def _version_at(root: str, commit: str) -> str | None:
    result = subprocess.run(
        ["git", "-C", root, "show", f"{commit}:dayzero/__init__.py"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    found = re.search(r'^__version__ = "([^"\n]+)"', result.stdout, re.M) if result.returncode == 0 else None
    return found.group(1) if found else None


def version_at_in(root: Path) -> Callable[[str], str | None] | None:
    """The harness version a commit of the maintainers' checkout carries: a bundle's is held to it."""
    if not (Path(root) / ".git").exists():
        return None
    return lambda commit: _version_at(str(root), commit)


def reference(matrix_dir: Path, goldens_dir: Path, allowed_signers: Path) -> Reference:
    return Reference(
        load_matrix(Path(matrix_dir)),
        Path(goldens_dir),
        Path(allowed_signers),
        known_commit=known_commit_in(harness_root(matrix_dir)),
        commit_time=commit_time_in(harness_root(matrix_dir)),
        version_at=version_at_in(harness_root(matrix_dir)),
    )
