"""A phase's speculative counters held against its generated tokens and its streamed chunks.

The draft and acceptance counters are the engine's word like every other counter, and the
acceptance length the checker recomputes from them also raises physics' ceiling; so they must
be possible for the tokens the phase generated:

- accepted draft tokens are tokens generated: never more than the generated-token counter's
  difference over the same phase (nor, where it counts them, more than the draft tokens proposed);
- every decode step emits one token of its own plus the drafts it accepted, so generated tokens =
  steps + accepted. Where each streamed chunk carries one step's tokens or more
  (`Engine.streams_whole_steps`: vLLM, SGLang), a phase's records streamed at most as many chunks
  as steps, so accepted <= generated - chunks: an acceptance of ~3.8 tokens a step while the
  records stream one token a chunk is impossible. llama-server streams each token as a chunk of
  its own, so its chunks bound nothing here.

Warm-up requests count in the counters but keep no chunks: leaving their chunks out only loosens
the bound, never refuses an honest run.
"""

from __future__ import annotations

from dayzero.engines.prometheus import SpecCounters

REQUIREMENT = "engine.speculative"


def problems(delta: SpecCounters, generated: float, chunks: int, whole_steps: bool) -> list[tuple[str, str]]:
    """(found, expected) for every way the phase's counter difference `delta` cannot be true of
    `generated` tokens (the server's counter) streamed in `chunks` chunks (the records')."""
    out = []
    if delta.accepted > generated:
        out.append(
            (
                f"{delta.accepted:g} accepted draft tokens",
                f"at most the {generated:g} tokens the phase generated",
            )
        )
    if delta.draft_tokens > 0 and delta.accepted > delta.draft_tokens:
        out.append(
            (
                f"{delta.accepted:g} accepted draft tokens",
                f"at most the {delta.draft_tokens:g} draft tokens proposed",
            )
        )
    if whole_steps and delta.drafts > 0 and delta.accepted > generated - chunks:
        out.append(
            (
                f"{delta.accepted:g} accepted draft tokens in {delta.drafts:g} verification steps"
                f" (accept length {1 + delta.accepted / delta.drafts:.2f})",
                f"at most {max(generated - chunks, 0):g}: {generated:g} tokens generated less the"
                f" {chunks} chunks the records streamed (each chunk is at least one step, and each"
                " step emits one token that is not a draft's)",
            )
        )
    return out
