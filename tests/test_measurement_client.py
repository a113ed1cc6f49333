"""The host client against the stub server, shipped the real way (python3 - '<spec>' on stdin).

The stub (tools/devlab/stub.py) exists for what a real engine cannot be told to do: flood
tokens, stop early, over-report usage, drop a connection. No test here asserts a speed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dayzero.checks.compliance import compliance_findings
from dayzero.checks.metrics import saturation
from dayzero.checks.performance import INVALID, check_floor
from dayzero.lab.deploy import run_client
from dayzero.lab.transport.local import LocalTransport
from dayzero.run.phases import Endpoint, measure_workload, run_speculative
from dayzero.run.plan import MeasurementPlan
from dayzero.spec import card as model_card
from dayzero.spec.card import Compliance, Floor, Protocol
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Cell
from dayzero.spec.workloads import load_workload
from devlab.stub import StubConfig, StubServer

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "suites" / "workloads"
HOST = Host(name="local", hardware="cpu", transport="local", address="127.0.0.1")


def client(spec: dict, timeout: float = 120) -> dict:
    return run_client(LocalTransport(HOST), spec, timeout=timeout)


def reqs(n, max_tokens=8, kind="completion", **extra):
    return [
        {"id": f"r{i}", "kind": kind, "prompt": [1, 2, 3], "max_tokens": max_tokens, "extra": extra}
        for i in range(n)
    ]


def test_raw_records_carry_every_chunk_time():
    with StubServer(StubConfig(ttft=0.03, itl=0.005)) as stub:
        out = client({"action": "load", "url": stub.url, "concurrency": 2, "requests": reqs(4)})
    assert [r["id"] for r in out["records"]] == ["r0", "r1", "r2", "r3"]
    for r in out["records"]:
        assert r["error"] is None and r["finish_reason"] == "length"
        assert len(r["chunks"]) == 8 and r["usage"]["completion_tokens"] == 8
        assert r["chunks"] == sorted(r["chunks"]) and r["chunks"][0] >= 0.03
        assert r["first"] == pytest.approx(r["send"] + r["chunks"][0], abs=1e-5)
        assert r["send"] < r["first"] <= r["end"]
    assert sum(r["reused"] for r in out["records"]) == 2  # keep-alive: one connection per slot
    assert out["client"]["version"] >= 2 and out["procs"][0]["lag_ms"]["n"] > 0


def test_chat_and_several_client_processes():
    with StubServer(StubConfig(itl=0.001)) as stub:
        out = client(
            {
                "action": "load",
                "url": stub.url,
                "concurrency": 4,
                "processes": 2,
                "requests": reqs(10, kind="chat"),
            }
        )
    assert len(out["procs"]) == 2 and {r["proc"] for r in out["records"]} == {0, 1}
    assert [r["id"] for r in out["records"]] == [f"r{i}" for i in range(10)]
    assert all(r["text"] == "tok " * 8 for r in out["records"])


def test_warmup_is_not_recorded():
    with StubServer() as stub:
        out = client(
            {"action": "load", "url": stub.url, "concurrency": 2, "warmup": reqs(3), "requests": reqs(2)}
        )
        assert stub.requests == 5
    assert out["warmup"]["requests"] == 3 and len(out["records"]) == 2


def test_sessions_resend_history_turn_by_turn():
    w = load_workload(WORKLOADS, "agentx", {"turns": 3, "max_tokens": 4})
    with StubServer() as stub:
        out = client({"action": "load", "url": stub.url, "concurrency": 2, "requests": w.requests(6)})
    recs = out["records"]
    assert [(r["session"], r["turn"]) for r in recs][:3] == [(recs[0]["session"], t) for t in range(3)]
    assert len(recs) == 6 and all(r["error"] is None for r in recs)


def test_every_record_carries_the_digest_of_the_prompt_the_workload_asked_for():
    """The checker regenerates each request from the workload and compares this digest: a
    session's turn is digested over the session's own inputs, never the server's answers."""
    from dayzero.loadgen.client import VERSION, prompt_digest

    chat = load_workload(WORKLOADS, "agentx", {"turns": 2, "max_tokens": 4}).requests(4)
    plain = reqs(2, kind="chat")
    with StubServer() as stub:
        out = client({"action": "load", "url": stub.url, "concurrency": 2, "requests": plain + chat})
    digests = {r["id"]: r["prompt_digest"] for r in out["records"]}
    want = {r["id"]: prompt_digest(r) for r in plain}
    want |= {f"{s['id']}/t{k}": prompt_digest(s, k) for s in chat for k in range(2)}
    assert digests == want and len(set(want.values())) == len(want) - 1  # r0, r1 ask the same
    assert out["client"]["version"] == VERSION >= 4


