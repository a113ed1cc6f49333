"""Cost per million output tokens from a price per accelerator-hour.

A hardware kind of the catalogue (`matrix/hardware.yaml`) may state `price: {per_accelerator_hour,
currency, source}`; a lab's own prices come from a `--prices` file (`load_prices`; an example of
public on-demand prices in hosts/prices.example.yaml), which replaces the catalogue's. A point's
cost is that price over the tokens one accelerator produced in an hour at the point's throughput.
No price, or no throughput: no cost (never a guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dayzero.errors import ConfigError
from dayzero.spec import yamlfile
from dayzero.spec.matrix import Matrix
from dayzero.spec.suggest import did_you_mean


@dataclass(frozen=True)
class Price:
    per_accelerator_hour: float
    currency: str = "USD"
    source: str = ""


def per_million_tokens(price: Price | None, tok_s_per_accelerator: float | None) -> float | None:
    """price/h / (tok/s x 3600 s/h) x 10^6 tokens."""
    if price is None or not tok_s_per_accelerator or tok_s_per_accelerator <= 0:
        return None
    return round(price.per_accelerator_hour / (tok_s_per_accelerator * 3600) * 1e6, 4)


def prices(matrix: Matrix) -> dict[str, Price]:
    """The catalogue's prices by hardware kind."""
    return {
        kind: Price(
            float(h.price["per_accelerator_hour"]), h.price.get("currency", "USD"), h.price.get("source", "")
        )
        for kind, h in matrix.hardware.items()
        if h.price
    }


def load_prices(path: Path, matrix: Matrix) -> dict[str, Price]:
    """A lab's prices file: `prices: {<kind>: {per_accelerator_hour, currency, source, date}}`;
    a kind the catalogue does not know is an error naming it."""
    data = yamlfile.load(Path(path), "prices")
    out = {}
    for kind, p in data["prices"].items():
        if kind not in matrix.hardware:
            why = (
                f"unknown hardware kind {kind!r}{did_you_mean(kind, matrix.hardware)} (matrix/hardware.yaml)"
            )
            raise ConfigError(path, f"prices.{kind}", why)
        source = f"{p['source']}, read {p['date']}, from {Path(path).name}"
        out[kind] = Price(float(p["per_accelerator_hour"]), p["currency"], source)
    return out
