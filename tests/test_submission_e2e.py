"""A vendor submission from a real cpu run: packed, checked clean, accepted into the table.

The run is real: the main job (`pytest -m cpu`: llama-server, SGLang 0.5.23 and vLLM 0.32.0
serving SmolLM2, the nine one-host cpu cells with their full protocol and sweeps), shared with
tests/test_e2e_cpu.py through the session's `main_job`; the checker recomputes every claim of
that run from its raw records, against the repository's own matrix. The corpus of hostile
bundles is replayed on the real bundle as well.
"""

from __future__ import annotations

import json
import re

import pytest

from dayzero.spec.card import gates_for
from dayzero.submission.accept import accept
from dayzero.submission.recompute import recompute_all
from dayzero.submission.schema import load_subject

from .conftest import needs_engine
from .submission_corpus.hostile import CASES, Case, targeting
from .submission_corpus.lab import VENDOR

pytestmark = [pytest.mark.e2e, needs_engine]
CPU_CELLS = [  # every one-host cpu cell of the three engines: the main job's
    "smollm2-135m/cpu+llama.cpp/high_throughput/baseline",
    "smollm2-135m/cpu+llama.cpp/high_throughput/ngram_spec",
    "smollm2-135m/cpu+llama.cpp/low_latency/baseline",
    "smollm2-135m/cpu+llama.cpp/low_latency/ngram_spec",
    "smollm2-135m/cpu+sglang/high_throughput/baseline",
    "smollm2-135m/cpu+sglang/low_latency/baseline",
    "smollm2-135m/cpu+vllm/high_throughput/baseline",
    "smollm2-135m/cpu+vllm/low_latency/baseline",
    "smollm2-135m/cpu+vllm/low_latency/ngram_spec",
]


def normalise(markdown: str) -> str:
    markdown = re.sub(r"sha256 `[0-9a-f]{64}`", "sha256 `<sha256>`", markdown)
    markdown = re.sub(r"SHA256:[A-Za-z0-9+/=]+", "SHA256:<key>", markdown)
    markdown = re.sub(r"@ [0-9a-f]{40}", "@ <commit>", markdown)
    return re.sub(r"checked: \S+", "checked: <date>", markdown)


SNAPSHOT = """# Submission check: ACCEPTED

- bundle: `bundle.tar.gz` (sha256 `<sha256>`)
- vendor: acme
- signature: Good "dayzero" signature for acme with ED25519 key SHA256:<key>
- harness: {version} @ <commit> (clean)
- checked: <date>
- findings: 0

## Cells

| cell | findings |
|---|---|
{cells}
"""


def test_real_bundle_packs_checks_clean_and_every_claim_is_recomputed(real_lab):
    report = real_lab.check(real_lab.bundle)
    assert report.accepted, "\n".join(report.lines())
    assert sorted(report.cells) == CPU_CELLS
    cells = "\n".join(f"| `{c}` | 0 |" for c in report.cells)
    assert normalise(report.to_markdown()) == SNAPSHOT.format(version=real_lab.harness.version, cells=cells)

    from dayzero.submission.extract import extract

    bundle, findings = extract(real_lab.bundle, real_lab.root / "extracted")
    subject, findings = load_subject(bundle)
    assert findings == []
    recomputed = recompute_all(subject, real_lab.ref)
    for name, doc in subject.evidence.items():
        claimed = {c["name"] for c in doc["checks"]}
        assert claimed == set(recomputed[name].checks) == set(recomputed[name].required)
        kinds = {c["name"].split(":")[0] for c in doc["checks"]}
        cell = real_lab.matrix.cell(doc["cell"])
        gated = bool(gates_for(real_lab.matrix.card(cell), cell))  # vLLM: low_latency baseline only
        assert {"probe", "golden", "floor"} <= kinds and ("accuracy" in kinds) == gated, (doc["cell"], kinds)
    # every phase has the server's own counters around it, and they are not vacuous
    from dayzero.checks.server_metrics import phase_totals
    from dayzero.run.records import metrics_for

    assert {metrics_for(rel) for rel in subject.records} == set(subject.metrics)
    engine_of = {
        metrics_for(rel): doc["engine"]["name"] for doc in subject.evidence.values() for rel in doc["records"]
    }
    for rel, snapshots in subject.metrics.items():
        assert phase_totals(engine_of[rel], snapshots).generated > 0, rel
    system = json.loads((bundle.root / "submission.json").read_text())["system"]
    engines = {e["name"]: e for e in system["engines"]}
    assert engines["llama.cpp"]["version"].startswith("llama-cpp-python")
    assert engines["sglang"]["version"] == "sglang 0.5.23"
    assert engines["vllm"]["version"] == "vllm 0.32.0"
    assert all(e["image_digest"].startswith("sha256:") for e in engines.values())
    assert system["hosts"][0]["name"] == "local" and system["controller"]["cpus"]


