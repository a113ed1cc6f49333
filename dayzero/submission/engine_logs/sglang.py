"""SGLang's server log as a `ServerAccount`: what its default logging lets us verify.

From SGLang's sources and published logs (not from a run here: the lab has no SGLang host),
the default log (no --log-requests) has one uvicorn access line per HTTP request and the
scheduler's batch lines, each prefixed with a wall-clock time:

    [2025-07-26 16:09:07] INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)
    [2025-07-26 16:09:08 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, ...
    [2025-07-26 16:09:11] INFO:     127.0.0.1:57732 - "POST /v1/chat/completions HTTP/1.1" 200 OK

That gives the listen address and the number of generation requests served (200 OK on a
generation endpoint, after the line "The server is fired up and ready to roll!" that follows
SGLang's own warm-up request); per-request tokens and timings are not in it (decode lines are sampled
every few dozen steps), so for SGLang only the request count is cross-checked.
"""

from __future__ import annotations

import re

from dayzero.submission.engine_logs import ServerAccount

LISTEN = re.compile(r"Uvicorn running on https?://(\S+?)/? ")
FIRED_UP = "The server is fired up and ready to roll"
SERVED = re.compile(r'"POST /(?:v1/chat/completions|v1/completions|generate) HTTP/[\d.]+" 200')


def parse(text: str) -> ServerAccount:
    listen = None
    requests, ready = 0, False
    for line in text.splitlines():
        if listen is None and (m := LISTEN.search(line)):
            listen = m.group(1)
        elif FIRED_UP in line:
            ready = True
        elif ready and SERVED.search(line):
            requests += 1
    return ServerAccount("sglang", listen=listen, requests=requests, ready=ready)
