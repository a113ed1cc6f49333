"""dayzero host client: health polls, probes and load against an OpenAI-compatible server.

Runs on the host next to the server, with the host's python3 (>= 3.8) and the standard library
only: the transport sends this file on stdin (`python3 - '<spec json>'`). It prints one JSON
document on stdout.

Load runs on asyncio with a minimal HTTP/1.1 client (keep-alive, chunked bodies, SSE), one event
loop per process, and forks several processes when asked: a thread per request or a single
Python loop is the classic way for a client to become the bottleneck unnoticed. Each process
reports its own CPU time and event-loop lag so the harness can declare a run invalid instead of
reporting a low number.

Raw per-request record (every summary is computed by the harness from these):
  id, kind, tag, max_tokens, send (wall-clock s), first (wall-clock s of the first content chunk),
  end (wall-clock s, body fully read), chunks (arrival of every content chunk, s after send),
  text, finish_reason, usage (the server's, if sent), timings (llama.cpp), error, proc (client
  process), reused (keep-alive connection reused), plus session/turn for multi-turn sessions;
  tool_calls (name, arguments as streamed, id) and reasoning (the reasoning field's text) where
  the server returned any; in an open-loop run (requests carrying an arrival time `at`),
  scheduled (when it was due); prompt_digest (`prompt_digest`: what the workload asked, so the
  checker can hold each record to the request it regenerates; version 4 on).

Stall: with `stall_s` in the spec, requests in flight and no streamed event from any of them (in
any client process) for that long end the phase at once: every connection is dropped, the
requests not yet sent are not sent, and the answer carries `stall` (the harness then ends the
cell as an engine stall). With `beat_s`, every client process writes a line to stderr that often,
so the controller can tell a silent host (network gone) from a long phase.
"""

# ruff: noqa: UP041 - asyncio.TimeoutError is not the builtin TimeoutError before Python 3.11
import asyncio
import glob
import hashlib
import json
import mmap
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

VERSION = 4  # 4: records carry prompt_digest
BEAT = b"dayzero-client: alive\n"  # on stderr every `beat_s`; the controller drops these lines
READ_LIMIT = 1 << 24  # asyncio's 64 KiB default cuts long SSE lines (and throughput) short
_WALL0 = time.time()
_MONO0 = time.monotonic()


def now():
    """Wall-clock seconds on a monotonic base: forked processes share the same anchor."""
    return _WALL0 + (time.monotonic() - _MONO0)


# --- stall watch ------------------------------------------------------------------------------


class Watch:
    """When any in-flight request of the phase last heard from the server, shared by every client
    process (an anonymous shared mapping made before the fork), and the stall once one is seen.
    Layout: [last heard, monotonic s][stalled after this many silent s, 0: no stall]."""

    def __init__(self, stall_s, beat_s):
        self.stall_s, self.beat_s = stall_s, beat_s
        self.shared = mmap.mmap(-1, 16)
        self.in_flight = 0  # this process's
        self.stall = None  # this process's account of the stall, once seen
        self.heard()

    def heard(self):
        struct.pack_into("d", self.shared, 0, time.monotonic())

    def silent_s(self):
        return time.monotonic() - struct.unpack_from("d", self.shared, 0)[0]

    @property
    def stalled(self):
        return struct.unpack_from("d", self.shared, 8)[0] > 0

    def check(self):
        """True once the phase stalled: this process saw its requests wait too long, or another
        process did."""
        if self.stalled:
            return True
        if self.stall_s and self.in_flight and self.silent_s() > self.stall_s:
            struct.pack_into("d", self.shared, 8, self.silent_s())
            return True
        return False

    def note(self):
        """What the records of requests cut by the stall say."""
        return f"stall: no streamed token from any in-flight request for {self.stall_s:g}s"


# --- HTTP/1.1 ---------------------------------------------------------------------------------


class HttpError(Exception):
    pass


def _split(url):
    parts = urllib.parse.urlsplit(url)
    return parts.hostname, parts.port or 80, parts.path or ""