def test_real_bundle_is_accepted_into_the_acceptance_table(real_lab, tmp_path):
    reports = tmp_path / "reports"
    report, written = accept(real_lab.bundle, real_lab.ref, reports)
    assert report.accepted and len(written) == len(CPU_CELLS)
    from dayzero.report.acceptance import write_acceptance

    table = write_acceptance(real_lab.matrix, reports).read_text()
    for cell in CPU_CELLS:
        row = next(line for line in table.splitlines() if f"`{cell}`" in line)
        said = f"| {VENDOR} (vendor, bundle {report.sha256[:16]}, checked {report.checked[:10]}) |"
        assert "| Verified (vendor) |" in row and said in row, row


# The corpus forged into the real bundle's llama.cpp cells, then into its vLLM cells (a case whose
# edit is one engine's own, e.g. a llama-server log line, names that engine).
REAL_CASES = [
    (engine, c)
    for engine in ("llama.cpp", "vllm")
    for c in CASES
    if not c.synthetic_only and (not c.engines or engine in c.engines)
]


@pytest.mark.parametrize(("engine", "case"), REAL_CASES, ids=[f"{e}-{c.id}" for e, c in REAL_CASES])
def test_hostile_variants_of_the_real_bundle_are_rejected(real_lab, engine: str, case: Case, tmp_path):
    with targeting(engine):
        bundle = case.build(real_lab, tmp_path)
    report = real_lab.check(bundle, limits=case.limits)
    assert not report.accepted
    assert not [f for f in report.findings if f.requirement == "checker.internal"], report.lines()
    if case.requirement == "unusable":
        assert report.exit_code == 2
    else:
        assert case.requirement in {f.requirement for f in report.findings}, "\n".join(report.lines())


# -- the real SGLang cells: SGLang's own log and counters are the engine's account ------------------


def _sglang_members(real_lab) -> tuple[dict, str]:
    from .submission_corpus.hostile import evidence_name

    members = real_lab.members()
    return members, evidence_name(members, engine="sglang")


def _resigned(real_lab, members: dict, tmp_path) -> object:
    from .submission_corpus.hostile import out
    from .submission_corpus.tarkit import resign, write_members

    members = resign(members, real_lab.key, VENDOR, tmp_path)
    return real_lab.check(write_members(out(tmp_path, "sglang-edited"), members))


def test_real_sglang_cells_are_in_the_accepted_bundle_with_their_own_account(real_lab):
    """The bundle's SGLang cells: evidence names sglang 0.5.23, every phase has SGLang's counters
    around it and its log accounts for each request (--log-requests), and the check is clean."""
    from dayzero.checks.server_metrics import phase_totals
    from dayzero.engines.sglang.log import parse

    from .submission_corpus.hostile import run_file

    members, ev = _sglang_members(real_lab)
    doc = json.loads(members[ev])
    assert doc["engine"] == {"name": "sglang", "version": "sglang 0.5.23"}
    account = parse(members[run_file(members, ev, ".log")].decode())
    assert account.ready and len(account.served) > 0 and all(s.generated > 0 for s in account.served)
    metrics = [rel for rel in doc["records"] if rel.endswith(".metrics.json")]
    assert metrics, doc["records"]
    for rel in metrics:
        assert phase_totals("sglang", json.loads(members[rel])).generated > 0, rel
    assert real_lab.check(real_lab.bundle).accepted


def test_one_sglang_log_line_changed_is_rejected(real_lab, tmp_path):
    """SGLang says it generated one token more for one request than the client received."""
    from .submission_corpus.hostile import run_file

    members, ev = _sglang_members(real_lab)
    log = run_file(members, ev, ".log")
    text = members[log].decode()
    line = [x for x in text.splitlines() if "] Finish: obj=" in x and "HEALTH_CHECK" not in x][-1]
    n = int(re.search(r"'completion_tokens': (\d+)", line).group(1))
    forged = line.replace(f"'completion_tokens': {n},", f"'completion_tokens': {n + 1},")
    assert forged != line
    report = _resigned(real_lab, {**members, log: text.replace(line, forged).encode()}, tmp_path)
    assert not report.accepted
    assert "engine.records" in {f.requirement for f in report.findings}, report.lines()


