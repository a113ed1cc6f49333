"""How far the load generator can be trusted: its own ceiling, the latency it adds, and agreement
with a peer client (aiperf) on the same real llama-server, side by side in one run.

    .venv/bin/python bench/loadgen_bench.py [--skip-llama] [--rounds 3]

Needs the peer in a separate venv: `python3 -m venv .venv-bench && .venv-bench/bin/pip install
aiperf gguf` (aiperf needs a Hugging Face tokenizer; `loadgen_tokenizer.py` writes one from the
model's GGUF since the hub is not reachable). Without it the peer columns are skipped.

Servers: the stub (dayzero.loadgen.stub, port 19010) streams pre-rendered tokens, so with no
delay it is faster than any client and measures the client's ceiling; with a fixed TTFT and
inter-token delay it is the ground truth for the latency a client adds. llama-server (port
19020, --parallel 4) is the real server both clients measure in alternating rounds. Every
server started here is killed on the way out. Speeds are machine-dependent: read ratios.
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
sys.path.insert(0, str(ROOT))

from dayzero.checks.performance import saturation, summarize  # noqa: E402
from dayzero.engine import cache_root  # noqa: E402
from dayzero.loadgen import client_source  # noqa: E402

STUB_PORT, LLAMA_PORT = 19010, 19020
BENCH_VENV = ROOT / ".venv-bench"
AIPERF = BENCH_VENV / "bin" / "aiperf"
MODEL = cache_root() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA = cache_root() / "llama.cpp" / "0.3.36" / "bin" / "llama-server"
TOKENIZER = cache_root() / "tokenizers" / "smollm2-135m"
PROMPTS = [
    json.loads(x)["prompt"] for x in (ROOT / "suites/workloads/prompts/prose.jsonl").read_text().splitlines()
]


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextlib.contextmanager
def server(argv: list[str], port: int, log: Path, ready_path: str = "/health", deadline: float = 120):
    """Start a server in its own process group; wait for 200 on ready_path; kill the group after."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
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
        "dayzero.loadgen.stub",
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
                "extra": {"ignore_eos": True},
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
    s = summarize(answer["records"], 1, concurrency)
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
        "--extra-inputs", f"max_tokens:{max_tokens}", "--extra-inputs", "ignore_eos:true",
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


def requests_processing(port: int) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("llamacpp:requests_processing "):
            return float(line.split()[1])
    return 0.0


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
    log_dir: Path, peer: bool, rounds: int, slots: int = 4, n: int = 24, max_tokens: int = 32
) -> dict:
    """Both clients at once on one llama-server, each with half the slots, same prompts and lengths.

    On a shared machine the server's speed drifts by minutes-long factors of 2 or more, so
    clients measured one after the other disagree for reasons that are not theirs. Running them
    concurrently, each keeping slots/2 requests in flight, puts both in the same window on the same
    server: a client that measures well agrees with the other one. The peer starts first (its
    start-up takes seconds); ours starts as soon as the server sees the peer's first request.
    """
    argv = [
        str(LLAMA), "--model", str(MODEL), "--host", "127.0.0.1", "--port", str(LLAMA_PORT), "--ctx-size", "4096",
        "--threads", "2", "--parallel", str(slots), "--cont-batching", "--no-webui", "--seed", "0", "--metrics",
    ]  # fmt: skip
    half = slots // 2
    rows = []
    with server(argv, LLAMA_PORT, log_dir / "llama-server.log"):
        url = f"http://127.0.0.1:{LLAMA_PORT}"
        ours(url, slots, slots, max_tokens)  # warm the server once, outside the rounds
        for k in range(rounds):
            if not peer:
                r = ours(url, half, n, max_tokens)
                r.update(round=k)
                rows.append(r)
                continue
            work = log_dir / f"aiperf-llama-{k}"
            proc = subprocess.Popen(
                aiperf_argv(url, half, n, max_tokens, work),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=work,
            )
            try:
                t0 = time.monotonic()
                while requests_processing(LLAMA_PORT) < 1 and proc.poll() is None:
                    if time.monotonic() - t0 > 300:
                        raise RuntimeError("aiperf sent no request within 300 s")
                    time.sleep(0.05)
                mine = ours(url, half, n, max_tokens)
                log, _ = proc.communicate(timeout=1800)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            theirs = aiperf_result(work, float("nan"), log.decode(errors="replace"))
            for r in (mine, theirs):
                r.update(round=k)
                rows.append(r)
    out: dict = {
        "slots": slots,
        "concurrency_each": half,
        "requests": n,
        "max_tokens": max_tokens,
        "rows": rows,
    }
    for client in ("dayzero", "aiperf"):
        mine = [r for r in rows if r["client"] == client]
        if mine:
            out[client] = {
                "output_throughput": statistics.median(r["output_throughput"] for r in mine),
                "median_ttft_ms": statistics.median(r["median_ttft_ms"] for r in mine),
            }
    if "aiperf" in out:
        out["ratio"] = {k: round(out["dayzero"][k] / out["aiperf"][k], 4) for k in out["dayzero"]}
        out["ratio_per_round"] = [
            {key: round(a[key] / b[key], 4) for key in ("output_throughput", "median_ttft_ms")}
            for a, b in zip(rows[0::2], rows[1::2], strict=True)
        ]
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
    g = result.get("agreement")
    if g:
        lines += [
            "",
            f"### Agreement on llama-server (SmolLM2-135M, --parallel {g['slots']}; both clients at once, {g['concurrency_each']} in flight each, {g['requests']} chat requests x {g['max_tokens']} tokens each)",
            "",
            "| round | client | output tok/s | median TTFT ms |",
            "|---|---|---|---|",
        ]
        for r in g["rows"]:
            lines.append(
                f"| {r['round']} | {r['client']} | {r['output_throughput']:.2f} | {r['median_ttft_ms']:.1f} |"
            )
        for client in ("dayzero", "aiperf"):
            if client in g:
                lines.append(
                    f"| median | {client} | {g[client]['output_throughput']:.2f} | {g[client]['median_ttft_ms']:.1f} |"
                )
        if "ratio" in g:
            per_round = ", ".join(
                f"{r['output_throughput']:.3f} / {r['median_ttft_ms']:.3f}" for r in g["ratio_per_round"]
            )
            lines += [
                "",
                f"dayzero / aiperf, medians over rounds: output throughput {g['ratio']['output_throughput']:.3f}, median TTFT {g['ratio']['median_ttft_ms']:.3f} (per round, throughput / TTFT: {per_round})",
            ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-llama", action="store_true", help="stub sections only")
    parser.add_argument("--only", choices=["ceiling", "latency", "agreement"], help="run one section")
    parser.add_argument(
        "--slots", type=int, default=4, help="llama-server slots; each client keeps half in flight"
    )
    parser.add_argument("--requests", type=int, default=24, help="requests per client per agreement round")
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
            result["agreement"] = agreement(log_dir, peer, args.rounds, args.slots, args.requests)
        result["load_average_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(markdown(result))
    print(f"(raw: {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
