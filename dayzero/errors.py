"""Exception types that decide how a fault is reported.

`ConfigError` stops a run before any test starts; `InfrastructureError` marks a lab fault
(host down, ssh refused, disk full, engine missing) so Allure shows it as *broken*, never as a
product failure of the cell.
"""

from __future__ import annotations


class DayzeroError(Exception):
    """Base of every error dayzero raises on purpose."""


class ConfigError(DayzeroError):
    """A matrix, inventory or golden file is wrong: names the file, the path and the expectation."""

    def __init__(self, file: str, path: str, message: str):
        self.file, self.path, self.message = str(file), path, message
        super().__init__(f"{file}: {path or '<root>'}: {message}")


class ConfigErrors(ConfigError):
    """Every problem found in one file, one line each: a lab fixes them all in one pass instead of
    meeting them one run at a time. Reads as the first where one `ConfigError` is expected."""

    def __init__(self, errors: list[ConfigError]):
        self.errors = tuple(errors)
        first = self.errors[0]
        super().__init__(first.file, first.path, first.message)
        self.args = ("\n".join(str(e) for e in self.errors),)


def raise_all(errors: list[ConfigError]) -> None:
    """Raise nothing, the one error, or all of them as `ConfigErrors`."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


class InfrastructureError(DayzeroError):
    """The lab failed, not the product: reported as broken, in the infrastructure category."""


class HostKeyError(InfrastructureError):
    """A host's key is unknown or changed: a person must verify it, so waiting cannot help."""


class HostUnreachable(InfrastructureError):
    """A host did not answer its transport within the connect timeout: connection refused, a name
    that does not resolve, no answer, no key accepted. It is quarantined for the run and its cells
    are broken at once: waiting the lease wait for a dead host only turned a dead lab into hours."""

    def __init__(self, message: str, retry: bool = False):
        super().__init__(message)
        self.retry = retry  # whether another dial may help (refused, unresolved: a host rebooting)


class CommandTimeout(InfrastructureError):
    """A command on a host ran past its wall-clock deadline."""


class HostSilent(InfrastructureError):
    """A host stopped answering mid-command (network dropped, machine hung): nothing from the
    command that should write every few seconds, for as long as the phase allows."""


class StillLoading(InfrastructureError):
    """Every role is alive but not ready by the card's deadline: loading weights that take longer
    here than the card allows (a slow disk, a cold cache) is the lab's fault, not the product's."""


class DeploymentError(DayzeroError):
    """The recipe did not come up (exited early, never ready): a product failure of the cell."""

    def __init__(self, message: str, log_tail: str = ""):
        self.log_tail = log_tail
        super().__init__(message + (f"\n--- server log tail ---\n{log_tail}" if log_tail else ""))
