"""A run as the store's tables hold it: made where its evidence file is read (a worker process of
`sources`), inserted by the store's writer (`store`). Its own module so that neither imports
the other's job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from dayzero.history.points import Run


class Rows(NamedTuple):
    """A run as the store's tables hold it, made where its file is read (a worker process: a
    tuple pickles fast), so that the writer only inserts."""

    run: tuple  # the store's _RUN_COLUMNS
    points: tuple[tuple, ...]  # the store's _POINT_COLUMNS

    @property
    def key(self) -> tuple[str, str]:
        return self.run[0], self.run[1]


def rows_of(path: Path | str, r: Run) -> Rows:
    run = (r.uid, r.cell, r.lab, r.controller, r.run_id, r.finished, r.source, r.vendor, r.verdict)
    facts = json.dumps(r.facts, sort_keys=True)
    return Rows(
        (*run, facts, str(path)),
        tuple((r.uid, r.cell, p.series, p.value, int(p.higher_is_better), p.lo, p.hi) for p in r.points),
    )
