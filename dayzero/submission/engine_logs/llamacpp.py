"""llama-server's log (llama.cpp, verbosity 3, as `dayzero` launches it) as a `ServerAccount`.

Read from real logs of the cpu cells (tools/build-engine's build). Each line starts with the
time since start as `M.SS.mmm.uuu`, a level and a module; the lines used:

    I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'
    I cmn          init: llama threadpool init, n_threads = 2
    I srv    load_model: loading model '/models/SmolLM2-135M-Instruct.Q4_1.gguf'
    I srv  llama_server: listening on http://127.0.0.1:18080
    I slot launch_slot_: id  0 | task 9 | processing task, is_child = 0
    I slot print_timing: id  0 | task 9 | prompt eval time =  493.29 ms /    18 tokens (...)
    I slot print_timing: id  0 | task 9 |        eval time = 1292.51 ms /    24 tokens (...)
    I slot print_timing: id  0 | task 9 |       total time = 1785.80 ms /    42 tokens

llama.cpp's `rpc-server` (ranks 1..N-1 of a multi-node cell) serves tensors, not requests; its
log (`parse_rpc_server`) says what it is and where it listens:

    Starting RPC server v7.0.0
      endpoint       : 127.0.2.2:50052

Devices: a GPU build prints `ggml_cuda_init: found N CUDA devices` and, per device used,
`using device CUDA0 (...)`; these two forms come from llama.cpp's sources, not from a log seen
here (the lab's only build is cpu).
"""

from __future__ import annotations

import re

from dayzero.submission.engine_logs.account import Served, ServerAccount

STAMP = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) ")
SLOTS = re.compile(r"initializing, n_slots = (\d+)")
THREADS = re.compile(r"threadpool init, n_threads = (\d+)")
MODEL = re.compile(r"load_model: loading model '([^']*)'")
LISTEN = re.compile(r"listening on https?://(\S+?)/?$")
TASK = re.compile(r"id +(\d+) \| task (-?\d+) \| (.*)$")
TIMING = re.compile(r"(prompt eval|eval|total) time = +([\d.]+) ms / +(\d+) tokens")
DEVICE = re.compile(r"using device (\w+)")
FOUND = re.compile(r"ggml_\w+_init: found (\d+) (\w+) devices")
RPC_BANNER = "Starting RPC server"
RPC_ENDPOINT = re.compile(r"^\s*endpoint\s*: (\S+)$")


def stamp(line: str) -> float | None:
    m = STAMP.match(line)
    if not m:
        return None
    minutes, seconds, ms, us = (int(g) for g in m.groups())
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


def parse(text: str) -> ServerAccount:
    slots = threads = model = listen = None
    devices: list[str] = []
    found: list[str] = []
    open_tasks: dict[int, dict] = {}
    served: list[Served] = []
    for line in text.splitlines():
        if (m := SLOTS.search(line)) and slots is None:
            slots = int(m.group(1))
        elif (m := THREADS.search(line)) and threads is None:
            threads = int(m.group(1))
        elif (m := MODEL.search(line)) and model is None:
            model = m.group(1)
        elif (m := LISTEN.search(line)) and listen is None:
            listen = m.group(1)
        elif m := FOUND.search(line):
            found += [f"{m.group(2)}{i}" for i in range(int(m.group(1)))]
        elif (m := DEVICE.search(line)) and m.group(1) not in devices:
            devices.append(m.group(1))
        elif m := TASK.search(line):
            slot, task, rest = int(m.group(1)), int(m.group(2)), m.group(3)
            if rest.startswith("processing task"):
                open_tasks[task] = {"slot": slot, "start": stamp(line)}
            elif (t := TIMING.search(rest)) and task in open_tasks:
                entry = open_tasks[task]
                entry[t.group(1)] = (float(t.group(2)), int(t.group(3)))
                if t.group(1) == "total" and "prompt eval" in entry and "eval" in entry:
                    served.append(
                        Served(
                            task,
                            entry["slot"],
                            entry["start"] if entry["start"] is not None else 0.0,
                            entry["prompt eval"][1],
                            entry["eval"][1],
                            entry["total"][0] / 1e3,
                        )
                    )
                    del open_tasks[task]
    served.sort(key=lambda s: (s.start_s, s.task))
    return ServerAccount(
        "llama.cpp",
        slots=slots,
        threads=threads,
        model=model,
        listen=listen,
        devices=tuple(devices or found),
        served=tuple(served),
        ready=listen is not None,
    )


def parse_rpc_server(text: str) -> ServerAccount:
    """An rpc-server's log: ready once it says it started, listening at its endpoint, with the
    requests a llama-server log in its place would show (an rpc-server's has none)."""
    lines = text.splitlines()
    listen = next((m.group(1) for line in lines if (m := RPC_ENDPOINT.match(line))), None)
    started = any(line.startswith(RPC_BANNER) for line in lines)
    return ServerAccount(
        "llama.cpp rpc-server", listen=listen, served=parse(text).served, ready=started and listen is not None
    )
