"""Anti-gaming on one measurement's raw records: what makes a run look faster than the server is.

MLPerf's compliance ideas (TEST06, TEST09) restated for HTTP serving: outputs shorter than asked,
token counts the stream does not support, runs of end-of-sequence markers, inputs of other lengths.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from dayzero.checks.metrics import completed, output_tokens
from dayzero.spec.card import Compliance


def trailing_eos(text: str, eos: Iterable[str]) -> int:
    """How many end-of-sequence markers the text ends with."""
    count, changed = 0, True
    while changed:
        changed = False
        for marker in eos:
            if marker and text.endswith(marker):
                text, count, changed = text[: -len(marker)].rstrip(), count + 1, True
    return count


def compliance_findings(records: Sequence[Mapping], exact_output: bool, rules: Compliance) -> list[str]:
    """What makes a run look faster than the server is: short outputs, inflated counts, EOS runs."""
    done = completed(records)
    if not done:
        return []
    findings = []
    if exact_output:
        requested = sum(r["max_tokens"] for r in done) / len(done)
        got = sum(output_tokens(r) for r in done) / len(done)
        if abs(got - requested) > rules.length_tolerance * requested:
            findings.append(
                f"mean output {got:.1f} tokens vs {requested:.1f} requested "
                f"({(got / requested - 1):+.0%}, tolerance +-{rules.length_tolerance:.0%})"
            )
    with_usage = [r for r in done if (r.get("usage") or {}).get("completion_tokens") is not None]
    if with_usage:
        reported = sum(r["usage"]["completion_tokens"] for r in with_usage)
        chunks = sum(len(r.get("chunks") or ()) for r in with_usage)
        ceiling = chunks * rules.tokens_per_chunk_max * (1 + rules.chunk_tolerance)
        if reported > ceiling + 1:
            findings.append(
                f"server reports {reported} output tokens but streamed only {chunks} content chunks "
                f"(at most {rules.tokens_per_chunk_max:g} token(s) per chunk allowed)"
            )
        elif chunks > reported * (1 + rules.chunk_tolerance) + 1:
            findings.append(f"streamed {chunks} content chunks but the server reports only {reported} tokens")
    sized = [r for r in done if r.get("input_len") and (r.get("usage") or {}).get("prompt_tokens")]
    off = [
        r for r in sized if abs(r["usage"]["prompt_tokens"] - r["input_len"]) > max(2, 0.01 * r["input_len"])
    ]
    if off:
        r = off[0]
        findings.append(
            f"{len(off)} request(s) with input length off the workload's "
            f"(e.g. {r['usage']['prompt_tokens']} tokens for {r['input_len']} requested)"
        )
    eos_runs = [r for r in done if trailing_eos(r.get("text") or "", rules.eos) > 1]
    if eos_runs:
        findings.append(
            f"{len(eos_runs)} output(s) end with more than one EOS marker (e.g. {eos_runs[0]['id']})"
        )
    return findings
