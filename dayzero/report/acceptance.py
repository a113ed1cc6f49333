"""The acceptance table: one row per cell, its status derived from evidence and the matrix.

No status is typed by hand. The badges mean what the cookbook's mean:

- **Verified**: the latest evidence passed, and is still current (date, engine version, link).
  Only evidence earns it: a dayzero run here, or a vendor's submission the checker accepted,
  shown "Verified (vendor)" on the vendor's word alone and "Verified (reproduced)" once a second
  party matched it with a run of its own, named in the detail (`dayzero.report.reproduction`).
  The source says whose run it is: `lab`, or `acme (vendor, bundle <sha256 prefix>, checked
  <day>)`; what the checker does not recompute of a vendor's run (its date, engine version,
  contention marks) is marked as the vendor's word.
- **Failed** / **Broken**: the latest evidence failed (product) or broke (lab fault). Broken is
  never Stale: it vouches for nothing, and a cell broken before its recipe rendered (a dead
  host) has no digest to compare.
- **Inconclusive**: nothing failed, but a floor's interval straddled its bound after the
  protocol's budget (`checks.intervals`): the numbers neither clear nor miss it; never green.
- **Stale**: there is evidence, but it no longer vouches for the cell: the recipe digest changed
  since the run, the engine version changed since the run, or the run is older than the age
  window (`max_age_days`, default 30). A rerun turns it back into Verified or Failed.
- **Published**: no evidence here, but the recipe's authors published the cell as verified (the
  cookbook's claim); the source names where. Not Verified: nothing here has vouched for it.
- **Pending**: no evidence here, and nothing published as verified; or the latest evidence passed
  every check it could make but some could not be made yet (a golden not recorded on the
  reference cell), named in the detail.
- **Unsupported**: the matrix rules the cell out, with the reason.
- **Needs data**: no evidence, and the recipe cannot render: a value it needs is null in the
  matrix ("to confirm", e.g. accelerators per node), named in the detail.

"The engine version changed" needs the *current* version of a cell's engine: it is the version
recorded by the most recent evidence of any cell on the same hardware with the same engine
(what the lab's hosts run now). One fresh run on a host that got a new engine build therefore
turns every older cell of that hardware Stale, which is the point: their numbers were taken
on another build. Versions recorded as "unknown" are never compared, and only the lab's own evidence sets the
current version (a vendor's evidence is compared with it, never the other way round). Evidence
dated in the future is Stale.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from dayzero import evidence
from dayzero.checks import INCONCLUSIVE, NOT_MEASURED, family_of
from dayzero.checks.claims import summary_line
from dayzero.checks.correctness import provenance_differs
from dayzero.clock import moment, parse_iso, utc_day
from dayzero.errors import ConfigError
from dayzero.escape import escape
from dayzero.redact import redact
from dayzero.report import claims as claims_table
from dayzero.report import engines as engine_grids
from dayzero.report import grid as status_grid
from dayzero.report import reproduction
from dayzero.report import speculative as accepted_table
from dayzero.spec.card import claims_for
from dayzero.spec.engine_identity import same_engine
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import MissingValue, digest, hosts_needed, placeholder_hosts, render

DEFAULT_MAX_AGE_DAYS = 30.0
STATUSES = (
    "Verified",
    "Failed",
    "Inconclusive",
    "Broken",
    "Stale",
    "Published",
    "Pending",
    "Needs data",
    "Unsupported",
)
UNKNOWN = "unknown"
FUTURE_SLACK_DAYS = 1 / 288  # five minutes of clock difference


@dataclass(frozen=True)
class Row:
    cell: Cell
    status: str  # one of STATUSES
    detail: str
    source: str
    evidence: Path | None = None
    claims: tuple[claims_table.ClaimRow, ...] = ()  # the card's claims, as this evidence answers them
    accepted: tuple[accepted_table.Accepted, ...] = ()  # speculative accepted length per workload
    reproduction: str = ""  # an accepted vendor cell's: vendor | reproduced (dayzero.report.reproduction)

    @property
    def label(self) -> str:
        """The status as the table prints it: a Verified vendor cell says whose word it rests on."""
        return (
            f"{self.status} ({self.reproduction})"
            if self.status == "Verified" and self.reproduction
            else self.status
        )


def latest_evidence(reports_dir: Path) -> dict[str, tuple[Path, dict]]:
    latest: dict[str, tuple[Path, dict]] = {}
    for path, doc in evidence.iter_evidence(reports_dir):
        seen = latest.get(doc["cell"])
        if seen is None or moment(doc["run"]["finished"]) > moment(seen[1]["run"]["finished"]):
            latest[doc["cell"]] = (path, doc)
    return latest


from_vendor = reproduction.from_vendor


def current_engine_versions(docs: list[dict]) -> dict[tuple[str, str], str]:
    """(hardware, engine name) -> version seen by the lab's most recent run that knew its version.

    Only the lab's own runs say what its hosts run now: a vendor's self-declared version (or
    date) must not turn the lab's cells Stale.
    """
    newest: dict[tuple[str, str], tuple[dt.datetime, str]] = {}
    for doc in docs:
        version = doc["engine"]["version"]
        if not version or version == UNKNOWN or from_vendor(doc):
            continue
        key = (doc["hardware"], doc["engine"]["name"])
        finished = moment(doc["run"]["finished"])
        if key not in newest or finished > newest[key][0]:
            newest[key] = (finished, version)
    return {k: v for k, (_, v) in newest.items()}


def stale_reasons(
    doc: dict,
    recipe_digest: str,
    current_engine: str | None,
    now: dt.datetime,
    max_age_days: float,
) -> list[str]:
    """Why this evidence no longer vouches for its cell (empty: it still does)."""
    reasons = []
    if doc["recipe"]["digest"] != recipe_digest:
        reasons.append(f"recipe changed (digest {doc['recipe']['digest'] or 'none'} -> {recipe_digest})")
    version = doc["engine"]["version"]
    if current_engine and version not in ("", UNKNOWN) and not same_engine(version, current_engine):
        reasons.append(f"engine changed ({version} -> {current_engine})")
    finished = parse_iso(doc["run"]["finished"])
    if finished is not None:
        age = (now - finished).total_seconds() / 86400
        if age < -FUTURE_SLACK_DAYS:
            reasons.append(f"dated in the future ({doc['run']['finished']})")
        elif age > max_age_days:
            reasons.append(f"evidence is {age:.0f} days old (window {max_age_days:g})")
    return reasons


def interval_flags(doc: dict) -> list[str]:
    """Each floor's figure with its 95% interval, or what its sample cannot support (issue 41)."""
    out = []
    for c in doc["checks"]:
        iv = (c.get("details") or {}).get("interval")
        if family_of(c) != "floor" or not isinstance(iv, dict) or c.get("measured") is None:
            continue
        metric = c["name"].split(":", 1)[-1].split("@", 1)[0]
        if iv.get("lo") is None or iv.get("hi") is None:
            out.append(f"{metric}: {iv.get('why') or 'no interval'}")
        else:
            out.append(f"{metric} {c['measured']:g} [{iv['lo']:g}, {iv['hi']:g}] (n={iv.get('n')})")
    return [f"intervals: {', '.join(out)}"] if out else []


