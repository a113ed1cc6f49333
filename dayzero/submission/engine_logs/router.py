"""The SGLang router's log (sglang-router 0.3.2, `smg`) as a `ServerAccount` of the requests it routed.

Read from real logs of the routed cpu cells. Lines are coloured (ANSI escapes, stripped here);
the lines used:

    ... smg::server: ...: Starting router on 127.0.2.1:18088 | mode: Regular { worker_urls: [...] } ...
    ... smg::server: ...: Router ready | workers: []
    ... http_request{method=POST uri=/v1/chat/completions ... request_id="chatcmpl-..."
        status_code=200 latency=2768}: smg::response: ...: finished processing request

The router keeps no token counts: it accounts for how many generation requests it answered 200,
which must be every request the client completed (warm-ups included). Its health probes
(`GET /readiness`) are not requests of the run.
"""

from __future__ import annotations

import re

from dayzero.submission.engine_logs.account import ServerAccount

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LISTEN = re.compile(r"Starting router on (\S+?)(?: \||$)")
READY = "Router ready"
ANSWERED = re.compile(
    r"http_request\{method=POST uri=/(?:v1/chat/completions|v1/completions|generate) [^}]*"
    r"status_code=200\b[^}]*\}: smg::response"
)


def parse(text: str) -> ServerAccount:
    listen, ready, requests = None, False, 0
    for raw in text.splitlines():
        line = ANSI.sub("", raw)
        if listen is None and (m := LISTEN.search(line)):
            listen = m.group(1)
        elif READY in line:
            ready = True
        elif ANSWERED.search(line):
            requests += 1
    ready = ready and listen is not None
    return ServerAccount("sglang-router", listen=listen, requests=requests, ready=ready)
