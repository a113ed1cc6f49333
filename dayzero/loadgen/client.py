"""dayzero host client: health polls, probes and load against an OpenAI-compatible server.

Runs on the host with the host's python3 and the standard library only: the transport sends
this file on stdin (`python3 - '<spec json>'`). It prints one JSON document on stdout. Raw
per-request records (send time, first-token time, every chunk time, token counts, finish reason,
error) come back unchanged; every summary is computed by the harness from them.
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse


def _conn(url, timeout):
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout), parts.path


def get(url, timeout=5.0):
    conn, path = _conn(url, timeout)
    try:
        conn.request("GET", path or "/")
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


def stream_request(base, req, timeout):
    """One streamed request; returns its raw record. Times are time.time() seconds."""
    kind = req.get("kind", "chat")
    body = {
        "model": req.get("model", "default"),
        "max_tokens": req["max_tokens"],
        "temperature": req.get("temperature", 0.0),
        "seed": req.get("seed", 0),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body.update(req.get("extra", {}))
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": req["prompt"]}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = req["prompt"]
        path = "/v1/completions"
    record = {
        "id": req.get("id"),
        "kind": kind,
        "max_tokens": req["max_tokens"],
        "send": None,
        "first": None,
        "chunks": [],
        "text": "",
        "finish_reason": None,
        "usage": None,
        "error": None,
        "end": None,
    }
    conn, base_path = _conn(base, timeout)
    try:
        record["send"] = time.time()
        conn.request(
            "POST",
            base_path.rstrip("/") + path,
            json.dumps(body),
            {"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        resp = conn.getresponse()
        if resp.status != 200:
            record["error"] = f"HTTP {resp.status}: {resp.read()[:300].decode('utf-8', 'replace')}"
            return record
        text = []
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            now = time.time()
            if event.get("usage"):
                record["usage"] = event["usage"]
            for choice in event.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") if kind == "chat" else choice.get("text")
                if piece:
                    if record["first"] is None:
                        record["first"] = now
                    record["chunks"].append(now)
                    text.append(piece)
                if choice.get("finish_reason"):
                    record["finish_reason"] = choice["finish_reason"]
            if "timings" in event:
                record["timings"] = event["timings"]
        record["text"] = "".join(text)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        record["end"] = time.time()
        conn.close()
    return record


def run_requests(spec):
    """Send requests with at most `concurrency` in flight (one thread per slot)."""
    requests = spec["requests"]
    records = [None] * len(requests)
    lock = threading.Lock()
    cursor = [0]

    def worker():
        while True:
            with lock:
                i = cursor[0]
                cursor[0] += 1
            if i >= len(requests):
                return
            records[i] = stream_request(spec["url"], requests[i], spec.get("timeout", 300))

    cpu0 = time.process_time()
    start = time.time()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(spec.get("concurrency", 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = time.time()
    return {"start": start, "end": end, "client_cpu_s": time.process_time() - cpu0, "records": records}


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
    elif action == "requests":
        out = run_requests(spec)
    else:
        raise SystemExit(f"unknown action {action!r}")
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
