"""The cache element types a command sets, by its engine's own flags, and what the Mamba ratio
takes from them.

Separate from `fit` so the card (`spec/card.py`, whose `mamba_ratio` takes its sizes from here)
and `fit` (which reads typed cards) both use it without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dayzero import engines
from dayzero.engines.memory import EngineMemory
from dayzero.spec.sizing import CacheDtypes, cache, dtype_bytes, from_card

STATE_KINDS = ("mamba", "mamba2", "kda")


def engine_memory(name: str | None) -> EngineMemory:
    """The engine's cache flags and reserve; an engine this install lacks: none stated."""
    found = engines.find(name)
    return found.memory if found else EngineMemory()


def cache_dtypes(argv: Sequence[str], memory: EngineMemory, model_dtype: str = "bfloat16") -> CacheDtypes:
    """The K, V, conv and SSM element sizes a command sets, by the engine's own flags and defaults."""
    t = memory.types(argv)
    b = {k: dtype_bytes(v, model_dtype) for k, v in t.items()}
    kv = f"K {t['k']}" + (f", V {t['v']}" if t["v"] != t["k"] else "")
    said = f"{kv}: {b['k']:g}" + (f"/{b['v']:g}" if t["v"] != t["k"] else "") + " B"
    said += f"; conv {t['conv']}: {b['conv']:g} B, state {t['ssm']}: {b['ssm']:g} B"
    return CacheDtypes(b["k"], b["v"], b["conv"], b["ssm"], said.replace("auto", f"auto={model_dtype}"))


def mamba_geometry(card_data: Mapping, engine: str | None) -> dict:
    """The Mamba ratio's state bytes per slot and KV bytes per token as `fit` sizes them (TP1, the
    recipe's cache flags), for a card whose `mamba_ratio` leaves them out; {} where unknown."""
    data = card_data.get("architecture")
    if not data:
        return {}
    arch = from_card(data)
    if not any(g.kind in STATE_KINDS for g in arch.layers):
        return {}
    argv = card_data.get("recipe", {}).get("command", ())
    c = cache(arch, cache_dtypes(argv, engine_memory(engine), arch.dtype))
    if c.missing or not c.per_token:
        return {}
    return {"state_bytes_per_slot": c.per_sequence, "kv_bytes_per_token": c.per_token}
