"""Raw-record names and paths: where a phase's client answer is kept, and under which name.

Every client answer of a cell run is kept as `runs/<run>/<cell slug>/records/<phase>.json`
(relative to the reports directory, and so inside a submission bundle), next to the server logs
in `runs/<run>/<cell slug>/logs/`. The server's own `/metrics` counters read just before and just
after a phase are kept beside its records as `records/<phase>.metrics.json` (a second,
server-side account of the phase). The phases are:

    probes                              the card's probes
    scores                              the probes' goldens scored by the engine (teacher forcing)
    accuracy-<eval>                     one accuracy gate's questions
    spec-<workload>                     speculative acceptance on one workload
    tools-<suite>                       one tool-use suite's cases (tool-call conformance)
    perf-<workload>[-m<k>]-c<conc>-r<rep>
                                        one repetition of a performance measurement; `-m<k>` tells
                                        the k-th (k >= 1) measurement of one workload at one
                                        concurrency apart (another length, prompt count or
                                        repetitions)
    sweep-<sweep>-<point>-r<rep>        one repetition of one point of a benchmark-card sweep
                                        (point: c<concurrency>, q<rate>, isl<input length>)

The run, the submission checker and the reports all name records through this module.
"""

from __future__ import annotations

import re

from dayzero.evidence import slug

RUNS = "runs"
RECORDS = "records"
LOGS = "logs"
PROBES = "probes"
SCORES = "scores"
METRICS_SUFFIX = ".metrics.json"
# `throughput-c<k>`: what older runs named their performance records
_PERFORMANCE = re.compile(r"^(?:perf|throughput)-(?P<load>.+?)(?:-r\d+)?$")


def accuracy(eval_name: str) -> str:
    return f"accuracy-{eval_name}"


def tool_calls(suite: str) -> str:
    return f"tools-{suite}"


def speculative(workload: str) -> str:
    return f"spec-{workload}"


def performance(workload: str, concurrency: int, repetition: int, measurement: int = 0) -> str:
    """One repetition of the `measurement`-th measurement of a workload at a concurrency."""
    variant = f"-m{measurement}" if measurement else ""
    return f"perf-{workload}{variant}-c{concurrency}-r{repetition}"


def sweep(name: str, label: str, repetition: int) -> str:
    """One repetition of one point of a sweep (`dayzero.spec.sweeps`)."""
    return f"sweep-{name}-{label}-r{repetition}"


def load_label(phase: str) -> str | None:
    """`perf-default-c4-r2` -> `default-c4`: the measurement a performance phase belongs to, its
    repetitions pooled; None for the other phases."""
    match = _PERFORMANCE.match(phase)
    return match["load"] if match else None


def cell_folder(run_id: str, cell_id: str) -> str:
    """A cell run's folder (records and logs), relative to the reports directory."""
    return f"{RUNS}/{run_id}/{slug(cell_id)}"


def folder(run_id: str, cell_id: str) -> str:
    return f"{cell_folder(run_id, cell_id)}/{RECORDS}"


def path(run_id: str, cell_id: str, phase: str) -> str:
    return f"{folder(run_id, cell_id)}/{phase}.json"


def metrics_path(run_id: str, cell_id: str, phase: str) -> str:
    """The server's /metrics snapshots taken around one phase, next to the phase's records."""
    return f"{folder(run_id, cell_id)}/{phase}{METRICS_SUFFIX}"


def metrics_for(records_file: str) -> str:
    """`.../records/perf-x-c1-r0.json` -> `.../records/perf-x-c1-r0.metrics.json`."""
    return records_file.removesuffix(".json") + METRICS_SUFFIX


def is_metrics_file(name: str) -> bool:
    return f"/{RECORDS}/" in name and name.endswith(METRICS_SUFFIX)


def logs_folder(run_id: str, cell_id: str) -> str:
    return f"{cell_folder(run_id, cell_id)}/{LOGS}"


def patterns(part: str) -> tuple[str, str]:
    """Regexes of a records file and a log file path, with `part` the regex of one path part."""
    return (
        rf"^{RUNS}/{part}/{part}/{RECORDS}/{part}\.json$",
        rf"^{RUNS}/{part}/{part}/{LOGS}/{part}$",
    )


def is_records_file(name: str) -> bool:
    """A phase's client records (its metrics snapshots are not records)."""
    return f"/{RECORDS}/" in name and name.endswith(".json") and not is_metrics_file(name)
