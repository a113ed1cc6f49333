"""Parse and validate every document of a bundle; later checks only see documents that passed.

Hostile JSON (NaN, huge nesting, wrong types) becomes a finding here, so the recompute and the
anti-gaming checks can trust shapes and stay simple.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema

from dayzero import devices
from dayzero.run.records import cell_folder, is_metrics_file, is_records_file
from dayzero.spec import yamlfile
from dayzero.submission.bundle import MANIFEST, SUBMISSION, Bundle, Reference, Subject, in_layout
from dayzero.submission.findings import Finding, short


class _Constant(ValueError):
    pass


def _reject_constant(name: str):
    raise _Constant(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Constant(f"{text[:20]} overflows a float")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 18:  # beyond int64: no count or time of ours, and floats overflow on it
        raise _Constant(f"{text[:20]}... is too large")
    return int(text)


MAX_DEPTH = 32  # the harness nests a few levels; deeper is only there to exhaust a recursion


def depth(doc: Any) -> int:
    """How deeply a parsed document nests, counted without recursion (it may be hostile)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            stack += [(v, level + 1) for v in (value.values() if isinstance(value, dict) else value)]
    return deepest


def parse(bundle: Bundle, name: str) -> tuple[Any, Finding | None]:
    try:
        doc = json.loads(
            bundle.path(name).read_bytes(),
            parse_constant=_reject_constant,
            parse_float=_finite,
            parse_int=_bounded_int,
        )
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        return None, Finding(name, "schema.json", f"not JSON: {short(str(exc))}", "a JSON document")
    if (levels := depth(doc)) > MAX_DEPTH:
        return None, Finding(name, "schema.depth", f"{levels} levels of nesting", f"at most {MAX_DEPTH}")
    return doc, None


@cache
def validator(schema_name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(yamlfile.schema(schema_name))


def _invalid(doc: Any, schema_name: str) -> str:
    try:
        if validator(schema_name).is_valid(doc):
            return ""
        error = jsonschema.exceptions.best_match(validator(schema_name).iter_errors(doc))
    except RecursionError:
        return "nested too deeply"
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path) or "<root>"
    return f"{where}: {short(error.message, 160)}"


def load(bundle: Bundle, name: str, schema_name: str) -> tuple[Any, list[Finding]]:
    doc, bad = parse(bundle, name)
    if bad:
        return None, [bad]
    if problem := _invalid(doc, schema_name):
        return None, [Finding(name, f"schema.{schema_name}", problem, f"valid per {schema_name}.schema.json")]
    return doc, []


def _number(value, null: bool = True) -> bool:
    return (value is None and null) or (isinstance(value, int | float) and not isinstance(value, bool))


def _integer(value, null: bool = True) -> bool:
    return (value is None and null) or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def record_problem(r) -> str:
    """Why one raw record cannot be read by the checks ('' when it can)."""
    if not isinstance(r, dict):
        return "not an object"
    if not isinstance(r.get("id"), str):
        return "id is not a string"
    if not _integer(r.get("max_tokens"), null=False):
        return "max_tokens is not a count"
    for key in ("send", "first", "end"):
        if not _number(r.get(key)):
            return f"{key} is not a time"
    chunks = r.get("chunks")
    if chunks is not None and not (isinstance(chunks, list) and all(_number(c, null=False) for c in chunks)):
        return "chunks are not times"
    for key in ("text", "error", "kind"):
        if r.get(key) is not None and not isinstance(r[key], str):
            return f"{key} is not text"
    if not _integer(r.get("input_len")):
        return "input_len is not a count"
    usage = r.get("usage")
    if usage is not None and not (
        isinstance(usage, dict)
        and _integer(usage.get("completion_tokens"))
        and _integer(usage.get("prompt_tokens"))
    ):
        return "usage token counts are not counts"
    timings = r.get("timings")
    if timings is not None and not (
        isinstance(timings, dict)
        and all(_number(timings.get(k, 0), null=False) for k in ("draft_n", "draft_n_accepted"))
    ):
        return "timings are not numbers"
    return ""


def _counters_ok(value) -> bool:
    if isinstance(value, dict):
        return set(value) <= {"drafts", "draft_tokens", "accepted"} and all(
            _number(v, null=False) for v in value.values()
        )
    return _number(value)


def records_problem(doc) -> str:
    """Raw records as the host client writes them (dayzero/loadgen/client.py), constrained where the
    checks read them; checked in Python, not with a JSON Schema, because bundles hold thousands."""
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        return "<root>: no records list"
    client = doc.get("client", {})
    if not isinstance(client, dict) or not all(
        _integer(client.get(k)) for k in ("processes", "concurrency", "cpu_count")
    ):
        return "client: processes, concurrency and cpu_count must be counts"
    procs = doc.get("procs", [])
    if not isinstance(procs, list) or not all(
        isinstance(p, dict)
        and "cpu_s" in p
        and "wall_s" in p
        and _number(p["cpu_s"])
        and _number(p["wall_s"])
        and (p.get("lag_ms") is None or (isinstance(p["lag_ms"], dict) and _number(p["lag_ms"].get("p99"))))
        for p in procs
    ):
        return "procs: cpu_s, wall_s and lag_ms.p99 must be numbers"
    counters = doc.get("counters", {})
    if not isinstance(counters, dict) or not all(_counters_ok(counters.get(k)) for k in ("before", "after")):
        return "counters: before and after must be numbers or {drafts, draft_tokens, accepted}"
    if problem := power_problem(doc.get("power")):
        return problem
    if not isinstance(doc.get("power_host", ""), str):
        return "power_host: the client's host name, a string"
    hosts = doc.get("power_hosts") or {}
    if not isinstance(hosts, dict):
        return "power_hosts: an object of host name -> power readings"
    for host, power in hosts.items():
        if problem := power_problem(power, f"power_hosts.{host}"):
            return problem
    for i, r in enumerate(doc["records"]):
        if problem := record_problem(r):
            return f"records/{i}: {problem}"
    return ""


