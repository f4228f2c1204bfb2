"""The answer cache and the caching base every LLM engine's generator builds on: a re-run regenerates nothing, an
interrupted run resumes at the first unanswered question, and the model is only loaded when some answer is missing.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstudy.errors import excerpt, store_error

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int
    do_sample: bool = False  # the study decodes greedily


class AnswerCache:
    """Append-only JSONL cache: one {"key", "answer", ...} record per line, fsynced per answer. A line that is not
    such a record (the torn last line of a killed run, a hand edit) is ignored with a warning, and that answer is
    generated again; an append always starts on a fresh line, so a torn line never swallows the next answer."""

    STORE = "answers cache"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._answers: dict[str, str] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._load()
        except OSError as exc:
            raise store_error(self.STORE, self.path, "cannot read it", exc,
                              "the answers in it are generated again") from None

    def _load(self) -> None:
        with open(self.path, "rb") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    record = json.loads(line)
                except ValueError:  # also UnicodeDecodeError
                    record = None
                if isinstance(record, dict) and isinstance(record.get("key"), str) \
                        and isinstance(record.get("answer"), str):
                    self._answers[record["key"]] = record["answer"]
                else:
                    logger.warning("%s:%d: not an answer record %s; ignored, that answer is generated again",
                                   self.path, number, excerpt(line, 60))

    def __contains__(self, key: str) -> bool:
        return key in self._answers

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> str | None:
        return self._answers.get(key)

    def put(self, key: str, answer: str, **meta: object) -> None:
        """Append one answer under an exclusive lock shared with other processes appending."""
        import fcntl

        line = (json.dumps({"key": key, "answer": answer, **meta}, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            with open(self.path, "a+b") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when the file is closed
                size = handle.seek(0, os.SEEK_END)
                if size:
                    handle.seek(size - 1)
                    if handle.read(1) != b"\n":  # a torn last line: start this answer on a fresh line
                        line = b"\n" + line
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise store_error(self.STORE, self.path, "cannot append an answer", exc,
                              "the answers in it are generated again") from None
        self._answers[key] = answer


def clean_answer(text: str) -> str:
    """Strip whitespace and the U+FFFD left when max_new_tokens cuts a multi-byte character in half."""
    return text.strip().rstrip("\ufffd").rstrip()


class CachingGeneratorBase:
    """Cache bookkeeping shared by the in-process and server generators. Subclasses define `key` and
    `_generate_missing`, which must call `done(index, answer)` as soon as each answer exists, so it is cached before
    the next one is awaited. `batch_size` None means the generator's own; backends that do not batch ignore it."""

    def __init__(self, model_label: str, params: GenerationParams, cache: AnswerCache) -> None:
        self.model_label, self.params, self.cache = model_label, params, cache
        self.generated = 0
        self.cached = 0

    def key(self, prompt: str, params: GenerationParams | None = None, batch_size: int | None = None) -> str:
        raise NotImplementedError

    def _generate_missing(self, prompts: Sequence[str], params: GenerationParams, batch_size: int | None,
                          done: Callable[[int, str], None]) -> None:
        raise NotImplementedError

    def _cache_meta(self) -> dict[str, Any]:
        return {"model": self.model_label}

    def __call__(self, prompt: str, params: GenerationParams | None = None) -> str:
        return self.generate_many([prompt], params)[0]

    def generate_many(self, prompts: Sequence[str], params: GenerationParams | None = None, desc: str = "",
                      batch_size: int | None = None) -> list[str]:
        """Answers in input order: cached ones from the cache, the rest generated and cached one by one."""
        from tqdm.auto import tqdm

        params = params or self.params
        answers: list[str | None] = [None] * len(prompts)
        missing: dict[str, list[int]] = {}  # key -> positions (a prompt repeated in the list is generated once)
        for index, prompt in enumerate(prompts):
            key = self.key(prompt, params, batch_size)
            cached = self.cache.get(key)
            if cached is not None and clean_answer(cached):  # an empty answer (cached by older runs) is redone
                self.cached += 1
                answers[index] = clean_answer(cached)  # also cleans answers cached before clean_answer existed
            else:
                missing.setdefault(key, []).append(index)
        if missing:
            keys = list(missing)
            todo = [prompts[missing[key][0]] for key in keys]

            def done(position: int, answer: str) -> None:
                key = keys[position]
                if clean_answer(answer):
                    self.cache.put(key, answer, **self._cache_meta())
                else:  # never cached: re-running the question really asks the model again
                    logger.warning("%s gave an empty answer; it is not cached, so a re-run generates it again",
                                   self.model_label)
                self.generated += 1
                self.cached += len(missing[key]) - 1  # a repeat is answered from the cache, as one at a time
                for index in missing[key]:
                    answers[index] = answer
                bar.update(1)

            with tqdm(total=len(todo), desc=desc or "Generating", unit="answer", disable=len(prompts) < 2) as bar:
                self._generate_missing(todo, params, batch_size, done)
        return [answer if answer is not None else "" for answer in answers]


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Positions grouped into batches of similar length, longest first (padding waste stays small, and a batch
    that does not fit in memory fails at once rather than at the end)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
