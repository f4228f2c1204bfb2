"""Small I/O helpers: atomic writes, stable hashing, project cache location."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def stable_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace variation, for hashing."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def sha256_text(*parts: str) -> str:
    """sha256 hex digest of the parts joined by NUL (so ("a","bc") != ("ab","c"))."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_dir() -> Path:
    """Root of the project cache: $RAGSTUDY_CACHE if set, else <repo>/.cache (git-ignored)."""
    return Path(os.environ.get("RAGSTUDY_CACHE") or PROJECT_ROOT / ".cache")


def _new_file_beside(path: Path, suffix: str) -> tuple[int, Path]:
    """Create a new empty hidden file beside `path` and return (fd, its path).

    Unlike tempfile.mkstemp (always 0600), the file gets the mode of any file the user writes: 0666 less the
    umask, applied by the kernel at creation, so the umask is never read or changed (os.umask is process-wide and
    racy between threads).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}{suffix}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: could not create a temporary file beside {path.name} (100 names taken)")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_file_beside(path, ".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_save(path: Path, save) -> None:
    """Call `save(tmp_path)` (for writers that need a file name, e.g. openpyxl, kaleido), then rename onto `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_file_beside(path, path.suffix)
    os.close(fd)
    try:
        save(str(tmp))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, ensure_ascii=False, indent=2) + "\n")