def power_problem(power, where: str = "power") -> str:
    """One host's power readings as the sampler keeps them (`PowerSampler.finish`,
    `lab.power.merge_windows`), constrained where `checks.energy` reads them; null: none taken."""
    if power is None:
        return ""
    if not isinstance(power, dict):
        return f"{where}: an object of readings or null"
    for key in ("t0", "t1"):
        if not _number(power.get(key), null=False):
            return f"{where}.{key}: a number of seconds"
    if not _number(power.get("interval")):
        return f"{where}.interval: a number of seconds or null"
    for key in ("errors", "absent"):
        said = power.get(key, [])
        if not isinstance(said, list) or not all(isinstance(x, str) for x in said):
            return f"{where}.{key}: a list of strings"
    for tool in devices.power_readers():  # each tool checks its own readings
        if tool.record_key in power and (
            problem := tool.power_problem(power[tool.record_key], f"{where}.{tool.record_key}")
        ):
            return problem
    return ""


def load_records(bundle: Bundle, name: str) -> tuple[Any, list[Finding]]:
    doc, bad = parse(bundle, name)
    if bad:
        return None, [bad]
    if problem := records_problem(doc):
        return None, [Finding(name, "schema.records", problem, "raw records as the host client writes them")]
    return doc, []


def _snapshot_ok(snap) -> bool:
    return (
        isinstance(snap, dict)
        and isinstance(snap.get("target"), str)
        and isinstance(snap.get("body"), str)
        and (snap.get("status") is None or _integer(snap.get("status"), null=False))
    )


def metrics_problem(doc) -> str:
    """A phase's /metrics snapshots as the run keeps them (`dayzero.run.phases.metered`)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("phase"), str):
        return "<root>: no phase"
    for when in ("before", "after"):
        snaps = doc.get(when)
        if not isinstance(snaps, list) or not all(_snapshot_ok(x) for x in snaps):
            return f"{when}: a list of {{target, status, body}} snapshots"
    return ""


def load_metrics(bundle: Bundle, name: str) -> tuple[Any, list[Finding]]:
    doc, bad = parse(bundle, name)
    if bad:
        return None, [bad]
    if problem := metrics_problem(doc):
        return None, [Finding(name, "schema.metrics", problem, "/metrics snapshots as the run keeps them")]
    return doc, []


def load_subject(bundle: Bundle) -> tuple[Subject, list[Finding]]:
    """Every JSON document the layout names, parsed and validated once."""
    findings: list[Finding] = []
    manifest = submission = None
    if bundle.has(MANIFEST):
        manifest, bad = load(bundle, MANIFEST, "manifest")
        findings += bad
    if bundle.has(SUBMISSION):
        submission, bad = load(bundle, SUBMISSION, "submission")
        findings += bad
    else:
        findings.append(
            Finding(SUBMISSION, "schema.submission", "no submission.json", "vendor, system, harness, cells")
        )
    evidence, records, metrics = {}, {}, {}
    for name in bundle.files:
        if name.startswith("evidence/"):
            doc, bad = load(bundle, name, "evidence")
            findings += bad
            if doc is not None:
                evidence[name] = doc
        elif is_metrics_file(name):
            doc, bad = load_metrics(bundle, name)
            findings += bad
            if doc is not None:
                metrics[name] = doc
        elif is_records_file(name):
            doc, bad = load_records(bundle, name)
            findings += bad
            if doc is not None:
                records[name] = doc
    return Subject(bundle, manifest, submission, evidence, records, metrics), findings


def check_layout(s: Subject, ref: Reference) -> list[Finding]:
    """A closed set of files: anything outside the layout is a finding, whatever the manifest says."""
    return [
        Finding(
            name,
            "schema.layout",
            "a file outside the bundle layout",
            "manifest, submission, evidence/, runs/",
        )
        for name in s.bundle.files
        if not in_layout(name)
    ]


def check_references(s: Subject, ref: Reference) -> list[Finding]:
    """Evidence may only point at records and logs of its own cell and run, inside the bundle layout."""
    out = []
    for name, doc in s.evidence.items():
        prefix = cell_folder(doc["run"]["id"], doc["cell"]) + "/"
        for rel in doc.get("records", []) + doc.get("logs", []):
            if not (rel.startswith(prefix) and in_layout(rel)):
                out.append(Finding(name, "schema.reference", short(rel, 160), f"a file under {prefix}"))
    return out


def check_fresh_evidence(s: Subject, ref: Reference) -> list[Finding]:
    """Only `accept` writes a vendor source, a check date or a submission record into evidence."""
    return [
        Finding(name, "schema.evidence", f"{key} already set", "evidence as the harness wrote it")
        for name, doc in sorted(s.evidence.items())
        for key in ("checked", "submission")
        if key in doc
    ]


def check_referenced(s: Subject, ref: Reference) -> list[Finding]:
    """Every run file is named by an evidence document: nothing rides along unchecked."""
    named = {rel for doc in s.evidence.values() for rel in doc.get("records", []) + doc.get("logs", [])}
    return [
        Finding(
            name, "schema.unreferenced", "a run file no evidence names", "records and logs of the evidence"
        )
        for name in s.bundle.files
        if name.startswith("runs/") and name not in named
    ]


CHECKS = (check_layout, check_references, check_fresh_evidence, check_referenced)
