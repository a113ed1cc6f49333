"""The engine's own account of a cell of several launches: each launch's own log and /metrics.

Every launch of the recipe has its log in the bundle (named as the run collects it:
`<host>-<role>-<rank>.log`), and each is read for what that launch is (`part_of`):

- a server (llama-server; an SGLang server or its rank 0): its log must be that engine's,
  listening where the recipe launched it, with the launch facts of its own command;
- a non-endpoint rank (llama.cpp's rpc-server, SGLang's ranks 1..N-1): its log must be such a
  rank's, listening at its own address, and hold no request;
- the router: its log must be the router's, listening at its address, and have answered every
  request the client completed (warm-ups included).

Where one server serves every request (llama.cpp's rank 0 beside its rpc-servers, SGLang's rank
0), its log is held to the records as a one-launch cell's is (`engine_account.one_log`). Where
several do (workers behind a router), the requests are reconciled across their logs
(`reconcile`): each record found in exactly one worker's log, each worker's share of each phase
what its own /metrics counted, the whole what the client completed.

A prefill/decode cell (SGLang `--disaggregation-mode prefill|decode` behind the router) serves
every request twice, once per side, as real PD logs show: the prefill server computes the prompt
and hands one token over with the KV cache (its log: `completion_tokens` 1 for every request),
the decode server generates the answer (its log: the client's token counts). So the requests are
reconciled across the decode servers' logs as across workers', and across the prefill servers'
logs with one generated token each (`handoff`); and the two halves are one request: every
bootstrap room (the router's per-request id, in both halves' log lines) is in exactly one
prefill and one decode log, with the same prompt.
"""

from __future__ import annotations

import shlex

from dayzero import engines
from dayzero.checks.server_metrics import totals
from dayzero.engines import DISAGGREGATED, RANK, ROUTER, SERVER
from dayzero.engines.account import ServerAccount
from dayzero.engines.prometheus import Totals, readable
from dayzero.run.records import metrics_for
from dayzero.submission import reconcile
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.engine_account import (
    _completed,
    _device_findings,
    _launch_findings,
    _warmups,
    expected_requests,
    listen_findings,
    log_name,
    one_log,
    phases,
)
from dayzero.submission.findings import Finding, short
from dayzero.submission.snapshots import target_of


def part_of(engine: str, launch: dict) -> str:
    """What a launch is to the engine account, read from its command (a router fronts any
    engine's workers; the rest the cell's engine tells: `Engine.launch_part`)."""
    argv = _argv(launch)
    if engines.router_of(argv) is not None:
        return ROUTER
    found = engines.find(engine)
    return (found.launch_part(argv) if found is not None else None) or SERVER


def _argv(launch: dict) -> list[str]:
    try:
        return shlex.split(launch.get("command") or "")
    except ValueError:
        return []


def _flag(argv: list[str], name: str) -> str | None:
    values = [v for f, v in zip(argv, argv[1:], strict=False) if f == name]
    return values[-1] if values else None


def _read(s: Subject, rel: str) -> str:
    return s.bundle.path(rel).read_text(errors="replace")


def _router_findings(rel: str, launch: dict, account: ServerAccount, want: int) -> list[Finding]:
    if not account.ready:
        return [Finding(rel, "engine.log", "no start-up line of the router", "an sglang-router log")]
    out = listen_findings(rel, launch, account)
    if account.count != want:
        out.append(
            Finding(
                rel,
                "engine.requests",
                f"{account.count} generation requests answered 200 by the router",
                f"{want}: the completed records and warm-up requests",
            )
        )
    return out


def _rank_findings(rel: str, launch: dict, engine: engines.Engine, account: ServerAccount) -> list[Finding]:
    what = engine.rank_label
    if not account.ready:
        return [Finding(rel, "engine.log", f"not {what}'s log", f"{what}'s log ({target_of(launch)})")]
    out = listen_findings(rel, launch, account)
    if account.count:
        out.append(Finding(rel, "engine.requests", f"{account.count} requests served", f"none: {what}"))
    return out


def side_of(launch: dict) -> str:
    """'prefill' or 'decode': a disaggregated launch's side, from its command."""
    return _flag(_argv(launch), "--disaggregation-mode") or ""


