"""What a new model's card starts from for an engine (`dayzero card new`): the engine's own data.

The engine section (name, the release dayzero's build installs and lint reads, health path,
multi-node arguments) and a server command with the placeholders every card fills, plus the
accelerator vendors the engine has a backend for: a card written for another vendor's kind
names it unsupported with that reason, never a guessed command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CardTemplate:
    engine: Mapping = field(default_factory=dict)  # the card's `engine:` section
    recipe: Mapping = field(default_factory=dict)  # the card's `recipe:` section
    vendors: tuple[str, ...] = ()  # the catalogue's vendors it serves (`any`: the host's CPU)
    multinode: bool = True  # a replica may span nodes (the engine section's multinode_args)
    source: str = ""  # where the command comes from
    # Each mode's args, `{concurrency}` and `{context}` (the mode's concurrency x the sequence the
    # card is sized for) filled in when the card is written: an engine whose slots are set by hand.
    mode_args: tuple[str, ...] = ()
    # The weights' form: "" the checkpoint's directory ({model_root}/<model>); a suffix such as
    # ".gguf" names one file converted from it ({model_root}/<model>.gguf).
    weights_suffix: str = ""
