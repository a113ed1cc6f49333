"""A new model's first card from its config.json (`dayzero card new`): what is known, nothing invented.

The architecture from the config (`hfconfig`); the hardware kinds where the checkpoint's weights
and one 8k-token sequence fit a rank, with the nodes `fit` says a replica needs; the other kinds
unsupported with the reason (no backend of the engine for that vendor, too many nodes, memory not
in the catalogue); one recipe per engine from the engine's own template (`Engine.card_template`),
the first at the top level, the others as `engines:` entries (with their own weights and modes
where the template's differ: llama.cpp's GGUF and slots); two modes, a baseline strategy, a
concurrency sweep on a random 1k/1k workload. Floors are left to be measured: none is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from dayzero.engines.template import CardTemplate
from dayzero.spec import fit, hfconfig, sizing

NEEDS_DATA = "fit needs data"
HOST_VENDORS = ("any", "Apple")  # the host's own CPU or unified memory: a card names them (--hardware)
MAX_NODES = 2  # beyond this a kind is listed unsupported with the nodes it would need
CONTEXT = 8192
SWEEP_WORKLOAD = "random-1k-1k"
MODES = {
    "low_latency": {"description": "one request at a time", "concurrency": 1},
    "balanced": {"description": "a moderate batch", "concurrency": 16},
}


@dataclass(frozen=True)
class Placement:
    kind: str
    nodes: int | None  # None: unsupported
    reason: str  # why unsupported, or what fit said


def checkpoint_precision(cfg: Mapping) -> str:
    """The precision the checkpoint's weights are stored at: its quantization_config, else bf16."""
    method = str((cfg.get("quantization_config") or {}).get("quant_method") or "").lower()
    return method if method in sizing.PRECISIONS else "bf16"


def place(
    arch: sizing.Architecture, precision: str, hardware: Mapping, template: CardTemplate
) -> list[Placement]:
    """Each kind of the catalogue: the nodes a replica needs there, or why the card skips it."""
    p = sizing.PRECISIONS[precision]
    out = []
    for kind, hw in hardware.items():
        if template.vendors and hw.vendor not in template.vendors:
            out.append(
                Placement(
                    kind, None, f"{template.engine['name']} has no backend for {hw.vendor} accelerators"
                )
            )
            continue
        target = fit.kind_target(kind, hw)
        if target.capacity is None or not hw.accelerators_per_node:
            out.append(Placement(kind, None, f"{NEEDS_DATA}: matrix/hardware.yaml hardware.{kind}.memory_gb"))
            continue
        target = replace(target, per_node=hw.accelerators_per_node)
        room, _ = fit.usable(target, fit.engine_memory(template.engine["name"]), ())
        dtypes = fit.cache_dtypes((), fit.engine_memory(template.engine["name"]), arch.dtype)
        v = fit.judge(target, p, arch, dtypes, CONTEXT, 1, room)
        nodes = v.nodes_needed
        weights = sizing.weights_bytes(arch, p) / fit.GB
        if nodes is None or nodes > MAX_NODES:
            out.append(
                Placement(
                    kind,
                    None,
                    f"{precision} weights ({weights:.4g} GB) and an {CONTEXT}-token sequence "
                    f"need more than {MAX_NODES} nodes of {kind}",
                )
            )
        elif nodes > 1 and not template.multinode:
            out.append(
                Placement(
                    kind, None, f"needs {nodes} nodes of {kind}; {template.source} has no multi-node launch"
                )
            )
        else:
            out.append(Placement(kind, nodes, f"{precision} fits {nodes} node(s) ({v.layout} a node)"))
    return out


def serving(templates: Mapping[str, CardTemplate], hardware: Mapping, kinds: Sequence[str]) -> list[str]:
    """The engines whose template serves one of the kinds (`kinds`, else every accelerator kind):
    `card new`'s engines when none is named, so a GPU model's card does not lead with an engine
    dayzero builds for the CPU only, and SmolLM2's on `cpu` leads with llama.cpp as the shipped one."""
    chosen = kinds or [k for k, hw in hardware.items() if hw.vendor not in HOST_VENDORS]
    return [
        name
        for name, t in templates.items()
        if not t.vendors or any(hardware[k].vendor in t.vendors for k in chosen if k in hardware)
    ]


def _modes(template: CardTemplate) -> dict:
    """The card's modes, each with the template's `mode_args` where it has some."""
    return {
        name: {
            **mode,
            **(
                {
                    "args": [
                        a.format(concurrency=mode["concurrency"], context=mode["concurrency"] * CONTEXT)
                        for a in template.mode_args
                    ]
                }
                if template.mode_args
                else {}
            ),
        }
        for name, mode in MODES.items()
    }


def _section(
    template: CardTemplate,
    placements: Sequence[Placement],
    kinds: Sequence[str],
    asked: bool,
    model: str,
) -> dict:
    """One engine's part of the card: engine, recipe, hardware, modes, cells, unsupported. A kind
    asked for whose memory the catalogue lacks is served on one node (fit cannot say)."""
    chosen = [
        replace(pl, nodes=1) if asked and pl.nodes is None and pl.reason.startswith(NEEDS_DATA) else pl
        for pl in placements
        if pl.kind in kinds
    ]
    hardware = {pl.kind: {"nodes": pl.nodes or 1} for pl in chosen}
    unsupported = [{"when": {"hardware": pl.kind}, "reason": pl.reason} for pl in chosen if pl.nodes is None]
    section = {
        "engine": dict(template.engine),
        "weights": "{model_root}/" + model + template.weights_suffix,
        "recipe": dict(template.recipe),
        "hardware": hardware,
        "modes": _modes(template),
        "strategies": {"baseline": {"description": "the recipe as written"}},
        "cells": [{"hardware": list(hardware), "modes": list(MODES), "strategies": ["baseline"]}],
    }
    if unsupported:
        section["unsupported"] = unsupported
    return section


