"""SSHTransport against real OpenSSH servers (tools/devlab/testbed.py): three sshd on 127.0.0.2-4, the
third reachable only through the first. Needs `openssh-server` (skipped without it, failed under CI).

Run: .venv/bin/pytest tests/test_ssh_transport.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
import warnings
from pathlib import Path

import paramiko
import pytest

from dayzero.errors import CommandTimeout, ConfigError, InfrastructureError
from dayzero.lab.transport import open_transport
from dayzero.lab.transport import ssh as ssh_mod
from dayzero.lab.transport.ssh import NewHostKeyWarning, SSHTransport
from dayzero.spec.inventory import Host, load_inventory
from devlab import testbed

if not os.path.exists(testbed.SSHD):
    if os.environ.get("CI"):
        pytest.fail(testbed.INSTALL_HINT, pytrace=False)
    pytest.skip(testbed.INSTALL_HINT, allow_module_level=True)

pytestmark = pytest.mark.e2e  # real sshd: the e2e tier


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("testbed")
    bed = testbed.start(
        3, directory, port=testbed.free_port(3), engine_setup="source /opt/env", variables={"MODEL": "smol"}
    )
    try:
        yield bed
    finally:
        ssh_mod.close_all()
        bed.stop()


@pytest.fixture(scope="module")
def inv(bed):
    return load_inventory(bed.inventory)


def transport(inv, name: str, **changes) -> SSHTransport:
    inventory = dataclasses.replace(inv, **changes) if changes else inv
    return SSHTransport(inv.host(name), inventory)


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


# --- the testbed itself ---------------------------------------------------------------------------


def test_testbed_inventory_is_valid_and_complete(bed, inv):
    assert [h.name for h in inv.hosts] == ["lab1", "lab2", "lab3"]
    lab1, lab3 = inv.host("lab1"), inv.host("lab3")
    assert (lab1.address, lab3.address, lab3.jump, lab1.jump) == ("127.0.0.2", "127.0.0.4", "lab1", None)
    assert Path(lab1.identity).is_absolute() and Path(lab1.workdir).is_dir()
    assert (lab1.hardware, lab1.slots, lab1.accelerators) == ("cpu", 1, 1)
    assert lab1.engine_setup == "source /opt/env" and lab1.var == {"MODEL": "smol", "threads": "1"}
    assert inv.known_hosts == bed.known_hosts
    assert f"[127.0.0.4]:{lab3.port} ssh-ed25519 " in bed.known_hosts.read_text()
    assert all(bed.status().values())


def test_testbed_without_sshd_exits_2_with_install_hint(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(testbed, "SSHD", str(tmp_path / "no-sshd"))
    assert testbed.main(["start", "--hosts", "1", "--dir", str(tmp_path / "bed")]) == 2
    assert "apt-get install -y openssh-server" in capsys.readouterr().err


def test_testbed_cli_start_status_stop(tmp_path):
    directory, port = tmp_path / "cli", str(testbed.free_port(1))
    script = [sys.executable, str(Path(__file__).resolve().parents[1] / "tools" / "testbed")]
    start = [*script, "start", "--hosts", "1", "--dir", str(directory), "--port", port]
    args = [*start, "--engine-setup", "source /opt/venv/bin/activate", "--var", "HF_HOME=/data/hf"]
    try:
        assert subprocess.run(args, capture_output=True, text=True).returncode == 0
        lab1 = load_inventory(directory / "inventory.yaml").host("lab1")
        assert (lab1.port, lab1.engine_setup) == (int(port), "source /opt/venv/bin/activate")
        assert lab1.var["HF_HOME"] == "/data/hf" and lab1.var["threads"] == "1"  # hosts share the cores
        status = subprocess.run([*script, "status", "--dir", str(directory)], capture_output=True, text=True)
        assert status.returncode == 0 and "running pid" in status.stdout
    finally:
        stop = subprocess.run([*script, "stop", "--dir", str(directory)], capture_output=True, text=True)
    assert stop.returncode == 0
    assert subprocess.run([*script, "status", "--dir", str(directory)], capture_output=True).returncode == 1


def test_testbed_inventory_runs_the_cpu_cells_as_written(tmp_path):
    """`tools/testbed start` with no options writes what the cpu cells need (the cached engine
    on PATH, model_root), so `pytest -m cpu --hosts <that inventory>` renders every command."""
    from dayzero.cache import model_path, server_binary

    from .conftest import run_pytest

    directory, port = tmp_path / "bare", str(testbed.free_port(1))
    script = [sys.executable, str(Path(__file__).resolve().parents[1] / "tools" / "testbed")]
    try:
        started = subprocess.run(
            [*script, "start", "--hosts", "1", "--dir", str(directory), "--port", port],
            capture_output=True,
            text=True,
        )
        assert started.returncode == 0, started.stderr
        lab1 = load_inventory(directory / "inventory.yaml").host("lab1")
        assert str(server_binary().parent) in lab1.engine_setup
        assert lab1.var["model_root"] == str(model_path().parent)
        dry = run_pytest("-m", "cpu", f"--hosts={directory / 'inventory.yaml'}", "--dry-run", "-q")
        assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-2000:]
        assert "unknown placeholder" not in dry.stdout and str(model_path()) in dry.stdout
    finally:
        subprocess.run([*script, "stop", "--dir", str(directory)], capture_output=True, text=True)


def test_testbed_stop_ends_listener_and_connections(tmp_path):
    bed = testbed.start(1, tmp_path / "bed", port=testbed.free_port(1))
    try:
        t = SSHTransport(load_inventory(bed.inventory).host("lab1"), load_inventory(bed.inventory))
        assert t.run("true", timeout=10).ok
        listener = bed.pid("lab1")
        pids = [listener, *testbed._descendants(listener)]
        assert len(pids) >= 2  # the connection's own sshd processes
    finally:
        bed.stop()
    assert all(testbed._gone(p) for p in pids)
    assert bed.status() == {"lab1": False}


# --- run -----------------------------------------------------------------------------------------


def test_run_returns_status_stdout_and_stderr(inv):
    result = transport(inv, "lab1").run("echo out; echo err >&2; exit 3", timeout=30)
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_run_has_bash_semantics(inv):
    result = transport(inv, "lab2").run(
        "set -o pipefail; false | true; echo $? ${BASH_VERSION:+bash}", timeout=30
    )
    assert result.stdout == "1 bash\n"


def test_large_stdout_and_stderr_do_not_deadlock(inv):
    size = 3_500_000
    command = f"head -c {size} /dev/zero | tr '\\0' o; head -c {size} /dev/zero | tr '\\0' e >&2; echo -n ."
    result = transport(inv, "lab1").run(command, timeout=60)
    assert result.ok
    assert (len(result.stdout), len(result.stderr)) == (size + 1, size)
    assert set(result.stderr) == {"e"}


def test_stdin_passes_through(inv):
    payload = os.urandom(3_000_000)
    result = transport(inv, "lab1").run("sha256sum", timeout=60, stdin=payload)
    assert result.stdout.split()[0] == hashlib.sha256(payload).hexdigest()
    echoed = transport(inv, "lab1").run("cat", timeout=60, stdin=b"x" * 4_000_000)
    assert len(echoed.stdout) == 4_000_000


def test_command_that_ignores_its_stdin(inv):
    t = transport(inv, "lab1")
    assert t.run("true", timeout=30, stdin=b"x" * 20_000_000).ok
    assert t.run("head -c 3", timeout=30, stdin=b"y" * 20_000_000).stdout == "yyy"


def test_without_stdin_the_command_reads_eof(inv):
    assert transport(inv, "lab1").run("cat; echo done", timeout=10).stdout == "done\n"


def test_deadline_fires_and_kills_the_remote_command(inv):
    marker = f"30.{uuid.uuid4().int % 10**8}"  # a unique argument to find this sleep by
    t = transport(inv, "lab1")
    with pytest.raises(CommandTimeout, match="lab1"):
        t.run(f"sleep {marker}", timeout=2)

    def gone() -> bool:
        return marker not in t.run("ps -eo args=", timeout=10).stdout

    assert wait_until(gone, 5.0), "the timed-out sleep is still running on the host"


def test_local_failure_mid_command_kills_the_remote_command(inv):
    marker = f"31.{uuid.uuid4().int % 10**8}"
    t = transport(inv, "lab1")

    def broken_sink(data: bytes):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        t._exec(f"echo go; exec sleep {marker}", 60, None, broken_sink, lambda data: None)
    assert wait_until(lambda: marker not in t.run("ps -eo args=", timeout=10).stdout, 5.0)


def test_command_killed_by_signal_is_a_failed_result(inv):
    result = transport(inv, "lab1").run("kill -KILL $$", timeout=10)
    assert not result.ok


def test_timeout_message_masks_secrets(inv, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(CommandTimeout) as info:
        transport(inv, "lab1").run("export DZ_SECRET=hunter2; sleep 20", timeout=1)
    assert "DZ_SECRET=***" in str(info.value) and "hunter2" not in str(info.value)
    assert "hunter2" not in caplog.text


def test_more_concurrent_commands_than_max_sessions(inv):
    t = transport(inv, "lab2")
    results: list = []

    def one():
        results.append(t.run("sleep 0.5; echo $SSH_CLIENT", timeout=60))

    threads = [threading.Thread(target=one) for _ in range(ssh_mod.MAX_SESSIONS + 5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == ssh_mod.MAX_SESSIONS + 5 and all(r.ok for r in results)
    assert len({r.stdout for r in results}) == 1  # one connection carried them all


# --- background process groups (built on run) ----------------------------------------------------


def test_start_alive_kill_process_group(inv):
    t = transport(inv, "lab2")
    log = f"{inv.host('lab2').workdir}/pg/server.log"
    proc = t.start(
        "bash -c 'echo started $DZ_TOKEN; sleep 301 & sleep 302 & wait'",
        env={"DZ_TOKEN": "t0k"},
        log_path=log,
    )

    def members() -> list[str]:
        """Live members: a killed orphan may stay a zombie where the host's init does not reap it."""
        return t.run(
            f"ps -eo pgid=,pid=,stat=,args= | awk '$1 == {proc.pgid} && $3 !~ /^Z/'", timeout=10
        ).stdout.splitlines()

    assert wait_until(lambda: len(members()) >= 3), members()
    assert t.alive(proc)
    t.kill(proc, grace=5)
    assert not t.alive(proc)
    assert members() == []
    assert "started t0k" in t.tail(log)


