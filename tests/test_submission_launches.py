"""Cells of several launches in a vendor bundle: each launch's own log read for what it is, and the
requests reconciled across the servers that served them (no engine needed: real log excerpts of
the cpu cells in tests/data, hand-made accounts for the reconciliation). The real rpc_split and
routed bundles are checked end to end in tests/test_multihost_e2e.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dayzero.checks.server_metrics import Totals
from dayzero.engines.account import Served, ServerAccount

DATA = Path(__file__).parent / "data"
MODEL = "/root/.cache/dayzero/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SGLANG = "python3 -m sglang.launch_server --model-path /m --device cpu --host 127.0.0.2 --port 18090"


def test_the_routers_log_accounts_for_the_generation_requests_it_answered():
    from dayzero.engines.sglang import router_log as router

    account = router.parse((DATA / "sglang-router-0.3.2.log").read_text())
    # 4 probes, 2 warm-ups and 4 measured chat requests of the real routed cell; no /readiness
    assert (account.ready, account.listen, account.count) == (True, "127.0.2.1:18088", 10)
    assert not router.parse((DATA / "sglang-0.5.23-cpu.log").read_text()).ready


def test_a_non_endpoint_ranks_log_says_what_it_is_and_where_it_listens():
    from dayzero.engines.llamacpp import log as llamacpp
    from dayzero.engines.sglang import log as sglang

    rpc = llamacpp.parse_rpc_server((DATA / "rpc-server.log").read_text())
    assert (rpc.ready, rpc.listen, rpc.count) == (True, "127.0.2.2:50052", 0)
    assert not llamacpp.parse((DATA / "rpc-server.log").read_text()).ready  # not a llama-server
    rank = sglang.parse_rank((DATA / "sglang-0.5.23-rank1.log").read_text())
    assert (rank.ready, rank.listen, rank.count) == (True, "127.0.0.3:18090", 0)
    endpoint = sglang.parse_rank((DATA / "sglang-0.5.23-cpu.log").read_text())
    assert not endpoint.ready and endpoint.count > 0  # the endpoint's log is no rank's


@pytest.mark.parametrize(
    ("engine", "command", "part"),
    [
        ("llama.cpp", f"llama-server --model {MODEL} --port 18080 --rpc 127.0.2.2:50052", "server"),
        ("llama.cpp", "rpc-server --host 127.0.2.2 --port 50052 --threads 1", "rank"),
        ("llama.cpp", "python3 -m sglang_router.launch_router --policy round_robin --port 18088", "router"),
        ("sglang", SGLANG, "server"),
        ("sglang", f"{SGLANG} --tp 2 --nnodes 2 --node-rank 0", "server"),
        ("sglang", f"{SGLANG} --tp 2 --nnodes 2 --node-rank 1", "rank"),
        ("sglang", f"{SGLANG} --disaggregation-mode prefill", "prefill/decode"),
    ],
)
def test_each_launch_is_read_for_what_it_is(engine, command, part):
    from dayzero.submission.engine_launches import part_of

    assert part_of(engine, {"command": command}) == part


def served(*keys: tuple[int, int], total_s: float = 0.1) -> tuple[Served, ...]:
    """llama.cpp requests: (prompt tokens evaluated, generated tokens) each."""
    return tuple(Served(i, 0, float(i), p, g, total_s) for i, (p, g) in enumerate(keys))


def counted(*phases: tuple[int, int]) -> list[Totals]:
    """A llama-server's /metrics difference per phase: (prompt evaluated, generated)."""
    return [Totals(prompt_evaluated=p, generated=g) for p, g in phases]


def test_a_servers_log_is_cut_into_phases_by_its_own_counters():
    from dayzero.submission.reconcile import cut

    log = served((10, 8), (12, 16), (30, 32), (31, 32))
    assert cut(log, counted((22, 24), (61, 64)), ["probes", "perf"], whole=False) == [log[:2], log[2:]]
    problem = cut(log, counted((22, 24), (61, 60)), ["probes", "perf"], whole=False)
    assert "phase perf: 2 request(s) of the log, 61 prompt + 64 generated tokens" in problem
    assert "counted 61 prompt + 60 generated" in problem
    assert "after the last phase" in cut(log, counted((22, 24)), ["probes"], whole=False)
    sglang = cut(log, [Totals(prompt_evaluated=22, generated=24, requests=2)], ["probes"], whole=False)
    assert "after the last phase" in sglang  # SGLang's request counter cuts by count


