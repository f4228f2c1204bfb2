"""Greedy chat generation with a persistent answer cache.

Answers are cached under a sha256 of (prompt, model, dtype, device, generation params) in an append-only JSONL
file (empty answers are not cached: re-running asks the model again): a re-run regenerates nothing, an
interrupted run resumes at the first unanswered question, and the model is
only loaded when some answer is missing. `generate_many` answers a list of prompts, generating the missing ones in
batches (in-process, left padding) or concurrently (OpenAI-compatible servers, `ragstudy.llm_server`).
In-process models run on one of two engines: torch (transformers `generate`) or ONNX Runtime GenAI (the same
weights exported once to ONNX, fp32, KV cache; CPU only; `OnnxChatModel`), which answers the lite profile's prompts
2.1x faster per CPU second than torch one at a time and 1.5x its batches of 8, with the same
answers (benchmarks/lite_study.py).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import StudyInputError, excerpt, store_error
from .io import cache_dir, sha256_text, stable_json

logger = logging.getLogger(__name__)

ENGINES = ("torch", "onnxruntime")  # in-process LLM engines (config `llm_engine`)
ONNX_GENAI_PIN = "onnxruntime-genai==0.18.0"
GENAI_MANIFEST = "ragstudy-files.json"  # sizes and sha256 of the export's files, recorded when it is built


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int
    do_sample: bool = False  # the study decodes greedily


class AnswerCache:
    """Append-only JSONL cache: one {"key", "answer", ...} record per line, flushed and fsynced per answer.

    A line that is not such a record (the torn last line of a run killed mid-write, a line edited by hand) is
    ignored with a warning naming it, and that answer is generated again; an append always starts on a fresh line,
    so a torn line never swallows the next answer. A cache that cannot be read or written (a folder or a file in
    the way, read-only, disk full) is a StoreError naming the file and the fix; answers already in it are kept.
    """

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
                record = _answer_record(line)
                if record is None:
                    logger.warning("%s:%d: not an answer record %s; ignored, that answer is generated again",
                                   self.path, number, excerpt(line, 60))
                else:
                    self._answers[record[0]] = record[1]

    def __contains__(self, key: str) -> bool:
        return key in self._answers

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> str | None:
        return self._answers.get(key)

    def put(self, key: str, answer: str, **meta: object) -> None:
        """Append one answer (fsynced), under an exclusive lock shared with other processes appending."""
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


def _answer_record(line: bytes) -> tuple[str, str] | None:
    """(key, answer) of one cache line, or None when it is not a complete record."""
    try:
        record = json.loads(line)
    except ValueError:  # also UnicodeDecodeError
        return None
    if not isinstance(record, dict) or not isinstance(record.get("key"), str) \
            or not isinstance(record.get("answer"), str):
        return None
    return record["key"], record["answer"]


class _ChatTemplate:
    """Prompt encoding shared by the engines: one user message through the model's chat template."""

    tokenizer: Any

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return self.tokenizer.eos_token_id if pad is None else pad

    def prompt_ids(self, prompt: str) -> list[int]:
        """The token ids of `prompt` as one user message through the chat template, ready for the answer."""
        messages = [{"role": "user", "content": prompt}]
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)
        return list(encoded["input_ids"])


class ChatModel(_ChatTemplate):
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
                                         temperature=None, top_p=None, top_k=None, pad_token_id=self.pad_token_id)
        new_tokens = output[0, inputs["input_ids"].shape[1]:]
        return clean_answer(self.tokenizer.decode(new_tokens, skip_special_tokens=True))

    def generate_batch(self, prompts: Sequence[str], params: GenerationParams) -> list[str]:
        """Answer several prompts in one `generate` call: left-padded to the longest, greedy, same template."""
        import torch

        if not prompts:
            return []
        ids = [self.prompt_ids(prompt) for prompt in prompts]
        width = max(len(row) for row in ids)
        input_ids = torch.tensor([[self.pad_token_id] * (width - len(row)) + row for row in ids])
        attention_mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in ids])
        with torch.inference_mode():
            output = self.model.generate(input_ids=input_ids.to(self.device),
                                         attention_mask=attention_mask.to(self.device),
                                         max_new_tokens=params.max_new_tokens, do_sample=params.do_sample,
                                         temperature=None, top_p=None, top_k=None, pad_token_id=self.pad_token_id)
        stops = self._stop_ids()
        answers = []
        for row in output[:, width:].tolist():
            # a row that finished early is filled with padding: cut at its first stop token, as generate() does
            cut = next((i + 1 for i, token in enumerate(row) if token in stops), len(row))
            answers.append(clean_answer(self.tokenizer.decode(row[:cut], skip_special_tokens=True)))
        return answers

    def _stop_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}



