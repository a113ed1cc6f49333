"""Issue 23 item 2: a cross-check fails closed.

Every field a cross-check needs is required (its absence is a finding naming the field, never a
skipped comparison or an "at least"); the server's counters are finite, non-negative, plausible
and monotone between snapshots, read only from the recipe's own launches; the server's time is
positive wherever it produced tokens. Each forgery edits the valid bundle consistently (the
evidence recomputed to match) and re-signs it, as a vendor holding its own key could.

Every forgery that applies to any llama.cpp bundle is built twice (`either_lab`, tests/conftest.py):
from the synthetic lab and from the main job's real cpu run. Built from the synthetic lab only:
requests marked errored (the forger removes their lines from the log by task number, which the
synthetic server assigns in the order requests were sent; llama-server numbers its tasks by its
own counter, so finding a request's task is the checker's reconciliation, not a forger's input),
and the power fields (a schema check of the records' own fields, alike for any bundle).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from dayzero.submission.engine_metrics import client_account

from .submission_corpus.hostile import Members, evidence_name, out, perf_file, recomputed, server_log_name
from .submission_corpus.lab import VENDOR, Lab, make_lab
from .submission_corpus.tarkit import edit_json, resign, write_members


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("vendor-lab"))


def forged(lab: Lab, tmp: Path, change: Callable[[Members], Members]) -> Path:
    members = recomputed(change(lab.members()), lab, tmp)
    return write_members(out(tmp, "forged"), resign(members, lab.key, VENDOR, tmp))


def rejected_naming(lab: Lab, bundle: Path, requirement: str, *words: str) -> None:
    report = lab.check(bundle)
    assert not report.accepted, "accepted"
    hits = [
        f
        for f in report.findings
        if f.requirement == requirement and all(w in f.found + " " + f.expected for w in words)
    ]
    assert hits, "\n".join(report.lines())


def metrics_of(members: Members, rel: str = "") -> str:
    return (rel or perf_file(members, evidence_name(members))).replace(".json", ".metrics.json")


def set_counter(members: Members, name: str, before: str | None, after: str | None, rel: str = "") -> Members:
    """One counter of a phase's snapshots rewritten (None: left as it is); the first perf phase
    of the low-latency baseline cell unless `rel` names another records file."""

    def change(doc):
        for when, value in (("before", before), ("after", after)):
            if value is None:
                continue
            for snap in doc[when]:
                snap["body"] = re.sub(rf"(?m)^{re.escape(name)} .*$", f"{name} {value}", snap["body"])

    return edit_json(members, metrics_of(members, rel), change)


def counter(members: Members, when: str, name: str, rel: str = "") -> float:
    body = json.loads(members[metrics_of(members, rel)])[when][0]["body"]
    return float(re.search(rf"(?m)^{re.escape(name)} (\S+)$", body).group(1))


# --- a field a cross-check needs --------------------------------------------------------------


def test_cached_tokens_are_required_not_a_reason_to_skip_the_prompt_comparison(either_lab, tmp_path):
    """Without `cached_tokens` the prompt tokens the server evaluated were compared with nothing,
    in the log and in the counters alike: the comparison was skipped."""

    def change(members):
        def edit(doc):
            for r in doc["records"]:
                del r["usage"]["prompt_tokens_details"]

        return edit_json(members, perf_file(members, evidence_name(members)), edit)

    bundle = forged(either_lab, tmp_path, change)
    rejected_naming(either_lab, bundle, "engine.records", "usage.prompt_tokens_details.cached_tokens")
    rejected_naming(either_lab, bundle, "engine.metrics", "usage.prompt_tokens_details.cached_tokens")


@pytest.mark.parametrize("field", ["e2e_s", "errors", "usage.cached_tokens"])
def test_a_warmup_without_a_field_the_counters_need_names_it(field):
    """Without its end-to-end time a warm-up's time was infinite: the server's time never exceeded it."""
    warm = {
        "requests": 2,
        "errors": 0,
        "usage": {"prompt_tokens": 8, "completion_tokens": 4, "cached_tokens": 0},
        "e2e_s": 0.5,
    }
    where = warm["usage"] if field.startswith("usage.") else warm
    del where[field.split(".")[-1]]
    record = {
        "id": "a",
        "send": 1.0,
        "end": 2.0,
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}},
    }
    _, why = client_account({"records": [record], "warmup": warm}, "llama.cpp")
    assert f"warmup.{field}" in why


def _tasks_of(members: Members, ev: str, rel: str, ids: set[str]) -> list[int]:
    """The log's task numbers of these requests (the synthetic server numbers tasks in the order
    their requests were sent, over the whole cell)."""
    doc = json.loads(members[ev])
    sent = []
    for name in doc["records"]:
        if name.endswith(".metrics.json"):
            continue
        sent += [(r["send"], name, r["id"]) for r in json.loads(members[name])["records"]]
    order = [(name, rid) for _, name, rid in sorted(sent)]
    return [order.index((rel, rid)) for rid in sorted(ids)]


def test_requests_marked_errored_leave_the_counters_exact(lab, tmp_path):
    """Two requests of a rate sweep's busiest point marked errored (an error is an SLO miss, not a
    failed check) and taken out of the log and of the server's seconds: the token counters, once
    "at least" the records' when a request errored, must still equal them."""

    def change(members):
        ev = evidence_name(members, "high_throughput")
        rel = next(r for r in json.loads(members[ev])["records"] if r.endswith("/sweep-rate-q4-r0.json"))
        records = json.loads(members[rel])["records"]
        slow = sorted(records, key=lambda r: r["end"] - r["send"])[-2:]
        ids = {r["id"] for r in slow}
        tasks = _tasks_of(members, ev, rel, ids)
        log = next(r for r in json.loads(members[ev])["logs"] if r.endswith(".log"))
        kept = [
            line
            for line in members[log].decode().splitlines()
            if not any(f"| task {t} |" in line for t in tasks)
        ]
        members = {**members, log: ("\n".join(kept) + "\n").encode()}
        seconds = sum(r["chunks"][-1] for r in slow)

        def mark(doc):
            for r in doc["records"]:
                if r["id"] in ids:
                    r["error"] = "timeout after 60s"

        members = edit_json(members, rel, mark)
        name = "llamacpp:tokens_predicted_seconds_total"
        less = f"{counter(members, 'after', name, rel) - seconds:.6f}"
        return set_counter(members, name, None, less, rel)

    rejected_naming(lab, forged(lab, tmp_path, change), "engine.metrics", "tokens generated")