async def _head(reader):
    line = await reader.readline()
    if not line:
        raise ConnectionResetError("connection closed before the response")
    fields = line.split(None, 2)
    if len(fields) < 2:
        raise HttpError(f"bad status line {line[:80]!r}")
    status = int(fields[1])
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def _body(reader, headers):
    """Yield body pieces as they arrive (chunked, content-length or until close)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise ConnectionResetError("connection closed inside a chunked body")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 1 << 16))
            if not data:
                raise ConnectionResetError("connection closed inside the body")
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                return
            yield data


class Connection:
    """One keep-alive connection per concurrency slot, reopened when the server closes it."""

    def __init__(self, host, port, timeout):
        self.host, self.port, self.timeout = host, port, timeout
        self.reader = self.writer = None
        self.fresh = False  # opened ahead of its first request: that request did not reuse it

    async def open(self):
        self.reader, self.writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=READ_LIMIT), self.timeout
        )
        self.fresh = True

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    def abort(self):
        """Drop the connection now: a read waiting on it ends (the phase stalled)."""
        if self.writer is not None:
            self.writer.transport.abort()

    async def send(self, method, path, body):
        """Send a request; return (status, headers, reused). Retries once on a stale keep-alive."""
        for attempt in (0, 1):
            reused = self.writer is not None and not self.fresh
            if self.writer is None:
                await self.open()
            self.fresh = False
            head = (
                f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            try:
                self.writer.write(head.encode("latin-1") + body)
                await self.writer.drain()
                status, headers = await _head(self.reader)
                return status, headers, reused
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if not reused or attempt:
                    raise
        raise HttpError("unreachable")


# --- one streamed request ---------------------------------------------------------------------


def _body_for(req, messages=None):
    kind = req.get("kind", "chat")
    body = {
        "model": req.get("model", "default"),
        "max_tokens": req["max_tokens"],
        "temperature": req.get("temperature", 0.0),
        "seed": req.get("seed", 0),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body.update(req.get("extra") or {})
    if kind == "chat":
        if messages is None:
            messages = req.get("messages") or [{"role": "user", "content": req["prompt"]}]
        body["messages"] = messages
        return "/v1/chat/completions", body
    body["prompt"] = req["prompt"]
    return "/v1/completions", body


def prompt_digest(req, turn=None):
    """sha256 of the prompt a request asks for (canonical JSON): a completion's prompt, a chat's
    messages, the tools it offers; for turn `turn` of a session, its opening messages and user
    turns up to that one (the server's answers in between are not the workload's)."""
    kind = req.get("kind", "chat")
    if turn is not None:
        messages = list(req.get("messages") or [])
        messages += [{"role": "user", "content": t["content"]} for t in req["turns"][: turn + 1]]
        asked = {"kind": "chat", "messages": messages}
    elif kind == "chat":
        messages = req.get("messages") or [{"role": "user", "content": req["prompt"]}]
        asked = {"kind": kind, "messages": messages}
    else:
        asked = {"kind": kind, "prompt": req["prompt"]}
    tools = (req.get("extra") or {}).get("tools")
    if tools is not None:
        asked["tools"] = tools
    text = json.dumps(asked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def new_record(req, proc):
    record = {
        "id": req.get("id"),
        "kind": req.get("kind", "chat"),
        "tag": req.get("tag"),
        "max_tokens": req["max_tokens"],
        "send": None,
        "first": None,
        "end": None,
        "chunks": [],
        "text": "",
        "finish_reason": None,
        "usage": None,
        "error": None,
        "proc": proc,
        "reused": False,
    }
    if "input_len" in req:
        record["input_len"] = req["input_len"]
    if (req.get("extra") or {}).get("logprobs"):
        # Goldens by log-probabilities: per generated token [token, logprob, [[alt, logprob], ...]]
        # (dayzero.checks.near_tie reads this form).
        record["logprobs"] = []
    if "turns" not in req and record["kind"] != "score":  # a session's turns: `one` digests each
        record["prompt_digest"] = prompt_digest(req)
    return record


def _apply(event, record, kind, pieces, t):
    """Fold one SSE data event into the record; `t` is its arrival time."""
    if event.get("usage"):
        record["usage"] = event["usage"]
    if "timings" in event:
        record["timings"] = event["timings"]
    if "error" in event and not event.get("choices"):
        record["error"] = "stream error: " + json.dumps(event["error"])[:300]
    for choice in event.get("choices") or ():
        piece = (choice.get("delta") or {}).get("content") if kind == "chat" else choice.get("text")
        if piece:
            if record["first"] is None:
                record["first"] = t
            record["chunks"].append(round(t - record["send"], 6))
            pieces.append(piece)
        if "logprobs" in record:
            _logprobs(choice.get("logprobs"), record["logprobs"])
        delta = (choice.get("delta") or {}) if kind == "chat" else {}
        _tool_calls(delta.get("tool_calls"), record)
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(thought, str) and thought:
            record["reasoning"] = record.get("reasoning", "") + thought
        if choice.get("finish_reason"):
            record["finish_reason"] = choice["finish_reason"]


def _logprobs(block, out):
    """A chunk's OpenAI `logprobs.content` entries, appended in the steps' JSON form."""
    content = block.get("content") if isinstance(block, dict) else None
    for entry in content or ():
        if not isinstance(entry, dict):
            continue
        top = [
            [alt.get("token"), alt.get("logprob")]
            for alt in entry.get("top_logprobs") or ()
            if isinstance(alt, dict)
        ]
        out.append([entry.get("token"), entry.get("logprob"), top])


def _tool_calls(deltas, record):
    """Streamed tool calls arrive in pieces by index: the name once, the arguments in fragments."""
    if not isinstance(deltas, list):
        return
    calls = record.setdefault("tool_calls", [])
    for d in deltas:
        if not isinstance(d, dict):
            continue
        i = d.get("index", len(calls))
        i = i if isinstance(i, int) and 0 <= i <= len(calls) else len(calls)
        if i == len(calls):
            calls.append({"id": None, "name": "", "arguments": ""})
        fn = d.get("function") or {}
        if d.get("id"):
            calls[i]["id"] = d["id"]
        if isinstance(fn.get("name"), str) and not calls[i]["name"]:
            calls[i]["name"] = fn["name"]  # sent once (some servers repeat it)
        if isinstance(fn.get("arguments"), str):
            calls[i]["arguments"] += fn["arguments"]


async def stream(conn, base_path, req, proc, messages=None, watch=None):
    """One streamed request on a slot's connection; returns its raw record."""
    path, body = _body_for(req, messages)
    record = new_record(req, proc)
    kind = record["kind"]
    pieces = []
    payload = json.dumps(body).encode()
    record["send"] = now()
    try:
        status, headers, record["reused"] = await conn.send("POST", base_path.rstrip("/") + path, payload)
        if status != 200:
            data = b""
            async for piece in _body(conn.reader, headers):
                data += piece
                if watch is not None:
                    watch.heard()
            record["error"] = f"HTTP {status}: " + data[:300].decode("utf-8", "replace")
        else:
            buf = b""
            async for data in _body(conn.reader, headers):
                t = now()
                if watch is not None:
                    watch.heard()
                buf += data
                if b"\n" not in data:
                    continue
                lines = buf.split(b"\n")
                buf = lines.pop()
                for line in lines:
                    if line.startswith(b"data:"):
                        payload = line[5:].strip()
                        if payload and payload != b"[DONE]":
                            _apply(json.loads(payload), record, kind, pieces, t)
                    elif line.startswith(b"error:"):
                        record["error"] = "stream error: " + line[6:].strip()[:300].decode("utf-8", "replace")
        if headers.get("connection", "").lower() == "close":
            conn.close()
    except (OSError, ValueError, HttpError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        conn.close()
    record["end"] = now()
    record["text"] = "".join(pieces)
    return record


async def score(conn, base_path, req, proc, timeout, watch=None):
    """A continuation scored by the engine (teacher forcing a golden; `dayzero.engines`' `score_calls`):
    its calls in order, each answered whole (prompt log-probabilities are not streamed), a call's
    `prompt_from` taking the previous answer's value at that path as its prompt. One raw record a
    call (`<id>/s<k>`), the answer kept whole for the engine's `scored` to read."""
    out, previous = [], None
    for k, call in enumerate(req["calls"]):
        body = {"model": req.get("model", "default"), "temperature": 0.0, **call["body"], "stream": False}
        record = new_record(
            {"id": f"{req['id']}/s{k}", "kind": "score", "max_tokens": body["max_tokens"]}, proc
        )
        out.append(record)
        record["send"] = now()
        try:
            if call.get("prompt_from"):
                body["prompt"] = _dig(previous, call["prompt_from"])
            status, headers, record["reused"] = await asyncio.wait_for(
                conn.send("POST", base_path.rstrip("/") + call["path"], json.dumps(body).encode()), timeout
            )
            data = b""
            async for piece in _body(conn.reader, headers):
                data += piece
                if watch is not None:
                    watch.heard()
            if status != 200:
                record["error"] = f"HTTP {status}: " + data[:300].decode("utf-8", "replace")
            else:
                previous = record["response"] = json.loads(data)
                record["usage"] = previous.get("usage")
                choice = (previous.get("choices") or [{}])[0]
                record["text"] = choice.get("text") or (choice.get("message") or {}).get("content") or ""
                record["finish_reason"] = choice.get("finish_reason")
            if headers.get("connection", "").lower() == "close":
                conn.close()
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            HttpError,
            asyncio.IncompleteReadError,
            asyncio.TimeoutError,
        ) as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
            conn.close()
        record["end"] = now()
        if record["error"]:
            break
    return out


