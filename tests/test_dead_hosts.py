"""Dead hosts in minutes, not hours: a host that refuses SSH, a name that does not resolve, a port
that takes connections and never speaks. Each is quarantined for the run within the connect
timeout, its cells are Broken (lab fault) naming the host and the cause, the live host's cells
run over the real sshd (tools/testbed) and pass, and the run exits 6 (`exitcodes.LAB_FAULT`),
not 1. Only hosts someone else holds are waited for, and the wait names who holds them.

The cells are the stub engine's (tests/stub_cells): the faults are the lab's, not an engine's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import paramiko
import pytest
import yaml

from dayzero import exitcodes
from dayzero.errors import InfrastructureError
from dayzero.lab.pool import HostPool
from dayzero.lab.transport.ssh.pool import unreachable_cause
from dayzero.spec.inventory import load_inventory
from dayzero.spec.matrix import load_matrix
from devlab import testbed

from .conftest import REPO
from .stub_cells import stub_card, stub_matrix
from .test_acceptance import md_statuses

CONNECT_TIMEOUT = 5
UNRESOLVED = "b300-01.dayzero.invalid"  # .invalid never resolves (RFC 6761)


# -- the causes, in words (pure) ------------------------------------------------------------------


def test_why_a_dial_failed_is_said_in_words_with_whether_to_try_again():
    refused = paramiko.ssh_exception.NoValidConnectionsError(
        {("127.0.0.9", 2201): ConnectionRefusedError(111, "Connection refused")}
    )
    assert unreachable_cause(refused, "127.0.0.9", 2201, 5) == (
        "connection refused on port 2201 (no sshd listening)",
        True,
    )
    why, again = unreachable_cause(socket.gaierror(-2, "Name or service not known"), UNRESOLVED, 22, 5)
    assert why == f"name '{UNRESOLVED}' does not resolve (Name or service not known)" and again
    assert unreachable_cause(TimeoutError("timed out"), "h", 22, 5) == ("no answer within 5s", False)
    banner = paramiko.SSHException("Error reading SSH protocol banner")
    why, again = unreachable_cause(banner, "h", 22, 7.5)
    assert why.startswith("no SSH answer within 7.5s") and not again
    late = paramiko.SSHException("No existing session")  # paramiko's words once the banner wait ran out
    assert unreachable_cause(late, "h", 22, 5, took=5.01)[0].startswith("no SSH answer within 5s")
    assert unreachable_cause(late, "h", 22, 5, took=0.2) == ("No existing session", True)
    assert "None" not in unreachable_cause(OSError(113, "No route to host"), "h", 22, 5)[0]
    hung_up = unreachable_cause(EOFError(), "h", 22, 5)  # it said "cannot connect: EOFError"
    assert hung_up == ("the connection was closed before SSH answered", True)


# -- over the real sshd -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dead_lab(tmp_path_factory):
    """Two testbed hosts, lab2's sshd stopped; a socket that takes connections and never answers.
    Yields (bed, silent port)."""
    bed = testbed.start(2, tmp_path_factory.mktemp("bed"), port=testbed.free_port(2))
    silent = socket.socket()
    try:
        os.kill(bed.pid("lab2"), signal.SIGTERM)
        deadline = time.monotonic() + 10
        while bed.pid("lab2") is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert bed.pid("lab2") is None, "lab2's sshd did not stop"
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel completes the handshake; nothing ever speaks SSH on it
        yield bed, silent.getsockname()[1]
    finally:
        silent.close()
        bed.stop()


def dead_inventory(bed, silent_port: int, path: Path) -> Path:
    """lab2 (sshd stopped) before lab1 (live) for cpu; two b300 hosts: a name that does not
    resolve, and the silent port."""
    data = yaml.safe_load(bed.inventory.read_text())
    data["known_hosts"] = str(bed.known_hosts)
    lab1, lab2 = data["hosts"]["lab1"], data["hosts"]["lab2"]
    like = {k: lab1[k] for k in ("transport", "user", "identity")}
    work = bed.directory / "work"
    data["hosts"] = {
        "lab2": lab2,
        "lab1": lab1,
        "b300-01": {**like, "address": UNRESOLVED, "hardware": "b300", "workdir": str(work / "b1")},
        "b300-02": {
            **like,
            "address": "127.0.0.1",
            "port": silent_port,
            "hardware": "b300",
            "workdir": str(work / "b2"),
        },
    }
    for host in data["hosts"].values():  # the stub engine's time to first token
        host["vars"] = {**host.get("vars", {}), "ttft": "0.05"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sixteen_cells(root: Path) -> Path:
    """A stub card of 16 cells: 2 on cpu (lab1 runs them), 14 on b300 (no live host)."""
    card = stub_card(model="lab")
    card["engine"]["bind"] = "{host}"  # the testbed host's own address, where its client calls
    serve = card["recipe"]["command"]
    card["recipe"]["command"] = [*serve[:3], "--host", "{bind}", *serve[3:]]
    card["recipe"]["port"] = testbed.free_port(1) + 100
    card["hardware"] = {"cpu": {"nodes": 1}, "b300": {"nodes": 1}}
    card["strategies"] = {"baseline": {}, **{f"s{i}": {} for i in range(1, 7)}}
    card["cells"] = [
        {"hardware": ["cpu"], "modes": ["low_latency", "high_throughput"], "strategies": ["baseline"]},
        {
            "hardware": ["b300"],
            "modes": ["low_latency", "high_throughput"],
            "strategies": list(card["strategies"]),
        },
    ]
    return stub_matrix(root, card)


@pytest.mark.e2e
def test_a_run_over_three_dead_hosts_ends_in_minutes_with_its_cells_broken_and_exit_6(dead_lab, tmp_path):
    bed, silent_port = dead_lab
    mdir = sixteen_cells(tmp_path)
    inv = dead_inventory(bed, silent_port, tmp_path / "lab.yaml")
    reports = tmp_path / "reports"
    t0 = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", "-m", "cpu or b300", f"--matrix={mdir}",
         "--hosts", str(inv), f"--reports={reports}", f"--connect-timeout={CONNECT_TIMEOUT}"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    took = time.monotonic() - t0
    out = result.stdout + result.stderr
    print(f"16 cells over 3 dead hosts and 1 live one: {took:.0f}s, exit {result.returncode}")
    assert result.returncode == exitcodes.LAB_FAULT == 6, out[-4000:]
    assert re.search(r"\b2 passed, 14 broken\b", out), out[-3000:]
    assert took < 180, f"took {took:.0f}s"

    # quarantined for the run, each naming its cause, within the connect timeout (its own clock)
    quarantined = {p.stem: p.read_text() for p in reports.glob("runs/*/quarantine/*.txt")}
    assert sorted(quarantined) == ["b300-01", "b300-02", "lab2"], out[-3000:]
    assert "connection refused on port" in quarantined["lab2"], quarantined
    assert f"name '{UNRESOLVED}' does not resolve" in quarantined["b300-01"], quarantined
    assert f"no SSH answer within {CONNECT_TIMEOUT}" in quarantined["b300-02"], quarantined
    for host, why in quarantined.items():
        spent = int(re.search(r"\((\d) tr(?:y|ies) in (\d+)s\)", why).group(2))
        assert spent <= CONNECT_TIMEOUT + 1, (host, why)

    # the terminal: lab faults apart, once per cause, no traceback through the library's source
    line = next(x for x in out.splitlines() if x.startswith("[dayzero] broken: lab fault: "))
    assert "needs 1 healthy b300 host(s), 0 left" in line and "b300-01" in line and "b300-02" in line
    assert "[dayzero]   14 cell(s): lab/b300/" in out, out[-3000:]
    assert "Traceback" not in out and "lease.py" not in out and "def acquire" not in out, out[-4000:]

    docs = [json.loads(p.read_text()) for p in (reports / "evidence").glob("*.json")]
    assert len(docs) == 16
    passed = [d for d in docs if d["verdict"] == "passed"]
    assert sorted(d["hardware"] for d in passed) == ["cpu", "cpu"]
    assert all([h["name"] for h in d["hosts"]] == ["lab1"] for d in passed), "the live host ran them"
    for doc in (d for d in docs if d["verdict"] != "passed"):
        assert doc["verdict"] == "broken" and doc["hardware"] == "b300", doc["cell"]
        assert "does not resolve" in doc["error"] and "no SSH answer" in doc["error"], doc["error"]

    statuses = md_statuses(reports / "acceptance.md")
    b300 = {cell: status for cell, status in statuses.items() if "/b300/" in cell}
    assert len(b300) == 14 and set(b300.values()) == {"Broken"}, statuses
    assert not list((bed.directory / "work" / "lab1" / "leases").glob("slot-*")), "lease left on lab1"


@pytest.mark.e2e
def test_the_lease_wait_waits_only_for_a_live_host_someone_else_holds_and_names_them(dead_lab, tmp_path):
    """lab2 (sshd stopped) is quarantined, never waited for; lab1 is held by another run: the cell
    waits the lease wait for lab1 alone, then is broken naming who holds it."""
    bed, silent_port = dead_lab
    inv = load_inventory(
        dead_inventory(bed, silent_port, tmp_path / "lab.yaml"), set(load_matrix(REPO / "matrix").hardware)
    )
    slot = bed.directory / "work" / "lab1" / "leases" / "slot-0"
    slot.mkdir(parents=True)
    holder = {
        "owner": "alice@bench-7",
        "pid": 4242,
        "run_id": "other-run",
        "worker": "gw3",
        "cell": "x/cpu/a/b",
    }
    (slot / "owner.json").write_text(json.dumps({**holder, "ttl": 600}))
    said: list[str] = []
    pool = HostPool(
        inv, tmp_path / "quarantine", "run-1", lease_wait=3, connect_timeout=CONNECT_TIMEOUT, say=said.append
    )
    cpu = load_matrix(REPO / "matrix").hardware["cpu"]
    try:
        with pytest.raises(InfrastructureError) as err:
            pool.acquire("m/cpu/low_latency/baseline", cpu, 1, "stub", "echo stub 1.0")
    finally:
        pool.close()
        slot.joinpath("owner.json").unlink()
        slot.rmdir()
    message = str(err.value)
    assert (
        "within 3s" in message
        and "lab1: held by alice@bench-7 pid 4242 (run other-run, worker gw3" in message
    )
    assert "lab2" not in message, "a dead host is not among those waited for"
    assert "connection refused" in pool.quarantined()["lab2"]


def test_a_host_whose_dial_went_unanswered_is_not_dialled_again_by_its_teardown(tmp_path):
    """A port that takes connections and never speaks SSH (a stopped sshd) uses the whole connect
    timeout; the cell's teardown then has several steps on that host (kill, log copy, lease
    release), and each would wait as long again: the next dials fail at once, naming the first
    one's cause. A refused port (a host rebooting) is dialled again."""
    from dayzero.errors import HostUnreachable
    from dayzero.lab.transport.ssh.config import SshTarget
    from dayzero.lab.transport.ssh.hostkeys import Trust
    from dayzero.lab.transport.ssh.pool import _Pool

    trust = Trust(tmp_path / "known_hosts")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        target = SshTarget("stopped", "127.0.0.1", silent.getsockname()[1], "root")
        pool = _Pool()
        with pytest.raises(HostUnreachable, match="no SSH answer within 1s") as first:
            pool.get(target, trust, connect_timeout=1)
        silent.setblocking(False)
        silent.accept()[0].close()  # the first dial's connection
        for _ in range(3):
            with pytest.raises(HostUnreachable, match="not dialled again") as again:
                pool.get(target, trust, connect_timeout=1)
            assert str(first.value) in str(again.value)
        with pytest.raises(BlockingIOError):  # no other connection came
            silent.accept()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        target = SshTarget("rebooting", "127.0.0.1", closed.getsockname()[1], "root")
        for _ in range(2):
            with pytest.raises(HostUnreachable, match="connection refused") as refused:
                pool.get(target, trust, connect_timeout=1)
            assert "not dialled again" not in str(refused.value)