def handoff(answer: dict) -> dict:
    """A phase's answer as a prefill server counts it: one generated token for every completed
    request and warm-up (the one it hands over with the KV cache); prompts as the client's."""
    records = [
        {**r, "usage": {**r["usage"], "completion_tokens": 1}} if isinstance(r.get("usage"), dict) else r
        for r in answer["records"]
    ]
    out = {**answer, "records": records}
    warm = answer.get("warmup")
    if isinstance(warm, dict) and isinstance(warm.get("usage"), dict):
        out["warmup"] = {**warm, "usage": {**warm["usage"], "completion_tokens": _warmups(answer)}}
    return out


def rooms_problem(prefill: list[ServerAccount], decode: list[ServerAccount]) -> str:
    """Why the prefill and decode halves are not the same requests ('' when each bootstrap room
    is in one prefill and one decode log, with the same prompt)."""
    halves = {}
    for side, accounts in (("prefill", prefill), ("decode", decode)):
        rooms: dict[int, int] = {}
        for x in (x for a in accounts for x in a.served):
            if x.room is None:
                return f"a {side} log line without its bootstrap room (task {x.task})"
            if x.room in rooms:
                return f"bootstrap room {x.room} twice in the {side} logs"
            rooms[x.room] = x.prompt
        halves[side] = rooms
    p, d = halves["prefill"], halves["decode"]
    if only := sorted(set(p) ^ set(d)):
        where = "prefill" if only[0] in p else "decode"
        return f"{len(only)} request(s) in one side's logs only (bootstrap room {only[0]}: {where})"
    if differ := [r for r in p if p[r] != d[r]]:
        room = differ[0]
        return f"bootstrap room {room}: {p[room]} prompt tokens at prefill, {d[room]} at decode"
    return ""


def _deltas(s: Subject, kind: str, ordered: list, launch: dict) -> list[Totals] | str:
    """A launch's own counters over each phase, or the phase whose snapshots lack them."""
    target, out = target_of(launch), []
    for rel, _ in ordered:
        doc = s.metrics.get(metrics_for(rel)) or {}
        read = {}
        for when in ("before", "after"):
            snaps = [x for x in doc.get(when) or [] if x.get("target") == target and readable(x)]
            read[when] = totals(kind, snaps[0]["body"]) if len(snaps) == 1 else None
        if read["before"] is None or read["after"] is None:
            return f"no readable /metrics of {target} around {short(rel, 160)}"
        out.append(read["after"] - read["before"])
    return out


def across(
    s: Subject, name: str, doc: dict, servers: list[tuple[str, dict, ServerAccount]], prefill: bool = False
) -> list[Finding]:
    """The records reconciled across several servers' logs, phase by phase (prefill servers' as
    they count them: `handoff`)."""
    ordered, kind = phases(s, doc), doc["engine"]["name"]
    if prefill:
        ordered = [(rel, handoff(answer)) for rel, answer in ordered]
    want = expected_requests(ordered)
    if (served := sum(a.count for _, _, a in servers)) != want:
        each = short(", ".join(f"{target_of(x)} {a.count}" for _, x, a in servers), 200)
        return [
            Finding(
                name,
                "engine.requests",
                f"{served} requests served in the servers' logs ({each})",
                f"{want}: the completed records and warm-up requests of {len(ordered)} records file(s)",
            )
        ]
    out, shares = [], []
    for rel, launch, account in servers:
        whole = bool(account.served) and all(x.prompt is not None for x in account.served)
        deltas = _deltas(s, kind, ordered, launch)
        if isinstance(deltas, str):
            out.append(Finding(rel, "engine.records", deltas, "each server's counters around each phase"))
            continue
        if account.count and not account.served:
            out.append(Finding(rel, "engine.log", "no per-request lines", "one line per request it served"))
            continue
        share = reconcile.cut(account.served, deltas, [r.rsplit("/", 1)[-1] for r, _ in ordered], whole)
        if isinstance(share, str):
            found = f"{target_of(launch)}: {share}"
            out.append(Finding(rel, "engine.records", found, "its requests as it counted them"))
            continue
        shares.append(share)
    if out:
        return out
    logs = ", ".join(short(target_of(x), 60) for _, x, _ in servers)
    for i, (rel, answer) in enumerate(ordered):
        union = [x for share in shares for x in share[i]]
        records = _completed(answer["records"])
        if problem := reconcile.split_problem(records, answer.get("warmup"), _warmups(answer), union):
            expected = f"the records as the logs of {logs} account for them"
            out.append(Finding(rel, "engine.records", problem, expected))
    return out


