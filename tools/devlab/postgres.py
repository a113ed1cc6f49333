"""A throwaway PostgreSQL server, for the history store's tests and for trying a shared store.

`start(directory)` runs Debian's `initdb` and `pg_ctl start` (postgresql-15, installed by
tools/setup) on a free loopback port with its socket, data and log in `directory`, and returns
the DSN; `stop(directory)` stops it (`pg_ctl stop -m fast`). PostgreSQL refuses to run as root:
as root, the server runs as the `postgres` user (the Debian package's), which gets the directory.

    python3 tools/devlab/postgres.py start /tmp/pg    # prints the DSN for `dayzero history --store`
    python3 tools/devlab/postgres.py stop /tmp/pg

A lab's shared store is its own PostgreSQL (any version with psycopg 3 support): create a
database and give controllers `--store postgresql://user@host/db`; the schema is made on first use.

Stdlib only, like devlab.testbed.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import subprocess
from pathlib import Path

USER = "postgres"


def bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed (Debian's postgresql; tools/setup installs it)")
    return Path(found[-1]).parent


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", USER, "--", *cmd] if os.geteuid() == 0 else cmd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], timeout: float) -> None:
    done = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(
            f"{Path(cmd[0]).name} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}"
        )


def start(directory: Path, timeout: float = 60) -> str:
    """`directory` must be reachable by the server's user: not under a root-only folder such as
    pytest's tmp_path; a fresh `tempfile.mkdtemp()` is."""
    directory = Path(directory).resolve()
    data, port = directory / "data", _free_port()
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(directory, USER)
        os.chmod(directory, 0o700)
    _run([str(bindir() / "initdb"), "-D", str(data), "-U", USER, "-A", "trust", "--no-sync"], timeout)
    options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off"
    _run(
        [
            str(bindir() / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(directory / "log"),
            "-o",
            options,
            "-w",
            "start",
        ],
        timeout,
    )
    (directory / "port").write_text(str(port))
    return f"postgresql://{USER}@127.0.0.1:{port}/postgres"


def stop(directory: Path) -> None:
    data = Path(directory).resolve() / "data"
    if (data / "postmaster.pid").exists():
        _run([str(bindir() / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], 60)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("directory", type=Path)
    args = parser.parse_args()
    print(start(args.directory)) if args.action == "start" else stop(args.directory)
