"""Probes and golden policies: pure functions over the text a server returned.

Byte-exact goldens hold only where the engine serves one request at a time; batching changes
greedy output (seen on llama.cpp with 4 slots), so a mode declares its policy: exact,
first_n_tokens, similarity or contains.

A golden keeps its provenance (recipe digest, engine version, where recorded); a run under
another recipe or engine build is flagged in the golden check (`details.provenance_differs`) and
in the acceptance detail, without changing the verdict: the policy decides what may differ.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from dayzero.checks import FAILED, NOT_MEASURED, PASSED, CheckResult
from dayzero.checks.forced import judge as judge_forced
from dayzero.checks.near_tie import compare_steps, spelled, spells, steps, unpaired_stop
from dayzero.spec.card import GoldenPolicy, Probe
from dayzero.spec.engine_identity import same_engine

TOKEN = re.compile(r"\w+|[^\w\s]")
PRINTABLE_MIN = 0.85
REPETITION_MAX = 0.25


def tokens(text: str) -> list[str]:
    """Word and punctuation pieces: engine-independent, so goldens survive tokenizer changes."""
    return TOKEN.findall(text)


def printable_ratio(text: str) -> float:
    if not text:
        return 0.0
    return sum(ch.isprintable() or ch in "\n\t" for ch in text) / len(text)


def repetition_ratio(text: str, n: int = 5) -> float:
    """Share of the most frequent word n-gram: a looping model scores high."""
    words = tokens(text)
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    if len(grams) < 4:
        return 0.0
    return Counter(grams).most_common(1)[0][1] / len(grams)


def probe_name(probe_id: str) -> str:
    return f"probe:{probe_id}"


def golden_name(probe_id: str) -> str:
    return f"golden:{probe_id}"


def check_probe(probe: Probe, text: str, error: str | None) -> CheckResult:
    name = probe_name(probe.id)
    problems = []
    if error:
        problems.append(f"request failed: {error}")
    else:
        missing = [s for s in probe.expect_contains if s not in text]
        if missing:
            problems.append(f"missing {missing}")
        if (ratio := printable_ratio(text)) <= PRINTABLE_MIN:
            problems.append(f"printable ratio {ratio:.2f} <= {PRINTABLE_MIN}")
        if (rep := repetition_ratio(text)) >= REPETITION_MAX:
            problems.append(f"repetition {rep:.2f} >= {REPETITION_MAX}")
    return CheckResult(
        name,
        "correctness",
        FAILED if problems else PASSED,
        "; ".join(problems) or "ok",
        measured=text,
        bound=list(probe.expect_contains),
    )


def compare(policy: GoldenPolicy, expected: str, actual: str) -> tuple[bool, str]:
    """Apply a golden policy; the message says what differed."""
    if policy.policy == "exact":
        if expected == actual:
            return True, "identical"
        diff = "".join(
            difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "golden", "output", n=1)
        )
        return False, f"differs from golden:\n{diff}"
    if policy.policy == "first_n_tokens":
        want, got = tokens(expected)[: policy.n], tokens(actual)[: policy.n]
        if want == got:
            return True, f"first {policy.n} tokens identical"
        return False, f"first {policy.n} tokens differ: golden {want} vs output {got}"
    if policy.policy == "similarity":
        ratio = difflib.SequenceMatcher(None, expected, actual).ratio()
        ok = ratio >= policy.min_ratio
        return ok, f"similarity {ratio:.2f} {'>=' if ok else '<'} {policy.min_ratio}"
    if policy.policy == "contains":
        ok = expected in actual
        return ok, "golden contained in output" if ok else f"output does not contain {expected!r}"
    raise ValueError(f"unknown golden policy {policy.policy!r}")


def _token_limit(golden: Sequence, n: int) -> int:
    """How many of the golden's engine tokens spell its first `n` word pieces (first_n_tokens):
    the most that spell no more than `n` (a word split over tokens counts once)."""
    k = 0
    while k < len(golden) and len(tokens(spelled(golden[: k + 1]))) <= n:
        k += 1
    return max(k, 1)


def compare_answer(
    policy: GoldenPolicy, expected: str, actual: str, golden_steps: object = None, output_steps: object = None
) -> tuple[bool, str, dict]:
    """The policy's comparison; for exact and first_n_tokens, token by token with near-ties where
    both the golden and the output carry log-probabilities that spell their texts (else by text,
    and the details say why). Log-probabilities that do not spell the output are never used: a
    bundle cannot keep the golden's numbers beside another answer."""
    if policy.by_tokens:
        want, got = steps(golden_steps), steps(output_steps)
        why = (
            "the golden has no log-probabilities (recorded before them)"
            if want is None
            else "the output has no log-probabilities (the engine returns none)"
            if got is None or (not got and actual)
            else "the golden's log-probabilities do not spell its text"
            if not spells(want, expected)
            else "the output's log-probabilities do not spell its text"
            if not spells(got, actual)
            else ""
        )
        if not why:
            want, got = unpaired_stop(want, expected, got, actual)
            limit = None if policy.policy == "exact" else _token_limit(want, policy.n)
            c = compare_steps(
                want, got, near_tie_nats=policy.near_tie_nats, drift_nats=policy.drift_nats, limit=limit
            )
            return c.ok, c.message, {"comparison": "tokens and log-probabilities", **c.details}
        ok, message = compare(policy, expected, actual)
        return ok, message, {"comparison": "text", "why_text": why}
    ok, message = compare(policy, expected, actual)
    return ok, message, {"comparison": "text"}


