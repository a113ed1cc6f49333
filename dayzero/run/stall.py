"""An engine stall ends the phase at once, as the card says; a silent host ends it as a lab fault.

The host client watches the streams (`stall_s` in its spec: requests in flight and no streamed
token from any of them for that long) and ends the phase itself, answering with a `stall`
account; the controller waits no longer than the same bound for the client's beat (HostSilent
from the transport). Either way the phase raises here, and the cell's teardown kills the engine
and frees the leases, instead of a hung server holding its hosts for the client's per-request
and the phase's deadlines (600 s and 3600 s).
"""

from __future__ import annotations

from collections.abc import Callable

from dayzero.errors import DeploymentError, InfrastructureError
from dayzero.spec.card import StallPolicy

STREAMED = ("load", "requests")  # the client's actions that stream tokens (probes, phases)

Run = Callable[[dict, float, float | None], dict]  # (spec, timeout, silence) -> the client's answer


def stall_error(policy: StallPolicy, stall: dict, where: str) -> DeploymentError | InfrastructureError:
    """The card's verdict on an engine stall the client reported: failed (the product hung) or
    broken (a lab fault)."""
    message = (
        f"engine stall on {where}: no streamed token from any of {stall.get('in_flight', '?')} "
        f"in-flight request(s) for {stall.get('silent_s', policy.after_s):g}s "
        f"(bound {policy.after_s:g}s, protocol.stall.after_s; {stall.get('phase', '?')} requests); "
        "the phase was ended and the engine stopped"
    )
    return DeploymentError(message) if policy.verdict == "failed" else InfrastructureError(message)


def watched(run: Run, policy: StallPolicy, where: str) -> Callable[[dict, float], dict]:
    """The Endpoint's client: streamed actions carry the stall bound (to the client, and as the
    silence the controller allows the host), and a reported stall raises `stall_error`."""

    def client(spec: dict, timeout: float) -> dict:
        if spec.get("action") not in STREAMED:
            return run(spec, timeout, None)
        answer = run({**spec, "stall_s": policy.after_s}, timeout, policy.after_s)
        if answer.get("stall"):
            raise stall_error(policy, answer["stall"], where)
        return answer

    return client