# --- files ---------------------------------------------------------------------------------------


def test_put_and_get_a_file(inv, tmp_path):
    t = transport(inv, "lab2")
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(2_500_000))
    remote = f"{inv.host('lab2').workdir}/files/{uuid.uuid4().hex}/blob.bin"
    t.put(source, remote)
    assert (
        t.run(f"sha256sum {remote}", timeout=30).stdout.split()[0]
        == hashlib.sha256(source.read_bytes()).hexdigest()
    )
    back = tmp_path / "back" / "blob.bin"
    t.get(remote, back)
    assert back.read_bytes() == source.read_bytes()


def test_put_tree_and_get_tree(inv, tmp_path):
    t = transport(inv, "lab1")
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "top.txt").write_text("top\n")
    (src / "a" / "b" / "deep.bin").write_bytes(os.urandom(300_000))
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("a/b/deep.bin")
    remote = f"{inv.host('lab1').workdir}/tree-{uuid.uuid4().hex}"
    t.put_tree(src, remote)
    assert t.run(f"{remote}/run.sh && readlink {remote}/link", timeout=10).stdout == "hi\na/b/deep.bin\n"
    dst = tmp_path / "dst"
    t.get_tree(remote, dst)
    assert (dst / "a" / "b" / "deep.bin").read_bytes() == (src / "a" / "b" / "deep.bin").read_bytes()
    assert (dst / "top.txt").read_text() == "top\n" and os.access(dst / "run.sh", os.X_OK)
    assert os.readlink(dst / "link") == "a/b/deep.bin"


