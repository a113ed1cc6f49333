"""`dayzero card`: the benchmark cards (one per model x hardware kind) from the evidence of a run."""

from __future__ import annotations

from pathlib import Path

from dayzero.cli.common import REPORTS
from dayzero.errors import DayzeroError
from dayzero.spec import cardnew
from dayzero.spec.matrix import load_matrix


def add(sub) -> None:
    p = sub.add_parser(
        "card",
        help="write reports/cards/<model>/<kind>.{md,html,json}: sweep table, Pareto, context plot",
        description=__doc__,
    )
    p.add_argument("--reports", default=REPORTS, help=f"a run's reports dir (default: {REPORTS})")
    p.add_argument("--model", action="append", default=[], help="only this model's cards (repeatable)")
    add_prices(p)
    p.add_argument(
        "--history",
        metavar="STORE",
        help="draw each cell's series across nights, change points marked, from this results store "
        "(dayzero history): a SQLite file or postgresql:// DSN",
    )
    p.set_defaults(func=run)
    verbs = p.add_subparsers(dest="card_verb", metavar="{new}")
    new = verbs.add_parser(
        "new",
        help="write a new model's card from its config.json: architecture, kinds that fit, recipes",
        description=cardnew.__doc__,
    )
    new.add_argument(
        "--config", required=True, type=Path, help="the model's Hugging Face config.json (a file)"
    )
    new.add_argument("--model", help="the card's model name (default: the config's folder, else file, name)")
    new.add_argument(
        "--engine",
        action="append",
        default=[],
        help="engines to write recipes for, the first at the top level "
        "(repeatable; default: every engine with a card template that serves one of the kinds)",
    )
    new.add_argument(
        "--hardware",
        action="append",
        default=[],
        help="only these kinds (repeatable; default: where it fits)",
    )
    new.add_argument("--out", type=Path, help="where to write it (default: MATRIX/models/MODEL.yaml)")
    new.add_argument("--force", action="store_true", help="replace a card already there")
    new.set_defaults(func=run_new)


def run_new(args) -> int:
    """Write the card; 2 (a usage error) where one is there already and --force is not given."""
    from dayzero import engines
    from dayzero.cli.fit import _name
    from dayzero.spec import hfconfig

    matrix = load_matrix(args.matrix)
    cfg = hfconfig.read(args.config)
    model = args.model or _name(args.config).lower()
    names = args.engine or [n for n, e in engines.registered().items() if e.card_template]
    templates = {}
    for name in names:
        engine = engines.get(name)
        if engine.card_template is None:
            raise DayzeroError(f"--engine {name}: its module has no card template (Engine.card_template)")
        templates[name] = engine.card_template
    unknown = [k for k in args.hardware if k not in matrix.hardware]
    if unknown:
        raise DayzeroError(
            f"--hardware {unknown[0]}: not a kind of the catalogue ({', '.join(matrix.hardware)})"
        )
    if not args.engine:  # the engines that serve one of the kinds (llama.cpp's build is the CPU's)
        templates = {n: templates[n] for n in cardnew.serving(templates, matrix.hardware, args.hardware)}
    data = cardnew.card(model, cfg, str(args.config), matrix.hardware, templates, args.hardware)
    out = args.out or Path(args.matrix) / "models" / f"{model}.yaml"
    if out.exists() and not args.force:
        raise DayzeroError(f"{out}: a card is there already (--force replaces it)")
    first = templates[next(iter(templates))]
    out.write_text(cardnew.text(model, data, cfg, str(args.config), matrix.hardware, first))
    print(f"card: {out}")
    return 0


def add_prices(p) -> None:
    p.add_argument(
        "--prices",
        help="the lab's prices per accelerator-hour (YAML, `prices: {<kind>: {per_accelerator_hour, "
        "currency, source, date}}`; e.g. hosts/prices.example.yaml): cost per 1M tokens on every card; "
        "a kind it names replaces the catalogue's price",
    )


def run(args) -> int:
    store = None
    if args.history:
        from dayzero.history.store import open_store

        store = open_store(args.history)
    try:
        for path in write(args.matrix, Path(args.reports), args.model, args.prices, store):
            print(f"card: {path}")
    finally:
        if store is not None:
            store.close()
    return 0


def write(
    matrix_dir: str, reports: Path, models=(), prices_file: str | None = None, history=None
) -> list[Path]:
    from dayzero.report.benchcard import write_cards
    from dayzero.report.cost import load_prices, prices

    matrix = load_matrix(matrix_dir)
    price_of = {**prices(matrix), **load_prices(Path(prices_file), matrix)} if prices_file else None
    return write_cards(matrix, reports, models, price_of, history)
