"""Cost per million output tokens from a price per accelerator-hour (pure).

A hardware kind of the catalogue (`matrix/hardware.yaml`) may state `price: {per_accelerator_hour,
currency, source}`; a point's cost is that price over the tokens one accelerator produced in an
hour at the point's throughput. No price, or no throughput: no cost (never a guess).
"""

from __future__ import annotations

from dataclasses import dataclass

from dayzero.spec.matrix import Matrix


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