# -- probed at once, a jump host once (issue 45) ----------------------------------------------------


def test_hosts_check_of_seven_hosts_behind_a_dead_bastion_dials_it_once(tmp_path, monkeypatch, capsys):
    """It took 51 s: the bastion (refusing: a host rebooting, tried 3 times) was dialled again for
    each host behind it, one host after another. Now every host is probed at once, and the hosts
    behind the bastion share its one dial (counted), in well under the issue's 10 s."""
    from collections import Counter

    from dayzero import cli
    from dayzero.lab.transport import CONNECT_TRIES
    from dayzero.lab.transport.ssh import pool as ssh_pool

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        port = closed.getsockname()[1]
        hosts = {"bastion": {"address": "127.0.0.1", "port": port, "hardware": "cpu", "slots": 0}}
        for i in range(7):
            hosts[f"b300-{i:02d}"] = {"address": f"10.45.0.{i + 1}", "hardware": "b300", "jump": "bastion"}
        inv = tmp_path / "lab.yaml"
        inv.write_text(yaml.safe_dump({"known_hosts": str(tmp_path / "known_hosts"), "hosts": hosts}))
        dials: Counter[str] = Counter()
        dial = ssh_pool._dial

        def counted(target, *args):
            dials[target.label] += 1
            return dial(target, *args)

        monkeypatch.setattr(ssh_pool, "_dial", counted)
        t0 = time.monotonic()
        assert cli.main(["hosts", "check", "--hosts", str(inv)]) == 1
        took = time.monotonic() - t0
    out = capsys.readouterr().out
    assert dials.pop("bastion") == CONNECT_TRIES, dials  # one dial of the bastion (its tries) for all
    assert dials == Counter({f"b300-{i:02d}": 1 for i in range(7)}), dials  # each tunnel asked once
    assert took <= 10, f"took {took:.1f}s"
    lines = [x for x in out.splitlines() if "UNREACHABLE" in x]
    assert len(lines) == 8, out
    for line in (x for x in lines if not x.startswith("bastion")):
        assert "via bastion): cannot connect: jump host bastion" in line, line
        assert "connection refused" in line, line


