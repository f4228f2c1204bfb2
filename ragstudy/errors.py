"""User-facing errors: each names the file, row or flag at fault and says what to do."""

from __future__ import annotations

import errno
from pathlib import Path


class StudyInputError(ValueError):
    """Bad input (documents, questions, config, model paths) that the user must fix before running."""


class StoreError(StudyInputError):
    """A store (output folder, cache, Chroma folder or server) that cannot be read or written: the message names
    the store, its path or URL, and the fix."""


_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


NEARLY_FULL = 4 << 20  # bytes free under which a store's failure is put down to a full disk


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the filesystem holding `path` (its nearest existing ancestor), None if unknown."""
    import shutil

    path = Path(path)
    for folder in (path, *path.parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def store_fix(exc: BaseException, rebuild: str = "", path: str | Path | None = None) -> str:
    """What to do about `exc` raised by a store: free space, make it writable, or (`rebuild` given: what is lost
    by deleting it) delete the file so it is rebuilt. Stores that fail vaguely on a full disk (Chroma: "Error in
    compaction") are recognised by the free space left under `path`."""
    text = str(exc).lower()
    code = getattr(exc, "errno", None)
    full = "free space on that disk, then re-run (what is already written is kept)"
    if code in _FULL or "disk is full" in text or "no space left" in text:
        return full
    if code in _READ_ONLY or "read-only" in text or "readonly" in text:
        return "make it writable or point the run elsewhere, then re-run"
    if code in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return "a file is in the way of a folder (or a folder of a file): move it, then re-run"
    free = free_bytes(path) if path is not None else None
    if free is not None and free < NEARLY_FULL:
        return f"only {free // 1024} KiB are free there: {full}"
    if rebuild:
        return f"delete it to rebuild it ({rebuild}), then re-run"
    return "check it, then re-run"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def store_error(store: str, path: str | Path, action: str, exc: BaseException, rebuild: str = "") -> StoreError:
    """One line: `<store> <path>: <action> failed (<reason>); <fix>`, e.g. "answers cache .cache/answers/answers.jsonl:
    cannot append an answer (No space left on device); free space on that disk, then re-run (...)"."""
    return StoreError(f"{store} {path}: {action} ({_reason(exc)}); {store_fix(exc, rebuild, path)}")


def excerpt(body: bytes | str, limit: int = 80) -> str:
    """A short, one-line, quoted excerpt of what a server answered (for messages)."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return repr(text[:limit] + ("..." if len(text) > limit else "")) if text else "an empty body"