def _dig(doc, path):
    """The value at `path` (keys and list indices) of a JSON answer; KeyError where there is none."""
    for key in path:
        try:
            doc = doc[key]
        except (KeyError, IndexError, TypeError):
            raise KeyError(f"the previous answer has no {'.'.join(map(str, path))}") from None
    return doc


# --- one client process -------------------------------------------------------------------------


def _quantiles(values):
    if not values:
        return {"n": 0}
    s = sorted(values)

    def q(p):
        return round(s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))] * 1000, 3)

    return {"n": len(s), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1.0)}


async def _run_items(url, items, concurrency, proc, timeout, lag_interval, watch):
    host, port, base_path = _split(url)
    records = []
    cursor = [0]
    lags = []
    done = [False]
    conns = []

    async def monitor():
        loop = asyncio.get_running_loop()
        beat = loop.time()
        while not done[0]:
            t = loop.time()
            await asyncio.sleep(lag_interval)
            lags.append(max(0.0, loop.time() - t - lag_interval))
            if watch.beat_s and loop.time() - beat >= watch.beat_s:
                beat = loop.time()
                os.write(2, BEAT)  # not sys.stderr: no buffer, no lock shared with a fork
            if watch.stall is None and watch.check():
                watch.stall = {
                    "after_s": watch.stall_s,
                    "silent_s": round(watch.silent_s(), 3),
                    "in_flight": watch.in_flight,
                    "proc": proc,
                }
                for conn in conns:
                    conn.abort()

    async def bounded(conn, req, messages=None):
        watch.in_flight += 1
        watch.heard()  # a request sent is progress: a slot came free
        try:
            rec = await asyncio.wait_for(stream(conn, base_path, req, proc, messages, watch), timeout)
        except asyncio.TimeoutError:
            conn.close()
            rec = new_record(req, proc)
            rec["error"] = f"timeout after {timeout}s"
            rec["end"] = now()
        finally:
            watch.in_flight -= 1
        if watch.stall is not None and rec["error"]:
            rec["error"] = watch.note() + f" (then: {rec['error']})"
        return rec

    async def one(conn, item):
        if item.get("kind") == "score":
            watch.in_flight += 1
            try:
                return await score(conn, base_path, item, proc, timeout, watch)
            finally:
                watch.in_flight -= 1
        if "turns" not in item:
            return [await bounded(conn, item)]
        # A multi-turn session: each turn resends the history with the model's own answers, so
        # the shared prefix grows the way an agent's context does.
        messages = list(item.get("messages") or [])
        out = []
        for k, turn in enumerate(item["turns"]):
            messages.append({"role": "user", "content": turn["content"]})
            req = dict(item, id=f"{item['id']}/t{k}", kind="chat", max_tokens=turn["max_tokens"])
            rec = await bounded(conn, req, messages)
            rec["session"], rec["turn"] = item["id"], k
            rec["prompt_digest"] = prompt_digest(item, k)
            out.append(rec)
            if rec["error"] or watch.stall is not None:
                break
            messages.append({"role": "assistant", "content": rec["text"]})
        return out

    if items and "at" in items[0]:
        watcher = asyncio.ensure_future(monitor())
        await _open_loop(host, port, items, concurrency, timeout, one, records, watch, conns)
        done[0] = True
        watcher.cancel()
        return records, lags

    slots = max(1, min(concurrency, len(items)))
    connected = [0]
    all_connected = asyncio.Event()

    async def slot():
        conn = Connection(host, port, min(timeout, 30.0))
        conns.append(conn)
        try:
            # Every slot connects before any sends, so no request's time to first token holds a
            # TCP handshake, or a burst of them: at 1024 streams the phase's first requests waited
            # on 1024 connects (1.1-1.3 s at p99, where the server's accept backlog overflowed).
            try:
                await conn.open()
            except (OSError, asyncio.TimeoutError):
                conn.close()  # its first request connects again and records the error
            connected[0] += 1
            if connected[0] == slots:
                all_connected.set()
            await all_connected.wait()
            while cursor[0] < len(items) and watch.stall is None:
                i = cursor[0]
                cursor[0] += 1
                recs = await one(conn, items[i])
                for rec in recs:
                    rec["index"] = items[i]["_index"]
                records.extend(recs)
        finally:
            conn.close()

    watcher = asyncio.ensure_future(monitor())
    await asyncio.gather(*[slot() for _ in range(slots)])
    done[0] = True
    watcher.cancel()
    return records, lags


