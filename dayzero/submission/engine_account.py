"""Cross-checks of the client's raw records against the engine's own account (its server log).

The raw records are the client's word; the server log is a second account, written by the
engine. Each record must agree with it, within stated tolerances:

- request counts equal: requests the log says it served = completed records + warm-up requests
  (per records file, in the order the phases ran; the log has no wall clock, so phases are
  matched by order);
- per request (within a phase, as multisets, since concurrent requests may start in any order):
  generated tokens equal, prompt tokens as the log counts them equal (llama.cpp: evaluated, i.e.
  prompt minus cached, so the record's cached tokens are required; SGLang: the whole prompt), the
  server's own time positive where it generated tokens, and a client's end-to-end time never
  shorter than it (less `TIME_TOLERANCE_S` for rounding); a field this needs is never skipped;
- a phase's span on the server (first start to last finish) not longer than the client's;
- launch facts: slots equal the recipe's --parallel, threads its --threads, the model file and
  the listen port the recipe's (a fact the llama.cpp log leaves out is a finding); devices: none
  on cpu hardware, at least the host's accelerators elsewhere.

Cells this cannot be done for are rejected, never passed unchecked: an engine without a log
parser (`unchecked`). Cells of several launches are `engine_launches`': each launch's own log,
the requests reconciled across the launches that served them; this module's `one_log` is theirs
where one launch serves every request (llama.cpp's rank 0 beside its rpc-servers).

What a vendor controlling both the server and the client can still forge is listed in the README
("Vendor submissions"): a log is only as honest as the machine that wrote it.
"""

from __future__ import annotations

import shlex
from collections import Counter

from dayzero import engines
from dayzero.engines.account import Served, ServerAccount
from dayzero.submission.bundle import Reference, Subject
from dayzero.submission.findings import Finding, short

TIME_TOLERANCE_S = 0.002  # the log rounds to 0.01 ms, the client to 1 µs; clocks tick differently
FLAGS = {  # launch flag -> the account's field (llama-server's short and long forms)
    "--parallel": "slots",
    "-np": "slots",
    "--threads": "threads",
    "-t": "threads",
    "--model": "model",
    "-m": "model",
}


def launch_flags(command: str) -> dict[str, str]:
    """The recipe's flags as launched (later ones win, as argparse does)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return {}
    out = {}
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag in FLAGS:
            out[FLAGS[flag]] = value
        elif flag in ("--port", "--host"):
            out[flag[2:]] = value
    return out


def _completed(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("end") is not None and not r.get("error")]


def _warmups(answer: dict) -> int:
    warm = answer.get("warmup")
    if not isinstance(warm, dict):
        return 0
    requests, errors = warm.get("requests"), warm.get("errors") or 0
    return max(requests - errors, 0) if isinstance(requests, int) and isinstance(errors, int) else 0


CACHED = "usage.prompt_tokens_details.cached_tokens"


def count_at(r: dict, path: str) -> int | None:
    """A record's count at a dotted path ('usage.completion_tokens'), None where it has none."""
    value = r
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def request_key(r: dict, whole_prompt: bool) -> tuple[int, int] | str:
    """(prompt tokens as the log counts them, generated tokens) of a record, or the field it lacks:
    SGLang's log counts the whole prompt, llama.cpp's the prompt tokens it evaluated (less the
    cached ones, so the record must say how many were cached)."""
    generated, prompt = count_at(r, "usage.completion_tokens"), count_at(r, "usage.prompt_tokens")
    if generated is None:
        return "usage.completion_tokens"
    if prompt is None:
        return "usage.prompt_tokens"
    if whole_prompt:
        return prompt, generated
    cached = count_at(r, CACHED)
    return CACHED if cached is None else (prompt - cached, generated)


def labelled(key: tuple[int, int], whole_prompt: bool) -> str:
    prompt = "prompt" if whole_prompt else "prompt evaluated"
    return f"{prompt} {key[0]} + generated {key[1]}"


def phases(s: Subject, doc: dict) -> list[tuple[str, dict]]:
    """The evidence's records files in the order they ran (by their first send)."""
    named = [(rel, s.records[rel]) for rel in doc.get("records", []) if rel in s.records]

    def first(item):
        sends = [r["send"] for r in item[1]["records"] if isinstance(r.get("send"), int | float)]
        return min(sends) if sends else float("inf")

    return sorted(named, key=first)


def served_key(x: Served, whole: bool) -> tuple[int, int]:
    return (x.prompt if whole else x.prompt_evaluated, x.generated)


def idle_problem(served) -> str:
    """A request that generated tokens in no time at all on the server ('' if none)."""
    if idle := [x for x in served if x.generated > 0 and not x.total_s > 0]:
        return (
            f"server time {idle[0].total_s * 1e3:.2f} ms for task {idle[0].task}, "
            f"which generated {idle[0].generated} tokens"
        )
    return ""