def _counter_raised(members: dict, ev: str, records: str, series: str, by: float) -> dict:
    """The members with one counter (regex `series`) of the after-snapshot of the phase whose
    records file ends `records` raised by `by`."""
    doc = json.loads(members[ev])
    rel = next(r for r in doc["records"] if r.endswith(records)).replace(".json", ".metrics.json")
    snaps = json.loads(members[rel])
    body = snaps["after"][0]["body"]
    m = re.search(rf"^({series}) (\S+)$", body, re.M)
    snaps["after"][0]["body"] = body.replace(m.group(0), f"{m.group(1)} {float(m.group(2)) + by}")
    return {**members, rel: json.dumps(snaps).encode()}


def test_one_sglang_counter_changed_is_rejected(real_lab, tmp_path):
    """A phase's sglang:generation_tokens_total after the phase, raised by 7."""
    members, ev = _sglang_members(real_lab)
    series = r'sglang:generation_tokens_total\{[^}]*is_streaming="true"[^}]*\}'
    report = _resigned(real_lab, _counter_raised(members, ev, "-r0.json", series, 7), tmp_path)
    assert not report.accepted
    assert "engine.metrics" in {f.requirement for f in report.findings}, report.lines()


def test_the_real_tool_call_answers_are_recomputed_and_a_forged_call_is_caught(real_lab, tmp_path):
    """The llama.cpp low_latency cells' tool-call phase (llama-server's own tool calling) is
    recomputed from its raw answers like any check; one call's arguments made invalid against its
    tool's schema (everything else as the run wrote it, re-signed) is refused."""
    members = real_lab.members()
    cell = "smollm2-135m/cpu+llama.cpp/low_latency/baseline"
    ev = next(k for k, v in members.items() if k.startswith("evidence/") and json.loads(v)["cell"] == cell)
    doc = json.loads(members[ev])
    assert {c["name"] for c in doc["checks"] if c["name"].startswith("tools:")} == {
        "tools:finish_reason@tool-use",
        "tools:arguments@tool-use",
        "tools:trigger@tool-use",
    }
    rel = next(r for r in doc["records"] if r.endswith("/records/tools-tool-use.json"))
    answer = json.loads(members[rel])
    called = next(r for r in answer["records"] if r.get("tool_calls"))
    called["tool_calls"][0]["arguments"] = json.dumps({"city": 5})  # not a string: breaks the schema
    report = _resigned(real_lab, {**members, rel: json.dumps(answer).encode()}, tmp_path)
    assert not report.accepted
    found = {f.requirement for f in report.findings if f.file in (ev, rel)}
    assert {"recompute.claim", "recompute.tools"} <= found, report.lines()


# -- the real vLLM cells: vLLM's own counters (and its log's request count) are the account -------


def _vllm_members(real_lab, strategy: str = "baseline") -> tuple[dict, str]:
    from .submission_corpus.hostile import evidence_name

    members = real_lab.members()
    return members, evidence_name(members, strategy=strategy, engine="vllm")


def test_real_vllm_cells_are_accepted_with_speculative_acceptance_from_vllms_counters(real_lab):
    """The bundle's vLLM cells: every phase has vLLM's counters around it, and the ngram_spec
    cell's acceptance length per workload is what vLLM's spec_decode counters give (1 + accepted
    / drafts over the phase), which the checker recomputes from the bundle's snapshots."""
    from dayzero.checks.server_metrics import phase_totals
    from dayzero.checks.speculative import from_snapshots

    members, ev = _vllm_members(real_lab, "ngram_spec")
    doc = json.loads(members[ev])
    assert doc["engine"]["name"] == "vllm" and "0.32.0" in doc["engine"]["version"]
    spec = [c for c in doc["checks"] if c["name"].startswith("speculative:accept_length@")]
    assert {c["name"] for c in spec} == {
        "speculative:accept_length@chat-code",
        "speculative:accept_length@chat-prose",
    }
    for check in spec:
        workload = check["name"].split("@", 1)[1]
        rel = next(r for r in doc["records"] if r.endswith(f"spec-{workload}.metrics.json"))
        snaps = json.loads(members[rel])
        delta = from_snapshots("vllm", snaps["after"]) - from_snapshots("vllm", snaps["before"])
        assert check["details"]["source"] == "vllm" and delta.drafts > 0, check
        assert check["measured"] == delta.accept_length == round(1 + delta.accepted / delta.drafts, 4)
        assert phase_totals("vllm", snaps).generated > 0
    assert real_lab.check(real_lab.bundle).accepted