def record(prompt: int, cached: int, generated: int, took: float = 1.0) -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": generated}
    usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": f"r{prompt}", "send": 0.0, "end": took, "usage": usage}


WARM = {"requests": 1, "errors": 0, "usage": {"prompt_tokens": 5, "completion_tokens": 8, "cached_tokens": 0}}


def test_every_record_is_one_request_of_exactly_one_servers_log():
    from dayzero.submission.reconcile import split_problem

    records = [record(12, 2, 16), record(30, 0, 32)]
    worker1, worker2 = served((5, 8), (10, 16)), served((30, 32))
    assert split_problem(records, WARM, 1, [*worker1, *worker2]) == ""
    # worker2's log dropped, or duplicated in place of worker1's
    assert "1 request(s) of the records in no log" in split_problem(records, WARM, 1, list(worker1))
    twice = split_problem(records, WARM, 1, [*worker2, *worker2, *worker1])
    assert "2 request(s) in the logs beyond the records" in twice
    # the warm-up: as many as the client sent, with its token totals
    assert "total prompt evaluated 5 + generated 8, the warm-up's prompt evaluated 6" in split_problem(
        records, {**WARM, "usage": {**WARM["usage"], "prompt_tokens": 6}}, 1, [*worker1, *worker2]
    )
    assert "usage is not stated" in split_problem(records, {"requests": 1}, 1, [*worker1, *worker2])
    # a client faster than the server it says served it
    slow = served((30, 32), total_s=2.5)
    assert "took 1000.0 ms end to end" in split_problem(records, WARM, 1, [*worker1, *slow])


def test_the_rpc_servers_of_a_multi_node_cell_run_the_recipes_worker_command(tmp_path):
    """Ranks 1..N-1 of llama.cpp's rpc_split run `rpc-server` (the card's engine.worker), not the
    role's llama-server command: what the recipe renders for them is the matrix's recipe."""
    from dayzero.evidence import launches_json
    from dayzero.spec.inventory import Host
    from dayzero.spec.matrix import load_matrix
    from dayzero.spec.recipe import render
    from dayzero.submission.bundle import Bundle, Reference, Subject
    from dayzero.submission.provenance import check_recipe_commands

    from .conftest import REPO

    matrix = load_matrix(REPO / "matrix")
    cell = matrix.cell("smollm2-135m/cpu+llama.cpp/rpc_split/baseline")
    hosts = [Host(f"n{i}", "cpu", f"127.0.2.{i}", vars=(("model_root", "/models"),)) for i in (1, 2)]
    launches = launches_json(render(matrix, cell, hosts), ())
    assert launches[1]["command"].startswith("rpc-server")
    doc = {"cell": cell.id, "recipe": {"launches": launches}}
    subject = Subject(Bundle(tmp_path, ()), None, None, {"evidence/x.json": doc}, {})
    ref = Reference(matrix, REPO / "suites" / "goldens", REPO / "submissions" / "allowed_signers")
    assert check_recipe_commands(subject, ref) == []
    launches[1]["command"] += " --cache"  # one argument more than the worker's command
    assert [f.found.split(":")[0] for f in check_recipe_commands(subject, ref)] == ["server[1]"]


# -- a hand-made routed cell: two llama-server workers behind the router, one phase ---------------

RUN = "runs/r1/smollm2-135m__cpu+llama.cpp__routed__baseline"
PHASE = f"{RUN}/records/perf.json"
ROUTER_LINES = [
    "2026-12-04 14:37:35  INFO smg::server: x.rs:794: Starting router on 127.0.0.1:18088 | mode: Regular",
    "2026-12-04 14:37:35  INFO smg::server: x.rs:985: Router ready | workers: []",
] + [
    "2026-12-04 14:37:36  INFO http_request{method=POST uri=/v1/chat/completions version=HTTP/1.1 "
    f'module="smg" request_id="chatcmpl-{i}" status_code=200 latency=2768}}: smg::response: x.rs:359: '
    "finished processing request"
    for i in range(3)
]


