"""Stall detection without an engine: the host client ends a phase whose streams went silent, the
controller's Endpoint client turns that into the card's verdict, the card states the bound.

The stub's time to first token stands for a server that took the requests and then stopped (a
real SIGSTOPped llama-server is in test_stall_e2e.py). No test asserts a speed: bounds are
checked as "ended before the per-request timeout would have ended it".
"""

from __future__ import annotations

import time

import pytest

from dayzero.errors import ConfigError, DeploymentError, InfrastructureError
from dayzero.lab.deploy import run_client
from dayzero.lab.transport.local import LocalTransport
from dayzero.loadgen.client import BEAT
from dayzero.run.stall import watched
from dayzero.spec.card import StallPolicy
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import load_matrix
from devlab.stub import StubConfig, StubServer

from .conftest import REPO
from .test_matrix import edit

HOST = Host(name="local", hardware="cpu", transport="local", address="127.0.0.1")
TIMEOUT = 60.0  # the client's per-request timeout in these tests: a stall must end well before


def reqs(n, max_tokens=8):
    return [
        {"id": f"r{i}", "kind": "completion", "prompt": [1, 2, 3], "max_tokens": max_tokens} for i in range(n)
    ]


def load(url, *, stall_s, processes=1, concurrency=2, n=6, warmup=0, max_tokens=8):
    spec = {
        "action": "load",
        "url": url,
        "concurrency": concurrency,
        "processes": processes,
        "requests": reqs(n, max_tokens),
        "stall_s": stall_s,
        "timeout": TIMEOUT,
    }
    if warmup:
        spec["warmup"] = reqs(warmup, max_tokens)
    t0 = time.monotonic()
    answer = run_client(LocalTransport(HOST), spec, timeout=TIMEOUT * 3)
    return answer, time.monotonic() - t0


@pytest.mark.parametrize("processes", [1, 2])
def test_a_server_that_stops_streaming_ends_the_phase_at_the_bound(processes):
    with StubServer(StubConfig(ttft=3600)) as stub:
        answer, took = load(stub.url, stall_s=1.0, processes=processes, concurrency=4)
    assert took < TIMEOUT / 2, f"the phase waited {took:.0f}s for a silent server"
    stall = answer["stall"]
    assert stall["phase"] == "measured" and stall["after_s"] == 1.0
    assert stall["silent_s"] >= 1.0 and stall["in_flight"] >= 1
    records = answer["records"]
    assert records and all(r["error"].startswith("stall: no streamed token") for r in records)
    assert len(records) == 4, "requests not yet sent are not sent to a stalled server"
    assert stub.requests == 4


def test_a_stall_in_the_warmup_sends_no_measured_request():
    with StubServer(StubConfig(ttft=3600)) as stub:
        answer, took = load(stub.url, stall_s=1.0, warmup=2)
    assert took < TIMEOUT / 2
    assert answer["stall"]["phase"] == "warmup" and answer["records"] == []
    assert stub.requests == 2


def test_a_slow_steady_stream_is_no_stall():
    """Each request takes longer than the bound, but tokens keep coming: progress, not a stall."""
    with StubServer(StubConfig(ttft=0.3, itl=0.3)) as stub:
        answer, _ = load(stub.url, stall_s=1.0, n=2, max_tokens=6)
    assert answer["stall"] is None
    assert [r["error"] for r in answer["records"]] == [None, None]
    assert all(r["end"] - r["send"] > 1.0 for r in answer["records"])


def test_without_a_bound_the_client_waits_as_before():
    with StubServer(StubConfig(ttft=2.0)) as stub:
        answer, took = load(stub.url, stall_s=None, n=1, concurrency=1)
    assert answer["stall"] is None and answer["records"][0]["error"] is None and took >= 2.0


def test_the_client_beats_on_stderr_when_asked():
    with StubServer(StubConfig(ttft=1.2)) as stub:
        spec = {"action": "load", "url": stub.url, "concurrency": 1, "requests": reqs(1), "beat_s": 0.2}
        result = LocalTransport(HOST).run(f"{HOST.python} -c {_boot()}", timeout=60, stdin=_stdin(spec))
    assert result.ok and result.stderr.count(BEAT.decode()) >= 3