def test_get_tree_refuses_links_out_of_the_tree(inv, tmp_path):
    t = transport(inv, "lab1")
    remote = f"{inv.host('lab1').workdir}/evil-{uuid.uuid4().hex}"
    t.check(f"mkdir -p {remote} && ln -s /etc/passwd {remote}/passwd")
    with pytest.raises(InfrastructureError, match="get_tree"):
        t.get_tree(remote, tmp_path / "out")
    assert not (tmp_path / "out" / "passwd").exists()


# --- jump hosts and ssh config ------------------------------------------------------------------


def test_jump_host_reaches_the_hidden_host(inv):
    t = transport(inv, "lab3")
    assert t.run("echo $SSH_CONNECTION", timeout=30).stdout.split()[2] == "127.0.0.4"
    assert isinstance(t.connection.sock, paramiko.Channel)  # a direct-tcpip channel through lab1
    assert t.target.jump.hostname == "127.0.0.2"


def test_hidden_host_refuses_a_direct_connection(inv):
    direct = dataclasses.replace(inv.host("lab3"), jump=None)
    with pytest.raises(InfrastructureError, match=r"lab3 .*authentication failed"):
        SSHTransport(direct, inv).run("true", timeout=30)


def test_ssh_config_alias_with_proxyjump(bed, inv, tmp_path):
    port, key = inv.host("lab1").port, bed.identity
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host dz-front\n  HostName 127.0.0.2\n  Port {port}\n  User root\n  IdentityFile {key}\n"
        f"Host dz-hidden\n  HostName 127.0.0.4\n  Port {port}\n  IdentityFile {key}\n  ProxyJump dz-front\n"
        f"Host *\n  IdentitiesOnly yes\n"
    )
    inventory = dataclasses.replace(inv, ssh_config=config)
    t = SSHTransport(Host(name="hidden-alias", hardware="cpu", address="dz-hidden"), inventory)
    assert (t.target.hostname, t.target.port, t.target.jump.label) == ("127.0.0.4", port, "dz-front")
    assert t.run("echo $SSH_CONNECTION", timeout=30).stdout.split()[2] == "127.0.0.4"


