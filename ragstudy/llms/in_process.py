"""The in-process generator: answers from the cache, loading the model on its engine (a registered LLM engine:
torch, onnxruntime, ...) only for missing ones. Prompts go through the model's chat template (ChatTemplate)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Callable

from ragstudy.errors import StudyInputError
from ragstudy.io import sha256_text, stable_json
from ragstudy.llms.cache import AnswerCache, CachingGeneratorBase, GenerationParams, length_batches

logger = logging.getLogger(__name__)


class ChatTemplate:
    """Prompt encoding shared by the engines: one user message through the model's chat template."""

    tokenizer: Any

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return self.tokenizer.eos_token_id if pad is None else pad

    def prompt_ids(self, prompt: str) -> list[int]:
        messages = [{"role": "user", "content": prompt}]
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)
        return list(encoded["input_ids"])


class CachedGenerator(CachingGeneratorBase):
    """Answers prompts from the cache, loading and running the model in-process only for missing ones.

    Batched greedy decoding can differ from one-at-a-time decoding in the last bits of the logits, so a batch size
    > 1 is part of the cache key (the key of batch size 1 is the one every earlier run used); so is any engine but
    torch, whose arithmetic differs. An engine that does not batch (onnxruntime) ignores batch_size.
    """

    def __init__(self, model_spec: str, model_label: str, device: str, dtype: str, params: GenerationParams,
                 cache: AnswerCache, loader=None, origin: str = "config", batch_size: int = 1,
                 engine: str = "torch", threads: int = 1) -> None:
        super().__init__(model_label, params, cache)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        from ragstudy.llms import get

        self.spec = get(engine)
        if self.spec.load is None:
            raise ValueError(f"LLM engine {engine!r} does not run in-process")
        if self.spec.runs is not None:
            self.spec.runs(device, dtype)
        self.model_spec, self.device, self.dtype, self.batch_size = model_spec, device, dtype, batch_size
        self.engine, self.threads = engine, threads
        self._loader = loader  # callable returning the resolved model path (defers wheel conversion)
        self.origin = origin  # which profile, file or flag chose the model (for error messages)
        self._model: Any = None

    def key(self, prompt: str, params: GenerationParams | None = None, batch_size: int | None = None) -> str:
        batch_size = self.batch_size if batch_size is None else batch_size
        fields: dict[str, Any] = {"prompt": prompt, "model": self.model_label, "dtype": self.dtype,
                                  "device": self.device, "params": asdict(params or self.params)}
        if self.engine != "torch":
            fields["engine"] = self.engine  # the paper's engine's keys carry no engine name
        if self.spec.batches and batch_size > 1:
            fields["batch_size"] = batch_size
        return sha256_text(stable_json(fields))

    def __call__(self, prompt: str, params: GenerationParams | None = None) -> str:
        """One prompt, generated alone (the paper's way, under its cache key) whatever `batch_size` is."""
        return self.generate_many([prompt], params, batch_size=1)[0]

    def model(self) -> Any:
        if self._model is None:
            path = self._loader() if self._loader else self.model_spec
            logger.info("loading LLM %s (%s, %s, %s)", self.model_label, self.engine, self.device, self.dtype)
            try:
                self._model = self.spec.load(path, self.device, self.dtype, self.threads)
            except OSError as exc:
                raise StudyInputError(f"LLM {self.model_spec!r} (set by {self.origin}) could not be loaded: "
                                      f"{exc}") from exc
        return self._model

    def _generate_missing(self, prompts: Sequence[str], params: GenerationParams, batch_size: int | None,
                          done: Callable[[int, str], None]) -> None:
        model = self.model()
        batch_size = self.batch_size if batch_size is None else batch_size
        if hasattr(model, "generate_each"):  # the engine answers the list itself (onnxruntime: worker processes)
            model.generate_each(prompts, params, done)
            return
        if batch_size == 1 or not self.spec.batches:
            for position, prompt in enumerate(prompts):
                done(position, model.generate(prompt, params))
            return
        for batch in length_batches([len(model.prompt_ids(p)) for p in prompts], batch_size):
            for position, answer in zip(batch, model.generate_batch([prompts[i] for i in batch], params)):
                done(position, answer)
