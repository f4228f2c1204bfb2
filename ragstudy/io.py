"""Small I/O helpers: atomic writes, stable hashing, project cache location, folder locks, CPU cores, the one
decoder of a user's text files (CSV, YAML, prompt files), what a job tells its user, and the one way an entry point
ends its process."""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from ragstudy.errors import StudyInputError, store_error

PROJECT_ROOT = Path(__file__).resolve().parents[1]


REPORT_LOGGER = "ragstudy.report"


def tell(text: str, problem: bool = False) -> None:
    """What a job tells its user when it is done (its table, where its outputs are; `problem`: why it did not do
    its work), as a record of the `ragstudy.report` logger, not a print: the command line shows it as is, on stdout
    (a problem on stderr); `ragstudy study` keeps it in its log; a program that calls the job sees it in its logs."""
    logging.getLogger(REPORT_LOGGER).log(logging.ERROR if problem else logging.INFO, text)


INTERRUPTED = 130  # the exit code of a run stopped by Ctrl-C (128 + SIGINT)


def exit_process(code: int) -> NoReturn:
    """End an entry point's process with `code` (`sys.exit(main())` of `ragstudy` and of the old script paths, its
    shims). After Ctrl-C (`INTERRUPTED`) every file and cached answer kept is already fsynced: flush
    stdout and stderr and skip the libraries' teardown (torch, Chroma: seconds), so the run stops at once."""
    if code == INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


_NAME = re.compile(r"[A-Za-z0-9_.-]+")
NAME_MAX = 100  # characters of a name: with what is added to it (a variant's axes, a file's prefix) it stays well
# under the 255 bytes a file name may have


def check_name(value: object, where: str) -> str:
    """`value` as a name that becomes part of a file or folder name (a sweep id, a strategy or Dataset name), so it
    can never point outside its folder (`../x`, `/abs`); `where`: the file and key, or the flag, for the error."""
    text = str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
    if text is None or not _NAME.fullmatch(text) or text in (".", ".."):
        raise StudyInputError(f"{where}: {value!r} is not a name: use letters, digits, '-', '_' and '.' only (not "
                              "'.' or '..'); it names a folder or file inside the output folder, never a path")
    if len(text) > NAME_MAX:
        raise StudyInputError(f"{where}: {text[:20]}... is {len(text)} characters long; a name is at most "
                              f"{NAME_MAX} (it names a folder or file, and file names are limited)")
    return text