# --- counters that cannot be -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-5", "1e300"])
def test_a_counter_that_is_not_a_plausible_count_is_a_finding(either_lab, tmp_path, value):
    """The same impossible value before and after: the difference said nothing was wrong."""
    name = "llamacpp:prompt_seconds_total"
    bundle = forged(either_lab, tmp_path, lambda m: set_counter(m, name, value, value))
    rejected_naming(either_lab, bundle, "engine.metrics", name)


def test_a_counter_that_runs_backwards_between_snapshots_is_a_finding(either_lab, tmp_path):
    name = "llamacpp:prompt_tokens_cached_total"
    bundle = forged(either_lab, tmp_path, lambda m: set_counter(m, name, "5", "0"))
    rejected_naming(either_lab, bundle, "engine.metrics", name, "backwards")


def test_a_metrics_target_that_is_not_a_launch_of_the_recipe_is_a_finding(either_lab, tmp_path):
    def change(members):
        def elsewhere(doc):
            for when in ("before", "after"):
                for snap in doc[when]:
                    snap.update(target="server[0]@elsewhere", url="http://10.0.0.9:9999/metrics")

        return edit_json(members, metrics_of(members), elsewhere)

    rejected_naming(either_lab, forged(either_lab, tmp_path, change), "engine.metrics", "server[0]@elsewhere")


def test_no_server_time_for_a_phase_that_generated_tokens_is_a_finding(either_lab, tmp_path):
    def change(members):
        for name in ("llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_seconds_total"):
            members = set_counter(members, name, None, str(counter(members, "before", name)))
        return members

    rejected_naming(either_lab, forged(either_lab, tmp_path, change), "engine.metrics", "server time")


