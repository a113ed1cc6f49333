"""How far the load generator can be trusted: its own ceiling, the latency it adds, and agreement
with a peer client (aiperf) on the same real llama-server, side by side in one run.

    .venv/bin/python bench/loadgen_bench.py [--skip-llama] [--rounds 3]

Needs the peer in a separate venv: `python3 -m venv .venv-bench && .venv-bench/bin/pip install
aiperf gguf` (aiperf needs a Hugging Face tokenizer; `loadgen_tokenizer.py` writes one from the
model's GGUF since the hub is not reachable). Without it the peer columns are skipped.

Servers: the stub (tools/devlab/stub.py, port 19010) streams pre-rendered tokens, so with no
delay it is faster than any client and measures the client's ceiling; with a fixed TTFT and
inter-token delay it is the ground truth for the latency a client adds. llama-server (port
19020, pinned to CPU 0, prompt cache off) is the real server both clients measure in
alternating rounds (`agreement` says why each of those choices). Every server started here is
killed on the way out. Speeds are machine-dependent: read ratios.
"""

# ruff: noqa: E501 - markdown table rows read best on one line
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from dayzero.cache import cache_root  # noqa: E402
from dayzero.checks.metrics import run_summary, saturation  # noqa: E402
from dayzero.loadgen import client_source  # noqa: E402

