"""Cells across hosts: a role spanning nodes (llama.cpp RPC: rpc-server on ranks 1..N-1) and a
routed cell (workers behind a router), rendered from the card and started in waves, each launch
checked ready on its own host.

The deployment tests run real processes on two local hosts: small Python HTTP servers that
behave as the engines would (a worker that listens late, a worker that never answers).
"""

from __future__ import annotations

import random
import shutil
import sys

import pytest

from dayzero.errors import StillLoading
from dayzero.lab.deploy import waves
from dayzero.run.cell import NoHost, RunContext, candidate_hosts, new_run_id, run_cell
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from dayzero.spec.recipe import ALIVE, HTTP, TCP, hosts_needed, placeholder_hosts, render

from .conftest import REPO, needs_engine, processes_matching, write_yaml

MATRIX = load_matrix(REPO / "matrix")
RPC = "smollm2-135m/cpu+llama.cpp/rpc_split/baseline"
ROUTED = "smollm2-135m/cpu+llama.cpp/routed/baseline"


def rendered(cell_id: str, port_offset: int = 0):
    cell = MATRIX.cell(cell_id)
    hosts = placeholder_hosts(MATRIX, cell, hosts_needed(MATRIX.card(cell), cell))
    return render(MATRIX, cell, hosts, port_offset=port_offset)


def test_rpc_split_runs_rpc_server_on_rank_1_and_llama_server_with_rpc_on_rank_0():
    recipe = rendered(RPC, port_offset=10)
    head, worker = sorted(recipe.launches, key=lambda x: x.rank)
    assert (head.role, head.rank, head.host, head.endpoint, head.ready) == ("server", 0, "node0", True, HTTP)
    assert (worker.role, worker.rank, worker.host, worker.endpoint, worker.ready) == (
        "server",
        1,
        "node1",
        False,
        TCP,
    )
    assert worker.argv[:5] == ("rpc-server", "--host", "<node1>", "--port", "50062")  # worker port + offset
    assert worker.port == 50062 and head.port == 18090
    assert head.argv[0] == "llama-server" and "--rpc" in head.argv
    assert head.argv[head.argv.index("--rpc") + 1] == "<node1>:50062"
    assert recipe.endpoint is head


def test_sglang_ranks_still_run_one_command_with_node_rank():
    recipe = rendered("kimi-k3.1-pro/h200/balanced/baseline")
    ranks = sorted(recipe.launches, key=lambda x: x.rank)
    assert [x.ready for x in ranks] == [HTTP, ALIVE]
    for x in ranks:
        assert x.argv[:2] == ("sglang", "serve") and x.port == 30000
        assert x.argv[x.argv.index("--node-rank") + 1] == str(x.rank)


def test_routed_cell_puts_the_router_beside_worker1_as_the_endpoint():
    recipe = rendered(ROUTED)
    by_role = {x.role: x for x in recipe.launches}
    assert set(by_role) == {"worker1", "worker2", "router"}
    assert by_role["router"].host == by_role["worker1"].host == "node0" and by_role["worker2"].host == "node1"
    router = by_role["router"]
    assert router.endpoint and router.ready == HTTP and recipe.endpoint is router
    assert "sglang_router.launch_router" in router.argv
    urls = router.argv[router.argv.index("--worker-urls") + 1 : router.argv.index("--worker-urls") + 3]
    assert urls == ("http://<node0>:18080", "http://<node1>:18080")


def test_waves_start_workers_before_the_endpoint():
    rpc = waves(rendered(RPC))
    assert [[(x.role, x.rank) for x in w] for w in rpc] == [[("server", 1)], [("server", 0)]]
    routed = waves(rendered(ROUTED))
    assert [[x.role for x in w] for w in routed] == [["worker1", "worker2"], ["router"]]
    pd = waves(rendered("kimi-k3.1-pro/b200/pd_balanced/baseline"))
    assert [sorted(x.role for x in w) for w in pd] == [
        ["decode", "prefill"],
        ["decode", "prefill"],
        ["router"],
    ]
    assert [x.rank for x in pd[0]] == [1, 1]


