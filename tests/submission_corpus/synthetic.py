"""A synthetic run of the embedded default's cells, made by the harness's own code paths.

Requests come from the request plan and records are named as a run names them (`dayzero.run.plan`,
`dayzero.run.records`); the measurement phases (`dayzero.run.phases.run_all`) run for real
against a fake endpoint whose client answers with consistent raw records (golden texts for
probes, the reference cell's recorded tool calls for the tool-use suite, exact output lengths, a
fixed token rate), so the evidence claims exactly what the
harness would claim from such records. That gives the checker's tests a valid bundle in a
second, without an engine.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import random
import time
from pathlib import Path

from dayzero import __version__, evidence
from dayzero.checks.accuracy import load_eval
from dayzero.checks.correctness import check_golden, check_probe
from dayzero.lab.lease import Lease
from dayzero.lab.preflight import NO_DRIVER, HostFacts
from dayzero.loadgen.client import VERSION as CLIENT_VERSION
from dayzero.loadgen.client import prompt_digest
from dayzero.run import plan, records
from dayzero.run.phases import Endpoint, metered, run_all, run_tool_calls, score_goldens
from dayzero.spec.goldens import load_golden
from dayzero.spec.inventory import Host
from dayzero.spec.matrix import Cell, Matrix
from dayzero.spec.recipe import hosts_needed, render
from dayzero.spec.workloads import suites_dir

ENGINE_VERSION = "llama.cpp synthetic build"
TTFT_S = 0.040
ITL_S = 0.004  # 250 tok/s per stream: far above the embedded default's floors
# What preflight's probe would have measured on the synthetic host (this 2-core VM measured 37
# GB/s): the roofline of SmolLM2 at Q4_1 is then ~238 tok/s a stream, x1.5 margin ~357.
SYNTHETIC_BANDWIDTH_GBS = 30.0
HOST = Host(
    name="local",
    hardware="cpu",
    transport="local",
    address="127.0.0.1",
    accelerators=1,
    vars=(("model_root", "/models"),),
)
# The synthetic runs' engine is a local build whose binary may not be on the packing machine: the
# description names it, with a digest of its name (a stand-in, not the zeros pack now refuses as a
# placeholder, issue 45 item 5).
SYNTHETIC_BINARY = "llama-server (synthetic)"
SYSTEM = {
    "system_name": "synthetic test system",
    "engines": [
        {
            "name": "llama.cpp",
            "image": SYNTHETIC_BINARY,
            "image_digest": "sha256:" + hashlib.sha256(SYNTHETIC_BINARY.encode()).hexdigest(),
        }
    ],
}


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")


def _flatten(requests: list[dict]) -> list[dict]:
    """What the host client records: one record per request, one per turn of a session."""
    out = []
    for req in requests:
        if "turns" in req:
            out += [
                dict(req, id=f"{req['id']}/t{k}", max_tokens=t["max_tokens"], session=req["id"], turn=k)
                for k, t in enumerate(req["turns"])
            ]
        else:
            out.append(req)
    return out


class FakeClient:
    """Answers client specs as the host client would, on a synthetic clock; /metrics counts drafts."""

    def __init__(
        self,
        start: float,
        texts: dict[str, str],
        itl_s: float = ITL_S,
        calls: dict[str, list[str]] | None = None,
        steps: dict[str, list] | None = None,
    ):
        self.clock = start
        self.texts = texts
        self.steps = steps or {}  # probe -> the golden's log-probabilities, returned where asked
        self.calls = calls or {}  # tool-use case -> the tools its reference answer called
        self.itl_s = itl_s
        self.jitter = random.Random(start)
        self.generated = 0
        self.served: list[tuple[float, int, int, int, float]] = []  # send, slot, prompt, tokens, time

    def metrics(self) -> str:
        """llama-server's /metrics (the counters the checker reads) for what it served so far."""
        drafts = self.generated // 4
        prompt = sum(x[2] for x in self.served)
        prompt_s = TTFT_S * len(self.served)
        return (
            f"llamacpp:prompt_tokens_total {prompt}\n"
            "llamacpp:prompt_tokens_cached_total 0\n"
            f"llamacpp:prompt_seconds_total {prompt_s:.6f}\n"
            f"llamacpp:tokens_predicted_total {self.generated}\n"
            f"llamacpp:tokens_predicted_seconds_total {sum(x[4] for x in self.served) - prompt_s:.6f}\n"
            f"llamacpp:spec_decode_num_drafts_total {drafts}\n"
            f"llamacpp:spec_decode_num_draft_tokens_total {drafts * 4}\n"
            f"llamacpp:spec_decode_num_accepted_tokens_total {drafts * 2}\n"
        )

    def __call__(self, spec: dict, timeout: float) -> dict:
        if spec.get("action") == "get":
            return {"status": 200, "body": self.metrics()}
        conc = spec.get("concurrency", 1)
        slots = [self.clock] * conc
        records = []
        for i, req in enumerate(_flatten(spec.get("requests") or [])):
            slot = min(range(conc), key=lambda k: slots[k])
            send = slots[slot] + 0.001
            text = self.texts.get(req["id"])
            n = req["max_tokens"] if text is None else max(1, min(len(text.split()), req["max_tokens"]))
            text = text if text is not None else " ".join(f"w{j % 50}x{i}" for j in range(n))
            # a real server's token gaps vary: no two runs stream a request alike (identity)
            gaps = [self.itl_s * (0.9 + 0.2 * self.jitter.random()) for _ in range(n)]
            chunks = [round(TTFT_S + sum(gaps[:j]), 6) for j in range(n)]
            end = send + chunks[-1] + 0.001
            slots[slot] = end
            self.generated += n
            self.served.append((send, slot, req.get("input_len", 12), n, chunks[-1]))
            record = {
                "id": req["id"],
                "kind": req.get("kind", "chat"),
                "tag": req.get("tag"),
                "max_tokens": req["max_tokens"],
                "send": send,
                "first": send + chunks[0],
                "end": end,
                "chunks": chunks,
                "text": text,
                "finish_reason": "length",
                "usage": {
                    "completion_tokens": n,
                    "prompt_tokens": req.get("input_len", 12),
                    "total_tokens": n + 12,
                    "prompt_tokens_details": {"cached_tokens": 0},
                },
                "error": None,
                "proc": 0,
                "reused": i >= conc,
                "index": i,
            }
            if named := self.calls.get(req["id"]) if (req.get("extra") or {}).get("tools") else None:
                offered = {t["function"]["name"]: t["function"]["parameters"] for t in req["extra"]["tools"]}
                record["tool_calls"] = [
                    {"id": f"call-{i}-{k}", "name": name, "arguments": json.dumps(least(offered[name]))}
                    for k, name in enumerate(named)
                ]
                record["text"], record["finish_reason"] = "", "tool_calls"
            for key in ("input_len", "session", "turn"):
                if key in req:
                    record[key] = req[key]
            record["prompt_digest"] = prompt_digest(req, req.get("turn"))
            if (req.get("extra") or {}).get("logprobs") and req["id"] in self.steps:
                record["logprobs"] = self.steps[req["id"]]
            records.append(record)
        start, self.clock = self.clock, max(slots) + 0.01
        wall = self.clock - start
        return {
            "client": {
                "version": CLIENT_VERSION,
                "python": "3.11",
                "cpu_count": 2,
                "processes": spec.get("processes", 1),
                "concurrency": conc,
            },
            "start": start,
            "end": self.clock,
            "client_cpu_s": round(wall * 0.05, 4),
            "procs": [
                {
                    "proc": 0,
                    "pid": 1,
                    "concurrency": conc,
                    "requests": len(records),
                    "cpu_s": round(wall * 0.05, 4),
                    "wall_s": round(wall, 4),
                    "lag_ms": {"n": 10, "p50": 0.1, "p90": 0.2, "p99": 0.5, "max": 1.0},
                }
            ],
            "records": records,
        }


