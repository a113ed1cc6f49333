"""How an engine's command sets its cache's element types and the share of memory it takes.

Data each engine module states (`Engine.memory`), which `dayzero fit` reads: the flags that set
the K, V, Mamba convolution and SSM state types with the engine's defaults ("auto" is the
checkpoint's dtype), and the memory it leaves to weights and cache by default (a share of the
device, as vLLM's `--gpu-memory-utilization`, or a reserve in MiB, as SGLang's own formula).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


def flag_value(argv: Sequence[str], flags: Sequence[str]) -> str | None:
    """The last value given for any of `flags` (argparse: the last one wins), `--f v` or `--f=v`."""
    found = None
    for k, token in enumerate(argv):
        for f in flags:
            if token == f and k + 1 < len(argv):
                found = argv[k + 1]
            elif token.startswith(f + "="):
                found = token.split("=", 1)[1]
    return found


@dataclass(frozen=True)
class EngineMemory:
    k: tuple[str, ...] = ()  # flags setting the K cache's type (and V's, where `v` is empty)
    v: tuple[str, ...] = ()  # flags setting V alone
    k_default: str = "auto"
    v_default: str = "auto"
    conv: tuple[str, ...] = ()  # a Mamba layer's convolution window
    conv_default: str = "auto"
    ssm: tuple[str, ...] = ()  # a Mamba/linear-attention layer's recurrent state
    ssm_default: str = "auto"
    share: tuple[str, ...] = ()  # the flag giving the share of device memory for weights + cache
    share_default: float | None = None  # None: `reserve_mib` (or nothing held back)
    reserve_mib: Callable[[int], float] | None = None  # by TP size: MiB kept for activations, graphs
    source: str = ""  # where the defaults were read

    def types(self, argv: Sequence[str]) -> dict[str, str]:
        """The cache element types this command sets: k, v, conv, ssm (engine names, "auto")."""
        k = flag_value(argv, self.k) or self.k_default
        v = flag_value(argv, self.v) if self.v else k
        return {
            "k": k,
            "v": v or self.v_default,
            "conv": flag_value(argv, self.conv) or self.conv_default,
            "ssm": flag_value(argv, self.ssm) or flag_value(argv, self.conv) or self.ssm_default,
        }

    def share_of(self, argv: Sequence[str]) -> float | None:
        given = flag_value(argv, self.share)
        return float(given) if given is not None else self.share_default
