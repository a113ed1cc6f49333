"""Inventories and leases on the local transport (the SSH path runs the same shell on a host)."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from dayzero.errors import ConfigError, InfrastructureError
from dayzero.lab.lease import acquire_all, held_by, release, try_acquire
from dayzero.lab.transport.local import LocalTransport
from dayzero.spec.inventory import Host, load_inventory

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


def gpu_host(tmp_path, accelerators=8, slots=4) -> Host:
    """An 8-accelerator host several cells may share (slots), its accelerators claimed by index."""
    return Host(
        "g0", "h200", transport="local", accelerators=accelerators, slots=slots, workdir=str(tmp_path / "g0")
    )


def test_accelerator_leases_share_a_host_and_never_overlap(tmp_path):
    """Issue 44 item 2: [0,1] and [2,3] on one host coexist; two claims of the same never do."""
    t = LocalTransport(gpu_host(tmp_path, accelerators=4))
    a = try_acquire(t, "run-a", "m/h200/tp2/baseline", "gw0", devices=2)
    b = try_acquire(t, "run-b", "m/h200/tp2/baseline", "gw1", devices=2)
    assert (a.slot, a.devices, b.slot, b.devices) == (0, (0, 1), 1, (2, 3))
    busy = try_acquire(t, "run-c", "c", "gw2", devices=2)
    assert (
        isinstance(busy, str) and busy.startswith("0 of the 2 accelerators wanted free") and "run-b" in busy
    )
    assert not Path(t.host.workdir, "leases", "slot-2").exists(), (
        "a claim short of accelerators keeps no slot"
    )
    assert held_by(t, "run-b", "gw1", "m/h200/tp2/baseline") == [b]  # a crashed worker's, devices read back
    release(t, a)
    c = try_acquire(t, "run-c", "c", "gw2", devices=2)
    assert c.devices == (0, 1)
    assert isinstance(try_acquire(t, "run-d", "c", "w", devices=0), str), "0: every accelerator, none left"
    release(t, b)
    release(t, c)
    assert try_acquire(t, "run-d", "c", "w", devices=0).devices == (0, 1, 2, 3)


def test_a_stale_slot_frees_its_accelerators(tmp_path):
    t = LocalTransport(gpu_host(tmp_path, accelerators=2, slots=2))
    stale = try_acquire(t, "old-run", "c", "w", ttl=-10, devices=2)
    fresh = try_acquire(t, "new-run", "c", "w", devices=2)
    assert (fresh.slot, fresh.devices) == (stale.slot, stale.devices) == (0, (0, 1))
    release(t, stale)  # the old owner's release must not free the new owner's accelerators
    assert isinstance(try_acquire(t, "third", "c", "w", devices=1), str)


def test_claims_at_once_from_many_workers_are_disjoint(tmp_path):
    """Four workers (each its own transport, as xdist workers and separate runs are) claim two
    of eight accelerators at the same instant: every one gets two, no index twice."""
    host = gpu_host(tmp_path)
    start, got = threading.Barrier(4), []

    def worker(i):
        t = LocalTransport(host)
        start.wait()
        got.append(
            acquire_all(
                [host], 1, lambda h: t, run_id=f"r{i}", cell_id="c", worker=f"gw{i}", wait=60, devices=2
            )
        )

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(90)
    indices = sorted(j for (lease,) in got for j in lease.devices)
    assert len(got) == 4 and indices == list(range(8))


def test_a_claim_short_of_accelerators_keeps_none_of_them(tmp_path):
    t = LocalTransport(gpu_host(tmp_path, accelerators=4))
    assert try_acquire(t, "a", "c", "w", devices=3).devices == (0, 1, 2)
    assert isinstance(try_acquire(t, "b", "c", "w", devices=2), str)  # got 3, not 2: all or none
    assert not Path(t.host.workdir, "leases", "acc-3").exists()
    assert try_acquire(t, "c", "c", "w", devices=1).devices == (3,)

    other = LocalTransport(gpu_host(tmp_path / "tp16", accelerators=4))
    assert try_acquire(other, "d", "c", "w", devices=16).devices == (0, 1, 2, 3), "a host caps a claim"
