"""vLLM scores a given text in one call: a chat completion continuing the assistant's turn with
`prompt_logprobs` (each prompt token's log-probability and its exact rank over the vocabulary)
and `return_token_ids` (which entry is the prompt's own token). Not streamed: vLLM refuses
prompt log-probabilities on a stream (vllm 0.32.0, chat_completion/protocol.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dayzero.engines.scoring import forced_chat


def calls(prompt: str, continuation: str, top: int) -> list[dict]:
    body = {**forced_chat(prompt, continuation), "prompt_logprobs": top, "return_token_ids": True}
    return [{"path": "/v1/chat/completions", "body": body}]


def scored(responses: Sequence[Mapping]) -> list[list] | None:
    try:
        answer = responses[0]
        out = []
        for token_id, entry in zip(answer["prompt_token_ids"], answer["prompt_logprobs"], strict=True):
            if entry is None:  # the first token: nothing before it to score it by
                continue
            own = entry[str(token_id)]
            out.append([own["decoded_token"], own["logprob"], own["rank"]])
        return out
    except (KeyError, IndexError, TypeError, ValueError):
        return None