STUB_PORT, LLAMA_PORT = 19010, 19020
BENCH_VENV = ROOT / ".venv-bench"
AIPERF = BENCH_VENV / "bin" / "aiperf"
MODEL = cache_root() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA = cache_root() / "llama.cpp" / "0.3.36" / "bin" / "llama-server"
TOKENIZER = cache_root() / "tokenizers" / "smollm2-135m"
# Every request does its whole prefill: llama-server otherwise serves prompts it has seen (in a
# slot or its RAM prompt cache) from cache, and which ones it has seen depends on what ran before.
EXTRA = {"ignore_eos": True, "cache_prompt": False}
PROMPTS = [
    json.loads(x)["prompt"] for x in (ROOT / "suites/workloads/prompts/prose.jsonl").read_text().splitlines()
]


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextlib.contextmanager
def server(
    argv: list[str], port: int, log: Path, ready_path: str = "/health", deadline: float = 120, preexec=None
):
    """Start a server in its own process group; wait for 200 on ready_path; kill the group after."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec
        )
    try:
        t0 = time.monotonic()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited: {log.read_text()[-500:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{ready_path}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - t0 > deadline:
                raise RuntimeError(f"{argv[0]} not ready after {deadline}s")
            time.sleep(0.3)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def stub(ttft: float, itl: float, log_dir: Path):
    argv = [
        sys.executable,
        "-m",
        "devlab.stub",
        "--port",
        str(STUB_PORT),
        "--ttft",
        str(ttft),
        "--itl",
        str(itl),
    ]
    return server(argv, STUB_PORT, log_dir / f"stub-{ttft}-{itl}.log")


# --- our client -------------------------------------------------------------------------------


def ours(url: str, concurrency: int, n: int, max_tokens: int, processes: int = 1, warmup: int = 0) -> dict:
    def reqs(k: int, offset: int = 0) -> list[dict]:
        return [
            {
                "id": f"r{i}",
                "kind": "chat",
                "prompt": PROMPTS[(i + offset) % len(PROMPTS)],
                "max_tokens": max_tokens,
                "extra": dict(EXTRA),
            }
            for i in range(k)
        ]

    spec = {
        "action": "load",
        "url": url,
        "concurrency": concurrency,
        "processes": processes,
        "requests": reqs(n),
    }
    if warmup:
        spec["warmup"] = reqs(warmup, offset=7)
    cpu0 = children_cpu()
    p = subprocess.run(
        ["python3", "-", json.dumps(spec)], input=client_source(), capture_output=True, timeout=1800
    )
    if p.returncode:
        raise RuntimeError(p.stderr.decode()[-1000:])
    answer = json.loads(p.stdout)
    s = run_summary(answer["records"], 1, concurrency)
    return {
        "client": "dayzero",
        "output_throughput": s["output_throughput"],
        "median_ttft_ms": s["median_ttft_ms"],
        "median_itl_ms": s["median_itl_ms"],
        "output_tokens": s["output_tokens"],
        "failed": s["failed"],
        "cpu_s": round(children_cpu() - cpu0, 3),
        "loop_cpu_s": round(sum(x["cpu_s"] for x in answer["procs"]), 3),
        "saturated": saturation(answer),
    }


# --- the peer ----------------------------------------------------------------------------------


def peer_available() -> bool:
    return AIPERF.exists()


def ensure_tokenizer() -> None:
    if (TOKENIZER / "tokenizer.json").exists():
        return
    subprocess.run(
        [
            str(BENCH_VENV / "bin" / "python"),
            str(ROOT / "bench" / "loadgen_tokenizer.py"),
            str(MODEL),
            str(TOKENIZER),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )


def aiperf_argv(
    url: str, concurrency: int, n: int, max_tokens: int, work: Path, warmup: int = 0
) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    prompts = work / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"text": PROMPTS[i % len(PROMPTS)]}) + "\n" for i in range(n)))
    shutil.rmtree(work / "out", ignore_errors=True)
    argv = [
        str(AIPERF), "profile", "--model", "smollm2", "--url", url, "--endpoint-type", "chat", "--streaming",
        "--tokenizer", str(TOKENIZER), "--use-server-token-count", "--input-file", str(prompts),
        "--custom-dataset-type", "single_turn", "--dataset-sampling-strategy", "sequential",
        "--concurrency", str(concurrency), "--request-count", str(n),
        "--extra-inputs", f"max_tokens:{max_tokens}",
        *(a for k, v in EXTRA.items() for a in ("--extra-inputs", f"{k}:{json.dumps(v)}")),
        "--extra-inputs", "temperature:0", "--output-artifact-dir", str(work / "out"), "--ui", "none",
    ]  # fmt: skip
    if warmup:
        argv += ["--warmup-request-count", str(warmup)]
    return argv


def aiperf_result(work: Path, cpu: float, log: str = "") -> dict:
    summary_file = work / "out" / "profile_export_aiperf.json"
    if not summary_file.exists():
        raise RuntimeError(f"aiperf failed: {log[-1500:]}")
    d = json.loads(summary_file.read_text())
    itl = d.get("inter_token_latency") or {}
    return {
        "client": "aiperf",
        "output_throughput": round(d["output_token_throughput"]["avg"], 3),
        "median_ttft_ms": round(d["time_to_first_token"]["p50"], 3),
        "median_itl_ms": round(itl.get("p50", float("nan")), 3),
        "output_tokens": d.get("total_osl", {}).get("avg"),
        "failed": (d.get("error_summary") and len(d["error_summary"])) or 0,
        "cpu_s": round(cpu, 3),
    }


def aiperf(url: str, concurrency: int, n: int, max_tokens: int, work: Path, warmup: int = 0) -> dict:
    cpu0 = children_cpu()
    p = subprocess.run(
        aiperf_argv(url, concurrency, n, max_tokens, work, warmup),
        capture_output=True,
        timeout=1800,
        cwd=work,
    )
    return aiperf_result(work, children_cpu() - cpu0, p.stdout.decode(errors="replace"))


def server_metrics(port: int) -> dict[str, float]:
    """llama-server's own counters (`--metrics`), to tell a slower server from a client that measures it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            name, value = line.split()
            out[name.removeprefix("llamacpp:")] = float(value)
    return out


def server_speed(before: dict, after: dict) -> dict:
    """Server-side ms per prompt token and per output token over one round (meaningful at c1)."""

    def per(seconds: str, tokens: str) -> float:
        n = after[tokens] - before[tokens]
        return round((after[seconds] - before[seconds]) * 1000 / n, 3) if n else float("nan")

    return {
        "server_prompt_ms_per_token": per("prompt_seconds_total", "prompt_tokens_total"),
        "server_ms_per_output_token": per("tokens_predicted_seconds_total", "tokens_predicted_total"),
    }


def pin(cpus: set[int]):
    """preexec_fn that pins a child to `cpus` (no-op where affinity is not supported)."""

    def apply() -> None:
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setaffinity(0, cpus)

    return apply


# --- sections ------------------------------------------------------------------------------------


def ceiling(log_dir: Path, peer: bool) -> dict:
    """Flooding stub: tokens ingested per CPU-second is the client's ceiling per core."""
    rows = []
    with stub(0.0, 0.0, log_dir):
        url = f"http://127.0.0.1:{STUB_PORT}"
        for procs in (1, 2):
            r = ours(url, 32, 64, 2000, processes=procs)
            r.update(config=f"c32 x 2000 tok, {procs} process(es)")
            rows.append(r)
        if peer:
            r = aiperf(url, 32, 64, 2000, log_dir / "aiperf-ceiling")
            r.update(config="c32 x 2000 tok")
            rows.append(r)
    for r in rows:
        r["tokens_per_cpu_s"] = round(r["output_tokens"] / r["cpu_s"]) if r["cpu_s"] else None
    return {"rows": rows}


