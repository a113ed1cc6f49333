"""The host pool on local hosts: lease + preflight, quarantine and swap of an unfit host, release."""

from __future__ import annotations

from pathlib import Path

import pytest

from dayzero.errors import InfrastructureError
from dayzero.lab.pool import HostPool, NoHost
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import Hardware

from .conftest import write_yaml

CPU = Hardware("cpu", "any", None, 1, "nproc")


@pytest.fixture
def pool(tmp_path):
    """A pool over local cpu hosts; `unfit` hosts fail preflight (their engine set-up exits)."""

    def make(n=2, unfit=()):
        hosts = {
            f"h{i}": {
                "transport": "local",
                "hardware": "cpu",
                "workdir": str(tmp_path / f"w{i}"),
                "max_foreign_load": 0,  # no contention check: no one-second load sample a preflight
                **({"engine_setup": "exit 3"} if f"h{i}" in unfit else {}),
            }
            for i in range(n)
        }
        inventory = load_inventory(write_yaml(tmp_path / "inv.yaml", {"hosts": hosts}), {"cpu"})
        said: list[str] = []
        return HostPool(inventory, tmp_path / "quarantine", "run-1", lease_wait=0, say=said.append), said

    return make


def leased(pool: HostPool) -> list[str]:
    return sorted(
        p.parent.name for h in pool.inventory.hosts for p in Path(h.workdir).glob("leases/slot-*/owner.json")
    )


def test_healthy_hosts_are_leased_preflighted_and_released(pool):
    p, _ = pool(2)
    held = p.acquire("m/cpu/low/base", CPU, 2, "sh", "echo 9.9")
    assert [h.name for h in held.hosts] == ["h0", "h1"]
    assert p.facts_of(held.hosts[0], "sh").engine_versions == {"sh": "9.9"}
    assert len(leased(p)) == 2 and held.acquired and "released" not in held.times
    p.release(held)
    assert leased(p) == [] and held.times["released"] >= held.times["acquired"]
    assert not held.keeper._thread.is_alive()


def test_an_unfit_host_is_quarantined_and_swapped(pool):
    p, said = pool(2, unfit=("h0",))
    held = p.acquire("m/cpu/low/base", CPU, 1, "sh", "echo 1")
    assert [h.name for h in held.hosts] == ["h1"]
    assert "engine sh not usable" in p.quarantined()["h0"]
    assert any("quarantined h0" in line for line in said)
    p.release(held)
    assert leased(p) == []


def test_too_few_fit_hosts_is_a_lab_fault_naming_each_quarantined_host(pool):
    p, _ = pool(2, unfit=("h0", "h1"))
    with pytest.raises(InfrastructureError, match=r"needs 1 healthy cpu host\(s\), 0 left.*h0: .*h1: "):
        p.acquire("m/cpu/low/base", CPU, 1, "sh", "echo 1")
    assert leased(p) == [], "leases of unfit hosts are let go"


def test_quarantine_is_shared_by_pools_of_one_run(pool, tmp_path):
    p, _ = pool(2, unfit=("h0",))
    p.release(p.acquire("c", CPU, 1, "sh", "echo 1"))
    other = HostPool(p.inventory, tmp_path / "quarantine", "run-1", lease_wait=0, say=lambda m: None)
    held = other.acquire("c", CPU, 1, "sh", "")  # h0 would pass now (no version command), yet is skipped
    assert [h.name for h in held.hosts] == ["h1"]
    other.release(held)


def test_no_host_of_the_hardware_skips_the_cell(pool):
    p, _ = pool(1)
    with pytest.raises(NoHost, match="'b300'"):
        p.candidates("b300")
    p.release(None)  # nothing held: nothing to do


@pytest.mark.parametrize("interrupts", [1, 2])
def test_a_ctrl_c_while_leases_are_released_still_releases_every_lease(pool, interrupts):
    """A Ctrl-C that lands while the first host's lease is being removed (before its command
    ran) must not leave that lease, nor the second host's, for a whole ttl: every lease is tried,
    the interrupted one once more, then the interrupt goes on. A second Ctrl-C on the same host
    gives that host up (its lease goes stale), never the others. (CI, two SSH hosts: SIGINT
    during the release of the first left the second's lease.)"""
    p, _ = pool(2)
    held = p.acquire("m/cpu/low/base", CPU, 2, "sh", "")
    first = p.transport(held.hosts[0])
    run, calls = first.run, []

    def interrupted_run(command, **kw):
        calls.append(command)
        if len(calls) <= interrupts:
            raise KeyboardInterrupt
        return run(command, **kw)

    first.run = interrupted_run
    with pytest.raises(KeyboardInterrupt):
        p.release(held)
    assert len(calls) == 2
    assert leased(p) == (["slot-0"] if interrupts == 2 else []), "h1's lease is released whatever"
    assert not held.keeper._thread.is_alive()


def test_a_cell_whose_hosts_are_all_quarantined_is_broken_at_once_not_after_the_lease_wait(pool, tmp_path):
    """A host quarantined by one cell (its engine missing) is never waited for by the next:
    the next cell of its hardware is broken at once with the same line, though the lease wait
    is long (the run's next cell waited more than 14 minutes for such a host)."""
    import time

    p, _ = pool(1, unfit=("h0",))
    with pytest.raises(InfrastructureError) as first:
        p.acquire("m/cpu/low/base", CPU, 1, "sh", "echo 1")
    patient = HostPool(p.inventory, tmp_path / "quarantine", "run-1", lease_wait=600, say=lambda m: None)
    t0 = time.monotonic()
    with pytest.raises(InfrastructureError) as second:
        patient.acquire("m/cpu/high/base", CPU, 1, "sh", "echo 1")
    assert time.monotonic() - t0 < 30, "waited for a quarantined host"
    assert str(second.value) == str(first.value), "one line for every cell of the hardware"
    assert "quarantined for run run-1: h0: engine sh not usable" in str(second.value)


def test_a_cell_needing_more_hosts_than_the_inventory_has_says_so_not_quarantine(pool):
    """No host quarantined, just too few of the kind: the line says the inventory is short
    (it printed 'quarantined for run ...:' with nothing after it)."""
    p, _ = pool(1)
    with pytest.raises(InfrastructureError, match=r"needs 2 cpu host\(s\), the inventory has 1$"):
        p.acquire("m/cpu/low/base", CPU, 2, "sh", "echo 1")
