"""The words an engine's exit status is reported in (dayzero.lab.exit_status)."""

from __future__ import annotations

import signal

from dayzero.lab.exit_status import describe


def test_a_status_above_128_is_the_signal_by_name_and_what_it_usually_means():
    assert describe(128 + signal.SIGILL).startswith("killed by SIGILL: an instruction this CPU refuses")
    assert "out-of-memory" in describe(128 + signal.SIGKILL)
    assert describe(128 + signal.SIGUSR1) == "killed by SIGUSR1"  # named, no meaning guessed


def test_a_plain_exit_stays_a_number():
    assert describe(1) == "exit 1" and describe(128) == "exit 128"
