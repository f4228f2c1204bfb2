"""Cache files are data that can be rebuilt: each is written with enough to verify it when read, and one that fails
is set aside (renamed `<name>.corrupt-<UTC time>`, so nothing is lost) with a warning naming it, then rebuilt:
JSON caches by their reader's schema check (`read_json`), built model files by a manifest of each file's size and
sha256 (`record`, `verify`), the SQLite vector cache with its -wal/-shm files. Each cache: docs/troubleshooting.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from ragstudy.io import atomic_write_json, set_aside, sha256_file

logger = logging.getLogger(__name__)

T = TypeVar("T")
MANIFEST_FORMAT = 1
SCALARS = (str, int, float, bool)


def json_object(value: Any, keys: Iterable[str], what: str, scalars: bool = False) -> dict:
    """`value` as a JSON object holding `keys` (each a string, number or boolean when `scalars`), else ValueError
    naming `what`: a schema check that leaves a TypeError or KeyError to be what it is, a bug."""
    keys = tuple(keys)
    if not isinstance(value, dict) or any(key not in value for key in keys):
        raise ValueError(f"{what} is not an object with {', '.join(keys)}")
    if scalars and any(not isinstance(value[key], SCALARS) for key in keys):
        raise ValueError(f"{what}: {', '.join(keys)} must be strings, numbers or booleans")
    return value


def set_aside_damaged(path: Path, what: str, reason: str) -> Path:
    """Rename a damaged cache file or folder beside itself and log one warning naming it; returns the new path."""
    aside = set_aside(path)
    logger.warning("%s %s is damaged (%s): set aside as %s and rebuilt", what, path, reason, aside.name)
    return aside


def read_json(path: Path, parse: Callable[[Any], T], what: str) -> T | None:
    """`parse(json of path)`, or None when the file is absent; a file that does not parse, or fails `parse`'s
    schema check (a ValueError: see json_object), is set aside (a warning names it) and None returned."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        set_aside_damaged(path, what, f"{type(exc).__name__}: {str(exc)[:160]}")
        return None


def manifest_of(path: Path) -> Path:
    """The manifest recording the files built with `path` (`<name>.files.json` beside it)."""
    return path.with_name(f"{path.name}.files.json")


def record(manifest: Path, files: Iterable[Path], **facts: Any) -> None:
    """Write `manifest`: the size and sha256 of each of `files` (named relative to it) and `facts`, atomically."""
    entries = {str(file.relative_to(manifest.parent)): {"size": file.stat().st_size, "sha256": sha256_file(file)}
               for file in sorted(Path(f) for f in files)}
    atomic_write_json(manifest, {"format": MANIFEST_FORMAT, "files": entries, **facts}, "cache manifest")


def recorded_files(manifest: Path) -> list[Path]:
    """The files a readable manifest lists (none when it is unreadable)."""
    try:
        files = json_object(json.loads(manifest.read_text(encoding="utf-8")), ("files",), "the manifest")["files"]
    except (OSError, ValueError):
        return []
    return [manifest.parent / str(name) for name in files] if isinstance(files, dict) else []


def verify(manifest: Path) -> str | None:
    """None when every file `manifest` lists has its recorded size and sha256; else what is wrong, in a few words
    ("no manifest", "model.onnx: 1,234 bytes, 90,000,000 recorded", "model.onnx: sha256 differs from ...")."""
    if not manifest.is_file():
        return f"no manifest {manifest.name}"
    try:
        data = json_object(json.loads(manifest.read_text(encoding="utf-8")), ("format", "files"), "the manifest")
        if data["format"] != MANIFEST_FORMAT or not isinstance(data["files"], dict) or not data["files"]:
            return f"manifest {manifest.name} is not of format {MANIFEST_FORMAT}"
        entries = {}
        for name, entry in data["files"].items():
            entry = json_object(entry, ("size", "sha256"), f"manifest entry {name}", scalars=True)
            entries[str(name)] = (int(entry["size"]), str(entry["sha256"]))
    except (OSError, ValueError) as exc:
        return f"manifest {manifest.name} unreadable ({type(exc).__name__})"
    for name, (size, digest) in entries.items():
        file = manifest.parent / name
        if not file.is_file():
            return f"{name} is missing"
        actual = file.stat().st_size
        if actual != size:
            return f"{name}: {actual:,} bytes, {size:,} recorded when it was built"
        if sha256_file(file) != digest:
            return f"{name}: its sha256 differs from the one recorded when it was built (same size)"
    return None


def vector_cache_damaged(path: Path, exc: Exception) -> None:
    """customembedding.VectorCache's `on_damaged`: set the SQLite file SQLite cannot read aside with its -wal and
    -shm files (they belong to it); its vectors are embedded again."""
    for suffix in ("-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.replace(path.with_name(f"{path.name}.corrupt{suffix}"))
    set_aside_damaged(path, "vector cache", f"{exc}; its vectors are embedded again")


FOLDER_MANIFEST = "ragstudy-files.json"  # in a built model folder: its files' sizes and sha256, recorded when built
_verified: set[tuple] = set()  # folders found whole in this process, by the size and mtime of each of their files


def record_folder(folder: Path, **facts: Any) -> None:
    """Write the folder's manifest (FOLDER_MANIFEST) over all its files, subfolders' too: call it last, before the
    folder is renamed into place."""
    files = [p for p in sorted(Path(folder).rglob("*")) if p.is_file() and p.name != FOLDER_MANIFEST]
    record(Path(folder) / FOLDER_MANIFEST, files, **facts)


def usable_folder(folder: Path, what: str, whole: Callable[[Path], Any] | None = None) -> bool:
    """Whether a built model folder in the project cache can be used as is: one with a manifest must match it
    (`verify`); one without (older) is adopted, its manifest written, when `whole(folder)` (loads the files, raises
    on a bad one) passes. A folder that fails is set aside with a warning: False, the caller builds it again."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    manifest = folder / FOLDER_MANIFEST
    if manifest.is_file() or whole is None:
        # a file rewritten or truncated since it was verified changes its stat: verified again (hashing is slow)
        key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file())
        problem = None if manifest.is_file() and key in _verified else verify(manifest)
        if problem is None:
            _verified.add(key)
            return True
    else:
        try:
            whole(folder)
        except Exception as exc:  # noqa: BLE001 - any failure to load the files means the folder is not whole
            problem = f"no manifest, and it does not load ({type(exc).__name__}: {str(exc)[:120]})"
        else:
            with suppress(OSError):  # a read-only cache: use the folder, verify it again next time
                record_folder(folder, adopted=True)
            return True
    set_aside_damaged(folder, what, problem)
    return False


def weights_read_back(folder: Path, *json_files: str) -> None:
    """Raise unless the folder's `model.safetensors` reads back tensor by tensor and each of `json_files` parses: the
    `whole` check of `usable_folder` for a model folder saved by transformers or sentence-transformers."""
    from safetensors import safe_open

    for name in json_files:
        json.loads((Path(folder) / name).read_text(encoding="utf-8"))
    with safe_open(str(Path(folder) / "model.safetensors"), framework="numpy") as weights:
        for name in weights.keys():
            weights.get_tensor(name)