def contended_flags(doc: dict) -> list[str]:
    """Checks measured while a host of the cell was contended (`details.contended`, issue 41
    item 4): their numbers are marked, never read as clean."""
    marked = [c["name"] for c in doc["checks"] if (c.get("details") or {}).get("contended")]
    return [f"contended: {', '.join(marked)}"] if marked else []


def golden_flags(doc: dict) -> list[str]:
    """Goldens this evidence was compared with that were recorded under another recipe digest or
    engine version than the run's (recomputed from the evidence, so older evidence says it too)."""
    flags: list[str] = []
    for check in doc["checks"]:
        details = check.get("details") or {}
        if family_of(check) != "golden":
            continue
        if check["verdict"] == "passed" and (flag := near_tie_flag(check["name"], details)):
            flags.append(flag)
        provenance = details.get("golden_provenance")
        if not isinstance(provenance, dict):
            continue
        for flag in provenance_differs(provenance, doc["recipe"]["digest"], doc["engine"]["version"]):
            if flag not in flags:
                flags.append(flag)
    return flags


def near_tie_flag(name: str, details: dict) -> str:
    """A golden that passed on a tolerated divergence, as the row's detail says it."""
    d = details.get("divergence")
    if not isinstance(d, dict):
        return ""
    try:
        return (
            f"{name} passed on a near-tie at token {int(d['position'])}: golden {str(d['golden_token'])!r} "
            f"({float(d['golden']['chosen']):.3f}), this run {str(d['output_token'])!r} "
            f"({float(d['output']['chosen']):.3f})"
        )
    except (KeyError, TypeError, ValueError):
        return f"{name} passed on a near-tie"


