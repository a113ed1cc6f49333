"""Golden outputs per cell, with provenance (engine version, recipe digest, date); on a reference
cell also its tool-call answers (which tools each case of a tool-use suite called)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dayzero import atomic
from dayzero.spec import yamlfile


@dataclass(frozen=True)
class Golden:
    cell: str
    policy: dict
    provenance: dict
    outputs: dict[str, str]
    tool_calls: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # suite -> case -> names
    # Outputs recorded by `dayzero golden record --alternate WHY` on another machine of the kind with
    # the same recipe and engine: each {"outputs": {probe: text}, "provenance": {..., "why": ...}}.
    # A CPU's float rounding (AVX2 against AVX-512 kernels) can turn a near-tie in greedy decoding.
    alternates: list[dict] = field(default_factory=list)
    # Per probe, the recording's log-probabilities, one step per generated token: [token, logprob,
    # [[alternative, logprob], ...]] (dayzero.checks.near_tie): what near-ties are judged by.
    tokens: dict[str, list] = field(default_factory=dict)
    # Per tool-use suite, per case: the first step of the recorded answer (its log-probabilities),
    # what a call / no-call disagreement at a near-tie is judged by (checks.tool_calls).
    tool_tokens: dict[str, dict[str, list]] = field(default_factory=dict)

    def alternatives(self, probe_id: str) -> tuple[tuple[str, dict], ...]:
        """(output, provenance) of each alternate recording that has this probe."""
        return tuple(
            (a["outputs"][probe_id], a.get("provenance") or {})
            for a in self.alternates
            if isinstance(a, dict) and isinstance((a.get("outputs") or {}).get(probe_id), str)
        )


def golden_path(goldens_dir: Path, cell_id: str) -> Path:
    return Path(goldens_dir) / f"{cell_id}.json"


def load_golden(goldens_dir: Path, cell_id: str) -> Golden | None:
    path = golden_path(goldens_dir, cell_id)
    if not path.exists():
        return None
    return Golden(**yamlfile.load(path, "golden"))


def save_golden(goldens_dir: Path, golden: Golden) -> Path:
    doc = {
        k: v
        for k, v in golden.__dict__.items()
        if k not in ("tool_calls", "alternates", "tokens", "tool_tokens") or v
    }
    return atomic.write_json(golden_path(goldens_dir, golden.cell), doc)
