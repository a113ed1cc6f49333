"""A run's progress lines: appended to the run's `progress.log`, and shown where a person looks.

xdist workers cannot reach the terminal, so every worker also appends to
`<reports>/runs/<run id>/progress.log` (`tail -f` it to follow a parallel run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dayzero.clock import now_iso
from dayzero.run.records import RUNS

PROGRESS_LOG = "progress.log"


def progress_log(reports_dir: Path, run_id: str) -> Path:
    return Path(reports_dir) / RUNS / run_id / PROGRESS_LOG


@dataclass(frozen=True)
class Progress:
    """A `say` for a `RunContext`: one timestamped line per message, tagged with the worker."""

    path: Path
    worker: str = "master"
    show: Callable[[str], None] | None = None  # the terminal, where this process can reach one

    def __call__(self, message: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.write(f"{now_iso()} [{self.worker}] {message}\n")
        if self.show is not None:
            self.show(message)