def row_for(
    matrix: Matrix,
    cell: Cell,
    found: tuple[Path, dict] | None,
    *,
    current_engine: str | None = None,
    now: dt.datetime | None = None,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
) -> Row:
    if not cell.supported:
        return Row(cell, "Unsupported", cell.reason, "matrix")
    if found is None:
        try:
            render(matrix, cell, placeholder_hosts(matrix, cell, hosts_needed(matrix.card(cell), cell)))
        except MissingValue as exc:
            return Row(cell, "Needs data", f"{exc.path} is null (to confirm)", "matrix")
        except ConfigError:
            pass  # e.g. a secret not set where the table is built: launching is not this table's concern
        if cell.published == "verified":
            source = matrix.card(cell).source
            detail = (
                "published as verified by the recipe's authors; no dayzero evidence or accepted submission"
            )
            return Row(cell, "Published", detail, f"published: {source}" if source else "published")
        return Row(cell, "Pending", "", "matrix")  # nobody published it: the matrix says it is to run
    path, doc = found
    when = utc_day(doc["run"]["finished"])
    engine = doc["engine"]["version"]
    # whose run: the lab's, or a vendor's accepted bundle (which, and when it was checked)
    checked = utc_day(doc["checked"]) if from_vendor(doc) and doc.get("checked") else ""
    source = reproduction.origin(reproduction.party(doc), reproduction.bundle_of(doc), checked)
    # a vendor's run date and engine version are its own, bounded but not recomputed
    stated = f" ({reproduction.VENDORS_WORD}: run date and engine version)" if from_vendor(doc) else ""
    engine += stated
    unmeasured = [c for c in doc["checks"] if c["verdict"] == NOT_MEASURED]
    unsure = [c for c in doc["checks"] if c["verdict"] == INCONCLUSIVE]
    if doc["verdict"] in ("passed", INCONCLUSIVE) and unsure:  # never green: an interval straddles a bound
        why = "; ".join(f"{c['name']}: {c['message']}" for c in unsure)
        status, detail = "Inconclusive", f"{when}, {engine}: {why}"
    elif doc["verdict"] == "passed" and unmeasured:
        why = "; ".join(sorted({c["message"] for c in unmeasured}))
        status, detail = "Pending", f"{when}, {engine}: {why} ({', '.join(c['name'] for c in unmeasured)})"
    elif doc["verdict"] == "passed":
        status, detail = "Verified", f"{when}, {engine}"
    else:
        failed = [c["name"] for c in doc["checks"] if c["verdict"] != "passed"]
        status = "Broken" if doc["verdict"] == "broken" else "Failed"
        reason = ", ".join(failed) or next(iter((doc.get("error") or "").splitlines()), "")[:160]
        detail = f"{when}: {reason}"
    contended = [
        f"{flag} ({reproduction.VENDORS_WORD})" if from_vendor(doc) else flag for flag in contended_flags(doc)
    ]
    flags = "".join(f"; {flag}" for flag in [*golden_flags(doc), *contended, *interval_flags(doc)])
    ids = {c.id for c in claims_for(matrix.card(cell), cell)}  # the card's: no other answer is shown
    if said := summary_line(claims_table.published(doc, ids)):
        flags += f"; {said}"
    answered = tuple(claims_table.rows_of(doc, ids))
    accepted = tuple(accepted_table.accepted_of(doc))
    reasons = (
        []
        if status == "Broken"
        else stale_reasons(
            doc,
            digest(matrix.card(cell), cell),
            current_engine,
            now or dt.datetime.now(dt.UTC),
            max_age_days,
        )
    )
    if reasons:
        return Row(
            cell,
            "Stale",
            f"{'; '.join(reasons)}; was {status} on {when}{stated}{flags}",
            source,
            path,
            answered,
            accepted,
        )
    return Row(cell, status, detail + flags, source, path, answered, accepted)


def carried(matrix: Matrix, latest: Mapping[str, tuple[Path, dict]]) -> tuple[dict, list[tuple[str, Path]]]:
    """The latest evidence by cell, that of a renamed cell (the engine axis added to or taken
    from its kind) carried to its new id; and the evidence no cell of the matrix is (id, file)."""
    ids = {c.id for c in matrix.cells}
    out = {k: v for k, v in latest.items() if k in ids}
    orphans = []
    for cell_id, (path, doc) in latest.items():
        if cell_id in ids:
            continue
        now = matrix.renamed(cell_id, doc["engine"]["name"])
        if now is None:
            orphans.append((cell_id, path))
        elif now.id not in out or moment(doc["run"]["finished"]) > moment(out[now.id][1]["run"]["finished"]):
            out[now.id] = (path, doc)
    return out, orphans