def least(schema: dict):
    """The smallest value a JSON Schema accepts (its required properties only): a valid call."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: least(props.get(k, {})) for k in schema.get("required") or ()}
    return {"array": [], "number": 1, "integer": 1, "boolean": True}.get(kind, "x")


def _stamp(t: float) -> str:
    """llama-server's time since start: minutes.seconds.milliseconds.microseconds."""
    us = round(t * 1e6)
    return f"{us // 60_000_000}.{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}.{us % 1000:03d}"


def server_log(command: str, served: list[tuple], server_start: float) -> str:
    """The log llama-server writes for these requests (the lines the checker reads, as in a real one)."""
    from dayzero.submission.engine_account import launch_flags

    flags = launch_flags(command)
    lines = [
        "0.00.005.739 I srv  llama_server: initializing ...",
        f"0.00.009.538 I srv    load_model: loading model '{flags.get('model', 'model.gguf')}'",
        f"0.00.389.874 I cmn          init: llama threadpool init, n_threads = {flags.get('threads', 2)}",
        f"0.00.765.839 I srv    load_model: initializing, n_slots = {flags.get('slots', 1)}, n_ctx = 512",
        f"0.00.767.645 I srv  llama_server: listening on http://127.0.0.1:{flags.get('port', 18080)}",
    ]
    for task, (send, slot, prompt, tokens, total) in enumerate(sorted(served)):
        begin, done = send - server_start, send - server_start + total
        prompt_ms, eval_ms = TTFT_S * 1e3, total * 1e3 - TTFT_S * 1e3
        head = f"I slot print_timing: id  {slot} | task {task} |"
        lines += [
            f"{_stamp(begin)} I slot launch_slot_: id  {slot} | task {task} | processing task, is_child = 0",
            f"{_stamp(done)} {head} prompt eval time = {prompt_ms:10.2f} ms / {prompt:5d} tokens",
            f"{_stamp(done)} {head}        eval time = {eval_ms:10.2f} ms / {tokens:5d} tokens",
            f"{_stamp(done)} {head}       total time = {total * 1e3:10.2f} ms / {prompt + tokens:5d} tokens",
            f"{_stamp(done)} I slot      release: id  {slot} | task {task} | stop processing",
        ]
    return "\n".join(lines) + "\n"


