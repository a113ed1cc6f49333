"""What an engine's exit status says, in words a lab engineer can act on.

A server that dies by a signal prints nothing of it: llama-server built for a newer CPU dies by
SIGILL 0.7 s after launch with an empty log, and "exited before the cell became ready" alone sent
people hunting in the recipe. The shell that starts each launch records the status (`exec_line`);
this names it. Pure.
"""

from __future__ import annotations

import signal

# What each signal usually means when it ends a serving engine.
MEANINGS = {
    "SIGILL": "an instruction this CPU refuses: the engine was built for a newer CPU "
    "(e.g. -march=native with AVX-512 or AMX); rebuild it at the pinned level (tools/build-engine)",
    "SIGSEGV": "a segmentation fault: the engine crashed (a bug, a corrupt model file, or a "
    "library built for another version)",
    "SIGBUS": "a bus error: a memory-mapped model file was truncated or its disk went away",
    "SIGABRT": "the engine aborted itself (a failed assertion or an uncaught exception in native code)",
    "SIGKILL": "killed outright: often the kernel's out-of-memory killer (see the host's dmesg)",
    "SIGFPE": "an arithmetic fault in native code (division by zero)",
    "SIGTERM": "asked to stop by someone else (another run's teardown, a scheduler, an operator)",
}


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe(status: int) -> str:
    """The shell's status of a finished launch in words: 'exit N', or 'killed by SIGX (meaning)'
    for a status above 128 (the shell's way of saying the program died by signal status-128)."""
    if status > 128:
        name = signal_name(status - 128)
        meaning = MEANINGS.get(name)
        return f"killed by {name}" + (f": {meaning}" if meaning else "")
    return f"exit {status}"
