"""Run on the controller itself: the embedded default, and the same code path as SSH."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

from dayzero.errors import CommandTimeout
from dayzero.lab.transport.base import CommandResult, Transport
from dayzero.spec.inventory import Host


def _kill_group(pgid: int) -> None:
    """SIGKILL a command's group, which may already be gone: an interrupt that lands after the
    command exited must stay the interrupt, not become a ProcessLookupError (a product failure)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class LocalTransport(Transport):
    def __init__(self, host: Host):
        self.host = host

    def run(self, command: str, *, timeout: float, stdin: bytes | None = None) -> CommandResult:
        # Own session so a deadline can kill the whole command, not just bash.
        proc = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.communicate()
            raise CommandTimeout(
                f"{self.host.name}: command ran past {timeout:.0f}s: {command[:200]}"
            ) from None
        except BaseException:  # Ctrl-C, SIGTERM: kill the command, then let the interrupt through
            _kill_group(proc.pid)
            proc.wait()
            raise
        return CommandResult(
            command, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )

    def put(self, local: Path, remote: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, remote)

    def get(self, remote: str, local: Path) -> None:
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(remote, local)