def times_problem(records: list[dict], keys: list, served, whole: bool) -> str:
    """The client's end-to-end time of each request never shorter than the server's own time for
    it. Requests are told apart by their token counts only; where the server holds more of one
    kind than the records (warm-ups), the records are paired with its shortest ones."""
    untimed = [r for r in records if not all(isinstance(r.get(k), int | float) for k in ("send", "end"))]
    if untimed:  # a mutated or hand-made record: nothing to compare the server's times with
        return f"{len(untimed)} completed record(s) without numeric send and end times"
    for key in sorted(set(keys)):
        client = sorted(r["end"] - r["send"] for r, k in zip(records, keys, strict=True) if k == key)
        server = sorted(x.total_s for x in served if served_key(x, whole) == key)
        for c, t in zip(client, server, strict=False):
            if c < t - TIME_TOLERANCE_S:
                return (
                    f"a request ({labelled(key, whole)}) took {c * 1e3:.1f} ms end to end at the "
                    f"client, the server's own time for it is {t * 1e3:.1f} ms"
                )
    return ""


def keyed(records: list[dict], served) -> tuple[bool, list[tuple[int, int]]] | str:
    """Whether the log counts whole prompts (SGLang), and each record's key as the log counts
    it; or the field a record lacks for that."""
    whole = bool(served) and all(x.prompt is not None for x in served)
    keys = []
    for r in records:
        key = request_key(r, whole)
        if isinstance(key, str):
            return f"record {short(r.get('id'), 40)} has no {key} (the log's account needs it)"
        keys.append(key)
    return whole, keys


def phase_problem(records: list[dict], served: list[Served]) -> str:
    """Why a phase's records disagree with the server's account of the same requests ('' if none)."""
    if isinstance(found := keyed(records, served), str):
        return found
    whole, keys = found
    mine = Counter(keys)
    theirs = Counter(served_key(x, whole) for x in served)
    if mine != theirs:
        extra = [labelled(k, whole) for k in sorted((mine - theirs).elements())[:3]]
        missing = [labelled(k, whole) for k in sorted((theirs - mine).elements())[:3]]
        return (
            f"requests the records hold and the server does not: {'; '.join(extra) or 'none'}; "
            f"the server's and not the records': {'; '.join(missing) or 'none'}"
        )
    if problem := idle_problem(served) or times_problem(records, keys, served, whole):
        return problem
    client_span = max(r["end"] for r in records) - min(r["send"] for r in records)
    server_span = max(x.start_s + x.total_s for x in served) - min(x.start_s for x in served)
    if client_span < server_span - TIME_TOLERANCE_S * len(served):
        return f"the phase took {client_span:.3f} s at the client, {server_span:.3f} s on the server"
    return ""


def _launch_findings(log: str, launch: dict, account: ServerAccount) -> list[Finding]:
    if not isinstance(launch.get("command"), str):
        return []
    flags = launch_flags(launch["command"])
    out = []
    # the launch facts the engine's log states (`Engine.logged_facts`): one the recipe sets and the
    # log leaves out is a finding, never a comparison skipped
    engine = engines.find(account.engine)
    for field in engine.logged_facts if engine is not None else ():
        if field in flags and getattr(account, field) is None:
            out.append(
                Finding(log, "engine.launch", f"no {field} in the log", f"{field} {flags[field]} (recipe)")
            )
    for field in ("slots", "threads"):
        got = getattr(account, field)
        if field in flags and got is not None and str(got) != flags[field]:
            out.append(Finding(log, "engine.launch", f"{field} {got} in the log", f"{flags[field]} (recipe)"))
    if (
        "model" in flags
        and account.model is not None
        and account.model.rsplit("/", 1)[-1] != flags["model"].rsplit("/", 1)[-1]
    ):
        out.append(
            Finding(
                log, "engine.launch", f"model {short(account.model)}", f"{short(flags['model'])} (recipe)"
            )
        )
    return out + args_findings(log, launch["command"], account) + listen_findings(log, launch, account)


def args_findings(log: str, command: str, account: ServerAccount) -> list[Finding]:
    """Every launch argument the log prints (vLLM's "non-default args", SGLang's server_args) that
    the recipe sets has the recipe's value, and (vLLM: `Engine.logs_every_arg` off) none the recipe
    leaves out is printed: a log of another launch (another mode's batch size, another strategy's
    draft) is refused even when its requests agree. A recipe argument the log leaves out is at
    its default (vLLM) or spelled by an alias (`--tp` for tp_size), so it is not compared."""
    engine = engines.find(account.engine)
    want = engine.launch_args(command) if engine is not None else None
    if want is None:
        return []
    if account.args is None:
        return [Finding(log, "engine.launch", "no launch arguments in the log", "those the recipe launched")]
    out = []
    for name, got in account.args:
        if name not in want and not engine.logs_every_arg:
            out.append(
                Finding(
                    log, "engine.launch", f"launch argument {name} {short(got)} in the log", "none (recipe)"
                )
            )
        elif name in want and want[name] != got:
            out.append(
                Finding(
                    log,
                    "engine.launch",
                    f"launch argument {name} {short(got)} in the log",
                    f"{short(want[name])} (recipe)",
                )
            )
    return out