UNKNOWN = ("", "unknown")


def provenance_differs(recorded: Mapping | None, recipe_digest: str, engine_version: str) -> list[str]:
    """How this run differs from the one its golden was recorded under (empty: the same, or
    nothing known to compare). An unknown version or digest is never compared; engine versions
    are compared as parsed identities (`dayzero.spec.engine_identity`), not as banners."""
    recorded = recorded or {}
    out = []
    for key, label, here, same in (
        ("recipe_digest", "recipe", recipe_digest, str.__eq__),
        ("engine_version", "engine", engine_version, same_engine),
    ):
        then = str(recorded.get(key) or "")
        if then not in UNKNOWN and here not in UNKNOWN and not same(then, here):
            out.append(f"golden recorded under {label} {then}, this run {here}")
    return out


def check_golden(
    policy: GoldenPolicy,
    probe_id: str,
    expected: str | None,
    actual: str,
    provenance: Mapping | None = None,
    *,
    recipe_digest: str = "",
    engine_version: str = "",
    missing: str = FAILED,
    alternates: Sequence[tuple[str, Mapping]] = (),
    golden_steps: object = None,
    output_steps: object = None,
    machine: Mapping | None = None,
    forced: object = None,
    forced_why: str = "",
) -> CheckResult:
    """The output against its golden under the mode's policy; `provenance` (the golden's) is kept
    in the details and compared with this run's recipe digest and engine version. Without a
    golden the verdict is `missing`: failed, or not measured where goldens are recorded later on
    a reference cell (the cell stays Pending). An output that misses the golden but meets one of
    its `alternates` (another machine's recording of the same recipe, with why) passes, naming it.
    `golden_steps`/`output_steps`: both sides' log-probabilities (`compare_answer`); `machine`:
    the one this run's client ran on, kept beside the golden's. `forced`: the engine's scores of
    the golden's text (`dayzero.checks.forced`, teacher forcing), which must also hold; where
    there are none, `forced_why` says why (kept in the details)."""
    name = golden_name(probe_id)
    if expected is None:
        return CheckResult(
            name,
            "correctness",
            missing,
            "golden not recorded" if missing == NOT_MEASURED else "no golden recorded for this probe",
            measured=actual,
            bound=policy.describe(),
        )
    ok, message, details = compare_answer(policy, expected, actual, golden_steps, output_steps)
    details = {"golden": expected, **details}
    if isinstance(machine, Mapping) and machine:
        details["machine"] = dict(machine)
    if not ok:
        for text, recorded in alternates:
            alt_ok, alt_message = compare(policy, text, actual)
            if alt_ok:
                where = recorded.get("why") or recorded.get("host") or "another machine"
                ok, message = True, f"{alt_message} (the alternate golden recorded on {where})"
                details["alternate"] = {"golden": text, "provenance": dict(recorded)}
                break
    if forced is not None:
        forcing = judge_forced(
            expected,
            steps(golden_steps),
            forced,
            max_rank=policy.forced_max_rank,
            mean_nats=policy.forced_mean_nats,
        )
        details["teacher_forced"] = {"ok": forcing.ok, "message": forcing.message, **forcing.details}
        ok, message = ok and forcing.ok, f"{message}; {forcing.message}"
    elif forced_why:
        details["teacher_forced"] = {"ok": None, "message": f"not scored: {forced_why}"}
        message = f"{message}; golden not scored by the engine ({forced_why})"
    if provenance is not None:
        details["golden_provenance"] = dict(provenance)
        if differs := provenance_differs(provenance, recipe_digest, engine_version):
            details["provenance_differs"] = differs
            message = f"{message} ({'; '.join(differs)})"
    bound = policy.describe()
    if forced is not None:
        bound += f"; scored: ranks <= {policy.forced_max_rank}, mean within {policy.forced_mean_nats} nats"
    return CheckResult(
        name,
        "correctness",
        PASSED if ok else FAILED,
        message,
        measured=actual,
        bound=bound,
        details=details,
    )
