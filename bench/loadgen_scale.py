"""The load generator at Kimi concurrencies (64, 256, 1024 streams): the latency it adds, next to
aiperf at the same concurrency, against the stub engine with a fixed TTFT and inter-token time.

    .venv/bin/python bench/loadgen_scale.py [--concurrency 64 256 1024] [--ttft 0.05 --itl 0.05]

The stub (tools/devlab/stub.py) waits `ttft` before the first token and `itl` between tokens, so
whatever a client measures above that was added on the way: by the client, by the kernel, or by
the stub's own event loop running late. The stub reports its own lateness per request (GET
/stats), so the last is told apart from the client's share, not hidden in it.

On a machine with 2 cores or more the stub gets CPU 0 and the clients the others (as in
loadgen_bench.py's agreement section): on 2 cores each side has one core.
Our client runs as the harness runs it: the client process count is the card protocol's automatic
one (`Protocol.processes`: one per 256 streams) and, when a process reports saturation, the
harness's rule for more (`phases.more_processes`); each run says whether a process was flagged
saturated, with its CPU share and event-loop lag. aiperf 0.13.0 (in .venv-bench, see
bench/README.md) runs with the same prompts, lengths and concurrency; without it, its columns
are skipped.

The inter-token time is the same at every concurrency (50 ms by default: 20k tokens/s at 1024
streams, about what one Python stub on one core can emit on time). Raw figures go to
reports/bench/loadgen_scale.json; speeds are machine-dependent: read ratios.
"""

# ruff: noqa: E501 - markdown table rows read best on one line
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(ROOT / "bench")]

from loadgen_bench import (  # noqa: E402
    PROMPTS,
    aiperf_argv,
    children_cpu,
    ensure_tokenizer,
    peer_available,
    pin,
    server,
)

from bench.common import load_average, machine, write_result  # noqa: E402
from dayzero.checks.metrics import percentile, run_summary, saturation  # noqa: E402
from dayzero.lab.deploy import run_client  # noqa: E402
from dayzero.lab.transport.local import LocalTransport  # noqa: E402
from dayzero.run.phases import more_processes  # noqa: E402
from dayzero.spec.card import Protocol  # noqa: E402
from dayzero.spec.inventory import Host  # noqa: E402

PORT = 19030
HOST = Host(name="local", hardware="cpu", transport="local", address="127.0.0.1")


def stub_argv(ttft: float, itl: float) -> list[str]:
    return [
        sys.executable, "-m", "devlab.stub", "--port", str(PORT), "--ttft", str(ttft), "--itl", str(itl),
    ]  # fmt: skip


