"""Inputs tied to the workload: each record asked for the prompt the checker regenerates.

The request plan (`dayzero.run.plan`) rebuilds every phase's requests from the workload's name
and seed; each record must carry the digest of its request's prompt (`prompt_digest`, written by
the host client since its version 4), a random workload's records its input length, and the
server's prompt token count must fit that length. Where no length is known without the model's
tokenizer (chat prompts), one prompt is counted alike every time a cell sends it. A record
checked only against itself would let a vendor send shorter prompts and say they were long.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from dayzero.loadgen.client import prompt_digest
from dayzero.submission.antigaming import repetitions
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.cellview import CellView, Unrecomputable, views
from dayzero.submission.findings import Finding, short

DIGESTS_SINCE = 4  # the host client's first version that writes prompt_digest


@dataclass(frozen=True)
class Asked:
    """What the workload asked of one record: its prompt's digest, its input length if known."""

    digest: str
    input_len: int | None
    turn: int | None = None


def asked(requests: list[dict]) -> dict[str, Asked]:
    """Record id -> what was asked, as the client names records (a session's turn: `<id>/t<k>`)."""
    out = {}
    for req in requests:
        if "turns" in req:
            for k in range(len(req["turns"])):
                out[f"{req['id']}/t{k}"] = Asked(prompt_digest(req, k), None, k)
        else:
            out[req["id"]] = Asked(prompt_digest(req), req.get("input_len"))
    return out


def length_slack(n: int) -> float:
    """A server may count a token or two more (BOS, template): the harness's compliance rule."""
    return max(2, 0.01 * n)


def phases(view: CellView) -> Iterator[tuple[str, dict, dict[str, Asked]]]:
    """(records file, answer, what was asked) for every phase whose requests the plan regenerates."""
    for m in view.loads:
        for rep, rel, answer in repetitions(view, m):
            yield rel, answer, asked(m.requests(rep))
    for plan in (view.probes, *view.gates, *view.speculative, *view.tool_calls):
        try:
            rel, answer = view.answer(plan.phase)
        except Unrecomputable:
            continue
        yield rel, answer, asked(plan.requests())


def _completed(r: dict) -> bool:
    return bool(r.get("end")) and not r.get("error")


def _prompt_tokens(r: dict):
    return (r.get("usage") or {}).get("prompt_tokens")


def length_problem(r: dict, want: Asked) -> str:
    if want.input_len is None:
        return ""
    if r.get("input_len") != want.input_len:
        return f"input_len {short(r.get('input_len'))}, the workload asked {want.input_len}"
    if not _completed(r):
        return ""
    counted = _prompt_tokens(r)
    if not isinstance(counted, int):
        return f"no usage.prompt_tokens for a prompt of {want.input_len} tokens"
    if abs(counted - want.input_len) > length_slack(want.input_len):
        return f"the server counted {counted} prompt tokens, the workload asked {want.input_len}"
    return ""


class PromptCounts:
    """How a cell's server counted each prompt the first time it was sent (digest -> count)."""

    def __init__(self):
        self.first: dict[str, tuple[int, str, str]] = {}  # digest -> (prompt tokens, record, file)

    def note(self, digest: str, tokens: int, rid: str, rel: str) -> str:
        """'' when the prompt was counted as before, else what differs."""
        seen = self.first.setdefault(digest, (tokens, rid, rel))
        if seen[0] == tokens:
            return ""
        return f"{tokens} prompt tokens, {seen[0]} for the same prompt as {short(seen[1], 60)} in {seen[2]}"


def _finding(rel: str, requirement: str, bad: list[tuple[str, str]], expected: str) -> list[Finding]:
    if not bad:
        return []
    rid, problem = bad[0]
    return [Finding(rel, requirement, f"{len(bad)} record(s), e.g. {short(rid, 60)}: {problem}", expected)]


def check_inputs(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for view in views(s, ref):
        counts = PromptCounts()
        for rel, answer, wanted in phases(view):
            version = (answer.get("client") or {}).get("version")
            if not isinstance(version, int) or version < DIGESTS_SINCE:
                out.append(
                    Finding(
                        rel,
                        "inputs.client-version",
                        f"host client version {short(version)} (records without prompt digests)",
                        f"version {DIGESTS_SINCE} or later",
                    )
                )
                continue
            digests, lengths, recounted = [], [], []
            for r in answer["records"]:
                want = wanted.get(r["id"])
                if want is None:
                    continue  # a request the workload never asked: antigaming.workload's finding
                if r.get("prompt_digest") != want.digest:
                    digests.append((r["id"], f"prompt_digest {short(r.get('prompt_digest'), 20)}"))
                if problem := length_problem(r, want):
                    lengths.append((r["id"], problem))
                tokens = _prompt_tokens(r)
                if want.turn not in (None, 0) or not _completed(r) or not isinstance(tokens, int):
                    continue  # later turns carry the server's own answers: their length is not the workload's
                if problem := counts.note(want.digest, tokens, r["id"], rel):
                    recounted.append((r["id"], problem))
            out += _finding(rel, "inputs.digest", digests, "the digest of the prompt regenerated")
            out += _finding(rel, "inputs.length", lengths, "the input length the workload regenerates")
            out += _finding(rel, "inputs.length", recounted, "one prompt counted alike every time it is sent")
    return out


CHECKS = (check_inputs,)
