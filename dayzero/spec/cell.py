"""The cell, the unit of a run: its own module so that the model card (which selects its rules
by cell) and the matrix (which expands cards into cells) can both name it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    """One (model, hardware, mode, strategy[, options]) combination."""

    model: str
    hardware: str
    mode: str
    strategy: str
    options: tuple[str, ...] = ()
    published: str = "pending"  # verified | pending | unsupported, as its authors published it
    reason: str = ""  # why a cell is unsupported
    nodes: int = 1
    # The engine axis: set only where the card serves this hardware kind with several engines
    # (smollm2 on cpu: llama.cpp and sglang); the id and the markers then carry it.
    engine: str = ""

    def __repr__(self) -> str:
        """The id: allure-pytest hashes parameter reprs into a test's history id, which must not
        change when a cell's published status does."""
        return f"Cell({self.id})"

    @property
    def id(self) -> str:
        strategy = "+".join((self.strategy, *self.options))
        return f"{self.model}/{self.kind}/{self.mode}/{strategy}"

    @property
    def kind(self) -> str:
        """The hardware segment of the id: `cpu`, or `cpu+sglang` where the engine is an axis."""
        return f"{self.hardware}+{self.engine}" if self.engine else self.hardware

    @property
    def markers(self) -> tuple[str, ...]:
        engine = (self.engine,) if self.engine else ()
        return (self.model, self.hardware, *engine, self.mode, self.strategy, *self.options)

    @property
    def supported(self) -> bool:
        return self.published != "unsupported"