# A byte-order mark names the encoding of a file written as UTF-16 or UTF-32 (Excel's "Unicode text", Notepad's
# "UTF-16"); UTF-32's marks first, as UTF-32-LE's starts with UTF-16-LE's. Without one, the file is UTF-8.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"), (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
         (codecs.BOM_UTF8, "utf-8", "UTF-8"), (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
         (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"))


def decode_user_text(raw: bytes, path: str | Path, advice: str) -> str:
    """The text of a user's file: UTF-8 (a BOM is dropped), or UTF-16/32 with its BOM. A bad byte is an error naming
    the line and its offset, counted from the file's first byte (the BOM included) as a hex editor shows it, then
    `advice` (the caller's fix: how to save a CSV from Excel, a YAML from an editor)."""
    bom, codec, name = next(((b, c, n) for b, c, n in _BOMS if raw.startswith(b)), (b"", "utf-8", "UTF-8"))
    body = raw[len(bom):]
    try:
        return body.decode(codec)
    except UnicodeDecodeError as exc:
        offset = len(bom) + exc.start
        line = body[:exc.start].decode(codec, "replace").count("\n") + 1
        raise StudyInputError(f"{path} line {line}: not {name} text (byte {offset} is 0x{raw[offset]:02x}); "
                              f"{advice}") from None


def read_user_text(path: str | Path, advice: str, what: str = "file") -> str:
    """`decode_user_text` of the file at `path`; a file that cannot be read is a StudyInputError naming it."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise StudyInputError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    return decode_user_text(raw, path, advice)


def stable_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace variation, for hashing."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def sha256_text(*parts: str) -> str:
    """sha256 hex digest of the parts joined by NUL (so ("a","bc") != ("ab","c"))."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


TORCH_THREADS_DOC = "half the cores"


def torch_threads(threads: int | None = None) -> int:
    """CPU threads for torch: `threads` when set, else half the cores (TORCH_THREADS_DOC), the one default of the
    chain's and the scripts' --threads (on 2 shared cores, 1 thread was 5x faster than 2 for SmolLM2 generation
    while anything else ran)."""
    return threads or max(1, (os.cpu_count() or 2) // 2)


def cache_dir() -> Path:
    """Root of the project cache: $RAGSTUDY_CACHE if set, else <repo>/.cache (git-ignored)."""
    return Path(os.environ.get("RAGSTUDY_CACHE") or PROJECT_ROOT / ".cache")


def _new_file_beside(path: Path, suffix: str) -> tuple[int, Path]:
    """A new empty hidden file beside `path`: (fd, its path). Unlike tempfile.mkstemp (always 0600) it gets the mode
    of any file the user writes, 0666 less the umask, applied by the kernel: the umask is never read or changed
    (os.umask is process-wide and racy between threads)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}{suffix}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: could not create a temporary file beside {path.name} (100 names taken)")


def _write_beside(path: Path, suffix: str, write, store: str) -> None:
    """Create a temporary file beside `path`, let `write(fd, tmp)` fill it, then rename it onto `path`. On any
    failure the temporary file is removed and an earlier `path` is left as it was; an OSError (disk full,
    read-only folder) becomes a StoreError naming the `store`, `path` and the fix."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_file_beside(path, suffix)
    except OSError as exc:
        raise store_error(store, path, "cannot write it", exc) from None
    try:
        write(fd, tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise store_error(store, path, "cannot write it", exc) from None
        raise


def atomic_write_bytes(path: Path, data: bytes, store: str = "file") -> None:
    """`data` into `path` through a temporary file beside it: readers never see a half-written file (`store`, e.g.
    "chunk cache", names it in a StoreError)."""

    def write(fd: int, tmp: Path) -> None:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    _write_beside(path, ".tmp", write, store)


def atomic_save(path: Path, save, store: str = "file") -> None:
    """Call `save(tmp_path)` (for writers that need a file name, e.g. openpyxl, kaleido), then rename onto `path`."""

    def write(fd: int, tmp: Path) -> None:
        os.close(fd)
        save(str(tmp))

    _write_beside(path, Path(path).suffix, write, store)


def atomic_write_text(path: Path, text: str, store: str = "file") -> None:
    atomic_write_bytes(path, text.encode("utf-8"), store)


def json_text(value: Any) -> str:
    """The text of a JSON file the project writes (atomic_write_json)."""
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def atomic_write_json(path: Path, value: Any, store: str = "file") -> None:
    atomic_write_text(path, json_text(value), store)


_HELD_LOCKS: dict[Path, int] = {}


def lock_folder(folder: Path, lock_name: str, what: str, flag: str) -> None:
    """Hold an exclusive lock on `folder` (flock on `folder/lock_name`) for this process's lifetime; the kernel drops
    it when the process ends, however it ends. A second process is refused at once, naming the folder (`what`), the
    holder's pid and the flag that gives a run its own folder (`flag`)."""
    import fcntl

    key = Path(folder).resolve() / lock_name
    if key in _HELD_LOCKS:
        return
    try:
        fd = os.open(key, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as exc:
        raise StudyInputError(f"{folder}: cannot write in the {what} ({exc.strerror}). Pass a writable "
                              f"{flag}.") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:  # the pid the holder wrote (a lock of an older run has none)
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            pid = ""
        os.close(fd)
        holder = f" (pid {pid})" if pid.isdigit() else ""
        raise StudyInputError(f"{folder}: another run is using this {what}{holder}. Wait for it to finish, or give "
                              f"this run its own {flag}.") from None
    try:  # the holder's pid, for the message a second run gets (the lock itself is the flock, not this text)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the lock holds without the pid; only the second run's message lacks it
    _HELD_LOCKS[key] = fd


PER_WORKER_ENV = "RAGSTUDY_PER_WORKER_FOLDERS"  # set in ragstudy.grid.executors' worker processes (see worker_folder)


def worker_folder(folder: Path, lock_name: str) -> Path:
    """`folder` itself, except in a worker process of ragstudy.grid.executors (PER_WORKER_ENV set): there, its own
    `<folder>-worker-<k>`, the first slot this process already holds or whose lock (`lock_name`, see lock_folder) it
    can take now. The lock is kept for the process's lifetime, so no two processes running at once share a slot,
    and a later run's workers reuse the slots (and what is in them)."""
    folder = Path(folder)
    if not os.environ.get(PER_WORKER_ENV):
        return folder
    slots = [folder.with_name(f"{folder.name}-worker-{k}") for k in range(1024)]
    for slot in slots:
        if slot.resolve() / lock_name in _HELD_LOCKS:
            return slot
    for slot in slots:
        try:
            slot.mkdir(parents=True, exist_ok=True)
        except OSError:
            return slot  # the caller's own check names the folder and the fix
        try:
            lock_folder(slot, lock_name, "folder", "")
        except StudyInputError:
            continue  # another worker holds it (or it is not writable: the next slot, then the caller's check)
        return slot
    return slots[-1]


@contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """`with build_lock(path):` holds an exclusive lock (flock on `.<name>.lock` beside `path`) while a cache entry
    is checked and built, so that concurrent processes build it once: the others wait, then find it built. The
    kernel drops the lock if the holder dies."""
    import fcntl

    key = Path(path).with_name(f".{Path(path).name}.lock")
    key.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the flock


def release_folder(folder: Path, lock_name: str) -> None:
    """Drop the lock `lock_folder` took (no-op if this process does not hold it)."""
    fd = _HELD_LOCKS.pop(Path(folder).resolve() / lock_name, None)
    if fd is not None:
        os.close(fd)


def set_aside(path: Path) -> Path:
    """Rename a corrupt store `path` (file or folder) to `<name>.corrupt-<UTC timestamp>` beside it, so it can be
    rebuilt without losing what was in it; returns the new path."""
    import time

    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    number = 1
    while target.exists():
        number += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{number}")
    os.replace(path, target)
    return target
