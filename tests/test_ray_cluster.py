"""`--ray ADDRESS` against real listeners, from the command line (a process of its own): an address where something
listens that is not a Ray head node (an HTTP server, as the dashboard's port 8265 is; a service that accepts and
never answers) is refused in one line within seconds, and SIGTERM ends the command at once while it checks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import REPO_ROOT, seed_built_models

pytest.importorskip("ray", reason="Ray is not installed (requirements.txt pins it)")

SAMPLE = ["--profile", "lite", "--documents", str(REPO_ROOT / "Documents"), "--questions",
          str(REPO_ROOT / "Questions.csv"), "--budgets", "300,900"]


def ragstudy(cache: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`ragstudy ARGS` in a process of its own, on the project cache `cache`."""
    return subprocess.Popen([sys.executable, "-m", "ragstudy_cli", *args], cwd=REPO_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGSTUDY_CACHE": str(cache),
                                 **(env or {})})


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # the test's output stays its own
        pass


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts (`accepted`, the first at `first`):
    `http`, an HTTP/1.1 server (what the dashboard's port 8265 is); else one that never sends a byte."""

    def __init__(self, http: bool) -> None:
        self.accepted = 0
        self.first: float | None = None
        self.held: list[socket.socket] = []
        self.http: ThreadingHTTPServer | None = None
        if http:
            listener = self

            class Counted(ThreadingHTTPServer):
                def get_request(self):  # type: ignore[no-untyped-def]
                    listener.count()
                    return super().get_request()

            self.http = Counted(("127.0.0.1", 0), _Quiet)
            self.port = self.http.server_address[1]
            threading.Thread(target=self.http.serve_forever, daemon=True).start()
        else:
            self.socket = socket.create_server(("127.0.0.1", 0))
            self.port = self.socket.getsockname()[1]
            threading.Thread(target=self._hold, daemon=True).start()

    def count(self) -> None:
        self.accepted += 1
        self.first = self.first or time.monotonic()

    def _hold(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:  # closed
                return
            self.count()
            self.held.append(connection)

    def close(self) -> None:
        if self.http is not None:
            self.http.shutdown()
            self.http.server_close()
            return
        self.socket.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def listener(request: pytest.FixtureRequest) -> Iterator[Listener]:
    """An HTTP server ("http") or a silent listener ("silent") on 127.0.0.1."""
    listening = Listener(http=request.param == "http")
    yield listening
    listening.close()


@pytest.fixture
def seeded_cache(tmp_path: Path, session_cache_reused: Path) -> Path:
    """A project cache of the test's own with the session's built models (the lite embedder is not rebuilt)."""
    cache = tmp_path / "cache"
    seed_built_models(cache, session_cache_reused, link=True)
    return cache


@pytest.mark.slow
@pytest.mark.parametrize("listener", ["http", "silent"], indirect=True)
def test_a_ray_address_where_something_else_listens_is_one_line_within_seconds(
        tmp_path: Path, seeded_cache: Path, listener: Listener) -> None:
    """`ragstudy retrieve --ray 127.0.0.1:PORT` where an HTTP server or a silent listener is: exit 2 within 30 s of
    the first connection to it (Ray itself waits for minutes), one `error:` line naming the address and the fix, no
    traceback, nothing written into the output folder."""
    port = listener.port
    out = tmp_path / "out"
    process = ragstudy(seeded_cache, "retrieve", *SAMPLE, "--limit", "1", "--strategies", "fixed-size",
                       "--retriever", "bm25", "--output-dir", str(out), "--ray", f"127.0.0.1:{port}")
    try:
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"--ray 127.0.0.1:{port} still waiting after 60 s")
    ended = time.monotonic()
    assert process.returncode == 2, err[-3000:]
    assert listener.first is not None and ended - listener.first < 30, ended - (listener.first or ended)
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err[-3000:]
    assert errors[0].startswith(f"error: --ray 127.0.0.1:{port}: 127.0.0.1:{port} accepts connections but is not a "
                                "Ray head node's GCS"), errors
    assert "`ray status` on the head node" in errors[0] and "leave the address out" in errors[0]
    assert not out.exists()  # refused before anything was written


@pytest.mark.slow
@pytest.mark.parametrize("listener", ["silent"], indirect=True)
def test_sigterm_ends_a_ray_run_that_waits_on_a_silent_listener_at_once(
        tmp_path: Path, seeded_cache: Path, listener: Listener) -> None:
    """SIGTERM while `--ray` waits on a listener that never answers ends the command within 5 s (it ran on for
    10-36 s inside ray.init)."""
    port, silent = listener.port, listener
    process = ragstudy(seeded_cache, "retrieve", *SAMPLE, "--limit", "1", "--strategies", "fixed-size",
                       "--retriever", "bm25", "--output-dir", str(tmp_path / "out"), "--ray", f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while not silent.accepted and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert silent.accepted and process.poll() is None
        time.sleep(1.5)  # the address was reached: the command now waits on it (the check's answer, or Ray)
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        process.communicate(timeout=30)
        assert time.monotonic() - sent < 5
        assert process.returncode in (-signal.SIGTERM, 2)  # stopped, or refused the address meanwhile
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