@pytest.fixture
def silent_address():
    """An address whose network drops every packet (devlab.netns, cut): no reset, no ICMP, what a
    dead switch or a powered-off host behind a firewall gives. Root only."""
    from devlab import netns

    try:
        host = netns.create(220 + os.getpid() % 30)  # test_stall_e2e's are 20-219
    except netns.NetnsError as exc:
        pytest.skip(f"no network namespace here: {exc}")
    try:
        host.cut()
        yield host.address
    finally:
        host.delete()


def test_hosts_check_of_seven_hosts_behind_a_silent_bastion_ends_within_ten_seconds(
    silent_address, tmp_path, capsys
):
    """A bastion that drops packets used the whole 15 s connect timeout (15.9 s in all). TCP's
    handshake now gets a third of it (three SYNs sent), the SSH login the rest: the bastion
    costs 5 s, the 7 hosts behind it nothing more, each line says how long and what to raise."""
    from dayzero import cli
    from dayzero.lab.transport import CONNECT_TIMEOUT_S

    hosts = {"bastion": {"address": silent_address, "port": 22, "hardware": "cpu", "slots": 0}}
    for i in range(7):
        hosts[f"b300-{i:02d}"] = {"address": f"10.45.0.{i + 1}", "hardware": "b300", "jump": "bastion"}
    inv = tmp_path / "lab.yaml"
    inv.write_text(yaml.safe_dump({"known_hosts": str(tmp_path / "known_hosts"), "hosts": hosts}))
    t0 = time.monotonic()
    assert cli.main(["hosts", "check", "--hosts", str(inv)]) == 1  # at the default connect timeout
    took = time.monotonic() - t0
    out = capsys.readouterr().out
    assert took <= 10, f"took {took:.1f}s"
    lines = [x for x in out.splitlines() if "UNREACHABLE" in x]
    assert len(lines) == 8, out
    said = f"no answer within {CONNECT_TIMEOUT_S / 3:.3g}s (the host is down, or a network drops its packets"
    assert all(said in line and "raise --connect-timeout" in line for line in lines), out
    assert sum("jump host bastion" in line for line in lines) == 7, out