def test_faults_become_errors_not_numbers():
    with StubServer(StubConfig(fail_every=2)) as stub:
        out = client({"action": "load", "url": stub.url, "concurrency": 1, "requests": reqs(4)})
    assert [bool(r["error"]) for r in out["records"]] == [False, True, False, True]
    assert out["records"][1]["error"].startswith("HTTP 500")
    with StubServer(StubConfig(drop_after=3, itl=0.001)) as stub:
        out = client({"action": "load", "url": stub.url, "concurrency": 1, "requests": reqs(2)})
    assert all(r["error"] for r in out["records"])
    with StubServer(StubConfig(ttft=5.0)) as stub:
        out = client(
            {"action": "load", "url": stub.url, "concurrency": 1, "timeout": 0.5, "requests": reqs(1)}
        )
    assert out["records"][0]["error"] == "timeout after 0.5s"


def test_gaming_servers_are_caught():
    rules = Compliance()
    with StubServer(StubConfig(stop_after=4)) as stub:
        early = client({"action": "load", "url": stub.url, "concurrency": 2, "requests": reqs(4, 16)})[
            "records"
        ]
    assert "mean output 4.0 tokens vs 16.0 requested" in compliance_findings(early, True, rules)[0]
    with StubServer(StubConfig(usage_factor=2.0)) as stub:
        inflated = client({"action": "load", "url": stub.url, "concurrency": 2, "requests": reqs(4, 16)})[
            "records"
        ]
    assert any(
        "reports 128 output tokens but streamed only 64" in f
        for f in compliance_findings(inflated, False, rules)
    )
    with StubServer(StubConfig(trailing_eos=2)) as stub:
        eos = client({"action": "load", "url": stub.url, "concurrency": 1, "requests": reqs(1, kind="chat")})[
            "records"
        ]
    assert any("more than one EOS" in f for f in compliance_findings(eos, False, rules))


def test_a_flooded_client_is_flagged_saturated():
    """The stub streams pre-rendered tokens as fast as the socket takes them: one event loop
    parsing 64 streams of 4000 tokens is busy all the time, so its timestamps are late."""
    with StubServer() as stub:
        out = client(
            {"action": "load", "url": stub.url, "concurrency": 64, "requests": reqs(64, 4000)},
            timeout=300,
        )
    assert all(r["error"] is None for r in out["records"])
    assert saturation(out), out["procs"]


def endpoint(stub: StubServer, kept: dict) -> Endpoint:
    def keep(phase, answer):
        kept[phase] = answer
        return f"records/{phase}.json"

    return Endpoint(
        url=stub.url,
        client=client,
        keep=keep,
        say=lambda m: None,
        meters=(("server[0]@local", stub.url + "/metrics"),),  # read around every phase
    )


def test_measure_workload_repeats_and_marks_saturated_runs_invalid():
    w = load_workload(WORKLOADS, "r", {"from": "random", "isl": 8, "osl": 8})
    kept: dict = {}
    with StubServer(StubConfig(itl=0.001)) as stub:
        meas = measure_workload(
            endpoint(stub, kept), MeasurementPlan(w, 2, Protocol(repetitions=3)), accelerators=1
        )
        assert stub.requests == 3 * 16 + 2  # 3 runs of max(16, 5 x 2) prompts + 2 warm-up
    assert list(kept) == ["perf-r-c2-r0", "perf-r-c2-r1", "perf-r-c2-r2"] and "warmup" in kept["perf-r-c2-r0"]
    assert len(meas.summaries) == 3 and not meas.invalid and not meas.compliance
    assert sum(len(kept[k]["records"]) for k in kept) == 48
    assert check_floor(Floor("output_throughput", 1.0, 2, workload="r"), meas).passed
    strict = Protocol(repetitions=1, saturation=Protocol().saturation.__class__(lag_p99_ms=1e-6))
    with StubServer(StubConfig(itl=0.001)) as stub:
        meas = measure_workload(endpoint(stub, {}), MeasurementPlan(w, 2, strict), accelerators=1)
    assert (
        meas.invalid
        and check_floor(Floor("output_throughput", 1.0, 2, workload="r"), meas).verdict == INVALID
    )


