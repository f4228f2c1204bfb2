"""Run a grid's variants: in this process (the default), in N worker processes on this machine, or as Ray tasks.

The rules every executor keeps (the done marker, failures, `session`, the one progress bar, the files landing the
same whatever ran them): docs/scale.md, "Running a grid's variants in parallel".
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.io import INTERRUPTED, PER_WORKER_ENV, atomic_write_json, exit_process
from ragstudy.results import VARIANT_DONE_FILE

logger = logging.getLogger(__name__)

KINDS = ("inprocess", "workers", "ray")
VARIANT_DONE = VARIANT_DONE_FILE.name  # written last into a finished variant's folder
RAY_PIN = "ray==2.60.0"  # requirements.txt
WORKER_ENV = {PER_WORKER_ENV: "1", "TQDM_DISABLE": "1"}  # what a worker process runs with


@dataclass(frozen=True)
class Task:
    """One variant. `fn` is a module-level function (pickled by reference); `spec` is plain picklable data."""

    id: str  # the variant id; errors name it
    fn: Callable[..., None]  # fn(spec, output_dir: Path, inputs: dict[str, Path]) -> None
    spec: Any
    output_dir: Path  # where fn's files must end up on the driver
    inputs: dict[str, Path]  # logical name -> the local file or folder fn reads
    key: str = ""  # what the files depend on (a hash); a done marker under another key is stale
    # Ray: how the files written on a worker get the driver's paths (default `translate`); a module-level function
    # (files, {worker path: driver path}) -> files, for tasks whose files also record hashes of the others
    relocate: Callable[[dict[str, bytes], dict[str, str]], dict[str, bytes]] | None = None


@dataclass(frozen=True)
class Executor:
    """Where tasks run. `workers`: processes at once (kind "workers"); for "ray", the CPUs of a Ray started here
    (1, the default: every core). `address`: a Ray cluster to join (None: start a local Ray)."""

    kind: str = "inprocess"  # "inprocess" | "workers" | "ray"
    workers: int = 1
    address: str | None = None


@dataclass(frozen=True)
class Outcome:
    id: str
    error: str | None  # None when it worked; else one line naming the variant and the error


# ---------------------------------------------------------------------------------------------- the rule for done

MARKER_FORMAT = 2  # 1: no key (read as the key "")


def is_done(task: Task) -> bool:
    """Whether the task's folder holds the done marker (written last) under its key; a damaged one is not."""
    path = Path(task.output_dir) / VARIANT_DONE
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        logger.warning("%s: unreadable; the variant is computed again", path)
        return False
    return isinstance(data, dict) and str(data.get("key", "")) == task.key


def pending(tasks: Sequence[Task]) -> list[Task]:
    return [task for task in tasks if not is_done(task)]


def _mark_done(folder: Path, task: Task) -> None:
    atomic_write_json(folder / VARIANT_DONE, {"variant": task.id, "format": MARKER_FORMAT, "key": task.key},
                      "variant folder")


def _drop_stale(tasks: Sequence[Task], label: str) -> None:
    """Remove the markers of the tasks about to run (their key changed), so that none looks finished meanwhile."""
    stale = [task for task in tasks if (Path(task.output_dir) / VARIANT_DONE).is_file()]
    for task in stale:
        (Path(task.output_dir) / VARIANT_DONE).unlink(missing_ok=True)
    if stale:
        logger.info("%d %s were done under other settings, questions, documents or code (%s): computing them again "
                    "(their stages come from the caches where nothing they depend on changed)", len(stale), label,
                    ", ".join(task.id for task in stale[:5]) + (" ..." if len(stale) > 5 else ""))


# ---------------------------------------------------------------------------------------------- the entry point