class OnnxChatModel(_ChatTemplate):
    """The same chat model run by ONNX Runtime GenAI (fp32 on CPU, KV cache), greedily, one prompt at a time.

    Prompts are encoded by the model folder's own tokenizer and chat template, exactly as `ChatModel` does, and the
    answer is decoded the same way; `onnx_model_folder` exports the weights once.
    """

    def __init__(self, model_path: str, threads: int) -> None:
        from transformers import AutoTokenizer

        og = import_onnx_genai()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        config = og.Config(str(onnx_model_folder(model_path)))
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
        self._og = og
        self.model = og.Model(config)

    def generate(self, prompt: str, params: GenerationParams) -> str:
        if params.do_sample:
            raise ValueError("the onnxruntime engine decodes greedily only")
        ids = self.prompt_ids(prompt)
        search = self._og.GeneratorParams(self.model)
        search.set_search_options(max_length=len(ids) + params.max_new_tokens, do_sample=False)
        generator = self._og.Generator(self.model, search)
        generator.append_tokens(ids)
        tokens: list[int] = []
        while not generator.is_done():  # stops at the EOS token or at max_length
            generator.generate_next_token()
            tokens.append(int(generator.get_next_tokens()[0]))
        return clean_answer(self.tokenizer.decode(tokens, skip_special_tokens=True))

    def generate_batch(self, prompts: Sequence[str], params: GenerationParams) -> list[str]:
        """One at a time: GenAI derives padding from the pad token, which SmolLM2's chat template also uses."""
        return [self.generate(prompt, params) for prompt in prompts]


def import_onnx_genai():
    """The onnxruntime_genai module, or a StudyInputError saying how to install it or avoid it."""
    try:
        import onnxruntime_genai
    except ImportError as exc:
        raise StudyInputError(f"the onnxruntime LLM engine needs onnxruntime-genai ({exc}): pip install "
                              f"{ONNX_GENAI_PIN}, or pass --llm-engine torch") from None
    return onnxruntime_genai


def onnx_model_folder(model_path: str) -> Path:
    """Export a local transformers model folder once to an ONNX Runtime GenAI folder (fp32, CPU), cached under
    <project cache>/models/onnx/ by the folder's name, config and weight file sizes; atomic (temp folder, rename)."""
    source = Path(model_path)
    if not (source / "config.json").is_file():
        raise StudyInputError(f"the onnxruntime LLM engine needs a local model folder, got {model_path!r}; pass "
                              "--llm PATH (a folder with config.json) or --llm-engine torch")
    files = {p.name: p.stat().st_size for p in sorted(source.iterdir()) if p.is_file()}
    digest = sha256_text(stable_json({"config": (source / "config.json").read_text(encoding="utf-8"),
                                      "files": files, "precision": "fp32", "engine": ONNX_GENAI_PIN}))[:16]
    target = cache_dir() / "models" / "onnx" / f"{source.name}-{digest}"
    if (target / "genai_config.json").is_file():
        from .cachefile import set_aside_damaged, verify

        problem = verify(target / GENAI_MANIFEST)  # a truncated or replaced weight file is exported again
        if problem is None:
            return target
        set_aside_damaged(target, "ONNX Runtime GenAI export", problem)
    import_onnx_genai()
    tmp = target.with_name(target.name + ".partial")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    logger.info("exporting %s to ONNX Runtime GenAI in %s (once, ~20 s)", source, target)
    command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(source), "-o", str(tmp / "model"),
               "-p", "fp32", "-e", "cpu", "-c", str(tmp / "build-cache")]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0 or not (tmp / "model" / "genai_config.json").is_file():
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-3:]
        raise StudyInputError(f"exporting {source} to ONNX failed (exit {done.returncode}: {' | '.join(tail)}); "
                              "pass --llm-engine torch")
    from .cachefile import record

    record(tmp / "model" / GENAI_MANIFEST, [f for f in (tmp / "model").iterdir() if f.is_file()],
           engine=ONNX_GENAI_PIN, precision="fp32")
    shutil.rmtree(target, ignore_errors=True)  # a folder left without genai_config.json
    (tmp / "model").rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    return target


def clean_answer(text: str) -> str:
    """Strip whitespace and the U+FFFD left when max_new_tokens cuts a multi-byte character in half."""
    return text.strip().rstrip("\ufffd").rstrip()


