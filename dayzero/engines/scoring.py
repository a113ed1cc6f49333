"""What the engines that can score a given text share: the chat request that hands an engine the
golden's answer as the assistant's turn, left open (teacher forcing, `dayzero.checks.forced`)."""

from __future__ import annotations

from collections.abc import Mapping


def forced_chat(prompt: str, continuation: str) -> dict:
    """A chat body whose rendered prompt ends with `continuation`: the assistant's turn continued,
    not closed (vLLM's and SGLang's `continue_final_message`), one token generated."""
    return {
        "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": continuation}],
        "continue_final_message": True,
        "add_generation_prompt": False,
        "max_tokens": 1,
    }


def rank_in(token: str, logprob: float, top: Mapping[str, float] | None) -> int:
    """A token's rank among the top-k an engine returned (1: its own choice), k + 1 past them."""
    top = top or {}
    if token not in top:
        return len(top) + 1
    return 1 + sum(v > logprob for v in top.values())
