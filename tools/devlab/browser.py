"""Headless Chromium over the DevTools protocol, enough to check a report as a reader sees it.

Allure 3's report is a JavaScript app: the cells, charts and attachments exist only after its
scripts ran, so a check must look at the live DOM, click, and take a screenshot. This is a
small stdlib client (HTTP for the target list, a minimal WebSocket for CDP) instead of a
browser-automation package, because those download browsers of their own; we use the system's
Debian `chromium`, started with every background-networking feature off (the lab network is
closed and Chromium would otherwise keep dialling out).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from dayzero.errors import DayzeroError

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)


class BrowserError(DayzeroError):
    """Chromium is missing, did not start, or a page check timed out."""


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError("no chromium on PATH: apt-get install chromium (tools/setup does)")


class _WebSocket:
    """The client side of RFC 6455, text frames only: what CDP needs."""

    def __init__(self, url: str, timeout: float):
        rest = url.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise BrowserError("DevTools closed the WebSocket handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise BrowserError(f"DevTools refused the WebSocket: {head[:200]!r}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text: str) -> None:
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(header + mask + masked)

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise BrowserError("DevTools closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise BrowserError("DevTools closed the WebSocket")
            if opcode in (0x9, 0xA):  # ping/pong: not used by Chromium's DevTools server
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """One headless Chromium with a fresh profile, killed (its whole group) on close."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 60):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="dayzero-chromium-")
        port_file = Path(self.profile) / "DevToolsActivePort"
        self.proc = subprocess.Popen(
            [
                chromium_path(),
                *FLAGS,
                f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrowserError("chromium did not open its DevTools port")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        pages = json.loads(
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10).read()
        )
        page = next(p for p in pages if p.get("type") == "page")
        self.ws = _WebSocket(page["webSocketDebuggerUrl"], timeout)
        self._id = 0
        # the report scrolls inside its own panes: a tall viewport is what a full-page shot needs
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
            self.ws = None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params) -> dict:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    def goto(self, url: str) -> None:
        """Navigate and wait until the new document has loaded (not just the navigation started)."""
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_for(
            f"location.href === {json.dumps(url)} && document.readyState === 'complete'",
            what=f"{url} to load",
        )

    def js(self, expression: str):
        """Evaluate in the page (promises awaited) and return the value."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"page script failed: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float | None = None, what: str = ""):
        """Poll a JS expression until it is truthy; returns its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                seen = self.js("location.href + ' :: ' + (document.body?.innerText || '')") or ""
                raise BrowserError(f"timed out waiting for {what or expression}; page: {seen[:500]!r}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> Path:
        """PNG of the viewport (see `height`: the report's panes scroll, the page does not)."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path


# --- reading an Allure 3 (awesome) report as a person would --------------------------------

# A collapsed group's arrow icon lacks the `...--opened` class; the report remembers what was
# open between page loads, so only collapsed groups are clicked.
_EXPAND_TREE = """(() => { let n = 0;
  for (const s of document.querySelectorAll('[data-testid=tree-section]')) {
    const icon = s.querySelector('[data-testid=tree-arrow] svg');
    if (icon && ![...icon.classList].some(c => c.includes('--opened'))) {
      s.querySelector('[data-testid=tree-section-title]').click(); n++;
    }
  } return n; })()"""
_LEAF_TITLES = "[...document.querySelectorAll('[data-testid=tree-leaf-title]')].map(e => e.textContent)"
_ATTACHMENT_NAMES = """[...document.querySelectorAll('[data-testid=test-result-attachment-header]')]
  .map(e => e.querySelector('button').textContent.replace(/^\\d+/, ''))"""


def _attachment_header(name: str) -> str:
    return (
        "[...document.querySelectorAll('[data-testid=test-result-attachment-header]')]"
        f".find(e => e.querySelector('button').textContent.replace(/^\\d+/, '') === {json.dumps(name)})"
    )


class AllureReportPage:
    """The awesome report's tree, a test result's attachments, an attachment opened."""

    def __init__(self, browser: Browser, index: Path):
        self.browser = browser
        self.url = Path(index).resolve().as_uri()

    def open_tree(self) -> list[str]:
        """Load the report, expand every group, return the titles of the results (our cell ids)."""
        b = self.browser
        b.goto(self.url)
        b.wait_for("document.querySelectorAll('[data-testid=tree-section]').length", what="the result tree")
        for _ in range(10):
            if not b.js(_EXPAND_TREE):
                break
            time.sleep(0.3)
        b.wait_for("document.querySelectorAll('[data-testid=tree-leaf]').length", what="tree leaves")
        return b.js(_LEAF_TITLES)

    def open_result(self, title: str) -> list[str]:
        """Click a result in the tree, go to its Attachments tab, return the attachment names."""
        b = self.browser
        b.js(
            "[...document.querySelectorAll('[data-testid=tree-leaf]')].find(e => "
            f"e.querySelector('[data-testid=tree-leaf-title]').textContent === {json.dumps(title)}).click()"
        )
        b.wait_for(
            "document.querySelector('[data-testid=test-result-info-title]')?.textContent === "
            + json.dumps(title),
            what=f"the page of {title}",
        )
        b.js("document.querySelector('[data-testid=test-result-tab-attachments]').click()")
        b.wait_for("location.hash.endsWith('/attachments')", what="the Attachments tab")
        return b.wait_for(_ATTACHMENT_NAMES, what="attachments")

    def open_attachment(self, name: str) -> dict:
        """Expand one attachment; returns what rendered: image sizes and visible text."""
        b = self.browser
        header = _attachment_header(name)
        if not b.js(f"!!{header}"):
            raise BrowserError(f"no attachment named {name!r} on this page")
        b.js(f"{header}.querySelector('button').click()")
        return b.wait_for(
            f"""(() => {{ const box = {header}.parentElement;
                const imgs = [...box.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0);
                const code = box.querySelector('[data-testid=code-attachment-content]');
                if (!imgs.length && !(code && code.textContent.length)) return null;
                return {{images: imgs.map(i => [i.naturalWidth, i.naturalHeight]),
                         text: code ? code.textContent.slice(0, 50000) : ''}};
            }})()""",
            what=f"attachment {name!r} to render",
        )

    def back_to_tree(self) -> list[str]:
        return self.open_tree()

    def categories(self) -> str:
        """The Categories tab's text (category names with their counts)."""
        b = self.browser
        b.goto(self.url)
        b.wait_for("document.querySelector('[data-testid=nav-tab-categories]')", what="the Categories tab")
        b.js("document.querySelector('[data-testid=nav-tab-categories]').click()")
        b.wait_for("location.hash === '#categories'", what="the Categories page")
        time.sleep(0.5)
        return b.js("document.querySelector('[data-testid=base-layout]').innerText")

    def history(self, title: str) -> int:
        """How many earlier runs the result's History tab lists (the trend behind it)."""
        b = self.browser
        self.open_tree()
        self.open_result(title)
        b.js("document.querySelector('[data-testid=test-result-tab-history]').click()")
        b.wait_for("location.hash.endsWith('/history')", what="the History tab")
        time.sleep(0.5)
        return b.js("document.querySelectorAll('[data-testid=test-result-history-item]').length")