def launch(role: str, host: str, port: int, program: str = "llama-server --parallel 1") -> dict:
    return {
        "role": role,
        "rank": 0,
        "host": host,
        "port": port,
        "command": f"{program} --host 127.0.0.1 --port {port}",
    }


def metrics_body(prompt: int, generated: int) -> str:
    return f"llamacpp:prompt_tokens_total {prompt}\nllamacpp:tokens_predicted_total {generated}\n"


def routed_cell(tmp_path: Path, logs: dict[str, str] | None = None, launches: list | None = None):
    """The subject of a routed cell: worker1 serves the warm-up and request A, worker2 request B."""
    from dayzero.submission.bundle import Bundle, Subject

    from .submission_corpus.synthetic import server_log

    launches = launches or [
        launch("worker1", "h1", 18080),
        launch("worker2", "h2", 18081),
        launch("router", "h1", 18088, "python3 -m sglang_router.launch_router --policy round_robin"),
    ]
    written = {
        "h1-worker1-0.log": server_log(
            launches[0]["command"], [(10.0, 0, 5, 8, 0.4), (11.0, 0, 30, 32, 0.8)], 0.0
        ),
        "h2-worker2-0.log": server_log(launches[1]["command"], [(11.0, 0, 20, 16, 0.6)], 0.0),
        "h1-router-0.log": "\n".join(ROUTER_LINES) + "\n",
    }
    written = {**written, **(logs or {})}
    for name, text in written.items():
        (tmp_path / f"{RUN}/logs").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{RUN}/logs/{name}").write_text(text)
    rels = [f"{RUN}/logs/{name}" for name in written]
    records = [record(30, 0, 32, took=1.0), record(20, 0, 16, took=0.9)]
    answer = {"records": records, "warmup": {**WARM, "e2e_s": 0.5}}
    snaps = {
        "before": [
            {"target": f"worker{i}[0]@h{i}", "status": 200, "body": metrics_body(0, 0)} for i in (1, 2)
        ],
        "after": [
            {"target": "worker1[0]@h1", "status": 200, "body": metrics_body(35, 40)},
            {"target": "worker2[0]@h2", "status": 200, "body": metrics_body(20, 16)},
        ],
    }
    mrel = PHASE.replace(".json", ".metrics.json")
    doc = {
        "engine": {"name": "llama.cpp"},
        "hardware": "cpu",
        "hosts": [{"name": "h1"}, {"name": "h2"}],
        "recipe": {"launches": launches},
        "records": [PHASE, mrel],
        "logs": rels,
    }
    subject = Subject(
        Bundle(tmp_path, tuple(rels)), evidence={"evidence/x.json": doc}, records={PHASE: answer}
    )
    subject.metrics[mrel] = snaps
    return subject, doc


def findings(subject, doc) -> list[str]:
    from dayzero.submission.engine_launches import cross_check

    return [f"{f.requirement}: {f.found}" for f in cross_check(subject, "evidence/x.json", doc)]


def test_a_routed_cells_requests_are_reconciled_across_its_workers_logs(tmp_path):
    assert findings(*routed_cell(tmp_path / "honest")) == []
    empty = routed_cell(tmp_path / "empty", logs={"h2-worker2-0.log": ""})
    assert findings(*empty) == ["engine.log: no start-up line of the engine"]
    worker1 = (tmp_path / f"honest/{RUN}/logs/h1-worker1-0.log").read_text()
    worker2 = (tmp_path / f"honest/{RUN}/logs/h2-worker2-0.log").read_text()
    # worker1's log in worker2's place, its listen address moved: every request of it twice
    twice = routed_cell(tmp_path / "twice", logs={"h2-worker2-0.log": worker1.replace(":18080", ":18081")})
    assert findings(*twice) == [
        "engine.requests: 4 requests served in the servers' logs (worker1[0]@h1 2, worker2[0]@h2 2)"
    ]
    # the two logs exchanged, addresses moved: each worker's log is not what its /metrics counted
    swapped = {
        "h1-worker1-0.log": worker2.replace(":18081", ":18080"),
        "h2-worker2-0.log": worker1.replace(":18080", ":18081"),
    }
    assert [f.split(":")[0] for f in findings(*routed_cell(tmp_path / "swapped", logs=swapped))] == [
        "engine.records",
        "engine.records",
    ]
    router = routed_cell(tmp_path / "router", logs={"h1-router-0.log": "\n".join(ROUTER_LINES[:-1])})
    assert findings(*router) == ["engine.requests: 2 generation requests answered 200 by the router"]