def known_answers(card, suites: Path) -> dict[str, str]:
    """The eval sets' answers, so the synthetic server passes its accuracy gates."""
    out = {}
    for rule in card.accuracy:
        for item in load_eval(suites / "evals", rule.item.eval).items:
            out[item.id] = f" {item.answer}"
    return out


def run_cell(
    matrix: Matrix, cell: Cell, reports: Path, goldens: Path, run_id: str, start: float, itl_s: float = ITL_S
) -> Path:
    """Write one cell's raw records, log and evidence under `reports`, as run.cell would."""
    card = matrix.card(cell)
    golden = load_golden(goldens, plan.probes(card, cell).golden_cell)
    suites = suites_dir(goldens, matrix.root)
    texts = {**known_answers(card, suites), **(golden.outputs if golden else {})}
    tool_answers = golden.tool_calls if golden else {}  # the probes' golden cell is the tools' reference
    calls = {case: names for suite in tool_answers.values() for case, names in suite.items()}
    client = FakeClient(start, texts, itl_s, calls, golden.tokens if golden else None)
    (reports / records.folder(run_id, cell.id)).mkdir(parents=True, exist_ok=True)

    def keep(phase: str, answer: dict) -> str:
        rel = records.path(run_id, cell.id, phase)
        (reports / rel).write_text(json.dumps(answer))
        return rel

    def keep_metrics(phase: str, doc: dict) -> str:
        rel = records.metrics_path(run_id, cell.id, phase)
        (reports / rel).write_text(json.dumps(doc))
        return rel

    ep = Endpoint(
        url="http://127.0.0.1:18080",
        client=client,
        keep=keep,
        say=lambda m: None,
        step=lambda title: contextlib.nullcontext(),
        meters=(("server[0]@local", "http://127.0.0.1:18080/metrics"),),
        keep_metrics=keep_metrics,
        engine=card.engine.name,
    )
    probes = plan.probes(card, cell)
    spec = {"action": "requests", "concurrency": probes.concurrency, "requests": probes.requests()}
    probe_answer, _ = metered(ep, probes.phase, lambda: client(spec, 60))
    keep(probes.phase, probe_answer)
    by_id = {r["id"]: r for r in probe_answer["records"]}
    checks = [check_probe(p, by_id[p.id]["text"], None) for p in probes.probes]
    forced = score_goldens(card, cell, ep, golden.outputs if golden else None)
    recipe = render(matrix, cell, [HOST])
    checks += [
        check_golden(
            probes.policy,
            p.id,
            texts.get(p.id),
            by_id[p.id]["text"],
            golden.provenance if golden else None,  # as the run keeps it, compared with this recipe
            recipe_digest=recipe.digest,
            engine_version=ENGINE_VERSION,
            missing=probes.missing_verdict,
            golden_steps=golden.tokens.get(p.id) if golden else None,
            output_steps=by_id[p.id].get("logprobs"),
            forced=forced[p.id][0],
            forced_why=forced[p.id][1],
        )
        for p in probes.probes
    ]
    tool_steps = golden.tool_tokens if golden else {}
    checks += run_tool_calls(card, cell, ep, suites, tool_answers, probes.golden_cell, tool_steps)
    run_all(card, cell, ep, HOST.accelerators, suites, into=checks)
    log = f"{records.logs_folder(run_id, cell.id)}/local-server-0.log"
    (reports / log).parent.mkdir(parents=True, exist_ok=True)
    launch = evidence.launches_json(recipe, ())[0]["command"]
    (reports / log).write_text(server_log(launch, client.served, start - 1.0))
    facts = HostFacts(
        HOST.name,
        True,
        accelerators_seen=1,
        memory_total_gb=7.8,
        cpus=2,
        engine_versions={card.engine.name: ENGINE_VERSION},
        memory_bandwidth_gbs=SYNTHETIC_BANDWIDTH_GBS,
        driver_version=NO_DRIVER,
        model_files=tuple(
            {"role": f.role, "path": f.path, "size": f.size, "sha256": f.sha256} for f in card.model_files
        ),
    )
    doc = evidence.build(
        cell,
        checks,
        [Lease(HOST, 0, run_id, f"{HOST.workdir}/leases/slot-0")],
        {HOST.name: facts},
        held={"acquired": iso(start - 1), "released": iso(client.clock + 1)},
        run={
            "id": run_id,
            "started": iso(start - 1),
            "finished": iso(client.clock + 1),
            "by": "ci",
            "controller": "ci-1",
            "worker": "master",
            "harness_version": __version__,
        },
        recipe=recipe,
        engine={"name": card.engine.name, "version": ENGINE_VERSION},
        records=[
            str(p.relative_to(reports)) for p in (reports / records.folder(run_id, cell.id)).glob("*.json")
        ],
        logs=[log],
        verdict="passed" if all(c.passed for c in checks) else "failed",
    )
    return evidence.write(reports, doc)


