"""A lab of real OpenSSH servers on loopback addresses, to test the SSH path without a lab.

`start(n, directory)` runs n `sshd -D` processes on 127.0.0.2 .. 127.0.0.(n+1), each with its own
host key, one client key (ed25519), a known_hosts that lists every host as `[127.0.0.x]:port`, and
an `inventory.yaml` for dayzero. With three hosts or more the last one is *hidden*: it is reachable
only through the first host as a jump host (its inventory entry says `jump: lab1`).

How "hidden" is enforced, honestly: on one machine every loopback address is reachable by every
process, and a connection that lab1's sshd forwards leaves from 127.0.0.1 exactly like the
controller's own (Linux picks 127.0.0.1 as the source for all of 127/8), so neither ListenAddress
nor `AllowUsers *@127.0.0.2` can tell the two apart. The hidden sshd therefore takes its authorized
keys from an AuthorizedKeysCommand (this file, run as `testbed.py gate`), which looks up the process
on the client end of the TCP connection (/proc/net/tcp and /proc/*/fd) and hands out the key only
when that process descends from lab1's sshd. Anything else, the controller included, gets
"Permission denied (publickey)".

Stdlib only: sshd runs the gate with a bare interpreter (`python -I`), and `tools/testbed` must
work before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
INSTALL_HINT = "openssh-server is not installed: apt-get install -y openssh-server"
DEFAULT_PORT = 2222
STATE_FILE = "testbed.json"
_CHILDREN: dict[int, subprocess.Popen] = {}  # sshd started by this process, reaped on stop


class TestbedError(Exception):
    """The testbed could not start or stop; the message says what to do."""

    __test__ = False


@dataclass(frozen=True)
class TestbedHost:
    """One sshd: its address, and where its key, config, pid file and log live."""

    __test__ = False

    name: str
    address: str
    port: int
    root: Path
    jump: str | None = None

    @property
    def host_key(self) -> Path:
        return self.root / "ssh_host_ed25519_key"

    @property
    def config(self) -> Path:
        return self.root / "sshd_config"

    @property
    def pid_file(self) -> Path:
        return self.root / "sshd.pid"

    @property
    def log(self) -> Path:
        return self.root / "sshd.log"

    @property
    def known_hosts_name(self) -> str:
        return f"[{self.address}]:{self.port}"


@dataclass(frozen=True)
class Testbed:
    """A running set of sshd processes; `stop()` (or leaving the `with` block) ends all of them."""

    __test__ = False

    directory: Path
    hosts: tuple[TestbedHost, ...]

    @property
    def inventory(self) -> Path:
        return self.directory / "inventory.yaml"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def identity(self) -> Path:
        return self.directory / "id_ed25519"

    def host(self, name: str) -> TestbedHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def pid(self, name: str) -> int | None:
        """The listener's pid, only if that process is still our sshd (pids get reused)."""
        host = self.host(name)
        try:
            pid = int(host.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _is_our_sshd(pid, host.config) else None

    def status(self) -> dict[str, bool]:
        return {h.name: self.pid(h.name) is not None for h in self.hosts}

    def kill_connections(self, name: str) -> list[int]:
        """SIGKILL the per-connection sshd processes of one host, as if sshd crashed under its
        clients; the listener stays, so new connections work. Commands they ran are orphaned."""
        pid = self.pid(name)
        if pid is None:
            return []
        victims = [p for p in _descendants(pid) if _comm(p) == "sshd"]
        for p in victims:
            _signal(p, signal.SIGKILL)
        _wait_gone(victims, 10.0)
        return victims

    def stop(self, grace: float = 2.0) -> None:
        """TERM every listener and everything under it (connections, sessions), then KILL what
        is left after `grace`; returns when all of them are gone. The grace is short because a
        connection's sshd can miss a TERM that lands while its loop is busy (OpenSSH 9.2 checks
        the flag only before it sleeps), and then waits for the client's next packet."""
        pids: list[int] = []
        for host in self.hosts:
            pid = self.pid(host.name)
            if pid is not None:
                pids += [pid, *_descendants(pid)]  # snapshot first: children outlive the listener
        for p in pids:
            _signal(p, signal.SIGTERM)
        left = _wait_gone(pids, grace)
        for p in left:
            _signal(p, signal.SIGKILL)
        left = _wait_gone(left, 5.0)
        if left:
            raise TestbedError(f"processes {left} did not exit")
        for host in self.hosts:
            host.pid_file.unlink(missing_ok=True)

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --- processes ----------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str]:
    """Fields after the `(comm)` of /proc/pid/stat: [state, ppid, pgid, ...]."""
    text = _read(f"/proc/{pid}/stat")
    return text.rpartition(")")[2].split() if text else []