def run_tasks(tasks: Sequence[Task], executor: Executor, label: str = "variants", unit: str = "variant"
              ) -> list[Outcome]:
    """Run every task not yet done with `executor`; one Outcome per task, in task order (a task already done is an
    Outcome without error). A bad executor, duplicate ids, or a Ray that cannot start or be joined raise one
    StudyInputError; a failing task does not raise."""
    from tqdm.auto import tqdm

    _check(tasks, executor)
    todo = pending(tasks)
    if len(todo) < len(tasks):
        logger.info("%d of %d %s already done (their %s): computing %d", len(tasks) - len(todo), len(tasks), label,
                    VARIANT_DONE, len(todo))
    _drop_stale(todo, label)
    results: dict[str, Outcome] = {}
    if todo:
        run = {"inprocess": _run_inprocess, "workers": _run_workers, "ray": _run_ray}[executor.kind]
        with tqdm(total=len(todo), desc=label, unit=unit) as bar:
            for outcome in run(todo, executor):
                results[outcome.id] = outcome
                if outcome.error:
                    logger.error("%s", outcome.error)
                bar.update(1)
    failed = sum(1 for o in results.values() if o.error)
    if failed:
        logger.warning("%d of %d %s failed; the others are kept, and a re-run computes only the missing ones",
                       failed, len(tasks), label)
    return [results.get(task.id, Outcome(task.id, None)) for task in tasks]


def check_executor(executor: Executor) -> None:
    """Refuse, in one StudyInputError, an executor that cannot run: a bad kind or --workers, Ray not installed, or a
    `--ray ADDRESS` where no Ray head node answers (a grid calls it before it writes anything)."""
    _check((), executor)
    if executor.kind == "ray":
        _import_ray()
        if executor.address:
            _check_reachable(executor.address)


def capped(executor: Executor, tasks: int, label: str = "variants") -> Executor:
    """`executor` with no more worker processes than `tasks` to compute (at least one; one log line when it lowers
    the number): each process loads the project and its models, --workers 1000 would exhaust memory."""
    wanted = max(tasks, 1)
    if executor.kind != "workers" or not isinstance(executor.workers, int) or executor.workers <= wanted:
        return executor
    logger.info("--workers %d: %d %s to compute, so %d worker process%s", executor.workers, tasks, label, wanted,
                "" if wanted == 1 else "es")
    return replace(executor, workers=wanted)


def _check(tasks: Sequence[Task], executor: Executor) -> None:
    if executor.kind not in KINDS:
        raise StudyInputError(f"executor {executor.kind!r} is not one of {', '.join(KINDS)}")
    if not isinstance(executor.workers, int) or executor.workers < 1:
        raise StudyInputError(f"--workers {executor.workers!r}: give a whole number of processes, 1 or more")
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise StudyInputError(f"variant id {task.id!r} is given twice: every variant needs its own id")
        seen.add(task.id)


def _failure(task_id: str, what: str) -> Outcome:
    return Outcome(task_id, f"variant {task_id}: {' '.join(what.split())}")


def _describe(exc: BaseException) -> str:
    """An exception in one line: a StudyInputError's own message, else its type and message."""
    text = str(exc).strip() or "(no message)"
    return text if isinstance(exc, StudyInputError) else f"{type(exc).__name__}: {text}"


# ---------------------------------------------------------------------------------------------- in this process

def _call(task: Task) -> tuple[str | None, str]:
    """Run the task here: (None, "") when it worked, else (the error in one line, its traceback)."""
    try:
        task.fn(task.spec, Path(task.output_dir), dict(task.inputs))
    except Exception as exc:  # one variant's failure; KeyboardInterrupt stops the grid
        return _describe(exc), traceback.format_exc()
    return None, ""


def _finished(task: Task, error: str | None, trace: str, where: str = "") -> Outcome:
    """The outcome of a task that ran in this filesystem: its failure, or its done marker written."""
    if error is not None:
        logger.debug("variant %s failed%s:\n%s", task.id, where, trace)
        return _failure(task.id, error)
    _mark_done(Path(task.output_dir), task)
    return Outcome(task.id, None)


def _run_inprocess(tasks: Sequence[Task], executor: Executor) -> Iterator[Outcome]:
    for task in tasks:
        yield _finished(task, *_call(task))


# ---------------------------------------------------------------------------------------------- worker processes