def orphaned(matrix: Matrix, reports_dir: Path) -> list[tuple[str, Path]]:
    """Evidence of cells the matrix no longer has under any id: said aloud, never dropped silently."""
    return carried(matrix, latest_evidence(reports_dir))[1]


def rows(
    matrix: Matrix,
    reports_dir: Path,
    *,
    now: dt.datetime | None = None,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
) -> list[Row]:
    latest, _ = carried(matrix, latest_evidence(reports_dir))
    docs = [doc for _, doc in evidence.iter_evidence(reports_dir)]
    engines = current_engine_versions(docs)
    out = []
    for cell in matrix.cells:
        found = latest.get(cell.id)
        engine_name = matrix.card(cell).engine.name
        row = row_for(
            matrix,
            cell,
            found,
            current_engine=engines.get((cell.hardware, engine_name)),
            now=now,
            max_age_days=max_age_days,
        )
        if row.status == "Verified" and found is not None:
            verdict = reproduction.reproduced_by(matrix, found[1], docs)
            if verdict is not None:  # a vendor's: who reproduced it, or on its word alone
                row = replace(row, reproduction=verdict.status, detail=f"{row.detail}; {verdict.words()}")
        out.append(row)
    return out


def _counts(table: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in table:
        counts[r.status] = counts.get(r.status, 0) + 1
    return counts


def _href(path: Path, base: Path) -> str:
    """A link to an evidence file whose name a vendor's run id is part of: percent-encoded."""
    return urllib.parse.quote(os.path.relpath(path, base))


def to_markdown(table: list[Row], base: Path) -> str:
    lines = [
        "# Acceptance table",
        "",
        "Generated by dayzero from evidence under `reports/evidence/` and the matrix; do not edit.",
        "",
        "| cell | status | detail | source | evidence |",
        "|---|---|---|---|---|",
    ]
    for r in table:
        link = f"[json]({_href(r.evidence, base)})" if r.evidence else ""
        detail, source = escape(redact(r.detail), "markdown"), escape(r.source, "markdown")
        lines.append(f"| `{escape(r.cell.id, 'code')}` | {r.label} | {detail} | {source} | {link} |")
    lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(_counts(table).items())), ""]
    lines += engine_grids.to_markdown(engine_grids.grids(table))
    if answered := [c for r in table for c in r.claims]:
        lines += [
            "## Claims",
            "",
            "Published numbers, held against the cells that run their prerequisites (latest evidence).",
            "",
            "| " + " | ".join(claims_table.HEADER) + " |",
            "|" + "---|" * len(claims_table.HEADER),
        ]
        for c in answered:
            lines.append("| " + " | ".join(escape(v, "markdown") for v in c.cells()) + " |")
        lines.append("")
    if accepted := [a for r in table for a in r.accepted]:
        header, body = accepted_table.table(accepted)
        lines += [
            "## Speculative acceptance",
            "",
            "Accepted length per workload (1 + accepted draft tokens per verification step, from the"
            " server's own counters around each workload; latest evidence).",
            "",
            "| " + " | ".join(escape(h, "markdown") for h in header) + " |",
            "|" + "---|" * len(header),
        ]
        lines += ["| " + " | ".join(escape(v, "markdown") for v in row) + " |" for row in body]
        lines.append("")
    return "\n".join(lines)


BADGE_COLOURS = {
    "Verified": "#15803d",
    "Failed": "#b91c1c",
    "Inconclusive": "#c2410c",
    "Broken": "#a16207",
    "Stale": "#7c3aed",
    "Published": "#0369a1",
    "Pending": "#64748b",
    "Needs data": "#0e7490",
    "Unsupported": "#334155",
}