async def _open_loop(host, port, items, cap, timeout, one, records, watch, conns):
    """Open loop: each request is sent at its arrival time (`at`, seconds after the start; Poisson
    gaps drawn by the harness), whatever is still in flight, up to `cap` requests at once (a
    request past the cap waits: its record's `scheduled` says when it was due)."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(max(1, cap))
    idle = []
    t0, wall0 = loop.time(), now()

    async def fire(item):
        async with gate:
            if idle:
                conn = idle.pop()
            else:
                conn = Connection(host, port, min(timeout, 30.0))
                conns.append(conn)  # a stall aborts it with the others
            try:
                recs = await one(conn, item)
            finally:
                idle.append(conn)
        for rec in recs:
            rec["index"], rec["scheduled"] = item["_index"], round(wall0 + item["at"], 6)
        records.extend(recs)

    tasks = []
    for item in sorted(items, key=lambda i: i["at"]):
        if watch.stall is not None:
            break  # a stalled engine ends the phase: what is not sent yet is not sent
        delay = t0 + item["at"] - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(fire(item)))
    try:
        await asyncio.gather(*tasks)
    finally:
        for conn in idle:
            conn.close()


def run_process(spec, items, concurrency, proc, watch):
    """One client process: an event loop with `concurrency` slots; returns records and self-checks."""
    cpu0, wall0 = time.process_time(), time.monotonic()
    records, lags = asyncio.run(
        _run_items(
            spec["url"],
            items,
            concurrency,
            proc,
            spec.get("timeout", 600.0),
            spec.get("lag_interval", 0.01),
            watch,
        )
    )
    return {
        "stall": watch.stall,
        "proc": proc,
        "pid": os.getpid(),
        "concurrency": concurrency,
        "requests": len(items),
        "cpu_s": round(time.process_time() - cpu0, 4),
        "wall_s": round(time.monotonic() - wall0, 4),
        "lag_ms": _quantiles(lags),
        "records": records,
    }


def _share(total, parts, k):
    return total // parts + (1 if k < total % parts else 0)


def run_phase(spec, items, concurrency, processes, watch):
    """Run items with `concurrency` in flight, split over `processes` forked client processes."""
    watch.heard()
    for i, item in enumerate(items):
        item["_index"] = i
    processes = max(1, min(processes, concurrency, len(items) or 1))
    if processes == 1:
        outs = [run_process(spec, items, concurrency, 0, watch)]
    else:
        go_read, go_write = os.pipe()
        children = []
        for k in range(processes):
            out_read, out_write = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: wait for the start signal so every process starts together
                status = 1
                try:
                    os.close(out_read)
                    os.close(go_write)
                    os.read(go_read, 1)
                    share = _share(concurrency, processes, k)
                    out = run_process(spec, items[k::processes], share, k, watch)
                    with os.fdopen(out_write, "wb") as f:
                        f.write(json.dumps(out).encode())
                    status = 0
                finally:
                    os._exit(status)
            os.close(out_write)
            children.append((pid, out_read))
        os.close(go_read)
        os.write(go_write, b"g" * processes)
        os.close(go_write)
        outs = []
        for pid, fd in children:
            chunks = []
            while True:
                data = os.read(fd, 1 << 20)
                if not data:
                    break
                chunks.append(data)
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            if status != 0 or not chunks:
                raise SystemExit(f"client process {pid} failed (status {status})")
            outs.append(json.loads(b"".join(chunks)))
    records = sorted(
        (r for o in outs for r in o.pop("records")), key=lambda r: (r["index"], r.get("turn", 0))
    )
    for item in items:
        item.pop("_index", None)
    return outs, records


def _usage_totals(records):
    """Token totals the server reported for these requests (usage of each answer)."""
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    for r in records:
        usage = r.get("usage") or {}
        totals["prompt_tokens"] += usage.get("prompt_tokens") or 0
        totals["completion_tokens"] += usage.get("completion_tokens") or 0
        totals["cached_tokens"] += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return totals


def _stall(procs, phase):
    """The stall as the first client process that saw it tells it, or None."""
    seen = [p["stall"] for p in procs if p.get("stall")]
    return dict(seen[0], phase=phase, processes=len(seen)) if seen else None


# The instruction sets that decide which kernels an engine runs on a CPU (and so which near-ties
# it turns): what a golden's provenance and a run's evidence name of the machine.
ISA_FLAGS = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "amx_bf16",
    "amx_tile",
    "asimd",
    "sve",
)


def parse_machine(arch, cpuinfo):
    """The machine from `uname -m` and /proc/cpuinfo's text: architecture, CPU model and its
    kernel-relevant flags (pure; preflight reads the same over the transport)."""
    out = {"arch": arch.strip(), "cpu": "", "isa": []}
    flags = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and not out["cpu"]:
            out["cpu"] = " ".join(value.split())[:200]
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    out["isa"] = [f for f in ISA_FLAGS if f in flags]
    return out


def machine(cpuinfo="/proc/cpuinfo"):
    """The machine the client runs on (`parse_machine`)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    return parse_machine(os.uname().machine, text)


