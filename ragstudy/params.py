"""Typed, range-checked parameter records built from user input (YAML, `--set`, sweep files).

User values arrive as JSON-ish scalars: `--set fixed-size.chunk_size=abc` is the string "abc". A dataclass accepts
anything in its fields, so `build_params` checks every value against its field's annotation before the record's
own `__post_init__` checks ranges. Errors name the setting and what would be accepted.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args, get_origin

from ragstudy.errors import StudyInputError

T = TypeVar("T")


def _accepts(annotation: Any, value: Any) -> bool:
    origin = get_origin(annotation)
    if annotation is Any:
        return True
    if origin is Literal:
        return value in get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in get_args(annotation))
    if origin in (tuple, list):
        return isinstance(value, (tuple, list)) and all(
            _accepts(get_args(annotation)[0], item) for item in value) if get_args(annotation) else True
    if origin is dict:
        return isinstance(value, dict)
    if annotation in (int, float):  # a bool is no number here; an int is a float
        return isinstance(value, (int, annotation)) and not isinstance(value, bool)
    if isinstance(annotation, type):  # bool, str, None's type, a class
        return isinstance(value, annotation)
    return True


def _describe(annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    return getattr(annotation, "__name__", str(annotation)).replace("NoneType", "null")


def build_params(cls: type[T], values: dict[str, Any], where: str) -> T:
    """`cls(**values)` with unknown keys, wrong types and out-of-range values reported as StudyInputError.

    `where` prefixes messages, e.g. "--set fixed-size." so that the user sees the setting to fix.
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise StudyInputError(f"unknown parameter(s) {', '.join(where + u for u in unknown)}; known: "
                              f"{', '.join(sorted(known))}")
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        if not _accepts(hints.get(key, Any), value):
            raise StudyInputError(f"{where}{key}: {value!r} is not a valid value (expected "
                                  f"{_describe(hints.get(key, Any))})")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:  # a StudyInputError is named again here, so its own cause is dropped
        raise StudyInputError(f"{where.rstrip('.')}: {exc}") from (None if isinstance(exc, StudyInputError) else exc)


@dataclass(frozen=True)
class WindowParams:
    """Windows of `chunk_size` units sharing `chunk_overlap` units with the next (characters, tokens, …): the
    range checks every such splitter needs. Strategies subclass it with their own defaults."""

    chunk_size: int
    chunk_overlap: int

    def __post_init__(self) -> None:
        if self.chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {self.chunk_size}")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be >= 0 and less than chunk_size "
                             f"({self.chunk_size})")