def to_html(table: list[Row], base: Path, trends: Mapping[str, str] | None = None) -> str:
    """A self-contained page (no external assets; a few lines of inline script for the filters):
    the grid per model first (`dayzero.report.grid`), then every cell as a list, folded."""

    def esc(value: str) -> str:
        return escape(value, "html")

    def badge(status: str, text: str, attrs: str = "") -> str:
        """`text` is already escaped; `attrs` (an href) makes the badge a link."""
        tag = "a" if attrs else "span"
        return f'<{tag} class="badge" style="background:{BADGE_COLOURS[status]}"{attrs}>{text}</{tag}>'

    body = []
    for r in table:
        link = f'<a href="{esc(_href(r.evidence, base))}">json</a>' if r.evidence else ""
        body.append(
            f'<tr data-cell="{esc(r.cell.id)}" data-status="{esc(r.status)}" data-label="{esc(r.label)}"'
            f' data-reproduction="{esc(r.reproduction)}">'
            f"<td><code>{esc(r.cell.id)}</code></td><td>{badge(r.status, esc(r.label))}</td>"
            f"<td>{esc(redact(r.detail))}</td><td>{esc(r.source)}</td><td>{link}</td></tr>"
        )
    totals = ", ".join(f"{k} {v}" for k, v in sorted(_counts(table).items()))
    notes: dict[str, list[str]] = {}
    for g in engine_grids.grids(table):
        notes.setdefault(g.model, []).append(f"Engines side by side: {g.title} (adjacent rows above).")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8"><title>Acceptance table</title>',
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}"
            ".badge{color:#fff;border-radius:4px;padding:1px 6px;font-size:90%}"
            + status_grid.STYLE
            + "</style>",
            "</head><body>",
            "<h1>Acceptance table</h1>",
            "<p>Generated by dayzero from evidence under <code>reports/evidence/</code> and the matrix;"
            " do not edit. Hover a badge for its cell, status and reason; a linked badge opens its"
            " evidence.</p>",
            f"<p>Totals: {esc(totals)}</p>",
            *status_grid.to_html(
                status_grid.grids(table), esc, badge, lambda path: _href(path, base), notes, trends
            ),
            f"<details><summary>Every cell as a list ({len(table)})</summary>",
            "<table><thead><tr><th>cell</th><th>status</th><th>detail</th><th>source</th>"
            "<th>evidence</th></tr></thead><tbody>",
            *body,
            "</tbody></table></details>",
            *_claims_html([c for r in table for c in r.claims], esc),
            *_accepted_html([a for r in table for a in r.accepted], esc),
            "</body></html>",
            "",
        ]
    )


def _claims_html(answered: list[claims_table.ClaimRow], esc) -> list[str]:
    if not answered:
        return []
    head = "".join(f"<th>{esc(h)}</th>" for h in claims_table.HEADER)
    body = [
        f'<tr data-claim="{esc(c.claim)}">' + "".join(f"<td>{esc(v)}</td>" for v in c.cells()) + "</tr>"
        for c in answered
    ]
    return ["<h2>Claims</h2>", f"<table><thead><tr>{head}</tr></thead><tbody>", *body, "</tbody></table>"]


def _accepted_html(accepted: list[accepted_table.Accepted], esc) -> list[str]:
    if not accepted:
        return []
    header, body = accepted_table.table(accepted)
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    rows = [
        f'<tr data-accepted="{esc(row[1])}">' + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>"
        for row in body
    ]
    return [
        "<h2>Speculative acceptance</h2>",
        f"<table><thead><tr>{head}</tr></thead><tbody>",
        *rows,
        "</tbody></table>",
    ]


ORPHANED = "Orphaned evidence (cells the matrix no longer has, under any id):"


def write_acceptance(
    matrix: Matrix,
    reports_dir: Path,
    *,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    now: dt.datetime | None = None,
    trends: Mapping[str, str] | None = None,
) -> Path:
    """Write `acceptance.md` and `acceptance.html`; returns the Markdown path. `trends`: a cell's
    sparkline across nights (`dayzero acceptance --history`), under its badge in the grid."""
    reports_dir = Path(reports_dir)
    table = rows(matrix, reports_dir, now=now, max_age_days=max_age_days)
    out = reports_dir / "acceptance.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    cards = sorted((reports_dir / "cards").glob("*/*.html"))  # `dayzero card`'s benchmark cards
    md = [f"- [{c.parent.name} on {c.stem}]({_href(c, reports_dir)})" for c in cards]
    html = [
        f'<li><a href="{escape(_href(c, reports_dir), "html")}">'
        f"{escape(f'{c.parent.name} on {c.stem}', 'html')}</a></li>"
        for c in cards
    ]
    orphans = orphaned(matrix, reports_dir)
    lost = [f"- `{escape(c, 'code')}`: [{p.name}]({_href(p, reports_dir)})" for c, p in orphans]
    out.write_text(
        to_markdown(table, reports_dir)
        + ("\nBenchmark cards:\n\n" + "\n".join(md) + "\n" if md else "")
        + (f"\n{ORPHANED}\n\n" + "\n".join(lost) + "\n" if lost else "")
    )
    page = to_html(table, reports_dir, trends)
    if html:
        page = page.replace("</body>", "<h2>Benchmark cards</h2><ul>" + "".join(html) + "</ul></body>")
    (reports_dir / "acceptance.html").write_text(page)
    return out