def _comm(pid: int) -> str:
    return _read(f"/proc/{pid}/comm").strip()


def _is_our_sshd(pid: int, config: Path) -> bool:
    fields = _stat_fields(pid)
    if not fields or fields[0] == "Z":
        return False
    # sshd rewrites its argv ("sshd: /usr/sbin/sshd -D -f CONFIG [listener] ..."): split on both.
    return str(config) in _read(f"/proc/{pid}/cmdline").replace("\0", " ").split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def _descendants(pid: int) -> list[int]:
    children, out, todo = _children_map(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _gone(pid: int) -> bool:
    """Exited, and reaped if it was our child (a zombie still has a /proc entry)."""
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        _CHILDREN.pop(pid, None)
    fields = _stat_fields(pid)
    return not fields or (fields[0] in ("Z", "X") and pid not in _CHILDREN)


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [p for p in pids if not _gone(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if not _gone(p)]
    return left


# --- files --------------------------------------------------------------------------------------


def _keygen(path: Path, comment: str) -> None:
    if path.exists():
        return
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _public_key(private: Path) -> str:
    """`type base64` of a key pair, without the comment."""
    return " ".join(Path(f"{private}.pub").read_text().split()[:2])


def _safe_python() -> str:
    """An interpreter sshd will run: AuthorizedKeysCommand must live in root- (or user-) owned
    directories that nobody else can write, checked on the real path."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        if os.path.exists(candidate) and _safe_path(os.path.realpath(candidate)):
            return os.path.realpath(candidate)
    raise TestbedError(
        f"no python3 in root-owned, non-writable directories for sshd's AuthorizedKeysCommand "
        f"(tried {sys.executable} and /usr/bin/python3)"
    )


def _safe_path(path: str) -> bool:
    uid = os.getuid()
    current = path
    while True:
        st = os.stat(current)
        if st.st_uid not in (0, uid) or st.st_mode & 0o022:
            return False
        if current == "/":
            return True
        current = os.path.dirname(current)


def _sshd_config(bed_dir: Path, host: TestbedHost, gate: str | None, login_rc: bool) -> str:
    keys = bed_dir / "authorized_keys"
    lines = [
        f"Port {host.port}",
        f"ListenAddress {host.address}",
        f"HostKey {host.host_key}",
        f"PidFile {host.pid_file}",
        "StrictModes no",
        "UsePAM no",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "AllowTcpForwarding yes",
        "AllowAgentForwarding no",
        "X11Forwarding no",
        "PrintMotd no",
        "MaxStartups 100:30:200",
        "Subsystem sftp internal-sftp",
        "LogLevel VERBOSE",
    ]
    if not login_rc:
        # bash sources ~/.bashrc when sshd starts it, unless SHLVL says it is nested: the
        # controller user's interactive rc (pyenv init: ~0.5 s) must not be in every command.
        lines.append("SetEnv SHLVL=1")
    if gate is None:
        lines.append(f"AuthorizedKeysFile {keys}")
    else:
        lines += [
            "AuthorizedKeysFile none",
            f"AuthorizedKeysCommand {gate} {host.address} {host.port}",
            f"AuthorizedKeysCommandUser {getpass.getuser()}",
        ]
    return "\n".join(lines) + "\n"


def _yaml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML double-quoted scalar


def _inventory_yaml(bed: Testbed, user: str, engine_setup: str, variables: dict[str, str]) -> str:
    hidden = [h.name for h in bed.hosts if h.jump]
    lines = [
        f"description: {_yaml_str(f'tools/testbed: {len(bed.hosts)} sshd on loopback')}",
        "known_hosts: known_hosts",
        "hosts:",
    ]
    for h in bed.hosts:
        lines += [
            f"  {h.name}:",
            "    transport: ssh",
            f"    address: {_yaml_str(h.address)}",
            f"    port: {h.port}",
            f"    user: {_yaml_str(user)}",
            f"    identity: {_yaml_str(str(bed.identity))}",
            "    hardware: cpu",
            "    accelerators: 1",
            "    slots: 1",
            f"    workdir: {_yaml_str(str(bed.directory / 'work' / h.name))}",
        ]
        if h.jump:
            lines.append(f"    jump: {h.jump}")
        if engine_setup:
            lines.append(f"    engine_setup: {_yaml_str(engine_setup)}")
        if variables:
            lines.append("    vars:")
            lines += [f"      {_yaml_str(k)}: {_yaml_str(v)}" for k, v in sorted(variables.items())]
    if hidden:
        lines.insert(0, f"# {', '.join(hidden)}: reachable only through {bed.hosts[0].name} (jump host)")
    return "\n".join(lines) + "\n"


# --- start / load ---------------------------------------------------------------------------------


def _addresses(n: int) -> list[str]:
    return [f"127.0.0.{i}" for i in range(2, n + 2)]


def port_is_free(addresses: list[str], port: int) -> bool:
    """Whether sshd could bind: it sets SO_REUSEADDR, so TIME_WAIT leftovers do not count."""
    for address in addresses:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((address, port))
            except OSError:
                return False
    return True


def free_port(n: int) -> int:
    """A port free on all n testbed addresses (for tests that must not collide with :2222)."""
    addresses = _addresses(n)
    for _ in range(50):
        with socket.socket() as s:
            s.bind((addresses[0], 0))
            port = s.getsockname()[1]
        if port_is_free(addresses, port):
            return port
    raise TestbedError("no free port on the testbed addresses")


def _plan(n: int, directory: Path, port: int, addresses: list[str] | None = None) -> Testbed:
    hosts = []
    for i, address in enumerate(addresses or _addresses(n), start=1):
        hidden = n >= 3 and i == n
        hosts.append(TestbedHost(f"lab{i}", address, port, directory / f"lab{i}", "lab1" if hidden else None))
    return Testbed(directory, tuple(hosts))


def _prepare(bed: Testbed, user: str, engine_setup: str, variables: dict[str, str], login_rc: bool) -> None:
    bed.directory.mkdir(parents=True, exist_ok=True)
    _keygen(bed.identity, "dayzero-testbed-client")
    (bed.directory / "authorized_keys").write_text(_public_key(bed.identity) + "\n")
    known = []
    for host in bed.hosts:
        host.root.mkdir(parents=True, exist_ok=True)
        (bed.directory / "work" / host.name).mkdir(parents=True, exist_ok=True)
        _keygen(host.host_key, f"dayzero-testbed-{host.name}")
        known.append(f"{host.known_hosts_name} {_public_key(host.host_key)}")
        gate = _gate_command(bed) if host.jump else None
        host.config.write_text(_sshd_config(bed.directory, host, gate, login_rc))
    bed.known_hosts.write_text("\n".join(known) + "\n")
    bed.inventory.write_text(_inventory_yaml(bed, user, engine_setup, variables))
    state = {
        "hosts": [{"name": h.name, "address": h.address, "port": h.port, "jump": h.jump} for h in bed.hosts]
    }
    (bed.directory / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def _gate_command(bed: Testbed) -> str:
    """`-I`: sshd runs it with this file's directory (dayzero/) off sys.path, so no module there
    can shadow the stdlib."""
    keys = bed.directory / "authorized_keys"
    return f"{_safe_python()} -I {Path(__file__).resolve()} gate {bed.hosts[0].pid_file} {keys}"


def _launch(host: TestbedHost, sshd: str) -> subprocess.Popen:
    with open(host.log, "ab") as log:
        proc = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(host.config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc


def _wait_listening(host: TestbedHost, proc: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TestbedError(f"{host.name}: sshd exited {proc.returncode}: {_read(str(host.log))[-1500:]}")
        try:
            with socket.create_connection((host.address, host.port), timeout=0.5):
                if host.pid_file.exists():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TestbedError(
        f"{host.name}: sshd not listening on {host.address}:{host.port}: {_read(str(host.log))[-1500:]}"
    )


def _check_prerequisites(sshd: str, directory: Path) -> None:
    if not os.path.exists(sshd):
        raise TestbedError(INSTALL_HINT)
    if shutil.which("ssh-keygen") is None:
        raise TestbedError("ssh-keygen is missing: apt-get install -y openssh-client")
    if any(c.isspace() for c in str(directory.resolve())):
        raise TestbedError(
            f"{directory}: sshd_config cannot hold paths with spaces; choose another directory"
        )
    if os.getuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory


def start(
    n: int,
    directory: Path,
    *,
    port: int = DEFAULT_PORT,
    engine_setup: str = "",
    variables: dict[str, str] | None = None,
    sshd: str | None = None,
    timeout: float = 20.0,
    login_rc: bool = False,
    addresses: list[str] | None = None,
) -> Testbed:
    """Start n sshd; returns when all of them accept connections. Raises TestbedError.

    `login_rc=True` lets bash source the user's ~/.bashrc in every command, as a plain sshd does.
    `addresses` (n of them) replace the loopback ones: hosts in network namespaces
    (`devlab.netns`, whose `sshd_wrapper` is then `sshd`); their ports are a fresh namespace's."""
    if n < 1 or n > 200:
        raise TestbedError("--hosts must be between 1 and 200")
    directory = Path(directory).resolve()
    sshd = sshd or SSHD
    _check_prerequisites(sshd, directory)
    bed = _plan(n, directory, port, addresses)
    running = [h.name for h, up in zip(bed.hosts, _status_of(bed), strict=True) if up]
    if running:
        raise TestbedError(f"{directory}: already running ({', '.join(running)}); stop it first")
    if addresses is None and not port_is_free([h.address for h in bed.hosts], port):
        raise TestbedError(f"port {port} is taken on one of {_addresses(n)}; pass another --port")
    # The hosts share this machine's cores: one engine thread each keeps parallel cells from
    # oversubscribing them (a card's `{threads}` default is for a machine of its own).
    _prepare(bed, getpass.getuser(), engine_setup, {"threads": "1", **(variables or {})}, login_rc)
    deadline = time.monotonic() + timeout
    try:
        for host, proc in [(h, _launch(h, sshd)) for h in bed.hosts]:
            _wait_listening(host, proc, deadline)
    except BaseException:
        bed.stop()
        for proc in list(_CHILDREN.values()):
            if proc.args[-1] in {str(h.config) for h in bed.hosts}:
                proc.kill()
                proc.wait()
                _CHILDREN.pop(proc.pid, None)
        raise
    return bed


def _status_of(bed: Testbed) -> list[bool]:
    return [bed.pid(h.name) is not None for h in bed.hosts]


def load(directory: Path) -> Testbed:
    """The testbed a previous `start` left in `directory` (for stop/status from another process)."""
    directory = Path(directory).resolve()
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise TestbedError(f"{directory}: no testbed here ({exc})") from None
    hosts = tuple(
        TestbedHost(h["name"], h["address"], h["port"], directory / h["name"], h.get("jump"))
        for h in state["hosts"]
    )
    return Testbed(directory, hosts)


# --- the gate of the hidden host (run by sshd) ---------------------------------------------------


def _hex_endpoint(address: str, port: int) -> str:
    """/proc/net/tcp's form of an IPv4 endpoint: the address as a little-endian hex word."""
    return f"{int.from_bytes(socket.inet_aton(address), 'little'):08X}:{port:04X}"


def _tcp_table() -> list[tuple[str, str, str]]:
    """(local, remote, inode) of every IPv4 TCP socket of this network namespace."""
    rows = []
    for line in _read("/proc/net/tcp").splitlines()[1:]:
        fields = line.split()
        rows.append((fields[1], fields[2], fields[9]))
    return rows


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def _ancestors(pid: int) -> list[int]:
    out = []
    for _ in range(64):
        fields = _stat_fields(pid)
        if len(fields) < 2 or int(fields[1]) <= 1:
            return out
        pid = int(fields[1])
        out.append(pid)
    return out


def _client_endpoints(server: str) -> set[str]:
    """Remote ends of the TCP connections our sshd ancestors accepted on `server` (hex form).
    OpenSSH 9.2 has no %C token for AuthorizedKeysCommand, so we ask /proc which connection
    the sshd that runs us is serving."""
    ours = set().union(*(_socket_inodes(p) for p in _ancestors(os.getpid())))
    return {remote for local, remote, inode in _tcp_table() if local == server and inode in ours}


def _socket_owners(inodes: set[str]) -> list[int]:
    targets, owners = {f"socket:[{i}]" for i in inodes}, []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and any(f"socket:[{i}]" in targets for i in _socket_inodes(int(entry))):
            owners.append(int(entry))
    return owners


def gate(jump_pid_file: str, keys_file: str, address: str, port: str) -> int:
    """AuthorizedKeysCommand of the hidden host: print the keys only to a connection that the jump
    host's sshd opened (a forwarded `direct-tcpip`), nothing to anyone else."""
    try:
        jump_pid = int(_read(jump_pid_file).strip())
    except ValueError:
        return 0
    server = _hex_endpoint(address, int(port))
    clients = _client_endpoints(server)
    peer_inodes = {inode for local, remote, inode in _tcp_table() if local in clients and remote == server}
    owners = _socket_owners(peer_inodes)
    if owners and all(jump_pid in _ancestors(p) for p in owners):
        sys.stdout.write(_read(keys_file))
    else:
        print(f"testbed gate: client processes {owners} are not lab1's sshd: refused", file=sys.stderr)
    return 0


# --- command line ---------------------------------------------------------------------------------


def _parse_vars(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TestbedError(f"--var {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def _print_status(bed: Testbed) -> bool:
    ok = True
    for h in bed.hosts:
        pid = bed.pid(h.name)
        ok &= pid is not None
        via = f" (only via {h.jump})" if h.jump else ""
        print(f"{h.name:6} {h.address}:{h.port}{via:16} {'running pid ' + str(pid) if pid else 'stopped'}")
    return ok


def engine_defaults() -> tuple[str, dict[str, str]]:
    """What the cpu cells need on a testbed host, as tools/setup left them: the cached
    llama-server and rpc-server on PATH, then the engines' environment, the router's
    (`python-router`, tools/build-router: the routed and pd cells' SGLang router), and
    `model_root` (the hosts share this machine's cache). The hosts share this machine's cores
    too: OpenMP threads wait passively there (OMP_WAIT_POLICY), as llama.cpp runs one thread
    (`threads`), or two SGLang servers side by side starve each other spinning (measured: 2
    ranks decoded 32 tokens in 17.7 s spinning, 3.8 s passive)."""
    from dayzero.cache import cache_root, model_path, server_binary  # stdlib only, like this file

    engines, router = cache_root() / "engines-venv" / "bin", cache_root() / "router-venv" / "bin"
    setup = f'export PATH="{server_binary().parent}:{engines}:$PATH:{router}" OMP_WAIT_POLICY=PASSIVE'
    return setup, {"model_root": str(model_path().parent)}


def _cli_start(args: argparse.Namespace) -> int:
    setup, variables = engine_defaults()
    bed = start(
        args.hosts,
        Path(args.dir),
        port=args.port,
        engine_setup=args.engine_setup if args.engine_setup is not None else setup,
        variables={**variables, **_parse_vars(args.var)},
        login_rc=args.login_rc,
    )
    _print_status(bed)
    print(f"inventory: {bed.inventory}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tools/testbed", description="real OpenSSH servers on loopback, for tests"
    )
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("start", help="start N sshd on 127.0.0.2.. and write DIR/inventory.yaml")
    p.add_argument(
        "--hosts", type=int, default=3, help="number of hosts (>=3: the last is only reachable via lab1)"
    )
    p.add_argument("--dir", required=True, help="directory for keys, configs, logs and the inventory")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument(
        "--engine-setup",
        default=None,
        help="engine_setup line copied into every host (default: the cached llama-server on PATH)",
    )
    p.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="host var (repeatable; model_root defaults to the cached model's folder, threads to 1)",
    )
    p.add_argument("--login-rc", action="store_true", help="let bash source ~/.bashrc in every command")
    for name, text in (("stop", "stop every sshd of DIR and wait until gone"), ("status", "show what runs")):
        sub.add_parser(name, help=text).add_argument("--dir", required=True)
    # tools/testbed hands `slurm ...` to devlab.slurm before this parser sees it: listed here for -h
    sub.add_parser("slurm", help="a real Slurm cluster on this machine instead: tools/testbed slurm -h")
    g = sub.add_parser("gate", help=argparse.SUPPRESS)
    g.add_argument("endpoints", nargs=4)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.action == "gate":
            return gate(*args.endpoints)
        if args.action == "start":
            return _cli_start(args)
        if not os.path.exists(SSHD):
            raise TestbedError(INSTALL_HINT)
        bed = load(Path(args.dir))
        if args.action == "stop":
            bed.stop()
            print(f"stopped {len(bed.hosts)} hosts in {bed.directory}")
            return 0
        return 0 if _print_status(bed) else 1
    except TestbedError as exc:
        print(f"testbed: {exc}", file=sys.stderr)
        return 2 if str(exc) == INSTALL_HINT else 1


if __name__ == "__main__":
    sys.exit(main())