def cross_check(s: Subject, name: str, doc: dict) -> list[Finding]:
    engine, launches = engines.find(doc["engine"]["name"]), doc["recipe"]["launches"]
    if engine is None or not engine.accounted or len(launches) < 2:
        return []  # one launch, or an engine the checker cannot read: engine_account's
    parts = [part_of(engine.name, x) for x in launches]
    logs = {rel.rsplit("/", 1)[-1]: rel for rel in doc.get("logs", []) if s.bundle.has(rel)}
    names = {log_name(x) for x in launches}
    out = [
        Finding(rel, "engine.log", "a log of no launch", f"the logs of {sorted(names)}")
        for base, rel in sorted(logs.items())
        if base not in names
    ]
    want = expected_requests(phases(s, doc))
    servers = []
    for launch, part in zip(launches, parts, strict=True):
        rel = logs.get(log_name(launch))
        if rel is None:
            found = f"logs: no {short(log_name(launch))}"
            out.append(Finding(name, "engine.log", found, f"a log per launch ({target_of(launch)})"))
        elif part == ROUTER:
            router = engines.router_of(_argv(launch)).parse_router_log(_read(s, rel))
            out += _router_findings(rel, launch, router, want)
        elif part == RANK:
            out += _rank_findings(
                rel, launch, engine, engine.parse_rank_log(_read(s, rel)) or ServerAccount(engine.name)
            )
        else:
            servers.append((rel, launch, engine.parse_log(_read(s, rel))))
    if not servers:
        return out + [Finding(name, "engine.log", "no launch that serves requests", "a server's log")]
    if DISAGGREGATED in parts:
        return out + disaggregated(s, name, doc, servers)
    if len(servers) == 1:
        rel, launch, _ = servers[0]
        return out + one_log(s, rel, launch, doc)
    for rel, launch, account in servers:
        if not account.ready:
            out.append(
                Finding(rel, "engine.log", "no start-up line of the engine", f"a {engine.name} server log")
            )
        else:
            out += _launch_findings(rel, launch, account) + _device_findings(rel, doc, launch, account)
    return out or across(s, name, doc, servers)


Servers = list[tuple[str, dict, ServerAccount]]  # (log, launch, its account)


def disaggregated(s: Subject, name: str, doc: dict, servers: Servers) -> list[Finding]:
    """A prefill/decode cell: each side's servers reconciled with the records, then the halves
    joined by bootstrap room."""
    sides = {side: [x for x in servers if side_of(x[1]) == side] for side in ("prefill", "decode")}
    want = "a prefill and a decode server, nothing else"
    out = [
        Finding(name, "engine.launches", f"no {side} server among the launches", want)
        for side, group in sides.items()
        if not group
    ]
    out += [
        Finding(rel, "engine.launches", "a server neither prefill nor decode", want)
        for rel, launch, _ in servers
        if side_of(launch) not in sides
    ]
    for rel, launch, account in servers:
        if not account.ready:
            out.append(Finding(rel, "engine.log", "no start-up line of the engine", "an sglang server log"))
        else:
            out += _launch_findings(rel, launch, account) + _device_findings(rel, doc, launch, account)
    if out:
        return out
    out = across(s, name, doc, sides["decode"]) + across(s, name, doc, sides["prefill"], prefill=True)
    accounts = {side: [a for *_, a in group] for side, group in sides.items()}
    if not out and (problem := rooms_problem(accounts["prefill"], accounts["decode"])):
        logs = ", ".join(short(rel.rsplit("/", 1)[-1], 60) for rel, _, _ in servers)
        expected = f"each request in one prefill and one decode log ({logs})"
        out.append(Finding(name, "engine.records", problem, expected))
    return out


def check_engine_launches(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, doc in sorted(s.evidence.items()):
        out += cross_check(s, name, doc)
    return out


CHECKS = (check_engine_launches,)