def listen_findings(log: str, launch: dict, account: ServerAccount) -> list[Finding]:
    """The log's server listens where the recipe launched it: its --host and port (a log from
    another launch of the same cell, or of another host, listens elsewhere)."""
    flags = launch_flags(launch["command"]) if isinstance(launch.get("command"), str) else {}
    if account.listen is None or "port" not in flags:
        return []
    host, _, port = account.listen.rpartition(":")
    if port == flags["port"] and flags.get("host", host) == host:
        return []
    want = f"{flags['host']}:{flags['port']}" if "host" in flags else f"port {flags['port']}"
    return [Finding(log, "engine.launch", f"listening on {short(account.listen)}", f"{want} (recipe)")]


def _device_findings(log: str, doc: dict, launch: dict, account: ServerAccount) -> list[Finding]:
    engine = engines.find(account.engine)
    if engine is None or not engine.logs_devices:
        return []
    if doc["hardware"] == "cpu" and account.devices:
        return [Finding(log, "engine.device", f"devices {list(account.devices)}", "none (cpu hardware)")]
    hosts = [h for h in doc["hosts"] if h.get("name") == launch.get("host")] or doc["hosts"]
    want = sum(h.get("accelerators") or 0 for h in hosts if isinstance(h.get("accelerators"), int))
    if doc["hardware"] != "cpu" and len(account.devices) < max(want, 1):
        return [
            Finding(
                log,
                "engine.device",
                f"{len(account.devices)} accelerator device(s) in the log",
                f"{max(want, 1)} on {doc['hardware']}",
            )
        ]
    return []


def log_name(launch: dict) -> str:
    """The log file a launch's server writes, as the run collects it (`lab.deploy.collect_logs`)."""
    return f"{launch.get('host')}-{launch.get('role')}-{launch.get('rank')}.log"


def unchecked(name: str, doc: dict) -> list[Finding]:
    """An engine whose log the checker cannot read: a finding, never a silent pass."""
    engine = doc["engine"]["name"]
    if not getattr(engines.find(engine), "accounted", False):
        return [
            Finding(
                name, "engine.unchecked", f"engine {short(engine)}", "an engine whose log the checker reads"
            )
        ]
    return []


def expected_requests(ordered: list[tuple[str, dict]]) -> int:
    """Requests the server finished for these records files: completed records and warm-ups."""
    return sum(len(_completed(a["records"])) + _warmups(a) for _, a in ordered)


def one_log(s: Subject, log: str, launch: dict, doc: dict) -> list[Finding]:
    """Every request of the cell held to one server log, phase by phase in the order they ran."""
    account = engines.get(doc["engine"]["name"]).parse_log(s.bundle.path(log).read_text(errors="replace"))
    if not account.ready:
        return [
            Finding(log, "engine.log", "no start-up line of the engine", f"a {account.engine} server log")
        ]
    out = _launch_findings(log, launch, account) + _device_findings(log, doc, launch, account)
    ordered = phases(s, doc)
    want = expected_requests(ordered)
    if account.count != want:
        out.append(
            Finding(
                log,
                "engine.requests",
                f"{account.count} requests served in the log",
                f"{want}: the completed records and warm-up requests of {len(ordered)} records file(s)",
            )
        )
        return out
    if not account.served:
        return out
    at = 0
    for rel, answer in ordered:
        records = _completed(answer["records"])
        at += _warmups(answer)
        served = list(account.served[at : at + len(records)])
        at += len(records)
        if records and (problem := phase_problem(records, served)):
            out.append(Finding(rel, "engine.records", problem, f"the records as {log} accounts for them"))
    return out


def cross_check(s: Subject, name: str, doc: dict) -> list[Finding]:
    """A cell of one launch (several: `engine_launches`)."""
    launches = doc["recipe"]["launches"]
    if findings := unchecked(name, doc):
        return findings
    if len(launches) > 1:
        return []
    logs = [rel for rel in doc.get("logs", []) if s.bundle.has(rel)]
    if len(logs) != 1:
        return [Finding(name, "engine.log", f"{len(logs)} server logs", "the one launch's log")]
    return one_log(s, logs[0], launches[0], doc)


def check_engine_account(s: Subject, ref: Reference) -> list[Finding]:
    out = []
    for name, doc in sorted(s.evidence.items()):
        out += cross_check(s, name, doc)
    return out


CHECKS = (check_engine_account,)