def test_proxyjump_chain_of_two_hops(bed, inv, tmp_path):
    """lab2 -> lab1 -> lab3: the hidden host only admits lab1's sshd, so order matters."""
    port, key = inv.host("lab1").port, bed.identity
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host dz-front\n  HostName 127.0.0.2\nHost dz-mid\n  HostName 127.0.0.3\n"
        f"Host dz-hidden\n  HostName 127.0.0.4\n  ProxyJump dz-mid,dz-front\n"
        f"Host *\n  Port {port}\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
    )
    inventory = dataclasses.replace(inv, ssh_config=config)
    t = SSHTransport(Host(name="chained", hardware="cpu", address="dz-hidden"), inventory)
    assert (t.target.jump.label, t.target.jump.jump.label) == ("dz-front", "dz-mid")
    assert t.run("echo $SSH_CONNECTION", timeout=30).stdout.split()[2] == "127.0.0.4"


def test_jump_loop_is_a_config_error(inv):
    looped = tuple(dataclasses.replace(h, jump="lab2" if h.name == "lab1" else "lab1") for h in inv.hosts)
    inventory = dataclasses.replace(inv, hosts=looped)
    with pytest.raises(ConfigError, match="jump loop"):
        SSHTransport(inventory.host("lab1"), inventory)