def test_lint_reads_the_rpc_server_and_router_commands():
    from dayzero.spec.lint import parser_of

    card = MATRIX.cards["smollm2-135m"]
    by = {(x.role, x.rank): x for x in rendered(RPC).launches}
    assert parser_of(card, by[("server", 1)].argv)[1] == 1
    assert "rpc-server" in parser_of(card, by[("server", 1)].argv)[0].programs
    assert parser_of(card, by[("server", 0)].argv)[0].kind == "llama.cpp"
    router = next(x for x in rendered(ROUTED).launches if x.role == "router")
    assert parser_of(card, router.argv)[0].kind == "sglang_router"


# --- deployments across two local hosts -----------------------------------------------------------


def two_hosts(tmp_path, names=("h1", "h2")):
    hosts = {
        name: {
            "transport": "local",
            "address": address,
            "hardware": "cpu",
            "accelerators": 1,
            "workdir": str(tmp_path / "work" / name),
            "max_foreign_load": 0,  # no contention check: no one-second load sample a preflight
        }
        for name, address in (("h1", "127.0.0.1"), ("h2", "127.0.0.2"))
        if name in names
    }
    return write_yaml(tmp_path / "hosts.yaml", {"hosts": hosts})


def context(tmp_path, card: dict, ready_deadline: float, hosts=("h1", "h2")) -> RunContext:
    mdir = tmp_path / "matrix"
    (mdir / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "matrix" / "hardware.yaml", mdir / "hardware.yaml")
    write_yaml(mdir / "models" / f"{card['model']}.yaml", card)
    matrix = load_matrix(mdir)
    return RunContext(
        matrix,
        load_inventory(two_hosts(tmp_path, hosts), set(matrix.hardware)),
        tmp_path / "reports",
        tmp_path / "goldens",
        new_run_id(),
        ready_deadline=ready_deadline,
        lease_wait=30,
        say=lambda m: None,
    )


PY = sys.executable


def http_server(port: str, bind: str, marker: str, delay: float = 0.0) -> list[str]:
    """A real HTTP server answering every GET path with 200 (so `/health` too), after `delay`."""
    code = f"import time; time.sleep({delay}); import http.server as h; h.test(h.SimpleHTTPRequestHandler, h.ThreadingHTTPServer, port=int({port!r}), bind={bind!r})"  # noqa: E501
    return [PY, "-c", code, marker]


def multinode_card(marker: str, port: int) -> dict:
    """A two-node role: rank 1 listens only after 2 s; rank 0 exits unless rank 1 already accepts
    (as llama-server --rpc does when its rpc-server is not up)."""
    head = (
        f"(exec 3<>/dev/tcp/127.0.0.2/{port + 1}) 2>/dev/null || {{ echo worker not up; exit 3; }}; "
        f"exec {PY} -m http.server {{port}} --bind {{bind}}"
    )
    return {
        "model": "fake",
        "engine": {
            "name": "fake",
            "health_path": "/",
            "bind": "{host}",
            "multinode_args": [marker],
            "worker": {"command": http_server("{port}", "{bind}", marker, delay=2), "port": port + 1},
        },
        "recipe": {"port": port, "command": ["bash", "-c", head]},
        "hardware": {"cpu": {"nodes": 1}},
        "modes": {"split": {"concurrency": 1, "roles": {"server": {"nodes": 2, "endpoint": True}}}},
        "strategies": {"baseline": {}},
        "cells": [{"hardware": ["cpu"], "modes": ["split"], "strategies": ["baseline"]}],
    }


