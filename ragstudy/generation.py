"""Greedy chat generation with a persistent answer cache.

Answers are cached under a sha256 of (prompt, model, dtype, device, generation params) in an append-only JSONL
file: a re-run regenerates nothing, an interrupted run resumes at the first unanswered question, and the model is
only loaded when some answer is missing.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .io import sha256_text, stable_json

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int
    do_sample: bool = False  # the study decodes greedily


class AnswerCache:
    """Append-only JSONL cache: one {"key", "answer", ...} record per line, flushed and fsynced per answer."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._answers: dict[str, str] = {}
        if self.path.exists():
            with open(self.path, encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    try:
                        record = json.loads(line)
                        self._answers[record["key"]] = record["answer"]
                    except (json.JSONDecodeError, KeyError):
                        # a run killed mid-write leaves a truncated last line: that answer is regenerated
                        logger.warning("%s:%d: unreadable cache line ignored", self.path, number)

    def __contains__(self, key: str) -> bool:
        return key in self._answers

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> str | None:
        return self._answers.get(key)

    def put(self, key: str, answer: str, **meta: object) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "answer": answer, **meta}, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._answers[key] = answer


class ChatModel:
    """A causal LM answering one user message through its chat template, greedily."""

    def __init__(self, model_path: str, device: str, dtype: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_path)
            self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype))
        except OSError as exc:
            raise OSError(f"LLM {model_path!r} could not be loaded ({exc}). Pass a local model folder (--llm PATH) "
                          "or make the model available in the Hugging Face cache.") from exc
        self.model.to(device).eval()

    def generate(self, prompt: str, params: GenerationParams) -> str:
        import torch

        messages = [{"role": "user", "content": prompt}]
        inputs = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                    return_dict=True).to(self.device)
        with torch.inference_mode():
            output = self.model.generate(**inputs, max_new_tokens=params.max_new_tokens, do_sample=params.do_sample,
                                         temperature=None, top_p=None, top_k=None,
                                         pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
        new_tokens = output[0, inputs["input_ids"].shape[1]:]
        return clean_answer(self.tokenizer.decode(new_tokens, skip_special_tokens=True))


def clean_answer(text: str) -> str:
    """Strip whitespace and the U+FFFD left when max_new_tokens cuts a multi-byte character in half."""
    return text.strip().rstrip("\ufffd").rstrip()


class CachedGenerator:
    """Answers prompts from the cache, loading and running the model only for missing ones."""

    def __init__(self, model_spec: str, model_label: str, device: str, dtype: str, params: GenerationParams,
                 cache: AnswerCache, loader=None, origin: str = "config") -> None:
        self.model_spec = model_spec
        self.model_label = model_label
        self.device = device
        self.dtype = dtype
        self.params = params
        self.cache = cache
        self._loader = loader  # callable returning the resolved model path (defers wheel conversion)
        self.origin = origin  # which profile, file or flag chose the model (for error messages)
        self._model: ChatModel | None = None
        self.generated = 0
        self.cached = 0

    def key(self, prompt: str) -> str:
        return sha256_text(stable_json({"prompt": prompt, "model": self.model_label, "dtype": self.dtype,
                                        "device": self.device, "params": asdict(self.params)}))

    def model(self) -> ChatModel:
        if self._model is None:
            path = self._loader() if self._loader else self.model_spec
            logger.info("loading LLM %s (%s, %s)", self.model_label, self.device, self.dtype)
            try:
                self._model = ChatModel(path, self.device, self.dtype)
            except OSError as exc:
                from .errors import StudyInputError

                raise StudyInputError(f"LLM {self.model_spec!r} (set by {self.origin}) could not be loaded: "
                                      f"{exc}") from exc
        return self._model

    def __call__(self, prompt: str) -> str:
        key = self.key(prompt)
        answer = self.cache.get(key)
        if answer is not None:
            self.cached += 1
            return clean_answer(answer)  # also cleans answers cached before clean_answer existed
        answer = self.model().generate(prompt, self.params)
        self.cache.put(key, answer, model=self.model_label)
        self.generated += 1
        return answer