def _setup_worker() -> None:
    """What a worker process (local or Ray) runs with: its own Chroma folders, no inner progress bars. Their lock is
    a thread lock: tqdm's default one is a named semaphore, which a worker ended at once by Ctrl-C never releases
    (the resource tracker then warns of "leaked semaphore objects" after the run)."""
    import threading

    from tqdm import tqdm

    os.environ.update(WORKER_ENV)
    logging.getLogger().setLevel(logging.WARNING)
    tqdm.set_lock(threading.RLock())


def _worker_main(conn: Any, cores: tuple[int, ...] = ()) -> None:
    """A worker process on its share of the cores: runs each task received until None, sends back (id, *_call)."""
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)  # the ONNX backends run one thread per core of the affinity mask
    _setup_worker()
    try:
        for task in iter(conn.recv, None):
            conn.send((task.id, *_call(task)))
    except EOFError:  # the driver went away
        return
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the driver reports it, once
        exit_process(INTERRUPTED)


@dataclass
class _Worker:
    process: Any
    conn: Any
    slot: int
    task: Task | None = None


def core_share(slot: int, workers: int, cores: Sequence[int]) -> tuple[int, ...]:
    """Worker `slot`'s equal share of `cores`, so that N workers do not each start one thread per core."""
    if not cores:
        return ()
    if workers >= len(cores):
        return (cores[slot % len(cores)],)
    size = len(cores) // workers
    return tuple(cores[slot * size:(slot + 1) * size]) if slot < workers - 1 else tuple(cores[slot * size:])


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"its worker process was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"its worker process was killed by signal {-exitcode}"
    return f"its worker process exited with code {exitcode} before the variant finished"


class _Pool:
    """`executor.workers` spawned processes, one task each at a time; a worker that dies costs only its own task
    (reported with how it died) and is replaced. A `session` keeps them alive across its run_tasks calls."""

    def __init__(self, executor: Executor) -> None:
        import multiprocessing

        self.executor = executor
        self.context = multiprocessing.get_context("spawn")
        self.workers: list[_Worker] = []
        self.cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    def _start(self) -> _Worker:
        count = self.executor.workers
        slot = min(set(range(count)) - {w.slot for w in self.workers})  # a dead worker's share is reused
        driver_end, worker_end = self.context.Pipe()
        process = self.context.Process(target=_worker_main, args=(worker_end, core_share(slot, count, self.cores)),
                                       daemon=True, name=f"ragstudy-worker-{slot}")
        process.start()
        worker_end.close()
        return _Worker(process, driver_end, slot)

    def prestart(self) -> None:
        """Start every worker process now: they spawn and import while the driver prepares the first tasks."""
        while len(self.workers) < self.executor.workers:
            self.workers.append(self._start())

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        from multiprocessing.connection import wait

        queue = deque(tasks)
        try:
            while queue or any(w.task for w in self.workers):
                if queue:
                    self.prestart()  # again where a worker died
                for worker in self.workers:
                    if worker.task is None and queue:
                        task = queue.popleft()
                        try:
                            worker.conn.send(task)
                        except Exception as exc:  # fn or spec cannot be pickled
                            yield _failure(task.id, f"cannot be sent to a worker process ({_describe(exc)}); its fn "
                                           "must be a module-level function and its spec plain data")
                            continue
                        worker.task = task
                busy = [w for w in self.workers if w.task is not None]
                if not busy:
                    continue
                ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
                for worker in [w for w in busy if w.conn in ready or w.process.sentinel in ready]:
                    if (outcome := _collect(worker)) is None:
                        continue
                    yield outcome
                    if not worker.process.is_alive():
                        worker.conn.close()
                        self.workers.remove(worker)
        finally:  # stopped early (Ctrl-C, an error in the driver): the workers still running a task go
            running = [w for w in self.workers if w.task is not None]
            _stop(running)
            self.workers = [w for w in self.workers if w not in running]

    def close(self) -> None:
        _stop(self.workers)
        self.workers = []


_SESSIONS: dict[Executor, _Pool] = {}