def _boot() -> str:
    from dayzero.lab.deploy import BOOT
    from dayzero.spec.shell import quote

    return quote(BOOT)


def _stdin(spec: dict) -> bytes:
    import json

    from dayzero.lab.deploy import SPEC_MARK
    from dayzero.loadgen import client_source

    return client_source() + SPEC_MARK + json.dumps(spec).encode()


# --- the controller's side: the card decides --------------------------------------------------------


def _answer_with(stall):
    seen = []

    def run(spec, timeout, silence):
        seen.append((spec, timeout, silence))
        return {"records": [], "stall": stall}

    return run, seen


@pytest.mark.parametrize(("verdict", "error"), [("failed", DeploymentError), ("broken", InfrastructureError)])
def test_a_reported_stall_is_the_cards_verdict(verdict, error):
    run, seen = _answer_with({"after_s": 7, "silent_s": 7.2, "in_flight": 3, "phase": "measured"})
    client = watched(run, StallPolicy(after_s=7, verdict=verdict), "lab1")
    with pytest.raises(error) as err:
        client({"action": "load", "url": "http://x"}, 3600)
    assert not isinstance(err.value, DeploymentError) or verdict == "failed"
    message = str(err.value)
    assert "engine stall on lab1" in message and "3 in-flight" in message and "7.2s" in message
    ((spec, timeout, silence),) = seen
    assert spec["stall_s"] == 7 and silence == 7 and timeout == 3600


def test_unstreamed_actions_carry_no_bound():
    run, seen = _answer_with(None)
    watched(run, StallPolicy(), "lab1")({"action": "get", "url": "http://x/metrics"}, 60)
    ((spec, _, silence),) = seen
    assert "stall_s" not in spec and silence is None


def test_the_card_states_the_bound_and_the_verdict(matrix_dir):
    card = load_matrix(REPO / "matrix").cards["smollm2-135m"]
    # well inside the client's 600 s per request; above the longest silent prefill of the cpu
    # cells (the context sweep's 4032 tokens: 22-30 s on a loaded 2-core host)
    assert 30 < card.protocol.stall.after_s <= 120 and card.protocol.stall.verdict == "failed"
    path = matrix_dir / "models" / "smollm2-135m.yaml"
    edit(path, lambda d: d["protocol"].__setitem__("stall", {"after_s": 12, "verdict": "broken"}))
    assert load_matrix(matrix_dir).cards["smollm2-135m"].protocol.stall == StallPolicy(12, "broken")
    edit(path, lambda d: d["protocol"].__setitem__("stall", {"after_s": 12, "verdict": "maybe"}))
    with pytest.raises(ConfigError) as err:
        load_matrix(matrix_dir)
    assert str(path) in str(err.value) and "protocol.stall.verdict" in str(err.value)


def test_a_host_that_fell_silent_is_not_dialled_again_for_a_while(tmp_path, monkeypatch):
    """After HostSilent, the teardown's steps on that host fail at once (no 15 s connect each);
    the hold ends by itself."""
    from dayzero.lab.transport.ssh import pool
    from dayzero.lab.transport.ssh.config import SshTarget
    from dayzero.lab.transport.ssh.hostkeys import Trust

    target = SshTarget("lab9", "10.213.250.2", 2222, "root")
    trust = Trust(tmp_path / "known_hosts")
    dialled = []
    monkeypatch.setattr(pool, "_connect", lambda *a: dialled.append(a) or pytest.fail("dialled"))
    the_pool = pool._Pool()
    the_pool.silenced(target, trust)
    with pytest.raises(InfrastructureError, match="not dialled: it stopped answering"):
        the_pool.get(target, trust)
    assert not dialled
    monkeypatch.setattr(pool, "SILENT_HOLD_S", 0.0)
    with pytest.raises(pytest.fail.Exception):
        the_pool.get(target, trust)  # the hold is over: dialled again
    assert dialled
