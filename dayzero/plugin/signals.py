"""Ctrl-C and SIGTERM end the run, even where Python swallows the interrupt.

SIGTERM unwinds like Ctrl-C so every deployment's `finally` kills its process groups. A signal
handler runs wherever the main thread happens to be, and a KeyboardInterrupt raised inside a
weakref callback or a `__del__` is only printed ("Exception ignored ...") and lost: the run went
on and passed, the Ctrl-C forgotten (seen in the two-host SIGINT sweep). So each signal is also
counted, and a cell that returns normally after one arrived raises the interrupt again.
"""

from __future__ import annotations

import atexit
import gc
import signal

import pytest

_received: list[int] = []
_traceback: list[str] = ["untouched"]  # a dayzero run's: "last frame", or "full" (--full-trace)


def install(full_trace: bool = True) -> None:
    """Take SIGINT and SIGTERM where nobody else has (pytest leaves Python's defaults);
    `full_trace`: pytest's --full-trace, the interrupt's whole traceback printed."""
    _traceback[0] = "full" if full_trace else "last frame"
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)


def _interrupt(signum, frame):
    _received.append(signum)
    raise KeyboardInterrupt(*(() if signum == signal.SIGINT else (f"signal {signum}",)))


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C ends the run within 2 s on a loaded machine: what it did after the signal was CPU
    (0.7 s of it, 1-4 s on 2 busy cores). Pytest rendered the source of every frame of the
    interrupt to print the last one (0.4 s): it gets the last frame only, unless --full-trace
    prints them all. The interpreter's last collections walked the whole heap at exit (0.2 s):
    an interrupted run's objects are frozen out of them (each `finally` has run by then; what
    the OS reclaims at exit need not be collected)."""
    if _traceback[0] == "untouched":  # pytest without a dayzero run (this project's own tests)
        return
    if _traceback[0] == "last frame":
        excinfo.traceback = excinfo.traceback[-1:]
    atexit.register(gc.freeze)


def received() -> int:
    """How many interrupting signals this process has had so far."""
    return len(_received)


def raise_if_swallowed(since: int) -> None:
    """Raise the interrupt again if a signal arrived after `since` (`received()` then) and the
    code in between still returned normally: the interrupt was swallowed where it landed."""
    if len(_received) > since:
        raise KeyboardInterrupt(f"signal {_received[-1]}, lost where it landed, raised again")


def mark_interrupted(session: pytest.Session) -> None:
    """A run that had a signal yet ends as if it had none (swallowed after its last cell) ends
    interrupted."""
    if _received and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