@contextmanager
def session(executor: Executor) -> Iterator[None]:
    """Keep `executor`'s worker processes (`--workers N`, started at once) or its local Ray (`--ray`) alive across
    the run_tasks calls inside the block, so each process loads the project and its models once. In-process, and
    inside a session already open for the executor, it does nothing."""
    if executor.kind == "workers" and executor not in _SESSIONS:
        _check((), executor)
        pool = _SESSIONS[executor] = _Pool(executor)
        try:
            pool.prestart()
            yield
        finally:
            del _SESSIONS[executor]
            pool.close()
    elif executor.kind == "ray":
        with _ray_session(executor):
            yield
    else:
        yield


def _run_workers(tasks: Sequence[Task], executor: Executor) -> Iterator[Outcome]:
    """The tasks on the session's worker processes (`session`), or on processes started for this call only."""
    with session(executor):
        yield from _SESSIONS[executor].run(tasks)


def _collect(worker: _Worker) -> Outcome | None:
    """The outcome of the worker's task once it answered or died; None while it is still running."""
    task = worker.task
    assert task is not None
    message = None
    if worker.conn.poll():
        with suppress(EOFError, OSError):
            message = worker.conn.recv()
    if message is None:
        worker.process.join(5)
        if worker.process.is_alive():
            return None  # the pipe woke us up spuriously; the task is still running
    worker.task = None
    if message is None:
        return _failure(task.id, _death(worker.process.exitcode))
    return _finished(task, *message[1:], where=" in its worker process")