def run_load(spec):
    """Warm-up (not recorded), then the measured phase; raw records and per-process self-checks."""
    concurrency = spec.get("concurrency", 1)
    processes = spec.get("processes", 1)
    watch = Watch(spec.get("stall_s"), spec.get("beat_s"))
    out = {
        "client": {
            "version": VERSION,
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "machine": machine(),
            "processes": processes,
            "concurrency": concurrency,
        }
    }
    if spec.get("warmup"):
        t0 = now()
        warm_procs, warm = run_phase(spec, spec["warmup"], concurrency, processes, watch)
        errors = [r["error"] for r in warm if r["error"]]
        firsts = [r for r in warm if r.get("first") and r.get("send") and not r["error"]]
        out["warmup"] = {
            "requests": len(warm),
            "errors": len(errors),
            "first_error": errors[0] if errors else None,
            "wall_s": round(now() - t0, 3),
            # the server's /metrics count warm-up requests too: their totals balance the account
            "usage": _usage_totals(warm),
            "e2e_s": round(sum(r["end"] - r["send"] for r in warm if r.get("end") is not None), 6),
            # and SGLang's TTFT histogram times them: their TTFTs take the warm-up back out
            "ttft_s": round(sum(r["first"] - r["send"] for r in firsts), 6),
            "first_tokens": len(firsts),
        }
        out["stall"] = _stall(warm_procs, "warmup")
        if out["stall"]:  # the measured phase is not sent to a server that stopped answering
            out["procs"], out["records"] = warm_procs, []
            return out
    sampler = PowerSampler(spec["power"]) if spec.get("power") else None
    out["start"] = now()
    if sampler:
        sampler.start()
    try:
        procs, records = run_phase(
            spec, spec.get("requests") or spec.get("sessions") or [], concurrency, processes, watch
        )
    finally:
        if sampler:
            out["power"] = sampler.finish()
    out["stall"] = _stall(procs, "measured")
    out["end"] = now()
    out["client_cpu_s"] = round(sum(p["cpu_s"] for p in procs), 4)
    out["procs"] = procs
    out["records"] = records
    return out