def test_a_server_stopping_early_fails_its_floor_however_fast():
    w = load_workload(WORKLOADS, "r", {"from": "random", "isl": 8, "osl": 16})
    with StubServer(StubConfig(stop_after=4)) as stub:
        meas = measure_workload(
            endpoint(stub, {}), MeasurementPlan(w, 2, Protocol(repetitions=1)), accelerators=1
        )
    result = check_floor(Floor("output_throughput", 1.0, 2, workload="r"), meas)
    assert result.verdict == "failed"
    assert "anti-gaming: mean output 4.0 tokens vs 16.0 requested" in result.message


def test_acceptance_is_diffed_per_workload_from_metrics():
    c = model_card.parse(
        ROOT / "m.yaml",
        {
            "model": "m",
            "engine": {"name": "llama.cpp"},
            "modes": {"x": {"concurrency": 2}},
            "workloads": {"chat-code": {"max_tokens": 8}, "chat-prose": {"max_tokens": 8}},
            "speculative": [{"workloads": ["chat-code", "chat-prose"], "num_prompts": 3}],
        },
    )
    kept: dict = {}
    with StubServer(StubConfig(draft_per_token=0.5, accept_rate=0.5, tokens_per_draft=2)) as stub:
        client({"action": "load", "url": stub.url, "concurrency": 1, "requests": reqs(5)})  # earlier traffic
        checks = list(run_speculative(c, Cell("m", "cpu", "x", "s"), endpoint(stub, kept), ROOT / "suites"))
    assert [ch.name for ch in checks] == [
        "speculative:accept_length@chat-code",
        "speculative:accept_length@chat-prose",
    ]
    for ch in checks:
        # per request: 8 tokens -> 4 draft tokens in 2 drafts, 2 accepted; 3 requests in the diff
        assert ch.details["drafts"] == 6 and ch.details["accepted"] == 6 and ch.measured == 2.0
    assert checks[0].message.startswith("code:") and checks[1].message.startswith("prose:")
    assert kept["spec-chat-code"]["counters"]["source"] == "llama.cpp"


def test_client_stays_stdlib_and_python38_compatible():
    """It runs with whatever python3 the host has: no third-party import, no syntax past 3.8."""
    import ast

    from dayzero.loadgen import client_source

    tree = ast.parse(client_source(), feature_version=(3, 8))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    stdlib = {"asyncio", "glob", "hashlib", "http", "json", "mmap", "os", "shutil", "struct", "subprocess"}
    assert imported <= stdlib | {"sys", "threading", "time", "urllib"}


def test_a_saturated_client_is_retried_with_more_processes_when_the_host_has_cores():
    """Auto mode doubles the client processes (up to half the host's cores) before giving up."""
    calls = []

    def fake_client(spec, timeout):
        calls.append(spec["processes"])
        busy = spec["processes"] < 4
        proc = {"proc": 0, "cpu_s": 9.9 if busy else 1.0, "wall_s": 10.0, "lag_ms": {"p99": 1.0}}
        return {"client": {"cpu_count": 8}, "procs": [proc], "records": []}

    ep = Endpoint(url="http://x", client=fake_client, keep=lambda phase, answer: phase, say=lambda m: None)
    w = load_workload(WORKLOADS, "r", {"from": "random", "isl": 4, "osl": 4})
    meas = measure_workload(ep, MeasurementPlan(w, 600, Protocol(repetitions=1)), accelerators=1)
    assert calls == [3, 4] and not meas.invalid and meas.client["processes"] == 4
    calls.clear()
    one_core = Protocol(repetitions=1, client_processes=1)
    meas = measure_workload(ep, MeasurementPlan(w, 600, one_core), accelerators=1)
    assert calls == [1] and "CPU 99% of a core" in meas.invalid[0]


def test_a_load_spec_larger_than_one_command_line_argument_still_runs():
    """5 x 256 prompts of a Kimi-size run make a spec of several hundred KiB: on the command line
    it failed with E2BIG ("Argument list too long") before the client started."""
    prompt = "word " * 60
    spec = {
        "action": "requests",
        "url": "http://127.0.0.1:9",  # nothing listens: every request fails fast, which is fine here
        "concurrency": 4,
        "timeout": 5,
        "requests": [{"id": f"r{i}", "prompt": prompt, "max_tokens": 1} for i in range(1280)],
    }
    assert len(json.dumps(spec)) > 300_000
    answer = client(spec, timeout=120)
    assert len(answer["records"]) == 1280 and all(r["error"] for r in answer["records"])