def head_commit_time() -> float:
    from dayzero.submission.check import commit_time_in, harness_root

    from .lab import head_commit

    when = commit_time_in(harness_root())
    return (when(head_commit()) if when else None) or 0.0


def one_host_cells(matrix: Matrix, hardware: str = "cpu") -> list[Cell]:
    """The supported cells of `hardware` that one host runs (the synthetic lab has one) with the
    engine it simulates, llama-server (its log and /metrics); real SGLang cells are bundled from
    real runs (tests/test_submission_e2e.py)."""
    return [
        c
        for c in matrix.cells
        if c.hardware == hardware
        and c.supported
        and hosts_needed(matrix.card(c), c) == 1
        and matrix.card(c).engine.name == "llama.cpp"
    ]


def synthetic_run(
    matrix: Matrix, reports: Path, goldens: Path, hardware: str = "cpu", itl_s: float = ITL_S
) -> list[Path]:
    """Evidence for every supported one-host cell of `hardware` (this lab has one host), one run
    id, times ending a minute ago."""
    run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-00001"
    # Ten minutes back (the evidence is in the age window and in the past) per ITL_S of token time,
    # but never before this checkout's commit: no run predates the harness it ran.
    start = max(time.time() - 600 * max(1.0, itl_s / ITL_S), head_commit_time() + 1)
    paths = []
    for cell in one_host_cells(matrix, hardware):
        paths.append(run_cell(matrix, cell, Path(reports), Path(goldens), run_id, start, itl_s))
        start = (
            dt.datetime.fromisoformat(json.loads(paths[-1].read_text())["run"]["finished"]).timestamp() + 10
        )
    return paths
