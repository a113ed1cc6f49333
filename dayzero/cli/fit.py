"""`dayzero fit MODEL`: what fits where, before anyone rents a machine.

The weights at each precision (the card's own, the common community quantizations, or those
asked for), the KV/state cache at the asked context lengths and concurrency from the card's
`architecture:` section, against each hardware kind of the card (the nodes it places a replica
on) and a machine of `--memory`. A field the card leaves null is answered "needs data", naming it.
Each engine of the card is answered on its own (its weights file and cache dtypes differ).
"""

from __future__ import annotations

import json

from dayzero.errors import DayzeroError
from dayzero.spec import fit
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="weights at each precision and KV/state cache against each hardware kind's memory",
        description=__doc__,
    )
    p.add_argument("model", help="a model of the matrix, e.g. kimi-k3.1-pro")
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
        type=int,
        action="append",
        default=[],
        help="tokens per sequence (repeatable; default: 8192, 131072 and the model's context length)",
    )
    p.add_argument("--concurrency", type=int, default=1, help="sequences held at once (default: 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    p.set_defaults(func=run)


def run(args) -> int:
    matrix = load_matrix(args.matrix)
    cards = [(engine, card) for (model, engine), card in matrix.engine_cards.items() if model == args.model]
    if not cards:
        raise DayzeroError(f"unknown model {args.model!r} (models: {', '.join(sorted(matrix.cards))})")
    memory = fit.parse_memory(args.memory) if args.memory else None
    out = {}
    for engine, card in cards:
        got = fit.plan(
            card,
            matrix.hardware,
            precisions=args.precision,
            contexts=args.context,
            concurrency=args.concurrency,
            memory=memory,
        )
        if got is None:
            raise DayzeroError(f"{card.path}: no architecture: section (parameters, layers): nothing to size")
        out[engine] = got
    if args.json:
        print(json.dumps({engine: fit.to_json(f) for engine, f in out.items()}, indent=2))
        return 0
    for i, (engine, f) in enumerate(out.items()):
        if len(out) > 1:
            print(f"{'' if i == 0 else chr(10)}[engine {engine}]")
        print("\n".join(fit.lines(f)))
    return 0
