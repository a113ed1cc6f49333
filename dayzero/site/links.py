"""Where a run's evidence and its night's Allure report are published: a template per lab.

Each lab publishes its reports where it likes (a web server, an object store), so the site is
told with `--evidence-url` / `--allure-url` templates, one for every lab or `LAB=TEMPLATE` for
one, with the fields of `FIELDS` (`{cell}` is the cell id, the run's stable name). Without a
template a run's file is linked relatively where the build machine holds it (a site built beside
the nightly root and published with it), else it is said to be unpublished. Allure 3 gives a
test no address that survives a rebuild: the link is the night's report.
"""

from __future__ import annotations

import os
import string
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dayzero.errors import ConfigError
from dayzero.evidence import slug

FIELDS = {
    "lab": "the run's lab",
    "cell": "the cell id",
    "slug": "the cell id with / as __",
    "run": "the run id",
    "controller": "the controller that ran it",
    "night": "the folder of the run's night (holding evidence/ and allure-report/)",
    "file": "the evidence file's name",
}
ALLURE_INDEX = Path("allure-report") / "index.html"  # in a night's folder (report.nightly)


@dataclass(frozen=True)
class Links:
    """(lab, template) pairs per target; lab '' is every lab's."""

    evidence: tuple[tuple[str, str], ...] = ()
    allure: tuple[tuple[str, str], ...] = ()

    def evidence_href(self, run: Mapping, page_dir: Path) -> str | None:
        return _href(self.evidence, run, page_dir, Path(run["path"]))

    def allure_href(self, run: Mapping, page_dir: Path) -> str | None:
        night = night_dir(run["path"])
        return _href(self.allure, run, page_dir, night / ALLURE_INDEX if night else None)


def parse(values: Sequence[str], flag: str) -> tuple[tuple[str, str], ...]:
    """`[LAB=]TEMPLATE` values of a flag; a field outside FIELDS is refused naming it."""
    out = []
    for value in values:
        lab, _, template = value.partition("=")
        if not template or any(c in lab for c in "/:{?"):  # no lab named: the '=' is the URL's
            lab, template = "", value
        for _, field, _, _ in string.Formatter().parse(template):
            if field is not None and field not in FIELDS:
                raise ConfigError(
                    flag,
                    repr(value),
                    f"unknown field {{{field}}}; expected one of " + ", ".join(f"{{{f}}}" for f in FIELDS),
                )
        out.append((lab, template))
    return tuple(out)


def night_dir(path: str) -> Path | None:
    """The folder of a run's night: the one holding its `evidence/` folder (None: the file is
    not laid out as a night's, `report.nightly`)."""
    p = Path(path)
    return p.parent.parent if p.parent.name == "evidence" else None


def fields(run: Mapping) -> dict[str, str]:
    path, night = Path(run["path"]), night_dir(run["path"])
    raw = {
        "lab": run["lab"],
        "cell": run["cell"],
        "slug": slug(run["cell"]),
        "run": run["run_id"],
        "controller": run["controller"],
        "night": night.name if night else "",
        "file": path.name,
    }
    return {k: urllib.parse.quote(v, safe="/") for k, v in raw.items()}


def _href(
    templates: Sequence[tuple[str, str]], run: Mapping, page_dir: Path, local: Path | None
) -> str | None:
    mine = dict(templates)
    template = mine.get(run["lab"], mine.get(""))
    if template is not None:
        return template.format(**fields(run))
    if local is None or not local.is_file():
        return None
    return urllib.parse.quote(os.path.relpath(local.resolve(), Path(page_dir).resolve()))