def test_a_request_the_log_served_in_no_time_is_a_finding(either_lab, tmp_path):
    def change(members):
        log = server_log_name(members)
        text = members[log].decode()
        task = re.search(r"\| task (\d+) \| prompt eval time", text).group(1)  # the first served
        for kind in ("prompt eval", "       eval", "      total"):
            text = re.sub(rf"(task {task} \| {kind} time = +)[\d.]+ ms", r"\g<1>0.00 ms", text, count=1)
        return {**members, log: text.encode()}

    rejected_naming(either_lab, forged(either_lab, tmp_path, change), "engine.records", "server time")


def test_a_launch_fact_the_log_leaves_out_is_a_finding(either_lab, tmp_path):
    """A log without its thread count compared nothing with the recipe's --threads."""

    def change(members):
        log = server_log_name(members)
        kept = [line for line in members[log].decode().splitlines() if "n_threads" not in line]
        return {**members, log: ("\n".join(kept) + "\n").encode()}

    rejected_naming(either_lab, forged(either_lab, tmp_path, change), "engine.launch", "threads")


def test_records_that_do_not_state_their_concurrency_are_a_finding(either_lab, tmp_path):
    def change(members):
        rel = perf_file(members, evidence_name(members))
        return edit_json(members, rel, lambda doc: doc["client"].pop("concurrency"))

    rejected_naming(
        either_lab, forged(either_lab, tmp_path, change), "antigaming.concurrency", "client.concurrency"
    )


# --- power readings: a hostile value is a finding naming its field, never a crash --------------

GOOD_POWER = {"t0": 0.0, "t1": 1.0, "interval": 0.5, "errors": [], "absent": ["amd-smi not found"]}
BAD_POWER = {
    "power": ("power", "not a reading"),
    "power.t1": ("power", {**GOOD_POWER, "t1": "soon"}),
    "power.errors": ("power", {**GOOD_POWER, "errors": [{"x": 1}]}),
    "power.nvidia_smi": ("power", {**GOOD_POWER, "nvidia_smi": "no header, no watts\n1, 2\n"}),
    "power.amd_smi/0.t": ("power", {**GOOD_POWER, "amd_smi": [{"t": None, "text": "GPU: 0"}]}),
    "power.amd_smi/0.text": ("power", {**GOOD_POWER, "amd_smi": [{"t": 0.5, "text": 7}]}),
    "power.rapl.before": ("power", {**GOOD_POWER, "rapl": {"before": [], "after": {}}}),
    "power.rapl.after.intel-rapl:0.energy_uj": (
        "power",
        {
            **GOOD_POWER,
            "rapl": {
                "before": {"intel-rapl:0": {"name": "package-0", "energy_uj": 1, "max_energy_range_uj": 9}},
                "after": {
                    "intel-rapl:0": {"name": "package-0", "energy_uj": "lots", "max_energy_range_uj": 9}
                },
            },
        },
    ),
    "power_host": ("power_host", ["h"]),
    "power_hosts": ("power_hosts", ["h1", "h2"]),
    "power_hosts.h1.t0": ("power_hosts", {"h1": {**GOOD_POWER, "t0": "x"}}),
}


def sweep_records(members: Members) -> str:
    return next(name for name in members if "/records/sweep-" in name and name.endswith("-r0.json"))


@pytest.mark.parametrize("field", list(BAD_POWER))
def test_a_power_field_that_is_not_a_reading_is_a_finding_naming_it(lab, tmp_path, field):
    key, value = BAD_POWER[field]
    members = lab.members()
    members = edit_json(members, sweep_records(members), lambda doc: doc.__setitem__(key, value))
    bundle = write_members(out(tmp_path, "power"), resign(members, lab.key, VENDOR, tmp_path))
    rejected_naming(lab, bundle, "schema.records", f"{field}:")


def test_a_well_formed_power_reading_passes_the_records_schema():
    from dayzero.submission.schema import records_problem

    doc = {"records": [], "client": {"processes": 1, "concurrency": 1, "cpu_count": 2}}
    assert records_problem({**doc, "power": GOOD_POWER, "power_host": "h", "power_hosts": {"h2": None}}) == ""
    assert records_problem({**doc, "power": None}) == ""