class SilentHost:
    """A port that takes connections and never speaks SSH (a hung host), counting each dial."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.dials: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        with contextlib.suppress(OSError):
            while True:
                self.dials.append(self.sock.accept()[0])

    def close(self):
        self.sock.close()
        for conn in self.dials:
            conn.close()


@pytest.mark.e2e
def test_six_workers_dial_each_of_four_dead_hosts_once(dead_lab, tmp_path):
    """Under `-n 6`, each worker dialled each dead host itself (24 quarantines, the last 40 s into
    the run). Now a worker dials a host under the run's probe lock, and reads the run's
    quarantine first: each dead host is dialled once (counted), lab1's cells still pass."""
    bed, silent_port = dead_lab
    mdir = sixteen_cells(tmp_path)
    inv = dead_inventory(bed, silent_port, tmp_path / "lab.yaml")
    data = yaml.safe_load(inv.read_text())
    dead = {f"b300-0{i}": SilentHost() for i in range(1, 5)}
    like = {k: data["hosts"]["lab1"][k] for k in ("transport", "user", "identity", "vars")}
    data["hosts"] = {"lab1": data["hosts"]["lab1"]}
    for name, host in dead.items():
        data["hosts"][name] = {**like, "address": "127.0.0.1", "port": host.port, "hardware": "b300"}
    inv.write_text(yaml.safe_dump(data, sort_keys=False))
    reports = tmp_path / "reports"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", "-n", "6", "-m", "cpu or b300",
             f"--matrix={mdir}", "--hosts", str(inv), f"--reports={reports}", "--connect-timeout=3"],
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        for host in dead.values():
            host.close()
    out = result.stdout + result.stderr
    assert result.returncode == exitcodes.LAB_FAULT, out[-4000:]
    assert re.search(r"\b2 passed, 14 broken\b", out), out[-3000:]
    dials = {name: len(host.dials) for name, host in dead.items()}
    assert dials == dict.fromkeys(dead, 1), f"dials per dead host: {dials}"
    quarantined = {p.stem for p in reports.glob("runs/*/quarantine/*.txt")}
    assert quarantined == set(dead), quarantined