def stub_lateness(reset: bool = True) -> dict:
    """The stub's own lateness since the last reset: first token after ttft, chunks after itl (ms)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/stats{'?reset' if reset else ''}", timeout=30) as r:
        late = json.loads(r.read())
    out = {}
    for key, values in late.items():
        ms = [v * 1000 for v in values]
        out[key] = {
            "median_ms": round(percentile(ms, 50), 3) if ms else None,
            "p99_ms": round(percentile(ms, 99), 3) if ms else None,
        }
    return out


SPREAD = 0  # --spread: output lengths max_tokens +- SPREAD, so that streams stop ending together


def length(i: int, max_tokens: int) -> int:
    return max_tokens + (i * 7) % (2 * SPREAD + 1) - SPREAD if SPREAD else max_tokens


def requests(n: int, max_tokens: int, offset: int = 0) -> list[dict]:
    return [
        {
            "id": f"r{i}",
            "kind": "chat",
            "prompt": PROMPTS[(i + offset) % len(PROMPTS)],
            "max_tokens": length(i + offset, max_tokens),
            "extra": {"ignore_eos": True},
        }
        for i in range(n)
    ]


def run_ours(url: str, concurrency: int, n: int, max_tokens: int, processes: int) -> dict:
    spec = {
        "action": "load",
        "url": url,
        "concurrency": concurrency,
        "processes": processes,
        "warmup": requests(concurrency, max_tokens, offset=7),
        "requests": requests(n, max_tokens),
    }
    cpu0 = children_cpu()
    answer = run_client(LocalTransport(HOST), spec, timeout=1800)  # as a cell runs it, on its host
    answer["cpu_s"] = round(children_cpu() - cpu0, 3)
    return answer


def ours(url: str, concurrency: int, n: int, max_tokens: int) -> dict:
    """As the harness measures: the automatic process count, more when one saturates."""
    protocol = Protocol()
    processes = protocol.processes(concurrency)
    tried = []
    while True:
        stub_lateness()  # reset
        answer = run_ours(url, concurrency, n, max_tokens, processes)
        late = stub_lateness()
        found = saturation(answer, protocol.saturation)
        tried.append(processes)
        more = more_processes(protocol, processes, concurrency, answer)
        if not found or more is None:
            break
        processes = more
    s = run_summary(answer["records"], 1, concurrency)
    procs = answer["procs"]
    waves = first_wave(answer["records"], concurrency)
    return {
        "client": "dayzero",
        "processes": processes,
        "processes_tried": tried,
        "completed": s["completed"],
        "failed": s["failed"],
        "output_throughput": s["output_throughput"],
        "median_ttft_ms": s["median_ttft_ms"],
        "p99_ttft_ms": s["p99_ttft_ms"],
        "median_itl_ms": s["median_itl_ms"],
        "p99_itl_ms": s["p99_itl_ms"],
        "cpu_s": answer["cpu_s"],
        "cpu_fraction": [round(p["cpu_s"] / max(p["wall_s"], 1e-9), 3) for p in procs],
        "lag_p99_ms": [p["lag_ms"].get("p99") for p in procs],
        "saturated": found,
        "stub_late": late,
        **waves,
    }


def first_wave(records: list[dict], concurrency: int) -> dict:
    """Added TTFT p99 of a phase's first `concurrency` requests (by send time) and of the rest."""
    sent = sorted((r for r in records if r.get("first")), key=lambda r: r["send"])
    ttft = [(r["first"] - r["send"]) * 1000 for r in sent]
    first, rest = ttft[:concurrency], ttft[concurrency:]
    return {
        "first_wave_p99_ttft_ms": round(percentile(first, 99), 3) if first else None,
        "later_p99_ttft_ms": round(percentile(rest, 99), 3) if rest else None,
    }


def aiperf(url: str, concurrency: int, n: int, max_tokens: int, work: Path) -> dict:
    stub_lateness()
    cpu0 = children_cpu()
    p = subprocess.run(
        aiperf_argv(url, concurrency, n, max_tokens, work, warmup=concurrency),
        capture_output=True,
        timeout=1800,
        cwd=work,
    )
    cpu = round(children_cpu() - cpu0, 3)
    late = stub_lateness()
    summary = work / "out" / "profile_export_aiperf.json"
    if not summary.exists():
        return {"client": "aiperf", "error": p.stdout.decode(errors="replace")[-800:], "cpu_s": cpu}
    d = json.loads(summary.read_text())
    ttft, itl = d["time_to_first_token"], d.get("inter_token_latency") or {}
    return {
        "client": "aiperf",
        "completed": d.get("request_count", {}).get("avg"),
        "failed": len(d.get("error_summary") or []),
        "output_throughput": round(d["output_token_throughput"]["avg"], 3),
        "median_ttft_ms": round(ttft["p50"], 3),
        "p99_ttft_ms": round(ttft["p99"], 3),
        "median_itl_ms": round(itl.get("p50", float("nan")), 3),
        "p99_itl_ms": round(itl.get("p99", float("nan")), 3),
        "cpu_s": cpu,
        "stub_late": late,
    }


def added(row: dict, ttft_ms: float, itl_ms: float) -> dict:
    if "median_ttft_ms" in row:
        row["added_ttft_median_ms"] = round(row["median_ttft_ms"] - ttft_ms, 3)
        row["added_ttft_p99_ms"] = round(row["p99_ttft_ms"] - ttft_ms, 3)
        row["added_itl_median_ms"] = round(row["median_itl_ms"] - itl_ms, 3)
        for key in ("first_wave_p99_ttft_ms", "later_p99_ttft_ms"):
            if row.get(key) is not None:
                row[key.replace("_ttft_ms", "_added_ttft_ms")] = round(row[key] - ttft_ms, 3)
    return row