def card(
    model: str,
    cfg: Mapping,
    source: str,
    hardware: Mapping,
    templates: Mapping[str, CardTemplate],
    kinds: Sequence[str] = (),
) -> dict:
    """The card's data: the first engine's section at the top level, the others under `engines:`.
    `kinds`: the hardware kinds to write (default: every accelerator kind of the catalogue, those
    where it does not fit or no engine serves it as unsupported cells with the reason)."""
    arch_data = hfconfig.architecture(cfg, source=source)
    arch = sizing.from_card(arch_data)
    precision = checkpoint_precision(cfg)
    placed = {name: place(arch, precision, hardware, t) for name, t in templates.items()}
    asked = bool(kinds)
    if not asked:
        kinds = [k for k, hw in hardware.items() if hw.vendor not in HOST_VENDORS]
    sections = {name: _section(t, placed[name], kinds, asked, model) for name, t in templates.items()}
    first, *others = sections
    top = sections[first]
    out = {
        "model": model,
        "display_name": model,
        "source": source,
        **{k: v for k, v in top.items() if k not in ("modes", "strategies")},
        "architecture": arch_data,
        "modes": sections[first]["modes"],
        "strategies": sections[first]["strategies"],
        "workloads": {SWEEP_WORKLOAD: {"from": "random", "isl": 1024, "osl": 1024}},
        "sweeps": [
            {
                "name": "concurrency",
                "kind": "concurrency",
                "workload": SWEEP_WORKLOAD,
                "points": [1, 4, 16, 64],
            }
        ],
    }
    if others:  # an entry replaces the top level's weights and modes only where its own differ
        out["engines"] = {
            name: {
                k: v
                for k, v in sections[name].items()
                if k != "strategies" and (k not in ("modes", "weights") or v != top[k])
            }
            for name in others
        }
    return out


HEADER = """\
# {model}: written by `dayzero card new --config {source}` from the model's config.json.
# What is known is filled in: the architecture (dayzero fit sizes it), the kinds where the
# checkpoint's {precision} weights and one {context}-token sequence fit with the nodes a replica needs,
# the other kinds unsupported with the reason, each engine's recipe from its own template.
# Floors: to be measured (dayzero calibrates them from measured runs; none is invented here).
# Goldens: `dayzero golden record` on a first cell once it runs. Check it: dayzero lint --model {model}
"""


PRECISIONS = ("bf16", "fp8")  # besides the checkpoint's own, in the card's fit table


def fit_table(
    arch: sizing.Architecture, precision: str, hardware: Mapping, template: CardTemplate
) -> list[str]:
    """Per kind the engine serves, the nodes a replica needs at each precision and its layout."""
    names = list(dict.fromkeys((precision, *PRECISIONS)))
    placed = {p: {pl.kind: pl for pl in place(arch, p, hardware, template)} for p in names}
    out = []
    for kind, hw in hardware.items():
        if template.vendors and hw.vendor not in template.vendors:
            continue
        cells = []
        for p in names:
            pl = placed[p][kind]
            if pl.nodes == 1:
                cells.append(f"{p} TP{smallest_tp(arch, p, kind, hw, template)} of a node")
            elif pl.nodes:
                cells.append(f"{p} {pl.nodes} nodes, TP{pl.nodes * hw.accelerators_per_node}")
            else:
                cells.append(f"{p} needs data" if pl.reason.startswith(NEEDS_DATA) else f"{p} no")
        out.append(f"#   {kind}: " + "; ".join(cells))
    return out


def smallest_tp(arch: sizing.Architecture, precision: str, kind: str, hw, template: CardTemplate) -> int:
    """The fewest accelerators of one node (a power of two) whose ranks hold weights and an 8k
    sequence: what a mode's `parallel: {tp: N}` may ask for."""
    memory = fit.engine_memory(template.engine["name"])
    dtypes = fit.cache_dtypes((), memory, arch.dtype)
    tp = 1
    while tp < hw.accelerators_per_node:
        target = fit.kind_target(kind, hw, tp)
        room, _ = fit.usable(target, memory, ())
        if fit.judge(target, sizing.PRECISIONS[precision], arch, dtypes, CONTEXT, 1, room).word == "fits":
            break
        tp *= 2
    return min(tp, hw.accelerators_per_node)


def text(
    model: str, data: Mapping, cfg: Mapping, source: str, hardware: Mapping, template: CardTemplate
) -> str:
    """The card as YAML, with the header saying what was filled in and what is left to measure,
    and the fit of each kind at each precision (the first engine's reserve)."""
    import yaml

    precision = checkpoint_precision(cfg)
    head = HEADER.format(model=model, source=source, precision=precision, context=CONTEXT)
    table = fit_table(sizing.from_card(data["architecture"]), precision, hardware, template)
    head += (
        f"# Where a replica fits (weights and one {CONTEXT}-token sequence a rank; dayzero fit {model}):\n"
    )
    return (
        head
        + "\n".join(table)
        + "\n"
        + yaml.safe_dump(dict(data), sort_keys=False, width=100, default_flow_style=None)
    )