def test_one_vllm_counter_changed_is_rejected(real_lab, tmp_path):
    """A phase's vllm:generation_tokens_total after the phase, raised by 5."""
    members, ev = _vllm_members(real_lab)
    series = r"vllm:generation_tokens_total\{[^}]*\}"
    report = _resigned(real_lab, _counter_raised(members, ev, "-r0.json", series, 5), tmp_path)
    assert not report.accepted
    assert "engine.metrics" in {f.requirement for f in report.findings}, report.lines()


def test_a_vllm_acceptance_raised_in_its_counters_is_rejected(real_lab, tmp_path):
    """The code workload's accepted draft tokens after its phase, raised by 10: a better
    acceptance than the run had. The records keep the counters they were read with, and the
    recomputed acceptance is no longer the claimed one."""
    members, ev = _vllm_members(real_lab, "ngram_spec")
    series = r"vllm:spec_decode_num_accepted_tokens_total\{[^}]*\}"
    forged = _counter_raised(members, ev, "spec-chat-code.json", series, 10)
    report = _resigned(real_lab, forged, tmp_path)
    assert not report.accepted
    found = {f.requirement for f in report.findings}
    assert found & {"engine.metrics", "recompute.speculative"}, report.lines()


def test_a_request_missing_from_the_vllm_log_is_rejected(real_lab, tmp_path):
    """vLLM's log counts the generation requests it answered 200; one such line taken out."""
    from .submission_corpus.hostile import run_file

    members, ev = _vllm_members(real_lab)
    log = run_file(members, ev, ".log")
    text = members[log].decode()
    line = next(x for x in reversed(text.splitlines()) if '"POST /v1/completions HTTP/1.1" 200' in x)
    report = _resigned(real_lab, {**members, log: text.replace(line + "\n", "", 1).encode()}, tmp_path)
    assert not report.accepted
    assert "engine.requests" in {f.requirement for f in report.findings}, report.lines()


def _launch_line_swapped(real_lab, engine: str, marker: str, tmp_path):
    """The low_latency cell's log with the high_throughput launch's line holding `marker` (its
    launch arguments) in place of its own, every request line kept, re-signed: the report."""
    from .submission_corpus.hostile import evidence_name, run_file

    members = real_lab.members()
    ev, other = (evidence_name(members, mode=m, engine=engine) for m in ("low_latency", "high_throughput"))
    log, theirs = run_file(members, ev, ".log"), run_file(members, other, ".log")

    def args_line(text: str) -> str:
        return next(x for x in text.splitlines() if marker in x)

    text = members[log].decode()
    forged = text.replace(args_line(text), args_line(members[theirs].decode()))
    assert forged != text
    report = _resigned(real_lab, {**members, log: forged.encode()}, tmp_path)
    assert not report.accepted
    return [f for f in report.findings if f.requirement == "engine.launch" and f.file == log], report


def test_a_vllm_log_of_another_launch_is_rejected_by_its_launch_arguments(real_lab, tmp_path):
    """Issue 42 item 1: vLLM's "non-default args" line of the high_throughput launch in the
    low_latency cell's log (its requests agree): the log says max_num_seqs 4, the recipe 1."""
    found, report = _launch_line_swapped(real_lab, "vllm", "non-default args:", tmp_path)
    assert any("max_num_seqs" in f.found for f in found), report.lines()


def test_an_sglang_log_of_another_launch_is_rejected_by_its_server_args(real_lab, tmp_path):
    """Issue 42 item 1 on SGLang: the high_throughput launch's server_args line in the low_latency
    cell's log: the log says max_running_requests 4, the recipe 1."""
    found, report = _launch_line_swapped(real_lab, "sglang", "server_args=", tmp_path)
    assert any("max_running_requests" in f.found for f in found), report.lines()


def test_a_vllm_acceptance_beyond_its_streamed_chunks_is_rejected(real_lab, tmp_path):
    """Issue 42 item 1: the prose workload's accepted draft tokens raised to 20 beyond what its
    chunks allow (vLLM streams each step's tokens as one chunk or more steps, so accepted <=
    generated - chunks), still below the tokens generated and the drafts proposed; the records'
    kept counters and the evidence's acceptance rewritten to agree, re-signed."""
    from dayzero.checks.server_metrics import phase_totals

    from .submission_corpus.hostile import (
        SPEC_SERIES,
        _rewritten,
        _with_kept_counters,
        recomputed,
        run_file,
    )

    members, ev = _vllm_members(real_lab, "ngram_spec")
    rel = run_file(members, ev, "/spec-chat-prose.json")
    snaps = json.loads(members[rel.replace(".json", ".metrics.json")])
    done = [r for r in json.loads(members[rel])["records"] if r.get("end") is not None and not r.get("error")]
    chunks = sum(len(r.get("chunks") or ()) for r in done)
    generated = phase_totals("vllm", snaps).generated
    target = generated - chunks + 20
    assert target < generated, (generated, chunks)
    accepted, proposed = SPEC_SERIES["vllm"]
    _rewritten(snaps, accepted, lambda _: target)
    _rewritten(snaps, proposed, lambda was: max(was, 2 * target))
    forged = recomputed(_with_kept_counters(members, rel, snaps, "vllm"), real_lab, tmp_path)
    report = _resigned(real_lab, forged, tmp_path)
    assert not report.accepted
    found = [f for f in report.findings if f.requirement == "engine.speculative"]
    assert found and "chunks the records streamed" in found[0].expected, report.lines()


