"""Inventories and leases on the local transport (the SSH path runs the same shell on a host)."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from dayzero.errors import ConfigError, InfrastructureError
from dayzero.lab.lease import acquire_all, release, try_acquire
from dayzero.lab.transport.local import LocalTransport
from dayzero.spec.inventory import load_inventory

from .conftest import REPO, write_yaml


def test_local_inventory_expands_the_cache_token(monkeypatch, tmp_path):
    monkeypatch.setenv("DAYZERO_CACHE", str(tmp_path / "cache"))
    inv = load_inventory(REPO / "hosts" / "local.yaml", {"cpu"})
    (host,) = inv.hosts
    assert host.workdir == f"{tmp_path}/cache/work"
    assert host.var["model_root"] == f"{tmp_path}/cache/models"
    assert inv.secrets == (host.engine_setup,)


def test_example_lab_inventory_is_valid():
    from dayzero.spec.matrix import load_matrix

    inv = load_inventory(REPO / "hosts" / "lab.example.yaml", set(load_matrix(REPO / "matrix").hardware))
    assert len(inv.for_hardware("b300")) == 2 and inv.host("b300-01").jump == "bastion"
    assert inv.known_hosts == (REPO / "hosts" / "lab.known_hosts").resolve()
    assert inv.for_hardware("cpu") == (), "the bastion (slots: 0) relays, it never runs a cell"


def test_inventory_errors_name_file_and_field(tmp_path):
    path = write_yaml(tmp_path / "h.yaml", {"hosts": {"a": {"hardware": "b3000"}}})
    with pytest.raises(ConfigError, match=r"h.yaml: hosts.a.hardware: unknown hardware 'b3000'"):
        load_inventory(path, {"cpu", "b300"})
    path = write_yaml(tmp_path / "h.yaml", {"hosts": {"a": {"hardware": "cpu", "port": "22"}}})
    with pytest.raises(ConfigError, match=r"hosts.a.port: expected integer"):
        load_inventory(path, {"cpu"})
    path = write_yaml(tmp_path / "h.yaml", {"hosts": {"a": {"port": 22}}})
    with pytest.raises(ConfigError, match=r"hosts.a: missing field 'hardware'"):
        load_inventory(path, {"cpu"})


@pytest.fixture
def hosts(tmp_path):
    def make(n=2, slots=1):
        path = write_yaml(
            tmp_path / "inv.yaml",
            {
                "hosts": {
                    f"h{i}": {
                        "transport": "local",
                        "hardware": "cpu",
                        "slots": slots,
                        "workdir": str(tmp_path / f"w{i}"),
                    }
                    for i in range(n)
                }
            },
        )
        return load_inventory(path, {"cpu"}).hosts

    return make


def test_lease_is_exclusive_and_released(hosts):
    (h,) = hosts(1)
    t = LocalTransport(h)
    lease = try_acquire(t, "run-a", "cell/1", "gw0")
    assert lease.slot == 0
    busy = try_acquire(t, "run-b", "cell/2", "gw1")
    assert isinstance(busy, str) and "run-a" in busy and "cell/1" in busy
    owner = json.loads(Path(lease.path, "owner.json").read_text())
    assert owner["run_id"] == "run-a" and owner["ttl"] > 0
    release(t, lease)
    assert try_acquire(t, "run-b", "cell/2", "gw1").slot == 0


def test_slots_allow_that_many_cells(hosts):
    (h,) = hosts(1, slots=2)
    t = LocalTransport(h)
    assert [try_acquire(t, f"r{i}", "c", "w").slot for i in range(2)] == [0, 1]
    assert isinstance(try_acquire(t, "r3", "c", "w"), str)


def test_expired_lease_is_reclaimed(hosts):
    (h,) = hosts(1)
    t = LocalTransport(h)
    stale = try_acquire(t, "old-run", "c", "w", ttl=-10)
    fresh = try_acquire(t, "new-run", "c", "w")
    assert fresh.slot == stale.slot == 0
    release(t, stale)  # the old owner's release must not remove the new owner's lease
    assert isinstance(try_acquire(t, "third", "c", "w"), str)


def test_release_of_someone_elses_lease_is_a_no_op(hosts):
    (h,) = hosts(1)
    t = LocalTransport(h)
    lease = try_acquire(t, "mine", "c", "w")
    release(t, type(lease)(h, 0, "not-mine", lease.path))
    assert isinstance(try_acquire(t, "x", "c", "w"), str)


def test_all_or_none_and_bounded_wait(hosts):
    h0, h1 = hosts(2)
    transports = {h.name: LocalTransport(h) for h in (h0, h1)}
    blocker = try_acquire(transports["h1"], "other", "c", "w")
    waits = []
    with pytest.raises(InfrastructureError, match=r"no 2 free host\(s\) for cell/pd within 1s.*h1: .*other"):
        acquire_all(
            [h0, h1],
            2,
            lambda h: transports[h.name],
            run_id="me",
            cell_id="cell/pd",
            worker="w",
            wait=1,
            on_wait=waits.append,
        )
    assert waits and "waits for 2 free host(s)" in waits[0]
    assert re.search(r"h1: held by \S+@\S+ pid \d+ \(run other, worker w, cell c\)", waits[0]), waits[0]
    # h0 was not kept while waiting: another cell can take it right now
    assert try_acquire(transports["h0"], "third", "c", "w").slot == 0
    release(transports["h0"], type(blocker)(h0, 0, "third", f"{h0.workdir}/leases/slot-0"))
    release(transports["h1"], blocker)
    got = acquire_all([h0, h1], 2, lambda h: transports[h.name], run_id="me", cell_id="c", worker="w", wait=5)
    assert sorted(lease.host.name for lease in got) == ["h0", "h1"]


def test_two_cells_needing_both_hosts_do_not_deadlock(hosts):
    h0, h1 = hosts(2)
    results, errors = [], []

    def cell(name, order):
        transports = {h.name: LocalTransport(h) for h in (h0, h1)}
        try:
            got = acquire_all(
                order, 2, lambda h: transports[h.name], run_id=name, cell_id=name, worker=name, wait=60
            )
            results.append(name)
            for lease in got:
                release(transports[lease.host.name], lease)
        except InfrastructureError as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=cell, args=("a", [h0, h1])),
        threading.Thread(target=cell, args=("b", [h1, h0])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors and sorted(results) == ["a", "b"]