def test_a_misspelt_jump_is_a_config_error_naming_its_line_not_an_alias(inv):
    """`jump: lab01` names no host of the inventory and no Host of the ssh config: it was dialled
    as an ssh alias with the controller's user; now the run stops before any cell, naming it."""
    from dayzero.lab.transport.ssh.config import check_jumps

    typo = tuple(dataclasses.replace(h, jump="lab01") if h.name == "lab3" else h for h in inv.hosts)
    inventory = dataclasses.replace(inv, hosts=typo)
    with pytest.raises(ConfigError) as err:
        check_jumps(inventory)
    assert err.value.path == "hosts.lab3.jump" and err.value.file == str(inv.path), str(err.value)
    assert "'lab01' is neither a host of this inventory nor a Host of ssh config" in str(err.value)
    assert "(did you mean 'lab1'?)" in str(err.value)
    with pytest.raises(ConfigError, match="hosts.lab3.jump"):
        SSHTransport(inventory.host("lab3"), inventory)
    check_jumps(inv)  # the testbed's own jump (lab1) is a host of the inventory
    port = inv.host("lab1").port
    explicit = dataclasses.replace(inv.host("lab3"), jump=f"root@127.0.0.2:{port}")  # said in full: allowed
    assert SSHTransport(explicit, inventory).target.jump.hostname == "127.0.0.2"


def test_a_missing_identity_names_its_field_and_is_not_retried(inv, tmp_path):
    missing = tmp_path / "id_lab"
    host = dataclasses.replace(inv.host("lab1"), name="lab1-nokey", identity=str(missing))
    with pytest.raises(InfrastructureError) as err:
        SSHTransport(host, inv).run("true", timeout=30)
    message = str(err.value)
    assert (
        message.startswith("lab1-nokey (")
        and f"hosts.lab1-nokey.identity: {missing} does not exist" in message
    )
    assert "tries" not in message and "No such file" not in message, message  # said once, not a network fault
    assert not err.value.retry


def test_a_public_key_as_identity_says_give_the_private_one(bed, inv):
    public = f"{bed.identity}.pub"
    host = dataclasses.replace(inv.host("lab2"), name="lab2-pub", identity=public)
    with pytest.raises(InfrastructureError) as err:
        SSHTransport(host, inv).run("true", timeout=30)
    assert f"identity: {public} is a public key: give the private one ({bed.identity}?)" in str(err.value)
    assert "tries" not in str(err.value) and not err.value.retry


def test_open_transport_picks_ssh(inv):
    assert isinstance(open_transport(inv.host("lab2"), inv), SSHTransport)


# --- host keys ----------------------------------------------------------------------------------


def test_unknown_host_key_is_refused_with_a_hint(inv, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    port = inv.host("lab1").port
    with pytest.raises(InfrastructureError) as info:
        transport(inv, "lab1", known_hosts=empty).run("true", timeout=30)
    message = str(info.value)
    assert f"ssh-keyscan -p {port} 127.0.0.2 >> {empty}" in message
    assert "accept_new_host_keys" in message and empty.read_text() == ""


@pytest.mark.parametrize("accept_new", [False, True])
def test_changed_host_key_is_refused_with_the_fix(inv, tmp_path, accept_new):
    port = inv.host("lab1").port
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.2]:{port} {keygen(tmp_path / 'impostor')}\n")
    with pytest.raises(InfrastructureError) as info:
        transport(inv, "lab1", known_hosts=known, accept_new_host_keys=accept_new).run("true", timeout=30)
    message = str(info.value)
    assert "HOST KEY CHANGED" in message and "lab1" in message
    assert f"ssh-keygen -R '[127.0.0.2]:{port}' -f {known}" in message


def test_accept_new_host_keys_records_and_warns(bed, inv, tmp_path):
    known = tmp_path / "new" / "known_hosts"
    port = inv.host("lab2").port
    with pytest.warns(NewHostKeyWarning, match=r"\[127\.0\.0\.3\]"):
        assert transport(inv, "lab2", known_hosts=known, accept_new_host_keys=True).run("true", timeout=30).ok
    expected = next(
        line for line in bed.known_hosts.read_text().splitlines() if line.startswith(f"[127.0.0.3]:{port}")
    )
    assert known.read_text().splitlines() == [expected]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # now known: strict checking passes without a warning
        assert transport(inv, "lab2", known_hosts=known).run("true", timeout=30).ok


# --- failures and connection reuse --------------------------------------------------------------


