"""The SGLang cookbook's Mamba ratio: how a hybrid model's memory splits between state and KV.

Hybrid models (attention plus a linear-attention state: Mamba, GDN, KDA) split the memory left
after the weights into a state pool (whole slots: it caps concurrency) and a paged KV pool;
`--mamba-full-memory-ratio r` sets state : KV = r. The cookbook's balanced value is

    r* = (S + D) * token_equiv * dcp_size / L,   token_equiv = state_bytes_per_slot / kv_bytes_per_token

with L the average context per request (input + output), S the state slots one running request
holds under the radix cache strategy, and D the speculative draft tokens (0 without). The
default 0.9 over-provisions the state pool for long contexts and silently clamps concurrency.
Pure: `inputs_for` reads a role's argv, `ratio` computes, `written` puts the value into a server
command whose mode does not pin one (what `dayzero recipe`, `--dry-run` and a run launch alike).
The geometry is the card's `mamba_ratio` section, which `dayzero recipe --mamba-*` overrides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

STATE_SLOTS = {"extra_buffer": 5, "extra_buffer_lazy": 4, "no_buffer": 3, "disabled": 1}
FLAG = "--mamba-full-memory-ratio"
SERVER = "--model-path"  # a role with it is an SGLang server (a router has none)
GEOMETRY = ("state_bytes_per_slot", "kv_bytes_per_token", "context_tokens")


@dataclass(frozen=True)
class Inputs:
    state_bytes_per_slot: float
    kv_bytes_per_token: float
    dcp_size: int
    strategy: str  # a STATE_SLOTS key
    draft_tokens: int
    context_tokens: float

    @property
    def slots(self) -> int:
        return STATE_SLOTS[self.strategy]

    @property
    def token_equiv(self) -> float:
        return self.state_bytes_per_slot / self.kv_bytes_per_token


def ratio(i: Inputs) -> float:
    return (i.slots + i.draft_tokens) * i.token_equiv * i.dcp_size / i.context_tokens


def text(value: float) -> str:
    """The value as the command carries it (4 significant digits)."""
    return f"{value:.4g}"


def _value(argv: Sequence[str], flag: str) -> str | None:
    """The last value given for a flag (argparse: the last one wins)."""
    found = None
    for k, token in enumerate(argv):
        if token == flag and k + 1 < len(argv):
            found = argv[k + 1]
        elif token.startswith(flag + "="):
            found = token.split("=", 1)[1]
    return found


def strategy_of(argv: Sequence[str]) -> str:
    """The radix cache strategy SGLang resolves: `auto` is extra_buffer while the overlap schedule
    is on (its default), else no_buffer (0.5.23, for a model that supports the extra buffer)."""
    if "--disable-radix-cache" in argv:
        return "disabled"
    chosen = _value(argv, "--mamba-radix-cache-strategy") or "auto"
    if chosen != "auto":
        return chosen
    return "no_buffer" if "--disable-overlap-schedule" in argv else "extra_buffer"


class NeedsData(ValueError):
    """An input is not stated: the value is not computed (never guessed)."""


def inputs_for(argv: Sequence[str], geometry: Mapping[str, float | None]) -> Inputs:
    """The calculator's inputs for one role's command and the card's `mamba_ratio` geometry."""
    missing = [f"mamba_ratio.{k}" for k in GEOMETRY if not geometry.get(k)]
    draft = 0
    if _value(argv, "--speculative-algorithm"):
        given = (
            _value(argv, "--speculative-num-draft-tokens")
            or _value(argv, "--speculative-dflash-block-size")
            or geometry.get("draft_tokens")
        )
        if given is None:
            missing.append("--speculative-num-draft-tokens (else the draft model's block size)")
        else:
            draft = int(given)
    if missing:
        raise NeedsData(", ".join(missing))
    return Inputs(
        state_bytes_per_slot=float(geometry["state_bytes_per_slot"]),
        kv_bytes_per_token=float(geometry["kv_bytes_per_token"]),
        dcp_size=int(_value(argv, "--dcp-size") or 1),
        strategy=strategy_of(argv),
        draft_tokens=draft,
        context_tokens=float(geometry["context_tokens"]),
    )


def stated(geometry: Mapping[str, float | None]) -> bool:
    """Every geometry input is given: commands carry the computed ratio (the recipe digest too)."""
    return all(geometry.get(k) for k in GEOMETRY)


def written(argv: Sequence[str], geometry: Mapping[str, float | None]) -> tuple[str, ...]:
    """A server command with the computed ratio appended where it pins none and every input is
    stated; any other command as it was (a pin wins, a missing input is never guessed)."""
    argv = tuple(argv)
    if SERVER not in argv or _value(argv, FLAG) is not None or not geometry:
        return argv
    try:
        return (*argv, FLAG, text(ratio(inputs_for(argv, geometry))))
    except NeedsData:
        return argv


def describe(argv: Sequence[str], geometry: Mapping[str, float | None]) -> str:
    """One line for `dayzero recipe`: the value beside its inputs and whether the command carries
    it (written by `written`), the card's pin, or what is missing."""
    pinned = _value(argv, FLAG)
    try:
        i = inputs_for(argv, geometry)
    except NeedsData as exc:
        head = f"card pins {pinned}; " if pinned else ""
        return f"{head}calculator needs data: {exc}"
    if pinned == text(ratio(i)) and tuple(argv[-2:]) == (FLAG, pinned):
        pinned = None  # the value `written` appended: the command carries r*
    computed = (
        f"r* = {ratio(i):.4g} = (S {i.slots} [{i.strategy}] + D {i.draft_tokens}) x token_equiv "
        f"{i.token_equiv:.4g} [{i.state_bytes_per_slot:g} B / {i.kv_bytes_per_token:g} B] x dcp {i.dcp_size} "
        f"/ L {i.context_tokens:g}"
    )
    return f"card pins {pinned}; {computed}" if pinned else f"{computed}; written as {FLAG} {text(ratio(i))}"