# --- power beside the phase ---------------------------------------------------------------------

RAPL = "/sys/class/powercap"


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def rapl_zones(root=RAPL):
    """Every readable RAPL zone: name, energy_uj, max_energy_range_uj (energy_uj is root-only on
    most kernels since 2020)."""
    zones = {}
    for zone in sorted(glob.glob(root + "/intel-rapl:*")):
        energy = _read(zone + "/energy_uj")
        if energy is not None:
            zones[os.path.basename(zone)] = {
                "name": _read(zone + "/name"),
                "energy_uj": energy,
                "max_energy_range_uj": _read(zone + "/max_energy_range_uj") or "0",
            }
    return zones


def rapl_absent(root=RAPL):
    """Why RAPL gave nothing: no powercap at all, no zone in it, or zones this user cannot read."""
    if not os.path.isdir(root):
        return "no RAPL on this host: " + root + " does not exist"
    if not glob.glob(root + "/intel-rapl:*"):
        return "no RAPL on this host: no intel-rapl zone under " + root
    return "RAPL zones under " + root + " but no energy_uj readable by this user (root-only on most kernels)"


class PowerSampler(threading.Thread):
    """Samples the host's power tools every `interval` s while the measured phase runs: each
    tool's raw output is kept (the harness parses it), and why a tool gave nothing. The tools
    come as data (`options["tools"]`: name, argv, the record's key, and `lines` kept under one
    header or `reads` kept whole with their time); RAPL's counters are read at both ends."""

    def __init__(self, options):
        super().__init__(daemon=True)
        self.interval = float(options.get("interval", 0.5))
        self.stop = threading.Event()
        self.tools = [dict(t, path=shutil.which(t["argv"][0])) for t in options.get("tools") or ()]
        self.rapl_root = options.get("rapl", RAPL)
        self.rapl_before = rapl_zones(self.rapl_root)
        self.t0 = now()
        self.kept = {t["key"]: [] for t in self.tools}
        self.errors = []

    def _sample(self):
        for tool in self.tools:
            if not tool["path"]:
                continue
            try:
                done = subprocess.run(
                    [tool["path"]] + tool["argv"][1:], capture_output=True, text=True, timeout=10
                )
            except (OSError, subprocess.SubprocessError) as exc:
                self.errors.append(f"{tool['path']}: {exc}")
                continue
            if done.returncode != 0:
                self.errors.append(f"{tool['path']} exited {done.returncode}: {done.stderr[:200]}")
            elif tool["style"] == "lines":
                self.kept[tool["key"]] += done.stdout.strip().splitlines()
            else:
                self.kept[tool["key"]].append({"t": now(), "text": done.stdout})

    def run(self):
        while True:
            self._sample()
            if self.stop.wait(self.interval):
                return

    def finish(self):
        self.stop.set()
        if self.is_alive():
            self.join(30)
        out = {"t0": self.t0, "t1": now(), "interval": self.interval, "errors": self.errors[:5]}
        after = rapl_zones(self.rapl_root)
        if self.rapl_before and after:
            out["rapl"] = {"before": self.rapl_before, "after": after}
        for tool in self.tools:
            kept = self.kept[tool["key"]]
            if kept and tool["style"] == "lines":
                out[tool["key"]] = tool.get("header", "") + "\n" + "\n".join(kept) + "\n"
            elif kept:
                out[tool["key"]] = kept
        absent = []
        if not self.rapl_before:
            absent.append(rapl_absent(self.rapl_root))
        absent += [f"{t['name']} not found" for t in self.tools if not t["path"]]
        out["absent"] = absent
        return out


# --- small actions ------------------------------------------------------------------------------


def get(url, timeout=5.0):
    import http.client

    host, port, path = _split(url)
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", (path or "/") + ("?" + parts.query if parts.query else ""))
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def health(spec):
    try:
        status, body = get(spec["url"], spec.get("timeout", 5.0))
    except OSError as exc:
        return {"ready": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ready": status == 200, "status": status, "body": body[:500]}


def main(argv):
    spec = json.loads(argv[1])
    action = spec["action"]
    if action == "health":
        out = health(spec)
    elif action == "get":
        try:
            status, body = get(spec["url"], spec.get("timeout", 10.0))
            out = {"status": status, "body": body}
        except OSError as exc:
            out = {"status": None, "error": str(exc)}
    elif action in ("requests", "load"):
        out = run_load(spec)
    elif action == "power":  # one window of readings on a host of the cell the client is not on
        sampler = PowerSampler(spec)
        sampler.start()
        time.sleep(float(spec.get("window", 2.0)))
        out = sampler.finish()
    else:
        raise SystemExit(f"unknown action {action!r}")
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
