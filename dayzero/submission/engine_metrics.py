"""Cross-checks of each phase's records against the server's own counters (its /metrics).

The run reads every engine's `/metrics` just before and just after each phase and keeps both
snapshots next to the phase's records (`records/<phase>.metrics.json`, `dayzero.run.records`);
the counters' difference is what the server says the phase cost it (`dayzero.checks.server_metrics`
names the counters per engine). Each phase must agree with it, within stated tolerances:

- generated tokens: the counter's difference equals the completion tokens of the phase's records
  plus its warm-up requests' (exactly, both ways, even when a request errored: an errored request
  is one the server did not finish, which its log does not count either);
- prompt tokens: llama.cpp's evaluated prompt tokens equal the records' prompt tokens less their
  cached ones; SGLang's and vLLM's prompt tokens equal the records' prompt tokens (exactly);
- requests: the finished-request counter (SGLang's, vLLM's) equals completed records plus warm-up
  requests (llama.cpp publishes no request counter: its log is the request count, `engine_account`);
- time: the server's own time for the phase's requests, summed, is no more than the client's
  end-to-end times summed (plus `TIME_TOLERANCE_S` per request for rounding), and more than
  nothing where tokens were generated;
- speculative counters kept in the records equal those the snapshots give, and are possible for
  the phase's generated tokens and streamed chunks (`speculative_account`).

In a prefill/decode cell the decode servers' counters are the client's account (`decode_side`).

A phase without readable snapshots is a finding: a server-side total that is missing is never
taken as agreement; so is a record or warm-up without a field the totals need (named). Whether
the snapshots could be an account at all (launches, plausible counts) is `snapshots`'. What a
vendor controlling both server and client could still forge is in the README ("Vendor
submissions").
"""

from __future__ import annotations

from dayzero import engines
from dayzero.checks.server_metrics import phase_totals
from dayzero.checks.speculative import from_snapshots
from dayzero.engines.prometheus import Totals
from dayzero.run.records import metrics_for
from dayzero.submission import speculative_account
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.engine_account import CACHED, count_at
from dayzero.submission.findings import Finding, short

TIME_TOLERANCE_S = 0.002  # per request: llama.cpp prints milliseconds, the client microseconds


