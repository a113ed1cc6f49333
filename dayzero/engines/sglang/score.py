"""SGLang scores a given text in two calls: the chat template rendered by a chat completion
continuing the assistant's turn (`return_prompt_token_ids`: its chat API returns no prompt
log-probabilities), then those token ids sent to `/v1/completions` with `echo` and `logprobs`,
which returns each prompt token's log-probability and the top-k beside it (sglang 0.5.23,
serving_completions.py: `logprob_start_len` 0 under echo)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dayzero.engines.scoring import forced_chat, rank_in

PROMPT_IDS = ["choices", 0, "prompt_token_ids"]


def calls(prompt: str, continuation: str, top: int) -> list[dict]:
    return [
        {
            "path": "/v1/chat/completions",
            "body": {**forced_chat(prompt, continuation), "return_prompt_token_ids": True},
        },
        {
            "path": "/v1/completions",
            "body": {"echo": True, "logprobs": top, "max_tokens": 1},
            "prompt_from": PROMPT_IDS,
        },
    ]


def scored(responses: Sequence[Mapping]) -> list[list] | None:
    try:
        n = len(responses[0]["choices"][0]["prompt_token_ids"])
        lp = responses[1]["choices"][0]["logprobs"]
        rows = zip(lp["tokens"][:n], lp["token_logprobs"][:n], lp["top_logprobs"][:n], strict=True)
        # the first token has no log-probability (nothing before it)
        return [
            [token, logprob, rank_in(token, logprob, top)]
            for token, logprob, top in rows
            if logprob is not None
        ]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