def markdown(result: dict) -> str:
    lines = [
        f"loadgen at scale, {result['date']} ({result['machine']}), stub TTFT {result['ttft_ms']:g} ms, "
        f"{result['itl_ms']:g} ms between tokens, {result['max_tokens']} (+-{result.get('spread', 0)}) tokens per request, "
        f"stub on CPU {result['stub_cpu']}; load average {result['load_average_at_start']} -> {result['load_average_at_end']}",
        "",
        "| streams | client | processes (auto) | added TTFT median ms | added TTFT p99 ms | added ITL median ms | stub's own lateness, first token p99 ms | client CPU s | flagged saturated |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if "error" in r:
            lines.append(
                f"| {r['concurrency']} | {r['client']} | | failed: {r['error'][-100:]!r} | | | | | |"
            )
            continue
        procs = f"{r['processes']} (tried {r['processes_tried']})" if r["client"] == "dayzero" else "n/a"
        if r["client"] == "dayzero":
            flagged = (
                "yes" if r["saturated"] else f"no (CPU {r['cpu_fraction']}, lag p99 {r['lag_p99_ms']} ms)"
            )
        else:
            flagged = "n/a (no such check)"
        late = (r.get("stub_late") or {}).get("ttft", {}).get("p99_ms")
        lines.append(
            f"| {r['concurrency']} | {r['client']} | {procs} | {r['added_ttft_median_ms']} | **{r['added_ttft_p99_ms']}** | {r['added_itl_median_ms']} | {late} | {r['cpu_s']} | {flagged} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--ttft", type=float, default=0.05)
    parser.add_argument("--itl", type=float, default=0.05)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--requests-per-stream", type=int, default=3)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument(
        "--spread",
        type=int,
        default=0,
        help="vary our client's output lengths by +-N tokens (aiperf is then skipped): a closed loop of "
        "equal lengths resends every stream at once",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "loadgen_scale.json")
    args = parser.parse_args(argv)
    global SPREAD
    SPREAD = args.spread
    peer = peer_available() and not args.no_peer and not args.spread
    if peer:
        ensure_tokenizer()
    cpus = sorted(os.sched_getaffinity(0))
    pinned = len(cpus) >= 2
    result = {
        **machine(),
        "load_average_at_start": load_average(),
        "ttft_ms": args.ttft * 1000,
        "itl_ms": args.itl * 1000,
        "max_tokens": args.max_tokens,
        "spread": args.spread,
        "stub_cpu": cpus[0] if pinned else "shared",
        "rows": [],
    }
    url = f"http://127.0.0.1:{PORT}"
    with tempfile.TemporaryDirectory(prefix="dz-lgscale-") as tmp:
        log = Path(tmp) / "stub.log"
        env_pp = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tools"), env_pp]))
        with server(stub_argv(args.ttft, args.itl), PORT, log, preexec=pin({cpus[0]}) if pinned else None):
            if pinned:
                os.sched_setaffinity(0, set(cpus[1:]))  # both clients inherit this
            try:
                for c in args.concurrency:
                    n = args.requests_per_stream * c
                    r = ours(url, c, n, args.max_tokens)
                    result["rows"].append(added({"concurrency": c, **r}, args.ttft * 1000, args.itl * 1000))
                    print(json.dumps(result["rows"][-1]), flush=True)
                    if peer:
                        r = aiperf(url, c, n, args.max_tokens, Path(tmp) / f"aiperf-{c}")
                        result["rows"].append(
                            added({"concurrency": c, **r}, args.ttft * 1000, args.itl * 1000)
                        )
                        print(json.dumps(result["rows"][-1]), flush=True)
            finally:
                if pinned:
                    os.sched_setaffinity(0, set(cpus))
    result["load_average_at_end"] = load_average()
    write_result(args.out, result)
    print(markdown(result))
    print(f"(raw: {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