def added_latency(log_dir: Path, peer: bool, ttft_s: float = 0.05, itl_s: float = 0.005) -> dict:
    """Stub with a fixed 50 ms TTFT and 5 ms between tokens: what a client measures above that."""
    rows = []
    with stub(ttft_s, itl_s, log_dir):
        url = f"http://127.0.0.1:{STUB_PORT}"
        for conc in (1, 16):
            r = ours(url, conc, max(16, 2 * conc), 64, warmup=conc)
            r.update(config=f"c{conc}")
            rows.append(r)
            if peer:
                r = aiperf(url, conc, max(16, 2 * conc), 64, log_dir / f"aiperf-lat-{conc}", warmup=conc)
                r.update(config=f"c{conc}")
                rows.append(r)
    for r in rows:
        r["added_ttft_ms"] = round(r["median_ttft_ms"] - ttft_s * 1000, 3)
        r["added_itl_ms"] = round(r["median_itl_ms"] - itl_s * 1000, 3)
    return {"stub_ttft_ms": ttft_s * 1000, "stub_itl_ms": itl_s * 1000, "rows": rows}


def agreement(
    log_dir: Path, peer: bool, rounds: int, concurrency: int = 1, n: int = 16, max_tokens: int = 32
) -> dict:
    """Both clients measure one llama-server in alternating rounds, same prompts and lengths.

    Three things make two clients disagree for reasons that are not theirs, and are removed here:
    - a client sharing the server's cores slows the server (next to a two-thread server on 2
      cores aiperf measured 2.5-3 tok/s at c1, ours 123-142): the server gets CPU 0 with one
      thread, the clients the other CPUs;
    - llama-server serves prompts it has seen from its slot and RAM prompt caches, and which ones
      it has seen depends on the previous round: every request carries `cache_prompt: false`;
    - at concurrency > 1 TTFT depends on how arrivals line up with other requests' prefill (a
      closed-loop client that resends at once lines them up; one with scheduling jitter does not):
      TTFT is compared at concurrency 1, throughput at any.
    The server's own counters are read around each round, so a round where the server itself ran
    slower is told apart from a client that measures differently.
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pinned = len(cpus) >= 2
    threads = 1 if pinned else 2
    argv = [
        str(LLAMA), "--model", str(MODEL), "--host", "127.0.0.1", "--port", str(LLAMA_PORT), "--ctx-size", "4096",
        "--threads", str(threads), "--parallel", str(max(1, concurrency)), "--cont-batching", "--no-webui",
        "--seed", "0", "--metrics",
    ]  # fmt: skip
    rows = []
    mine_cpus = set(cpus[1:]) if pinned else None
    with server(argv, LLAMA_PORT, log_dir / "llama-server.log", preexec=pin({cpus[0]}) if pinned else None):
        if mine_cpus:
            os.sched_setaffinity(0, mine_cpus)  # our client and the peer inherit this
        try:
            url = f"http://127.0.0.1:{LLAMA_PORT}"
            ours(url, concurrency, max(4, concurrency), max_tokens)  # warm the server once
            for k in range(rounds):
                clients = [lambda: ours(url, concurrency, n, max_tokens, warmup=concurrency)]
                if peer:
                    work = log_dir / f"aiperf-llama-{k}"
                    clients.append(
                        lambda w=work: aiperf(url, concurrency, n, max_tokens, w, warmup=concurrency)
                    )
                for measure in clients:
                    before = server_metrics(LLAMA_PORT)
                    r = measure()
                    r.update(round=k, **server_speed(before, server_metrics(LLAMA_PORT)))
                    rows.append(r)
        finally:
            if mine_cpus:
                os.sched_setaffinity(0, set(cpus))
    keys = ("output_throughput", "median_ttft_ms", "median_itl_ms", "server_ms_per_output_token")
    out: dict = {
        "concurrency": concurrency,
        "requests": n,
        "max_tokens": max_tokens,
        "server_cpu": cpus[0] if pinned else "shared",
        "rows": rows,
    }
    for client in ("dayzero", "aiperf"):
        mine = [r for r in rows if r["client"] == client]
        if mine:
            out[client] = {k: statistics.median(r[k] for r in mine) for k in keys}
    if "aiperf" in out:
        out["ratio"] = {k: round(out["dayzero"][k] / out["aiperf"][k], 4) for k in keys}
    return out


def markdown(result: dict) -> str:
    lines = [f"## loadgen bench, {result['date']} ({result['machine']})", ""]
    c = (result.get("ceiling") or {}).get("rows", [])
    if c:
        lines += [
            "### Ceiling: flooding stub (c32, 2000-token streams)",
            "",
            "| client | config | tok/s (wall) | client CPU s | tok per CPU-s | flagged saturated |",
            "|---|---|---|---|---|---|",
        ]
    for r in c:
        flagged = "yes" if r.get("saturated") else ("no" if "saturated" in r else "n/a")
        lines.append(
            f"| {r['client']} | {r['config']} | {r['output_throughput']:.0f} | {r['cpu_s']} | {r['tokens_per_cpu_s']} | {flagged} |"
        )
    a = result.get("added_latency") or {"rows": []}
    if a["rows"]:
        lines += [
            "",
            f"### Added latency: stub with TTFT {a['stub_ttft_ms']:g} ms, {a['stub_itl_ms']:g} ms between tokens",
            "",
            "| client | concurrency | median TTFT ms | added TTFT ms | median ITL ms | added ITL ms | flagged saturated |",
            "|---|---|---|---|---|---|---|",
        ]
    for r in a["rows"]:
        flagged = "yes" if r.get("saturated") else ("no" if "saturated" in r else "n/a")
        lines.append(
            f"| {r['client']} | {r['config']} | {r['median_ttft_ms']} | {r['added_ttft_ms']} | {r['median_itl_ms']} | {r['added_itl_ms']} | {flagged} |"
        )
    for g in result.get("agreement") or ():
        lines += [
            "",
            f"### Agreement on llama-server (SmolLM2-135M on CPU {g['server_cpu']}, concurrency {g['concurrency']}, "
            f"{g['requests']} chat requests x {g['max_tokens']} tokens, no prompt cache; rounds alternate)",
            "",
            "| round | client | output tok/s | median TTFT ms | median ITL ms | server ms per output token |",
            "|---|---|---|---|---|---|",
        ]
        for r in g["rows"]:
            lines.append(
                f"| {r['round']} | {r['client']} | {r['output_throughput']:.2f} | {r['median_ttft_ms']:.1f} | {r['median_itl_ms']:.2f} | {r['server_ms_per_output_token']:.3f} |"
            )
        for client in ("dayzero", "aiperf"):
            if client in g:
                m = g[client]
                lines.append(
                    f"| median | {client} | {m['output_throughput']:.2f} | {m['median_ttft_ms']:.1f} | {m['median_itl_ms']:.2f} | {m['server_ms_per_output_token']:.3f} |"
                )
        if "ratio" in g:
            q = g["ratio"]
            lines.append(
                f"| ratio | dayzero / aiperf | {q['output_throughput']:.3f} | {q['median_ttft_ms']:.3f} | {q['median_itl_ms']:.3f} | {q['server_ms_per_output_token']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-llama", action="store_true", help="stub sections only")
    parser.add_argument("--only", choices=["ceiling", "latency", "agreement"], help="run one section")
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1, 4],
        help="agreement: requests in flight (one section each; TTFT is comparable at 1)",
    )
    parser.add_argument("--requests", type=int, default=16, help="agreement: requests per client per round")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "loadgen.json")
    args = parser.parse_args(argv)
    peer = peer_available()
    if peer:
        ensure_tokenizer()
    else:
        print(f"no peer client at {AIPERF}: peer columns skipped", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="dz-bench-") as tmp:
        log_dir = Path(tmp)
        result = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": f"{os.cpu_count()} cores, python {sys.version.split()[0]}",
            "load_average_at_start": os.getloadavg(),
        }
        if args.only in (None, "ceiling"):
            result["ceiling"] = ceiling(log_dir, peer)
        if args.only in (None, "latency"):
            result["added_latency"] = added_latency(log_dir, peer)
        if args.only in (None, "agreement") and not args.skip_llama:
            result["agreement"] = [
                agreement(log_dir, peer, args.rounds, c, max(args.requests, 4 * c)) for c in args.concurrency
            ]
        result["load_average_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(markdown(result))
    print(f"(raw: {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
