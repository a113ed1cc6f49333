"""SGLang's server log as a `ServerAccount`, read from real SGLang 0.5.23 logs (the cpu cells).

Each line is prefixed with a wall-clock time. The launch prints its listen address, then SGLang's
own warm-up request, then "The server is fired up and ready to roll!":

    [2026-12-04 00:51:37] INFO:     Uvicorn running on http://127.0.0.1:18190 (Press CTRL+C to quit)
    [2026-12-04 00:51:39] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, ...
    [2026-12-04 00:51:39] The server is fired up and ready to roll!
    [2026-12-04 00:51:41] INFO:     127.0.0.1:33400 - "POST /v1/completions HTTP/1.1" 200 OK

With `--log-requests --log-requests-level 0` (what the cards' SGLang recipes pass) every finished
request also gets one line with SGLang's own accounting of it:

    [...] Finish: obj=GenerateReqInput(rid='5e2f...', ...), out={'meta_info': {'id': '5e2f...',
      'prompt_tokens': 4, 'completion_tokens': 8, 'cached_tokens': 0, 'e2e_latency': 4.775,
      'request_received_ts': 1796347780.144, ...}}

which gives one `Served` per request (prompt tokens evaluated = prompt - cached, generated, the
server's own end-to-end time and arrival), as llama.cpp's slot lines do. SGLang's periodic health
probes (rid HEALTH_CHECK_*) are not requests of the run. Without request logging only the count of
generation requests answered 200 is known, and that is all that is then cross-checked.

Ranks 1..N-1 of a multi-node server (`--node-rank` 1 and up) serve no HTTP requests; their log
(`parse_rank`) names the health endpoint they answer on instead:

    [2026-12-04 14:18:31] Dummy health check server started in background thread at 127.0.0.3:18090
"""

from __future__ import annotations

import re

from dayzero.engines.account import Served, ServerAccount
from dayzero.engines.launch_args import logged

LISTEN = re.compile(r"Uvicorn running on https?://(\S+?)/? ")
FIRED_UP = "The server is fired up and ready to roll"
SERVED = re.compile(r'"POST /(?:v1/chat/completions|v1/completions|generate) HTTP/[\d.]+" 200')
FINISH = re.compile(r"\] Finish: obj=GenerateReqInput\(rid='([^']*)'.*?, out=(\{'meta_info'.*)$")
SERVER_ARGS = re.compile(r"\bserver_args=(\{.*\})\s*$")  # every argument, as argparse named it
RANK = re.compile(r"Dummy health check server started in background thread at (\S+)")
ROOM = re.compile(r"\bbootstrap_room=(\d+)")
NUMBER = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
META = {
    key: re.compile(rf"'{key}': {NUMBER}")
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency", "request_received_ts")
}


def _finished(rid: str, out: str, task: int, room: int | None = None) -> tuple[float, Served] | None:
    values = {key: m.group(1) for key, rx in META.items() if (m := rx.search(out))}
    if rid.startswith("HEALTH_CHECK") or len(values) != len(META):
        return None
    served = Served(
        task=task,
        slot=0,
        start_s=0.0,
        prompt_evaluated=int(values["prompt_tokens"]) - int(values["cached_tokens"]),
        generated=int(values["completion_tokens"]),
        total_s=float(values["e2e_latency"]),
        prompt=int(values["prompt_tokens"]),
        room=room,
    )
    return float(values["request_received_ts"]), served


def _room(obj: str) -> int | None:
    """The request's bootstrap room (prefill/decode: the router gives both halves the same one)."""
    return int(m.group(1)) if (m := ROOM.search(obj)) else None


def parse(text: str) -> ServerAccount:
    listen = None
    requests, ready = 0, False
    finished: list[tuple[float, Served]] = []
    for line in text.splitlines():
        if listen is None and (m := LISTEN.search(line)):
            listen = m.group(1)
        elif FIRED_UP in line:
            ready = True
        elif ready and SERVED.search(line):
            requests += 1
        elif (
            ready
            and (m := FINISH.search(line))
            and (item := _finished(m.group(1), m.group(2), len(finished), _room(line[: m.start(2)])))
        ):
            finished.append(item)
    if not finished:
        return ServerAccount(
            "sglang", listen=listen, requests=requests, ready=ready, args=logged(text, SERVER_ARGS)
        )
    t0 = min(ts for ts, _ in finished)  # arrivals as seconds since the first request of the run
    served = tuple(
        Served(s.task, s.slot, ts - t0, s.prompt_evaluated, s.generated, s.total_s, s.prompt, s.room)
        for ts, s in finished
    )
    return ServerAccount("sglang", listen=listen, served=served, ready=ready, args=logged(text, SERVER_ARGS))


def parse_rank(text: str) -> ServerAccount:
    """A non-endpoint rank's log: ready once its health endpoint started, with every request line
    it shows (a rank's log has none), whether or not it ever said it was fired up."""
    listen, requests = None, 0
    for line in text.splitlines():
        if listen is None and (m := RANK.search(line)):
            listen = m.group(1)
        elif SERVED.search(line) or FINISH.search(line):
            requests += 1
    return ServerAccount("sglang rank", listen=listen, requests=requests, ready=listen is not None)