def test_rank_1_is_ready_before_rank_0_starts(tmp_path):
    marker = f"mh{random.randint(100000, 999999)}"
    ctx = context(tmp_path, multinode_card(marker, 18720), ready_deadline=20)
    seen = []
    ctx.say = seen.append
    cell = ctx.matrix.cells[0]
    try:
        from dayzero.run import cell as steps

        t = steps.target(ctx, cell)
        held = steps.lease(ctx, t, steps.CellRun(started=""))
        recipe = steps.render_recipe(ctx, t, held)
        dep = steps.deployment(ctx, t, recipe, held)
        try:
            dep.start()
            dep.wait_ready()
            assert dep.url == "http://127.0.0.1:18720"
        finally:
            dep.stop()
            ctx.pool.release(held)
    finally:
        ctx.close()
    order = [m for m in seen if m.startswith(("started", "server["))]
    assert order[0].startswith("started server[1] on h2")
    assert order[1].startswith("server[1] on h2 ready")
    assert order[2].startswith("started server[0] on h1")
    assert not processes_matching(marker)


def routed_card(marker: str, port: int) -> dict:
    """Two workers and a router in front; worker2 runs but never answers (a dead worker)."""
    return {
        "model": "fake",
        "engine": {"name": "fake", "health_path": "/", "bind": "{host}"},
        "recipe": {"port": port, "command": http_server("{port}", "{bind}", marker)},
        "hardware": {"cpu": {"nodes": 1}},
        "modes": {
            "routed": {
                "concurrency": 1,
                "roles": {
                    "worker1": {},
                    "worker2": {"command": ["bash", "-c", f"exec sleep 300 # {marker}"]},
                    "router": {
                        "colocate": "worker1",
                        "endpoint": True,
                        "port": port + 1,
                        "command": http_server("{port}", "{bind}", marker),
                    },
                },
            }
        },
        "strategies": {"baseline": {}},
        "cells": [{"hardware": ["cpu"], "modes": ["routed"], "strategies": ["baseline"]}],
    }


def test_a_live_router_in_front_of_a_worker_that_never_answers_is_not_ready(tmp_path):
    marker = f"mh{random.randint(100000, 999999)}"
    card = routed_card(marker, 18730)
    card["modes"]["routed"]["roles"]["worker2"] = {
        "command": http_server("{port}", "{bind}", marker, delay=600)  # runs, never listens
    }
    ctx = context(tmp_path, card, ready_deadline=4)
    try:
        with pytest.raises(StillLoading) as caught:  # alive, never ready: broken (lab), not failed
            run_cell(ctx, ctx.matrix.cells[0])
    finally:
        ctx.close()
    assert "worker2[0] on h2 not ready within the 4s deadline, still running" in str(caught.value)
    assert "127.0.0.2:18730/" in str(caught.value)
    assert not processes_matching(marker), "every role's group is killed on every host"
    for host in ("h1", "h2"):
        assert not list((tmp_path / "work" / host / "leases").glob("slot-*")), "leases released"


def test_a_two_host_cell_with_one_host_is_skipped_at_once(tmp_path):
    ctx = context(tmp_path, multinode_card("x", 18740), ready_deadline=4, hosts=("h1",))
    with pytest.raises(NoHost, match="needs 2 cpu hosts; inventory .* has 1"):
        candidate_hosts(ctx, ctx.matrix.cells[0])


@needs_engine
def test_rpc_server_commands_are_checked_against_rpc_servers_own_help():
    from dayzero.cache import rpc_server_binary
    from dayzero.engines.llamacpp import help as llama_help

    table = llama_help.table(rpc_server_binary())
    assert table["--port"]["value"] and table["-H"]["value"] and not table["--cache"]["value"]
    assert (
        llama_help.check(table, ["--host", "10.0.0.1", "--port", "50052", "--threads", "1"], "rpc-server")
        == []
    )
    (found,) = llama_help.check(table, ["--hots", "10.0.0.1"], "rpc-server")[:1]
    assert found["flag"] == "--hots" and found["message"] == "not in rpc-server --help"