class CachingGeneratorBase:
    """Cache bookkeeping shared by the in-process and server generators.

    Subclasses define `key(prompt, params, batch_size)` and `_generate_missing(prompts, params, batch_size, done)`,
    which must call `done(index, answer)` as soon as each answer exists, so it is cached (fsynced) before the next
    one is awaited. `batch_size` None means the generator's own; backends that do not batch ignore it.
    `generated` / `cached` count answers produced and answers read from the cache.
    """

    params: GenerationParams
    cache: AnswerCache
    model_label: str

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

    def generate_many(self, prompts: Sequence[str], params: GenerationParams | None = None,
                      desc: str = "") -> list[str]:
        """Answers in input order: cached ones from the cache, the rest generated and cached one by one."""
        return self._answer(prompts, params, desc, None)

    def _answer(self, prompts: Sequence[str], params: GenerationParams | None, desc: str,
                batch_size: int | None) -> list[str]:
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
            bar = tqdm(total=len(todo), desc=desc or "Generating", unit="answer", disable=len(prompts) < 2)

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

            try:
                self._generate_missing(todo, params, batch_size, done)
            finally:
                bar.close()
        return [answer if answer is not None else "" for answer in answers]


class CachedGenerator(CachingGeneratorBase):
    """Answers prompts from the cache, loading and running the model in-process only for missing ones.

    batch_size 1 generates one prompt at a time (the paper's way); batch_size > 1 generates prompts of similar
    length together with left padding. Batched greedy decoding can differ from one-at-a-time decoding in the last
    bits of the logits, so the batch size is part of the cache key when it is > 1 (the key of batch size 1 is the
    key every earlier run used). engine "onnxruntime" runs the model with ONNX Runtime GenAI, one prompt at a time
    (batch_size is ignored); its answers are cached under their own key (engine in it), as its arithmetic differs.
    """

    def __init__(self, model_spec: str, model_label: str, device: str, dtype: str, params: GenerationParams,
                 cache: AnswerCache, loader=None, origin: str = "config", batch_size: int = 1,
                 engine: str = "torch", threads: int = 1) -> None:
        super().__init__(model_label, params, cache)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if engine == "onnxruntime" and (device != "cpu" or dtype != "float32"):
            raise StudyInputError(f"the onnxruntime LLM engine runs float32 on the CPU, not {dtype} on {device}; "
                                  "pass --llm-engine torch")
        self.model_spec, self.device, self.dtype, self.batch_size = model_spec, device, dtype, batch_size
        self.engine, self.threads = engine, threads
        self._loader = loader  # callable returning the resolved model path (defers wheel conversion)
        self.origin = origin  # which profile, file or flag chose the model (for error messages)
        self._model: ChatModel | OnnxChatModel | None = None

    def key(self, prompt: str, params: GenerationParams | None = None, batch_size: int | None = None) -> str:
        batch_size = self.batch_size if batch_size is None else batch_size
        fields: dict[str, Any] = {"prompt": prompt, "model": self.model_label, "dtype": self.dtype,
                                  "device": self.device, "params": asdict(params or self.params)}
        if self.engine != "torch":
            fields["engine"] = self.engine  # one prompt at a time: no batch size
        elif batch_size > 1:
            fields["batch_size"] = batch_size
        return sha256_text(stable_json(fields))

    def __call__(self, prompt: str, params: GenerationParams | None = None) -> str:
        """One prompt, generated alone (the paper's way, under its cache key) whatever `batch_size` is."""
        return self._answer([prompt], params, "", 1)[0]

    def model(self) -> ChatModel | OnnxChatModel:
        if self._model is None:
            path = self._loader() if self._loader else self.model_spec
            logger.info("loading LLM %s (%s, %s, %s)", self.model_label, self.engine, self.device, self.dtype)
            try:
                self._model = (OnnxChatModel(path, self.threads) if self.engine == "onnxruntime"
                               else ChatModel(path, self.device, self.dtype))
            except OSError as exc:
                raise StudyInputError(f"LLM {self.model_spec!r} (set by {self.origin}) could not be loaded: "
                                      f"{exc}") from exc
        return self._model

    def _generate_missing(self, prompts: Sequence[str], params: GenerationParams, batch_size: int | None,
                          done: Callable[[int, str], None]) -> None:
        model = self.model()
        batch_size = self.batch_size if batch_size is None else batch_size
        if batch_size == 1 or self.engine != "torch":
            for position, prompt in enumerate(prompts):
                done(position, model.generate(prompt, params))
            return
        for batch in length_batches([len(model.prompt_ids(p)) for p in prompts], batch_size):
            for position, answer in zip(batch, model.generate_batch([prompts[i] for i in batch], params)):
                done(position, answer)


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Positions grouped into batches of similar length, longest first (padding waste stays small, and a batch
    that does not fit in memory fails at once rather than at the end)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
