"""`dayzero fit MODEL` (or `--config config.json`): what fits where, before anyone rents a machine.

The weights at each precision (the card's own, the common community quantizations, or those
asked for), the KV/state cache at the asked context lengths and concurrency, one rank's share
under the layout, against the memory the engine may use on each hardware kind of the card (the
nodes it places a replica on) or each `--on` target (`h100`, `8xh200`, `mac=64GiB`), with the
headroom left. A field the card leaves null is answered "needs data", naming it. Each engine of
the card is answered on its own (its weights file, cache flags and reserve differ).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from dayzero.errors import DayzeroError
from dayzero.spec import fit, hfconfig, sizing
from dayzero.spec.matrix import load_matrix


def _count(text: str):  # an argparse type, not a status: no `-> int` (tests/test_readme.py reads those)
    """A size that must be at least 1 (a context of 0 tokens sizes nothing): else bad input, 2."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def _bad_input(args, matrix) -> str:
    """Why an option's value cannot be read, or "": bad input exits 2, as the verbs' table says."""
    try:
        for target in args.on:
            fit.parse_on(target, matrix.hardware)
        if args.memory:
            fit.parse_memory(args.memory)
        for name in args.precision:
            fit.precision(name)
    except DayzeroError as exc:
        return str(exc)
    if args.model and not args.config and args.model not in matrix.cards:
        return f"unknown model {args.model!r} (models: {', '.join(sorted(matrix.cards))})"
    return ""


def add(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="weights at each precision and KV/state cache against each hardware kind's memory",
        description=__doc__,
    )
    p.add_argument("model", nargs="?", help="a model of the matrix, e.g. kimi-k3.1-pro")
    p.add_argument("--config", help="a Hugging Face config.json to size instead of a card (a file)")
    p.add_argument("--engine", help="with --config: the engine whose cache flags and reserve apply (vllm)")
    p.add_argument("--flags", default="", help="with --config: engine flags, e.g. '--kv-cache-dtype fp8'")
    p.add_argument(
        "--on",
        action="append",
        default=[],
        help="a target (repeatable): KIND, COUNTxKIND or KIND=MEMORY, e.g. h100, 8xh200, mac=64GiB "
        "(default: the card's kinds, the nodes it places a replica on)",
    )
    p.add_argument("--mode", help="judge one rank of this mode's parallel sizes (the card's `parallel:`)")
    for flag, what in (("--tp", "tensor"), ("--ep", "expert"), ("--pp", "pipeline")):
        p.add_argument(
            flag, type=_count, help=f"{what} parallel size (default: TP over a target's accelerators)"
        )
    p.add_argument("--memory", help="a machine's memory to fit into, e.g. 64GB or 96GiB (a Mac Mini: 64GB)")
    p.add_argument(
        "--precision",
        action="append",
        default=[],
        help=f"only these precisions (repeatable; {', '.join(fit.PRECISIONS)}); "
        "default: the card's own and the 4/3/2-bit community GGUF ones",
    )
    p.add_argument(
        "--context",
        type=_count,
        action="append",
        default=[],
        help="tokens per sequence (repeatable; default: 8192, 131072 and the model's context length)",
    )
    p.add_argument("--concurrency", type=_count, default=1, help="sequences held at once (default: 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    p.set_defaults(func=run)


def _layout(args, card=None) -> fit.Layout | None:
    """`--tp/--ep/--pp`, else the `--mode`'s `parallel` sizes in the card, else None (TP over all)."""
    sizes = {}
    if card is not None and args.mode:
        if args.mode not in card.raw["modes"]:
            raise DayzeroError(
                f"--mode {args.mode}: not a mode of {card.path} ({', '.join(card.raw['modes'])})"
            )
        sizes = card.raw["modes"][args.mode].get("parallel") or {}
    tp, ep, pp = (args.tp or sizes.get("tp"), args.ep or sizes.get("ep"), args.pp or sizes.get("pp"))
    if not (tp or ep or pp):
        return None
    return fit.Layout(tp or 1, ep or 1, pp or 1)


def _from_config(args, matrix) -> dict:
    cfg = hfconfig.read(args.config)
    arch = sizing.from_card(hfconfig.architecture(cfg, args.config))
    targets = [fit.parse_on(t, matrix.hardware) for t in args.on]
    if args.memory:
        memory = fit.parse_memory(args.memory)
        targets.insert(0, fit.Target("machine", memory, 1, f"a {memory / fit.GB:.4g} GB machine"))
    if not targets:
        raise DayzeroError("--config: name what to fit into: --on KIND (--on h100, --on 8xh200) or --memory")
    if layout := _layout(args):
        targets = [replace(t, layout=layout) for t in targets]
    got = fit.plan_arch(
        _name(Path(args.config)),
        arch,
        targets,
        memory=fit.engine_memory(args.engine),
        argv=shlex.split(args.flags),
        precisions=args.precision or ["bf16", "fp8"],
        contexts=args.context,
        concurrency=args.concurrency,
    )
    return {args.engine or "any engine": got}


def _name(path: Path) -> str:
    """A config's model: its folder's name for a checkpoint's `config.json`, else the file's stem."""
    return path.resolve().parent.name if path.stem == "config" else path.stem


def run(args) -> int:
    matrix = load_matrix(args.matrix)
    if why := _bad_input(args, matrix):
        print(f"dayzero: {why}", file=sys.stderr)
        return 2
    if args.config:
        out = _from_config(args, matrix)
    elif not args.model:
        raise DayzeroError("name a model of the matrix or give --config config.json")
    else:
        out = _from_card(args, matrix)
    if args.json:
        print(json.dumps({engine: fit.to_json(f) for engine, f in out.items()}, indent=2))
        return 0
    for i, (engine, f) in enumerate(out.items()):
        if len(out) > 1 or args.config:
            print(f"{'' if i == 0 else chr(10)}[engine {engine}]")
        print("\n".join(fit.lines(f)))
    return 0


def _from_card(args, matrix) -> dict:
    cards = [(engine, card) for (model, engine), card in matrix.engine_cards.items() if model == args.model]
    if not cards:
        raise DayzeroError(f"unknown model {args.model!r} (models: {', '.join(sorted(matrix.cards))})")
    memory = fit.parse_memory(args.memory) if args.memory else None
    on = [fit.parse_on(t, matrix.hardware) for t in args.on]
    out = {}
    for engine, card in cards:
        got = fit.plan(
            card,
            matrix.hardware,
            precisions=args.precision,
            contexts=args.context,
            concurrency=args.concurrency,
            memory=memory,
            on=on,
            layout=_layout(args, card),
        )
        if got is None:
            raise DayzeroError(f"{card.path}: no architecture: section (parameters, layers): nothing to size")
        out[engine] = got
    return out