@pytest.mark.e2e  # a pytest run of its own (no testbed: the host is a silent port)
def test_ctrl_c_while_a_silent_host_is_dialled_ends_the_run_at_once(tmp_path):
    """It took ~11-16 s (the dial ran out its connect timeout first); a probe is now dialled in a
    thread the run does not wait for once interrupted. What was left, 1.1-4 s on a loaded
    machine, was CPU after the signal: pytest rendering the source of the interrupt's 44 frames
    to print one (0.4 s of 0.7 s; the plugin now hands it the last frame only, unless
    --full-trace) and the hypothesis plugin (a dev dependency, not a lab's: left out here)
    importing hypothesis for its summary (0.2 s). The issue's bound, 2 s, is the requirement.
    Its summary counts the three cells selected, not only the one reached."""
    silent = SilentHost()
    card = stub_card(model="ctrlc")
    card["hardware"] = {"b300": {"nodes": 1}}
    card["strategies"] = {"baseline": {}, "s1": {}, "s2": {}}
    card["cells"] = [{"hardware": ["b300"], "modes": ["low_latency"], "strategies": list(card["strategies"])}]
    mdir = stub_matrix(tmp_path, card)
    host = {"address": "127.0.0.1", "port": silent.port, "hardware": "b300", "vars": {"ttft": "0.1"}}
    inv = tmp_path / "lab.yaml"
    inv.write_text(yaml.safe_dump({"known_hosts": str(tmp_path / "known_hosts"), "hosts": {"b300-01": host}}))
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:hypothesispytest", "-q",
         "-m", "b300", f"--matrix={mdir}", "--hosts", str(inv), f"--reports={tmp_path / 'reports'}",
         "--connect-timeout=30"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not silent.dials and time.monotonic() < deadline:  # the dial is under way
            time.sleep(0.05)
        assert silent.dials, "the host was never dialled"
        time.sleep(0.5)
        sent = time.monotonic()
        run.send_signal(signal.SIGINT)
        out = run.communicate(timeout=60)[0]
        took = time.monotonic() - sent
    finally:
        run.kill()
        silent.close()
    print(f"ended {took:.1f}s after SIGINT")
    assert run.returncode == exitcodes.INTERRUPTED, out[-3000:]
    assert took < 2, f"ended {took:.1f}s after SIGINT"
    assert "KeyboardInterrupt" in out, out[-3000:]  # pytest's line on it, from the one frame kept
    # the summary counts what was selected (it said "1 of 1 selected" when 36 were)
    assert "[dayzero] 1 of 3 selected cells ran (1 interrupted)" in out, out[-3000:]
    assert "2 skipped: not reached: the run ended before it" in out, out[-3000:]
