"""A stub OpenAI-compatible streaming server, for the load generator's own tests and bench.

It is a stub on purpose: a real engine cannot be told to flood tokens faster than any client
reads them, to stop early, to over-report its token counts or to drop a connection mid-stream,
and those are exactly the cases that prove the client and the checks right. It pre-renders its
SSE chunks, so in flood mode (`itl=0`) it costs far less CPU per token than the client reading
them, which is what measuring the client's ceiling needs. It also serves llama.cpp-style
`/metrics` speculative counters that advance with every request, to test the counter diff, or
(`metrics_format="sglang"`) SGLang's counters as sglang 0.5.23 names and labels them, with an
acceptance that may differ per workload (`accept_when`: code prompts accept more than prose). Asked
with `tools`, it can answer with a tool call whose arguments are what it is told to send
(`tool_arguments`: e.g. arguments that break the tool's schema), and stream a reasoning field.
Given `--tp N --devices-dir D` it stands in for an engine on accelerators that cannot be shared:
it holds a lock on each accelerator its device mask shows (`--mask-variable`, unset: all of
`--accelerators`) and refuses to start when one is held by another or fewer than N are visible;
it prints the mask at start and serves it at `/devices`.

Run standalone for bench: `PYTHONPATH=tools python -m devlab.stub --port 19010 --itl 0`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import threading
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class StubConfig:
    ttft: float = 0.0  # seconds before the first token
    itl: float = 0.0  # seconds between chunks; 0 floods
    tokens_per_chunk: int = 1
    stop_after: int | None = None  # stop early (finish "stop") after this many tokens
    usage_factor: float = 1.0  # report usage.completion_tokens = streamed tokens x factor
    trailing_eos: int = 0  # append this many "<|im_end|>" pieces at the end of the text
    fail_every: int = 0  # every Nth request answers HTTP 500
    drop_after: int | None = None  # close the connection after this many chunks
    piece: str = "tok "
    draft_per_token: float = 0.5  # /metrics: draft tokens per generated token
    accept_rate: float = 0.5  # /metrics: accepted share of draft tokens
    tokens_per_draft: int = 4  # /metrics: draft tokens per verification step
    metrics_format: str = "llama.cpp"  # or "sglang": which engine's /metrics the stub prints
    # /metrics: accept_rate of a request whose prompt contains the text (first match wins)
    accept_when: tuple[tuple[str, float], ...] = ()
    tool_arguments: str | None = None  # asked with tools: call the first one with these arguments
    reasoning: str = ""  # chat: stream this as the reasoning field (reasoning_content) first


BACKLOG = 4096  # 1024 streams connect at once; asyncio's default of 100 drops SYNs (1 s retries)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: dict) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


class StubServer:
    """Serve on host:port (default 127.0.0.1) in a background thread (`with StubServer(cfg) as s`)."""

    def __init__(self, config: StubConfig = StubConfig(), port: int = 0, host: str = "127.0.0.1"):
        self.config = config
        self.port = port
        self.host = host
        self.requests = 0
        self.counters = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "predicted": 0}
        self.counters.update({"prompt": 0, "finished": 0, "seconds": 0.0})
        # How late the stub itself was (s): first token after ttft, each later chunk after itl.
        # A bench subtracts nothing with it, but tells the stub's slack from the client's.
        self.late: dict[str, list[float]] = {"ttft": [], "itl": []}
        self.devices: dict = {}  # /devices: the mask it was started under and what it holds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> StubServer:
        self._thread = threading.Thread(target=self._serve_thread, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("stub server did not start")
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def _serve_thread(self) -> None:
        asyncio.run(self._serve_until_stopped())  # asyncio.run cancels open handlers on the way out

    async def _serve_until_stopped(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._handle, self.host, self.port, limit=1 << 24, backlog=BACKLOG
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def serve_forever(self) -> None:
        server = await asyncio.start_server(
            self._handle, self.host, self.port, limit=1 << 24, backlog=BACKLOG
        )
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            await server.serve_forever()

    # -- HTTP ----------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path = line.decode("latin-1").split()[:2]
                length = 0
                while (h := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = h.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                if method == "GET":
                    await self._get(writer, path)
                elif not await self._post(writer, path, json.loads(body or b"{}")):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    async def _plain(self, writer, status: int, text: str, ctype: str = "application/json") -> None:
        data = text.encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _get(self, writer, path: str) -> None:
        if path.startswith("/devices"):
            await self._plain(writer, 200, json.dumps(self.devices))
        elif path.startswith("/stats"):
            await self._plain(writer, 200, json.dumps(self.late))
            if "reset" in path:
                self.late = {"ttft": [], "itl": []}
        elif path.startswith("/metrics") and self.config.metrics_format == "sglang":
            await self._plain(writer, 200, self._sglang_metrics(), "text/plain")
        elif path.startswith("/metrics"):
            c = self.counters
            text = "".join(
                f"# TYPE llamacpp:{name} counter\nllamacpp:{name} {value}\n"
                for name, value in (
                    ("tokens_predicted_total", c["predicted"]),
                    ("spec_decode_num_draft_tokens_total", c["draft_tokens"]),
                    ("spec_decode_num_accepted_tokens_total", c["accepted"]),
                    ("spec_decode_num_drafts_total", c["drafts"]),
                )
            )
            await self._plain(writer, 200, text, "text/plain")
        else:
            await self._plain(writer, 200, '{"status":"ok"}')

    def _sglang_metrics(self) -> str:
        """SGLang's counters (names and labels of sglang 0.5.23's TokenizerMetricsCollector): one
        verification call yields its accepted draft tokens plus one, so calls = tokens - accepted."""
        c, labels = self.counters, 'model_name="stub",engine_type="unified"'
        samples = (
            ("prompt_tokens_total", f'{labels},is_streaming="true"', c["prompt"]),
            ("generation_tokens_total", f'{labels},is_streaming="true"', c["predicted"]),
            ("num_requests_total", f'{labels},is_streaming="true"', c["finished"]),
            ("spec_verify_calls_total", labels, c["predicted"] - c["accepted"]),
            ("e2e_request_latency_seconds_sum", labels, round(c["seconds"], 6)),
        )
        return "".join(f"sglang:{name}{{{label}}} {float(value)}\n" for name, label, value in samples)

    async def _post(self, writer, path: str, body: dict) -> bool:
        """Stream one completion; False when the connection was dropped on purpose."""
        loop = asyncio.get_running_loop()
        self.requests += 1
        began = loop.time()
        cfg = replace(self.config, **(body.get("stub") or {}))
        if cfg.fail_every and self.requests % cfg.fail_every == 0:
            await self._plain(writer, 500, '{"error":{"message":"injected failure"}}')
            return True
        chat = path.endswith("/chat/completions")
        prompt = json.dumps(body.get("messages") or body.get("prompt") or "")
        rate = next((r for text, r in cfg.accept_when if text in prompt), cfg.accept_rate)
        cfg = replace(cfg, accept_rate=rate)
        if chat and body.get("tools") and cfg.tool_arguments is not None:
            await self._tool_call(writer, body, cfg, began)
            return True
        want = int(body.get("max_tokens", 16))
        n = min(want, cfg.stop_after) if cfg.stop_after is not None else want
        per = max(1, cfg.tokens_per_chunk)
        piece = cfg.piece * per
        head = {
            "id": f"stub-{self.requests}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": 0,
            "model": body.get("model", "stub"),
        }
        one = {
            **head,
            "choices": [
                {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                if chat
                else {"index": 0, "text": piece, "finish_reason": None}
            ],
        }
        event = _event(one)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        if cfg.ttft:
            await asyncio.sleep(cfg.ttft)
        if chat and cfg.reasoning:
            writer.write(
                _event({**head, "choices": [{"index": 0, "delta": {"reasoning_content": cfg.reasoning}}]})
            )
        chunks = (n + per - 1) // per
        if cfg.itl or cfg.drop_after is not None:
            due = began + cfg.ttft
            for i in range(chunks):
                if cfg.drop_after is not None and i >= cfg.drop_after:
                    await writer.drain()
                    writer.close()
                    return False
                self.late["itl" if i else "ttft"].append(loop.time() - due)
                writer.write(event)
                await writer.drain()
                if cfg.itl and i + 1 < chunks:
                    due = loop.time() + cfg.itl
                    await asyncio.sleep(cfg.itl)
        else:
            writer.write(event * chunks)
        eos = "<|im_end|>" * cfg.trailing_eos
        finish = "length" if n == want else "stop"
        last = {"index": 0, "finish_reason": finish}
        last.update({"delta": {"content": eos}} if chat else {"text": eos})
        draft = int(n * cfg.draft_per_token)
        accepted = int(draft * cfg.accept_rate)
        self.counters["predicted"] += n
        self.counters["draft_tokens"] += draft
        self.counters["accepted"] += accepted
        self.counters["drafts"] += (draft + cfg.tokens_per_draft - 1) // cfg.tokens_per_draft
        usage = {
            "prompt_tokens": len(body.get("prompt") or []) if not chat else 8,
            "completion_tokens": int(n * cfg.usage_factor),
        }
        # counted before the last bytes leave, as a server does: a read after the answer sees it
        self.counters["prompt"] += usage["prompt_tokens"]
        self.counters["finished"] += 1
        self.counters["seconds"] += asyncio.get_running_loop().time() - began
        writer.write(
            _event({**head, "choices": [last]})
            + _event(
                {
                    **head,
                    "choices": [],
                    "usage": usage,
                    # llama-server's per-request account: prompt_ms is its own time to the first token
                    "timings": {"draft_n": draft, "draft_n_accepted": accepted, "prompt_ms": cfg.ttft * 1000},
                }
            )
            + _chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )
        await writer.drain()
        return True

    async def _tool_call(self, writer, body: dict, cfg: StubConfig, began: float) -> None:
        """One streamed tool call of the first offered tool, its arguments in two pieces, as
        llama-server and SGLang stream them: the name first, then argument fragments."""
        head = {
            "id": f"stub-{self.requests}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "stub",
        }
        name = body["tools"][0]["function"]["name"]
        args = cfg.tool_arguments or ""
        half = len(args) // 2
        first = {"index": 0, "id": f"call_{self.requests}", "type": "function"}
        deltas = [
            {**first, "function": {"name": name, "arguments": ""}},
            {"index": 0, "function": {"arguments": args[:half]}},
            {"index": 0, "function": {"arguments": args[half:]}},
        ]
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        if cfg.reasoning:
            writer.write(
                _event({**head, "choices": [{"index": 0, "delta": {"reasoning_content": cfg.reasoning}}]})
            )
        for d in deltas:
            writer.write(_event({**head, "choices": [{"index": 0, "delta": {"tool_calls": [d]}}]}))
        n = len(deltas)
        self.counters["predicted"] += n
        self.counters["prompt"] += 8
        self.counters["finished"] += 1
        self.counters["seconds"] += asyncio.get_running_loop().time() - began
        usage = {"prompt_tokens": 8, "completion_tokens": n}
        writer.write(
            _event({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
            + _event({**head, "choices": [], "usage": usage})
            + _chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )
        await writer.drain()


def hold_devices(visible: list[int], directory: str) -> list:
    """A lock on each accelerator shown (kept open for the process's life), as a real engine
    holds the memory of the GPUs it runs on; one held by another is a refusal, with its holder."""
    os.makedirs(directory, exist_ok=True)
    held = []
    for j in visible:
        lock = open(os.path.join(directory, f"acc-{j}.lock"), "a+")  # noqa: SIM115 - held till exit
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise SystemExit(
                f"accelerator {j} is in use by another process ({lock.read().strip()})"
            ) from None
        lock.truncate(0)
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        held.append(lock)
    return held


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=19010)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (a testbed host's own)")
    parser.add_argument("--ttft", type=float, default=0.0)
    parser.add_argument("--itl", type=float, default=0.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    # accepted as llama-server's: /metrics is always served, and a run reads it around every phase
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--tool-arguments", help="asked with tools: call the first with these arguments")
    parser.add_argument("--reasoning", default="", help="stream this as the reasoning field first")
    parser.add_argument("--tp", type=int, default=0, help="accelerators its ranks need (0: none)")
    parser.add_argument("--accelerators", type=int, default=8, help="the host's, shown with no mask")
    parser.add_argument("--mask-variable", default="CUDA_VISIBLE_DEVICES")
    parser.add_argument("--devices-dir", help="where the accelerators' locks are (with --tp)")
    args = parser.parse_args(argv)
    mask = os.environ.get(args.mask_variable)
    visible = [int(j) for j in mask.split(",") if j] if mask is not None else list(range(args.accelerators))
    print(f"devices: {args.mask_variable}={mask if mask is not None else '(unset)'}", flush=True)
    if args.tp and len(visible) < args.tp:
        raise SystemExit(f"--tp {args.tp} needs {args.tp} accelerators, {len(visible)} visible")
    held = visible if args.tp and args.devices_dir else []
    locks = hold_devices(held, args.devices_dir) if held else []
    cfg = StubConfig(
        ttft=args.ttft,
        itl=args.itl,
        tokens_per_chunk=args.tokens_per_chunk,
        tool_arguments=args.tool_arguments,
        reasoning=args.reasoning,
    )
    server = StubServer(cfg, args.port, args.host)
    server.devices = {"variable": args.mask_variable, "mask": mask, "held": held, "locks": len(locks)}
    print(f"stub serving on {server.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve_forever())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