def test_a_real_prefill_decode_pairs_halves_are_joined_by_bootstrap_room():
    """Real SGLang 0.5.23 PD logs (mooncake_tcp on the cpu, 8 requests through the router): the
    prefill side hands one token over for each request, the decode side generates the answer; both
    name the same bootstrap rooms, with the same prompts."""
    from dayzero.engines.sglang import log as sglang
    from dayzero.submission.engine_launches import rooms_problem

    prefill = sglang.parse((DATA / "sglang-0.5.23-pd-prefill.log").read_text())
    decode = sglang.parse((DATA / "sglang-0.5.23-pd-decode.log").read_text())
    assert prefill.count == decode.count == 8  # health checks and SGLang's own warm-up left out
    assert {x.generated for x in prefill.served} == {1} and {x.generated for x in decode.served} == {30, 8}
    assert {x.room for x in prefill.served} == {x.room for x in decode.served} and None not in {
        x.room for x in decode.served
    }
    assert rooms_problem([prefill], [decode]) == ""
    dropped = ServerAccount("sglang", served=decode.served[1:], ready=True)
    assert rooms_problem([prefill], [dropped]).startswith("1 request(s) in one side's logs only")
    twice = ServerAccount("sglang", served=decode.served + decode.served[:1], ready=True)
    assert rooms_problem([prefill], [twice]).startswith(f"bootstrap room {decode.served[0].room} twice")
    other = replace(decode.served[0], prompt=decode.served[0].prompt + 1)
    moved = ServerAccount("sglang", served=(other, *decode.served[1:]), ready=True)
    assert "prompt tokens at prefill" in rooms_problem([prefill], [moved])


def test_a_prefill_server_counts_one_generated_token_a_request():
    from dayzero.submission.engine_launches import handoff

    answer = {"records": [record(30, 0, 32), {"id": "e", "error": "x"}], "warmup": {**WARM, "e2e_s": 0.5}}
    seen = handoff(answer)
    assert (
        seen["records"][0]["usage"]["completion_tokens"] == 1 and seen["records"][1] == answer["records"][1]
    )
    assert seen["warmup"]["usage"]["completion_tokens"] == 1  # one warm-up request
    assert answer["records"][0]["usage"]["completion_tokens"] == 32  # the answer itself untouched


@pytest.mark.parametrize(
    ("command", "side"),
    [
        (f"{SGLANG} --disaggregation-mode prefill --disaggregation-bootstrap-port 18092", "prefill"),
        (f"{SGLANG} --disaggregation-mode decode", "decode"),
        (SGLANG, ""),
    ],
)
def test_a_disaggregated_launch_says_its_side(command, side):
    from dayzero.submission.engine_launches import side_of

    assert side_of({"command": command}) == side


def test_a_prefill_decode_cell_without_a_decode_server_is_refused(tmp_path):
    pd = [
        launch("prefill", "h1", 30000, "python3 -m sglang.launch_server --disaggregation-mode prefill"),
        launch("decode", "h2", 30001, "python3 -m sglang.launch_server --disaggregation-mode prefill"),
        launch("router", "h1", 18088, "python3 -m sglang_router.launch_router --pd-disaggregation"),
    ]
    text = (DATA / "sglang-0.5.23-pd-prefill.log").read_text()
    logs = {"h1-prefill-0.log": text, "h2-decode-0.log": text}
    subject, doc = routed_cell(tmp_path, logs=logs, launches=pd)
    doc["engine"]["name"] = "sglang"
    assert "engine.launches: no decode server among the launches" in findings(subject, doc)
