"""Sweeps through the real host client against the stub engine: open-loop arrivals, and the
client-versus-server TTFT gap flagged when the client's side is slowed (a delaying proxy between
client and server: every byte the server sends reaches the client 150 ms late)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from dayzero.checks.performance import INVALID, check_floor
from dayzero.checks.server_latency import BOUND_MS, per_request
from dayzero.checks.sweep import point
from dayzero.lab.deploy import run_client
from dayzero.lab.transport.local import LocalTransport
from dayzero.run.plan import MeasurementPlan
from dayzero.run.sweeps import SweepPlan
from dayzero.spec.card import Floor, Protocol
from dayzero.spec.inventory import Host
from dayzero.spec.sweeps import Slo, Sweep
from dayzero.spec.workloads import Workload
from devlab.stub import StubConfig, StubServer

HOST = Host(name="local", hardware="cpu", transport="local", address="127.0.0.1")
WORKLOAD = Workload("w", "random", {"isl": 8, "osl": 6, "vocab": [10, 100]})


def client(spec: dict) -> dict:
    return run_client(LocalTransport(HOST), spec, timeout=120)


class SlowProxy:
    """A TCP proxy that holds every piece the server sends for `delay` seconds."""

    def __init__(self, upstream_port: int, delay: float):
        self.upstream, self.delay = upstream_port, delay
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SlowProxy:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()
        server.close()

    async def _pipe(self, reader, writer, delay: float) -> None:
        try:
            while data := await reader.read(1 << 16):
                if delay:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        await asyncio.gather(self._pipe(reader, up_writer, 0), self._pipe(up_reader, writer, self.delay))


def measure(url: str, sweep: Sweep, load: float, slots: int = 2):
    p = SweepPlan(sweep, MeasurementPlan(WORKLOAD, 1, Protocol(min_prompts=6)), slots).point(load)
    spec = {"action": "load", "url": url, "concurrency": p.concurrency, "requests": p.requests(0)}
    answer = client(spec)
    m = p.measurement([("r.json", answer)], accelerators=1, processes=1)
    return point(sweep, load, m, [answer]), answer


def test_rate_points_are_sent_at_their_arrival_times_whatever_is_in_flight():
    sweep = Sweep("q", "rate", "w", (8.0,), {}, concurrency=8, slo=Slo(ttft_ms=1000))
    with StubServer(StubConfig(ttft=0.3, itl=0.01)) as stub:
        row, answer = measure(stub.url, sweep, 8.0)
    records = sorted(answer["records"], key=lambda r: r["scheduled"])
    first = records[0]["scheduled"]
    plan = SweepPlan(sweep, MeasurementPlan(WORKLOAD, 1, Protocol(min_prompts=6))).point(8.0)
    for rec, req in zip(records, sorted(plan.requests(0), key=lambda r: r["at"]), strict=True):
        assert rec["scheduled"] - first == pytest.approx(req["at"], abs=1e-3)
        assert rec["send"] - rec["scheduled"] < 0.1  # sent when due, not when a slot freed
    # TTFT 300 ms and gaps of ~125 ms: a closed loop of one would never overlap; this one does
    spans = [(r["send"], r["end"]) for r in records]
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))
    assert row["attainment"] == 1.0 and row["label"] == "q8"


def test_a_slowed_client_side_is_flagged_against_the_servers_own_ttft():
    sweep = Sweep("c", "concurrency", "w", (2.0,), {})
    with StubServer(StubConfig(ttft=0.05, itl=0.002)) as stub:
        direct, _ = measure(stub.url, sweep, 2.0)
        with SlowProxy(stub.port, delay=0.15) as proxy:
            slowed, answer = measure(f"http://127.0.0.1:{proxy.port}", sweep, 2.0)
    assert direct["server_ttft_gap_ms"] < BOUND_MS and not direct["client_flagged"]
    assert slowed["server_ttft_gap_ms"] >= 150 and slowed["client_flagged"]
    assert per_request(answer["records"], queues=False).gap_ms == slowed["server_ttft_gap_ms"]


def test_a_slowed_client_side_invalidates_a_ttft_floor_and_is_reported_beside_any_other():
    """A floor phase (the mode's slots, one request per slot): the gap is in every floor's details;
    a TTFT floor is not compared with a TTFT that is the client's, a throughput floor still is."""
    plan = MeasurementPlan(WORKLOAD, 2, Protocol(min_prompts=6, repetitions=1), slots=2)
    ttft = Floor(metric="median_ttft_ms", workload="w", concurrency=2, bound=10_000.0, direction="max")
    tput = Floor(metric="output_throughput", workload="w", concurrency=2, bound=0.1, direction="min")
    with StubServer(StubConfig(ttft=0.05, itl=0.002)) as stub:
        runs = {}
        for name, port in (("direct", stub.port), ("slowed", None)):
            with SlowProxy(stub.port, delay=0.15) as proxy:
                url = f"http://127.0.0.1:{port or proxy.port}"
                spec = {"action": "load", "url": url, "concurrency": 2, "requests": plan.requests(0)}
                runs[name] = plan.measurement([("r.json", client(spec))], accelerators=1, processes=1)
    direct, slowed = runs["direct"], runs["slowed"]
    assert check_floor(ttft, direct).verdict == "passed" and not direct.server_gap.flagged
    result = check_floor(ttft, slowed)
    assert result.verdict == INVALID and "the client's or the network's latency" in result.message
    assert result.details["server_gap"]["flagged"] and result.details["server_gap"]["gap_ms"] >= 150
    kept = check_floor(tput, slowed)
    assert kept.verdict == "passed" and kept.details["server_gap"]["flagged"]


def test_a_gap_where_requests_queue_for_a_slot_is_not_the_clients():
    """Four in flight on a server of one slot: three wait, and their wait is in the gap."""
    sweep = Sweep("c", "concurrency", "w", (4.0,), {})
    with StubServer(StubConfig(ttft=0.05, itl=0.002)) as stub, SlowProxy(stub.port, delay=0.15) as proxy:
        row, _ = measure(f"http://127.0.0.1:{proxy.port}", sweep, 4.0, slots=1)
    assert row["server_ttft_gap_ms"] >= 150 and not row["gap_judged"] and not row["client_flagged"]
    assert "wait for a server slot" in row["server_gap"]["reason"]


def test_no_engine_account_no_gap():
    assert per_request([{"send": 1.0, "first": 1.2, "end": 2.0}], queues=False) is None


def test_the_gap_bound_grows_with_a_long_prompt():
    """60 ms more than 30 s of prompt time is not the client (the cpu cells' 4032-token point)."""
    records = [{"send": 1.0, "first": 31.06, "end": 32.0, "timings": {"prompt_ms": 30000}}]
    gap = per_request(records, queues=False)
    assert gap.gap_ms == pytest.approx(60, abs=0.01) and gap.bound_ms == 1500 and not gap.flagged
    short = per_request([{"send": 1.0, "first": 1.2, "timings": {"prompt_ms": 100}}], queues=False)
    assert short.bound_ms == BOUND_MS and short.flagged


def test_the_power_sampler_says_why_it_measured_nothing_here():
    """This VM has no RAPL, nvidia-smi or amd-smi: the point's energy is not measured, with why."""
    sweep = Sweep("c", "concurrency", "w", (1.0,), {})
    p = SweepPlan(sweep, MeasurementPlan(WORKLOAD, 1, Protocol(min_prompts=2))).point(1.0)
    with StubServer(StubConfig(ttft=0.01, itl=0.002)) as stub:
        spec = {
            "action": "load",
            "url": stub.url,
            "concurrency": 1,
            "requests": p.requests(0),
            "power": p.power,
        }
        answer = client(spec)
    power = answer["power"]
    assert power["t1"] >= power["t0"] and power["interval"] == 0.5
    m = p.measurement([("r.json", answer)], accelerators=1, processes=1)
    row = point(sweep, 1.0, m, [answer])
    if not Path("/sys/class/powercap").exists():
        assert "no RAPL on this host: /sys/class/powercap does not exist" in row["energy"]["not_measured"]
        assert "nvidia-smi not found" in row["energy"]["not_measured"]
