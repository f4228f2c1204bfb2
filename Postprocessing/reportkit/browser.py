"""Open a local HTML file in headless Chromium, collect JavaScript errors, evaluate a probe and take a screenshot.

Talks the DevTools protocol over ``--remote-debugging-pipe`` (JSON messages separated by NUL bytes on file
descriptors 3 and 4), so it needs no package and no network port. Used by ``report.py --screenshot`` and by the
report's browser test.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# Quiet and offline: no GPU, no first-run UI, no background fetches.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--hide-scrollbars", "--mute-audio")


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or did not answer in time."""


def find_chromium() -> str | None:
    """$BROWSER_PATH, else the first Chromium/Chrome on PATH."""
    env = os.environ.get("BROWSER_PATH")
    if env and Path(env).is_file():
        return env
    return next((p for p in (shutil.which(n) for n in CHROMIUM_NAMES) if p), None)


@dataclass
class RenderResult:
    errors: list[str] = field(default_factory=list)  # uncaught exceptions, console.error, error log entries
    console: list[str] = field(default_factory=list)  # every console/log message, for diagnostics
    probe: Any = None  # the value of the probe expression
    page_height: int = 0


class _Pipe:
    """A Chromium process and its DevTools pipe."""

    def __init__(self, executable: str, profile_dir: str) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds() -> None:  # Chromium reads commands on fd 3 and writes replies on fd 4
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", "--remote-debugging-pipe",
                "about:blank"]
        logger.debug("starting %s", " ".join(args))
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, close_fds=False, preexec_fn=child_fds)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._messages: queue.Queue = queue.Queue()
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr: list[bytes] = []
        threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                data = os.read(self._from_chrome, 1 << 16)
            except OSError:
                data = b""
            if not data:
                self._messages.put(None)
                return
            buffer += data
            *complete, buffer = buffer.split(b"\0")
            for raw in complete:
                self._messages.put(json.loads(raw))

    def stderr_tail(self) -> str:
        return b"".join(self._stderr[-20:]).decode(errors="replace")

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict[str, Any]:
        """Send one command and wait for its reply; events that arrive meanwhile go to ``self.events``."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._get(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, session: str, timeout: float = 60.0) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        deadline = time.monotonic() + timeout
        while True:
            event = self._get(deadline, method)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def _get(self, deadline: float, what: str) -> dict[str, Any]:
        try:
            message = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise BrowserError(f"Chromium did not answer {what} in time") from None
        if message is None:
            raise BrowserError(f"Chromium exited while waiting for {what}: {self.stderr_tail()}")
        return message

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.call("Browser.close", timeout=10)
        except (BrowserError, OSError) as exc:
            logger.debug("Browser.close failed: %s", exc)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass


def _error_messages(events: Sequence[dict[str, Any]], session: str) -> tuple[list[str], list[str]]:
    errors, console = [], []
    for e in events:
        if e.get("sessionId") != session:
            continue
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            text = (d.get("exception") or {}).get("description") or d.get("text", "exception")
            errors.append(f"uncaught: {text} (line {d.get('lineNumber')})")
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            console.append(f"console.{params.get('type')}: {text}")
            if params.get("type") in ("error", "assert"):
                errors.append(f"console.{params.get('type')}: {text}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            console.append(f"log {entry.get('level')}: {entry.get('text')} {entry.get('url', '')}".strip())
            if entry.get("level") == "error":
                errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
    return errors, console


def render(html_path: Path, png_path: Path | None = None, width: int = 1280, height: int | None = None,
           probe: str | None = None, timeout: float = 90.0) -> RenderResult:
    """Load ``html_path``; return its errors and the value of the JavaScript expression ``probe``; save a PNG of
    the whole page (or of its top ``height`` pixels) to ``png_path``."""
    executable = find_chromium()
    if executable is None:
        raise BrowserError("no Chromium found: install the Debian package 'chromium' "
                           "(apt-get install -y --no-install-recommends chromium) or set BROWSER_PATH")
    url = Path(html_path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="report-chromium-") as profile:
        pipe = _Pipe(executable, profile)
        try:
            target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
            session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
                pipe.call(domain, session=session)
            metrics = {"width": width, "height": height or 900, "deviceScaleFactor": 1, "mobile": False}
            pipe.call("Emulation.setDeviceMetricsOverride", metrics, session=session)
            pipe.call("Page.navigate", {"url": url}, session=session, timeout=timeout)
            pipe.wait_event("Page.loadEventFired", session, timeout=timeout)
            # let plotly finish its first (async) drawing pass
            settle = "new Promise(r => requestAnimationFrame(() => setTimeout(r, 300)))"
            pipe.call("Runtime.evaluate", {"expression": settle, "awaitPromise": True}, session=session)
            result = RenderResult()
            if probe:
                reply = pipe.call("Runtime.evaluate", {"expression": probe, "returnByValue": True,
                                                       "awaitPromise": True}, session=session, timeout=timeout)
                if "exceptionDetails" in reply:
                    raise BrowserError(f"probe failed: {reply['exceptionDetails']}")
                result.probe = reply.get("result", {}).get("value")
            full = pipe.call("Runtime.evaluate", {"expression": "document.documentElement.scrollHeight",
                                                  "returnByValue": True}, session=session)
            result.page_height = int(full.get("result", {}).get("value") or 0)
            if png_path is not None:
                shot_height = min(height or result.page_height, 16000)
                pipe.call("Emulation.setDeviceMetricsOverride", {**metrics, "height": shot_height}, session=session)
                pipe.call("Runtime.evaluate", {"expression": settle, "awaitPromise": True}, session=session)
                data = pipe.call("Page.captureScreenshot", {"format": "png"}, session=session, timeout=timeout)
                Path(png_path).parent.mkdir(parents=True, exist_ok=True)
                Path(png_path).write_bytes(base64.b64decode(data["data"]))
            result.errors, result.console = _error_messages(pipe.events, session)
            return result
        finally:
            pipe.close()