def _stop(workers: list[_Worker]) -> None:
    """Tell idle workers to stop; terminate any still running a task (Ctrl-C, an error in the driver)."""
    for worker in workers:
        if worker.task is None:
            with suppress(OSError):
                worker.conn.send(None)
    deadline = time.monotonic() + 10
    for worker in workers:
        if worker.task is not None:
            worker.process.terminate()
        worker.process.join(max(0.1, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


# ---------------------------------------------------------------------------------------------- Ray

def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise StudyInputError(f"--ray needs Ray, which is not installed: pip install {RAY_PIN} (requirements.txt "
                              "pins it; tools/setup.sh installs it), or run with --workers N instead") from None
    return ray


@contextmanager
def _ray_session(executor: Executor) -> Iterator[Any]:
    """Ray, started here (no address; stopped at the end) or joined (`address`), or the one already running in this
    process (left running). A Ray that cannot start or be joined is one StudyInputError naming it and the fix."""
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    if executor.address:
        _check_reachable(executor.address)
    options = ({"address": executor.address} if executor.address else
               {"num_cpus": executor.workers if executor.workers > 1 else None, "include_dashboard": False,
                "runtime_env": {"env_vars": _local_env()}})
    try:
        ray.init(**options, logging_level=logging.WARNING)
    except Exception as exc:  # ConnectionError, RuntimeError, ValueError...: Ray raises several kinds
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        if executor.address:
            raise StudyInputError(f"--ray {executor.address}: cannot join that Ray cluster ({reason}). Give the "
                                  "head node's address as `ray status` on it prints it (host:6379, or "
                                  f"ray://host:10001), check the cluster runs {RAY_PIN} on this Python, or leave the "
                                  "address out to start a local Ray") from None
        raise StudyInputError(f"--ray: cannot start a local Ray ({reason}). Check `ray start --head` works on this "
                              "machine, or run with --workers N instead") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A cluster address `host:port` (or `ray://host:port`) must accept a connection within `timeout` seconds and
    answer as Ray (`_check_speaks_ray`): Ray itself retries an unreachable address for minutes, and one where
    something else listens for ever. "auto" and addresses without a port are left to Ray."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    host = port = None
    with suppress(ValueError):  # a port that is not a number: left to Ray
        host, port = parts.hostname, parts.port
    if not host or not port:
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise StudyInputError(f"--ray {address}: nothing answers at {host}:{port} ({exc.strerror or exc}). Start the "
                              "head node there (`ray start --head`; `ray status` on it prints the address), or leave "
                              "the address out to start a local Ray") from None
    _check_speaks_ray(address, f"{host}:{port}", client=parts.scheme == "ray")


GCS_PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"  # the call a driver makes first to a head node's GCS
RAY_PROBE_SECONDS = 5.0  # a head node answers it in milliseconds (Ray gives its own GCS connection 5 s)


def _check_speaks_ray(address: str, target: str, client: bool = False, timeout: float = RAY_PROBE_SECONDS) -> None:
    """The listener at `target` must be Ray's: a head node's GCS answers GCS_PROBE (gRPC), a Ray Client server
    (`ray://`) completes a gRPC handshake, within `timeout` seconds. Skipped where it cannot be checked: without the
    grpc package (chromadb brings it), or on a cluster with TLS (RAY_USE_TLS, which Ray's own channels handle)."""
    try:
        import grpc
    except ImportError:
        return
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return
    with grpc.insecure_channel(target) as channel:
        try:
            if client:
                grpc.channel_ready_future(channel).result(timeout=timeout)
            else:
                channel.unary_unary(GCS_PROBE)(b"", timeout=timeout)  # an empty request is a valid GetClusterId
            return
        except grpc.FutureTimeoutError:
            answer = f"no gRPC handshake within {timeout:.0f} s"
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details() or ""
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return  # a GCS with token authentication: Ray itself sends the token
            last = " ".join(details.split()).rsplit(": ", 1)[-1][:160]
            answer = {grpc.StatusCode.DEADLINE_EXCEEDED: f"no gRPC answer within {timeout:.0f} s",
                      grpc.StatusCode.UNIMPLEMENTED: "a gRPC server without Ray's GCS service"}.get(
                code, f"not gRPC ({last})" if "HTTP/2" in details else f"{code.name.lower()} ({last})")
    what = ("Ray Client server (ray://host:10001)" if client
            else "Ray head node's GCS (`ray start --head --port`, 6379 by default)")
    raise StudyInputError(f"--ray {address}: {target} accepts connections but is not a {what}: {answer}. Give the "
                          "address `ray status` on the head node prints (not the dashboard's port, 8265), or leave "
                          "the address out to start a local Ray")


def _local_env() -> dict[str, str]:
    """The driver's import path and the project's variables, for the workers of a Ray started here."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths += [p for p in sys.path if p and os.path.isdir(p) and p not in paths]
    env = {k: v for k, v in os.environ.items() if k.startswith("RAGSTUDY_") or k in ("HF_HOME", "HF_HUB_OFFLINE")}
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def pack(path: Path) -> dict[str, bytes]:
    """The files of a folder (relative POSIX path -> bytes; symlinks followed), or of one file (its name -> bytes)."""
    path = Path(path)
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def unpack(files: dict[str, bytes], folder: Path) -> None:
    """Write `pack`'s files under `folder` (made even when there are none)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def _pack_inputs(inputs: dict[str, Path]) -> tuple[str, dict[str, tuple[str, bool, dict[str, bytes]]]]:
    """(sha256 of everything, {name: (basename, is a folder, files)}) of a task's inputs."""
    packed: dict[str, tuple[str, bool, dict[str, bytes]]] = {}
    digest = hashlib.sha256()
    for name in sorted(inputs):
        path = Path(inputs[name])
        if not path.exists():
            raise StudyInputError(f"{path}: the {name} to send to the Ray workers does not exist")
        files = pack(path)
        packed[name] = (path.name, path.is_dir(), files)
        digest.update(f"{name}\0{path.name}\0{path.is_dir()}\0".encode())
        for rel in sorted(files):
            digest.update(f"{rel}\0{len(files[rel])}\0".encode())
            digest.update(files[rel])
    return digest.hexdigest(), packed


def materialise(key: str, packed: dict[str, tuple[str, bool, dict[str, bytes]]], root: Path | None = None
                ) -> dict[str, Path]:
    """Write shipped inputs into `<root>/ragstudy-inputs-<key>/<name>/<basename>` once per machine (built in a
    temporary folder, then renamed); returns name -> local path."""
    base = Path(root or tempfile.gettempdir()) / f"ragstudy-inputs-{key[:24]}"
    if not base.is_dir():
        tmp = base.with_name(f".{base.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            tmp.mkdir(parents=True)
            for name, (basename, is_folder, files) in packed.items():
                unpack(files, tmp / name / basename if is_folder else tmp / name)  # a file's one entry is its name
            try:
                tmp.rename(base)
            except OSError:  # another worker on this machine finished first: use its folder
                if not base.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {name: base / name / basename for name, (basename, _, _) in packed.items()}


def translate(files: dict[str, bytes], paths: dict[str, str]) -> dict[str, bytes]:
    """Replace each worker path (key) by the driver's (value) in the text files among `files` (UTF-8, no NUL);
    longest first, so a folder's path never cuts into a longer one."""
    pairs = [(old.encode(), new.encode()) for old, new in sorted(paths.items(), key=lambda kv: -len(kv[0]))
             if old != new]
    out = dict(files)
    for rel, data in files.items():
        with suppress(UnicodeDecodeError):
            if pairs and b"\0" not in data:
                data.decode("utf-8")  # text files only: a binary one raises
                out[rel] = functools.reduce(lambda text, pair: text.replace(*pair), pairs, data)
    return out


def _ray_task(task: Task, key: str, packed: dict) -> dict[str, bytes]:
    """On a Ray worker: the inputs written locally, fn run into a temporary folder, its files returned."""
    _setup_worker()
    local = materialise(key, packed)
    out = Path(tempfile.mkdtemp(prefix=f"ragstudy-{task.id}-"))
    try:
        task.fn(task.spec, out, local)
        paths = {str(local[name]): str(Path(task.inputs[name])) for name in local}
        paths[str(out)] = str(Path(task.output_dir))
        return (task.relocate or translate)(pack(out), paths)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def land(files: dict[str, bytes], output_dir: Path, task: Task) -> None:
    """Write a variant's files into a temporary folder beside `output_dir`, the marker last, then rename it into
    place (an earlier, unfinished folder is replaced)."""
    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_dir.with_name(f".{output_dir.name}.{secrets.token_hex(4)}.partial")
    try:
        unpack(files, tmp)
        _mark_done(tmp, task)
        old = output_dir.with_name(f".{output_dir.name}.{secrets.token_hex(4)}.old")  # a fresh name: never there
        if output_dir.exists():
            output_dir.rename(old)
        tmp.rename(output_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ray_error(ray: Any, exc: BaseException) -> str:
    """A Ray failure in one line: the task's own exception, or how its worker died."""
    cause = getattr(exc, "cause", None)
    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(cause, BaseException):
        return _describe(cause)
    if isinstance(exc, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)):
        return f"its Ray worker died ({type(exc).__name__})"
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first.strip()}"[:400]


RAY_RETRIES = 2  # a task whose worker or node died (a node lost from the cluster) runs again, on another node


def _run_ray(tasks: Sequence[Task], executor: Executor) -> Iterator[Outcome]:
    """Ray tasks, one CPU each; inputs shared by several tasks go into the object store once."""
    with _ray_session(executor) as ray:
        remote = ray.remote(num_cpus=1, max_retries=RAY_RETRIES, retry_exceptions=False)(_ray_task)
        refs: dict[tuple, tuple[str, Any]] = {}
        running: dict[Any, Task] = {}
        for task in tasks:
            signature = tuple(sorted((k, str(Path(v).resolve())) for k, v in task.inputs.items()))
            if signature not in refs:
                key, packed = _pack_inputs(task.inputs)
                refs[signature] = (key, ray.put(packed))
            key, ref = refs[signature]
            try:
                running[remote.remote(task, key, ref)] = task
            except Exception as exc:  # fn or spec cannot be serialised
                yield _failure(task.id, f"cannot be sent to Ray ({_describe(exc)})")
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            task = running.pop(done[0])
            try:
                files = ray.get(done[0])
            except Exception as exc:
                logger.debug("variant %s failed on Ray: %s", task.id, exc)
                yield _failure(task.id, _ray_error(ray, exc))
                continue
            try:
                land(files, Path(task.output_dir), task)
            except OSError as exc:
                yield _failure(task.id, f"its files could not be written into {task.output_dir} ({exc})")
                continue
            yield Outcome(task.id, None)