def test_sshd_dying_mid_command_is_an_infrastructure_error(bed, inv):
    t = transport(inv, "lab2")
    pid_file = Path(inv.host("lab2").workdir) / f"sleeper-{uuid.uuid4().hex}.pid"

    def kill_sshd():
        if wait_until(pid_file.exists):
            bed.kill_connections("lab2")

    killer = threading.Thread(target=kill_sshd)
    killer.start()
    with pytest.raises(InfrastructureError) as info:
        t.run(f"echo $$ > {pid_file}; exec sleep 40", timeout=30)
    killer.join()
    assert not isinstance(info.value, CommandTimeout), "the lost connection went unnoticed"
    assert "lab2" in str(info.value) and "mid-command" in str(info.value)
    orphan = pid_file.read_text().strip()  # sshd died; its command did not: clean it up
    assert t.run(f"kill {orphan} && echo reconnected", timeout=30).stdout == "reconnected\n"


def test_connection_refused_names_the_host(inv):
    closed = testbed.free_port(1)
    host = dataclasses.replace(inv.host("lab1"), name="nowhere", port=closed)
    with pytest.raises(InfrastructureError, match=r"nowhere .*cannot connect"):
        SSHTransport(host, inv).run("true", timeout=30)


def test_transports_of_one_host_share_one_connection(inv):
    first, second = transport(inv, "lab1"), transport(inv, "lab1")
    assert first.connection is second.connection
    a = first.run("echo $SSH_CLIENT", timeout=30).stdout
    first.close()
    assert second.run("echo $SSH_CLIENT", timeout=30).stdout == a  # same client port: same TCP connection
    assert transport(inv, "lab2").connection is not first.connection


# --- host-key faults a lab meets (issue: retried for the whole lease wait, hints that did not paste)


def test_unknown_host_key_is_broken_at_once_not_waited_for(inv, tmp_path):
    """Leasing a host whose key is unknown fails on the first attempt, not after --lease-wait."""
    from dayzero.errors import HostKeyError
    from dayzero.lab.lease import acquire_all

    empty = tmp_path / "known_hosts"
    empty.write_text("")
    attempts = []

    def connect(host):
        attempts.append(host.name)
        return transport(inv, host.name, known_hosts=empty)

    with pytest.raises(HostKeyError, match="unknown host key"):
        acquire_all([inv.host("lab2")], 1, connect, run_id="r", cell_id="c", worker="w", wait=20)
    assert attempts == ["lab2"], "a host-key fault is reported once, never retried"


def test_keyscan_hint_through_the_jump_host_runs_as_pasted(bed, inv, tmp_path):
    """The hint for the hidden host (reachable only through lab1) is one shell command that,
    run as printed, records the right key: then strict checking connects."""
    known = tmp_path / "known_hosts"
    hidden = inv.host("lab3")
    lines = [line for line in bed.known_hosts.read_text().splitlines() if "127.0.0.4" not in line]
    known.write_text("\n".join(lines) + "\n")  # the jump host is known, the hidden host is not
    with pytest.raises(InfrastructureError, match="unknown host key") as info:
        transport(inv, hidden.name, known_hosts=known).run("true", timeout=30)
    hint = str(info.value).split("add it: ", 1)[1].split(" -- or set", 1)[0]
    assert "#" not in hint
    subprocess.run(["bash", "-c", hint], check=True, timeout=60, capture_output=True)
    assert transport(inv, hidden.name, known_hosts=known).run("true", timeout=30).ok


def test_accept_new_host_keys_keeps_a_hashed_known_hosts_hashed(bed, inv, tmp_path):
    known = tmp_path / "known_hosts"
    port = inv.host("lab2").port
    lab1 = [line for line in bed.known_hosts.read_text().splitlines() if line.startswith("[127.0.0.2]")]
    known.write_text("\n".join(lab1) + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    with pytest.warns(NewHostKeyWarning):
        assert transport(inv, "lab2", known_hosts=known, accept_new_host_keys=True).run("true", timeout=30).ok
    text = known.read_text()
    assert "127.0.0.3" not in text and all(line.startswith("|1|") for line in text.splitlines())
    found = subprocess.run(["ssh-keygen", "-F", f"[127.0.0.3]:{port}", "-f", str(known)], capture_output=True)
    assert found.returncode == 0, "the recorded line is found under the host's name"
