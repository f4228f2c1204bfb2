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
        _, err = process.communicate(timeout=180)  # the command starts slowly on a loaded machine
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"--ray 127.0.0.1:{port} still waiting after 180 s")
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


# ---------------------------------------------------------------------------------- a real two-node Ray cluster

LOST = '''
"""bm25, except on the node that the test stops: there it says it was reached and waits to be stopped (a variant
running on a node that is lost)."""

import os
import time
from pathlib import Path

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.bm25 import BM25Children


@register_retriever("bm25-lost", unit="children", lexical=True, description="bm25; waits on the node to lose")
class LostWithItsNode(BM25Children):
    def unit_ranking(self, question):
        reached = os.environ.get("LOST_NODE_REACHED")
        if reached:
            Path(reached).write_text(str(os.getpid()), encoding="utf-8")
            time.sleep(300)
        return super().unit_ranking(question)
'''


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free now on every address of the machine (Ray binds them a moment later, on every
    interface, and another Ray may hold a port on the machine's own address only: free on 127.0.0.1 is not enough).
    Nothing listens on them here."""
    sockets = []
    for _ in range(count):
        sockets.append(socket.socket())
        sockets[-1].bind(("", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class RayNode:
    """One Ray node on this machine: `ray start --block` in a session of its own (its process group holds every
    process of the node: GCS, raylet, agents, workers), with its own temporary folder, its own ports (none of Ray's
    fixed defaults, so other Ray runs on the machine are never met) and the environment `env` (its project cache,
    its temporary folder: the nodes share no folder)."""

    def __init__(self, root: Path, env: dict[str, str], *, head_address: str | None = None) -> None:
        self.temp = root / "ray"
        self.log = root / "ray-start.log"
        self.temp.mkdir(parents=True)
        ports = free_ports(14)
        flags = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--temp-dir", str(self.temp),
                 "--object-store-memory", str(100 * 1024 ** 2), "--disable-usage-stats",
                 "--node-manager-port", str(ports[0]), "--object-manager-port", str(ports[1]),
                 "--dashboard-agent-listen-port", str(ports[2]), "--dashboard-agent-grpc-port", str(ports[3]),
                 "--runtime-env-agent-port", str(ports[4]), "--metrics-export-port", str(ports[5]),
                 "--worker-port-list", ",".join(map(str, ports[6:12]))]
        if head_address is None:
            self.address = f"127.0.0.1:{ports[12]}"
            flags += ["--head", "--port", str(ports[12]), "--ray-client-server-port", str(ports[13]),
                      "--include-dashboard", "false", "--dashboard-port", str(free_ports(1)[0])]
        else:
            self.address = head_address
            flags += ["--address", head_address]
        ray = Path(sys.executable).with_name("ray")
        with open(self.log, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen([str(ray), "start", "--block", *flags], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True, env=env)
        self.group = self.process.pid

    def wait_started(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while "Ray runtime started" not in self.log.read_text(encoding="utf-8", errors="replace"):
            assert self.process.poll() is None, self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"ray start still starting after {timeout} s"
            time.sleep(0.2)

    def processes(self) -> list[int]:
        """The node's processes still alive (zombies, already dead, left out)."""
        import psutil

        alive = []
        for process in psutil.process_iter(["pid", "status"]):
            try:
                if os.getpgid(process.pid) == self.group and process.info["status"] != psutil.STATUS_ZOMBIE:
                    alive.append(process.pid)
            except (ProcessLookupError, psutil.Error):
                continue
        return alive

    def stop(self, sig: int = signal.SIGTERM, grace: float = 15) -> None:
        """The node stopped: `sig` to its whole process group, SIGKILL to what is left after `grace` seconds."""
        try:
            os.killpg(self.group, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.processes():
            try:
                os.killpg(self.group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture
def lost_plugin(tmp_path: Path) -> Path:
    """A folder holding the plug-in package `lost_plugin` (the bm25-lost retriever)."""
    folder = tmp_path / "plugins"
    (folder / "lost_plugin").mkdir(parents=True)
    (folder / "lost_plugin" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "lost_plugin" / "lost.py").write_text(LOST, encoding="utf-8")
    return folder


@pytest.mark.slow
def test_a_grid_on_a_two_node_cluster_survives_a_lost_node_and_lands_what_in_process_does(
        tmp_path: Path, seeded_cache: Path, lost_plugin: Path) -> None:
    """A real cluster on this machine: a head node and a worker node (`ray start`), one CPU each, each with its own
    temporary folder and project cache (no folder shared, as on two machines). `ragstudy retrieve --ray HEAD` runs
    fixed-size and newline x bm25-lost (bm25, no model) on the bundled sample; the variant that lands on the worker
    node waits there, and the test kills that node (SIGKILL of its process group: the machine is gone). The lost
    variant is run again on the head (Ray's retries), the run ends well, and its variants, rankings and verdict
    files are the bytes of the same grid run in-process; a re-run computes nothing. Both nodes are stopped and no
    process of theirs is left."""
    import shutil
    import tempfile

    from conftest import markers

    root = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # Ray's socket paths must stay under 107 characters
    path = os.pathsep.join([str(lost_plugin), str(REPO_ROOT)])
    # RAY_AUTH_MODE set for the nodes and the driver alike: a ~/.ray/auth_token left by any local ray.init() on the
    # machine would otherwise switch token authentication on for the head node only
    env = {"PYTHONPATH": path, "RAGSTUDY_PLUGIN_PACKAGES": "lost_plugin", "RAY_AUTH_MODE": "disabled"}
    common = {**os.environ, **env}
    reached = tmp_path / "reached"
    grid = [*SAMPLE, "--limit", "2", "--strategies", "fixed-size,newline", "--retriever", "bm25-lost"]
    # the same grid in-process, beside the nodes' start-up (each run its own Chroma root: two runs at once)
    inprocess = ragstudy(seeded_cache, "retrieve", *grid, "--output-dir", str(tmp_path / "inprocess"),
                         "--db-dir", str(tmp_path / "inprocess-db"), env=env)
    nodes: list[RayNode] = []
    try:
        (root / "head-tmp").mkdir()
        (root / "worker-tmp").mkdir()
        head = RayNode(root / "head", {**common, "RAGSTUDY_CACHE": str(root / "head-cache"),
                                       "TMPDIR": str(root / "head-tmp")})
        nodes.append(head)
        head.wait_started()
        worker = RayNode(root / "worker", {**common, "RAGSTUDY_CACHE": str(root / "worker-cache"),
                                           "TMPDIR": str(root / "worker-tmp"), "LOST_NODE_REACHED": str(reached)},
                         head_address=head.address)
        nodes.append(worker)
        worker.wait_started()

        on_cluster = ["retrieve", *grid, "--output-dir", str(tmp_path / "ray"), "--db-dir", str(tmp_path / "ray-db"),
                      "--ray", head.address]
        cluster = ragstudy(seeded_cache, *on_cluster, env=env)
        deadline = time.monotonic() + 180
        while not reached.exists() and cluster.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert reached.exists(), cluster.communicate(timeout=60)[1][-3000:]  # a variant runs on the worker node
        worker.stop(signal.SIGKILL)  # the worker node is lost in the middle of its variant
        assert worker.processes() == []
        _, err = cluster.communicate(timeout=240)
        assert cluster.returncode == 0, err[-3000:]
        assert "error:" not in err
        assert sorted(markers(tmp_path / "ray")) == ["fixed-size__bm25-lost__raw", "newline__bm25-lost__raw"]
        assert len(list((root / "head-cache" / "rankings").glob("*.json"))) == 2  # both ranked on the head at last

        before = markers(tmp_path / "ray")
        again = ragstudy(seeded_cache, *on_cluster, env=env)
        _, err = again.communicate(timeout=240)
        assert again.returncode == 0 and "2 of 2 variants already done" in err, err[-3000:]
        assert markers(tmp_path / "ray") == before
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(root, ignore_errors=True)
        if inprocess.poll() is None and sys.exc_info()[0] is not None:
            inprocess.kill()
        _, err = inprocess.communicate(timeout=240)
    assert [pid for node in nodes for pid in node.processes()] == []
    assert inprocess.returncode == 0, err[-3000:]
    assert_scored_the_same(tmp_path / "ray", tmp_path / "inprocess", seeded_cache, env)


def assert_scored_the_same(out: Path, reference: Path, cache: Path, env: dict[str, str]) -> None:
    """Both runs scored (`ragstudy score-retrieval`, at once), then every file of `out` is the bytes of
    `reference`'s (conftest.landed: the run's folder written as OUT, config.json without how it ran)."""
    from conftest import landed

    scoring = [ragstudy(cache, "score-retrieval", "--results-dir", str(folder), "--evidence",
                        str(REPO_ROOT / "sample" / "evidence.json"), "--no-plot", "--n-resamples", "200", env=env)
               for folder in (out, reference)]
    for scored in scoring:
        _, err = scored.communicate(timeout=240)
        assert scored.returncode == 0, err[-3000:]
    found, expected = landed(out), landed(reference)
    assert "variants.csv" in expected and any(n.endswith("retrieval_verdict.csv") for n in expected), sorted(expected)
    assert sum(n.startswith("variants/") and "/retrieval_" in n for n in expected) == 2
    assert sorted(n for n in set(expected) | set(found) if found.get(n) != expected.get(n)) == []