def _num(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def client_account(answer: dict, kind: str) -> tuple[dict, str]:
    """The phase as the client tells it: token totals, requests and summed end-to-end time of its
    completed records and warm-up requests; '' or the field it lacks to be totalled (a field the
    comparison needs is never taken as zero or skipped)."""
    done = [r for r in answer["records"] if r.get("end") is not None and not r.get("error")]
    out = {"prompt": 0, "cached": 0, "generated": 0, "requests": len(done), "client_s": 0.0}
    for r in done:
        rid = short(r.get("id"), 40)
        for path in ("usage.prompt_tokens", "usage.completion_tokens", CACHED):
            if count_at(r, path) is None and (path != CACHED or engines.get(kind).counts_evaluated_prompt):
                return out, f"record {rid} has no {path}"
        if not (_num(r.get("send")) and _num(r.get("end"))):
            return out, f"record {rid} has no numeric send and end"
        out["prompt"] += r["usage"]["prompt_tokens"]
        out["cached"] += count_at(r, CACHED) or 0
        out["generated"] += r["usage"]["completion_tokens"]
        out["client_s"] += r["end"] - r["send"]
    warm = answer.get("warmup")
    if warm is None:
        return out, ""
    fields = {
        "warmup.requests": warm.get("requests") if isinstance(warm, dict) else None,
        "warmup.errors": warm.get("errors") if isinstance(warm, dict) else None,
        **{
            f"warmup.usage.{k}": count_at(warm, f"usage.{k}")
            for k in ("prompt_tokens", "completion_tokens", "cached_tokens")
        },
        "warmup.e2e_s": warm.get("e2e_s") if isinstance(warm, dict) else None,
    }
    if missing := [k for k, v in fields.items() if not (_num(v) and v >= 0)]:
        return out, f"a warm-up without {missing[0]}"
    out["requests"] += warm["requests"] - warm["errors"]
    out["prompt"] += warm["usage"]["prompt_tokens"]
    out["cached"] += warm["usage"]["cached_tokens"]
    out["generated"] += warm["usage"]["completion_tokens"]
    out["client_s"] += warm["e2e_s"]
    return out, ""


def disagreements(kind: str, server: Totals, client: dict) -> list[tuple[str, str]]:
    """(what the server counted, what the records say) for every counter that disagrees: counts
    exactly, both ways (an errored request is one the server did not finish: its log does not
    count it, nor may its counters); the server's time no more than the client's, and more than
    nothing wherever it generated tokens."""
    out = []

    def compare(what: str, theirs: float | None, mine: float):
        if theirs is None or theirs != mine:
            out.append((f"{'no' if theirs is None else f'{theirs:g}'} {what}", f"{mine:g} from the records"))

    compare("tokens generated", server.generated, client["generated"])
    engine = engines.get(kind)  # what it counts (`Engine.totals`)
    if engine.counts_evaluated_prompt:
        compare("prompt tokens evaluated", server.prompt_evaluated, client["prompt"] - client["cached"])
    else:
        compare("prompt tokens", server.prompt, client["prompt"])
    if engine.counts_requests:
        compare("requests finished", server.requests, client["requests"])
    slack = TIME_TOLERANCE_S * max(client["requests"], 1)
    if server.server_s > client["client_s"] + slack:
        out.append(
            (
                f"{server.server_s:.3f} s of server time for the phase's requests",
                f"at most {client['client_s']:.3f} s, their end-to-end times at the client",
            )
        )
    elif client["generated"] > 0 and not server.server_s > 0:
        out.append(
            (
                f"{server.server_s:g} s of server time for the phase's requests",
                f"more than 0 s: the server generated {client['generated']:g} tokens",
            )
        )
    return out


def counters_problem(kind: str, answer: dict, doc: dict) -> str:
    """The speculative counters the records keep are the snapshots' own ('' when they are)."""
    kept = answer.get("counters")
    if not isinstance(kept, dict):
        return ""
    for when in ("before", "after"):
        mine, theirs = kept.get(when), from_snapshots(kind, doc.get(when))
        theirs = theirs.__dict__ if theirs is not None else None
        if mine != theirs and not (
            isinstance(mine, dict)
            and isinstance(theirs, dict)
            and all(abs(float(mine.get(k, 0)) - v) < 1e-9 for k, v in theirs.items())
        ):
            return f"counters.{when} {short(mine)} in the records, {short(theirs)} from the snapshots"
    return ""


def check_phase(kind: str, rel: str, mrel: str, answer: dict, doc: dict) -> list[Finding]:
    server = phase_totals(kind, doc)
    if server is None:
        return [
            Finding(mrel, "engine.metrics", f"snapshots not readable as {kind} /metrics", "readable counters")
        ]
    client, why = client_account(answer, kind)
    if why:
        return [Finding(rel, "engine.metrics", why, "records the server's counters can be compared with")]
    out = [
        Finding(mrel, "engine.metrics", found, f"{expected} ({short(rel, 160)})")
        for found, expected in disagreements(kind, server, client)
    ]
    if problem := counters_problem(kind, answer, doc):
        out.append(Finding(rel, "engine.metrics", problem, "the counters of the phase's own snapshots"))
    return out + speculative_findings(kind, rel, mrel, answer, doc, server)


def speculative_findings(kind: str, rel: str, mrel: str, answer: dict, doc: dict, server: Totals) -> list:
    """The phase's speculative counters possible for its generated tokens and streamed chunks
    (`speculative_account`); nothing where the engine publishes none or generated nothing."""
    before, after = from_snapshots(kind, doc.get("before")), from_snapshots(kind, doc.get("after"))
    if before is None or after is None or server.generated is None:
        return []
    done = [r for r in answer["records"] if r.get("end") is not None and not r.get("error")]
    chunks = sum(len(r["chunks"]) for r in done if isinstance(r.get("chunks"), list))
    whole_steps = engines.get(kind).streams_whole_steps
    return [
        Finding(mrel, speculative_account.REQUIREMENT, found, f"{expected} ({short(rel, 160)})")
        for found, expected in speculative_account.problems(
            after - before, server.generated, chunks, whole_steps
        )
    ]


def decode_side(doc: dict, snapshots: dict) -> dict:
    """A prefill/decode cell's snapshots as the client's account: the decode servers' alone (the
    prefill servers count every prompt a second time and one handed-over token per request; they
    are held to their own logs by `engine_launches`)."""
    from dayzero.submission.engine_launches import DISAGGREGATED, part_of, side_of
    from dayzero.submission.snapshots import target_of

    launches = doc["recipe"]["launches"]
    split = [x for x in launches if part_of(doc["engine"]["name"], x) == DISAGGREGATED]
    if not split:
        return snapshots
    decode = {target_of(x) for x in split if side_of(x) == "decode"}
    keep = {w: [x for x in snapshots.get(w) or [] if x.get("target") in decode] for w in ("before", "after")}
    return {**snapshots, **keep}


def cross_check(s: Subject, name: str, doc: dict) -> list[Finding]:
    engine = engines.find(doc["engine"]["name"])
    if engine is None or not engine.accounted:
        return []  # an engine the checker cannot read at all: engine_account rejects it
    kind = engine.name
    out = []
    named = set(doc.get("records", []))
    for rel in sorted(named):
        if rel not in s.records:
            continue
        mrel = metrics_for(rel)
        if mrel not in named or mrel not in s.metrics:
            if not s.bundle.has(mrel) or mrel not in named:  # an invalid one is schema's finding
                out.append(
                    Finding(
                        rel,
                        "engine.metrics",
                        "no /metrics snapshots around this phase",
                        f"{short(mrel, 160)}: the server's counters before and after it",
                    )
                )
            continue
        out += check_phase(kind, rel, mrel, s.records[rel], decode_side(doc, s.metrics[mrel]))
    return out


def check_engine_metrics(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, doc in sorted(s.evidence.items()):
        out += cross_check(s, name, doc)
    return out


CHECKS = (check_engine_metrics,)
