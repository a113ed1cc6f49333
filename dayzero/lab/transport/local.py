"""Run on the controller itself: the embedded default, and the same code path as SSH."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from dayzero.errors import CommandTimeout
from dayzero.lab.transport.base import CommandResult, Transport
from dayzero.spec.inventory import Host


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
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise CommandTimeout(
                f"{self.host.name}: command ran past {timeout:.0f}s: {command[:200]}"
            ) from None
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
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