def test_an_sglang_server_time_below_physics_is_rejected(real_lab, tmp_path):
    """Issue 42 item 1 on SGLang's account: the perf phase's end-to-end latency sum (and its TTFT
    sum) cut to a thousandth, evidence recomputed, re-signed: below what the tokens need at the
    cpu host's roofline."""
    from .submission_corpus.hostile import consistent, server_time_below_physics

    with targeting("sglang"):
        bundle = consistent(server_time_below_physics)(real_lab, tmp_path)
    report = real_lab.check(bundle)
    assert not report.accepted
    assert "physics.server-time" in {f.requirement for f in report.findings}, report.lines()


# -- teacher forcing: the goldens scored by SGLang and vLLM, recomputed from the bundle -------------


def _scores_worsened(members: dict, ev: str, engine: str) -> dict:
    """The code probe's scores with the engine's rank of one golden token made 9 (vLLM: its exact
    rank; SGLang: its top-5 without that token, so past them)."""
    from .submission_corpus.hostile import run_file
    from .submission_corpus.tarkit import edit_json

    def change(doc):
        if engine == "vllm":
            answer = next(r for r in doc["records"] if r["id"] == "code/s0")["response"]
            token_id = str(answer["prompt_token_ids"][-5])
            answer["prompt_logprobs"][-5][token_id]["rank"] = 9
        else:
            answer = next(r for r in doc["records"] if r["id"] == "code/s1")["response"]
            n = len(
                next(r for r in doc["records"] if r["id"] == "code/s0")["response"]["choices"][0][
                    "prompt_token_ids"
                ]
            )
            top = answer["choices"][0]["logprobs"]["top_logprobs"]
            top[n - 5] = {f"x{i}": 0.0 for i in range(5)}

    return edit_json(members, run_file(members, ev, "/scores.json"), change)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_real_scores_of_the_goldens_are_recomputed_and_an_edited_one_is_caught(
    real_lab, engine, tmp_path
):
    """The engine's scores of each golden (records/scores.json) are in the bundle and the checker
    re-derives the golden verdicts from them: one golden token's rank edited to fail is caught."""
    from .submission_corpus.hostile import evidence_name

    members = real_lab.members()
    ev = evidence_name(members, engine=engine)
    doc = json.loads(members[ev])
    forced = [c["details"]["teacher_forced"] for c in doc["checks"] if c["name"].startswith("golden:")]
    assert forced and all(f["ok"] for f in forced), forced
    report = _resigned(real_lab, _scores_worsened(members, ev, engine), tmp_path)
    assert not report.accepted
    found = [f for f in report.findings if f.requirement == "recompute.golden"]
    assert found and "golden:code" in found[0].line() and "ranks" in "\n".join(report.lines()), report.lines()


# -- whose run it is (issue 42, item 3), on the real run of every engine ----------------------------


def test_the_labs_own_real_run_resigned_by_a_vendor_is_refused_as_the_labs(real_lab, main_job):
    """The main job's reports are the lab's own: the vendor's bundle of that very run is refused."""
    report = real_lab.check(real_lab.bundle, reports_dir=main_job.reports)
    assert not report.accepted
    found = [f.found for f in report.findings if f.requirement == "identity.replay"]
    assert all("the lab's own run of" in text for text in found), report.lines()
    assert {c for c in CPU_CELLS if any(f"the lab's own run of {c}" in text for text in found)} == set(
        CPU_CELLS
    )


def test_a_real_vendor_bundle_leaves_the_labs_nights_unchanged_and_has_its_own_series(
    real_lab, main_job, tmp_path
):
    from .test_submission_provenance import accepted_beside_the_labs_nights

    assert accepted_beside_the_labs_nights(real_lab, main_job.reports, tmp_path) == CPU_CELLS
