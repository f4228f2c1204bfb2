"""onnxruntime: the same weights exported once to ONNX Runtime GenAI (fp32, KV cache; CPU only), greedy, one prompt
at a time in each of several worker processes; why it is the lite profile's default and why processes, not threads:
docs/scale.md (Answers at scale)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.io import cache_dir, sha256_text, stable_json
from ragstudy.llms import register_engine
from ragstudy.llms._genai import greedy_tokens, load_genai_model
from ragstudy.llms.cache import GenerationParams, clean_answer
from ragstudy.llms.in_process import ChatTemplate
from ragstudy.models import wheel_llm
from ragstudy.stores.cachefile import FOLDER_MANIFEST, record_folder, usable_folder

logger = logging.getLogger(__name__)

ONNX_GENAI_PIN = "onnxruntime-genai==0.18.0"


class OnnxChatModel(ChatTemplate):
    """The same chat model run by ONNX Runtime GenAI, encoding and decoding as `ChatModel` does."""

    def __init__(self, model_path: str, threads: int, workers: int = 1) -> None:
        from transformers import AutoTokenizer

        if threads < 1 or workers < 1:
            raise ValueError(f"threads and workers must be >= 1, got {threads}, {workers}")
        import_onnx_genai()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.folder = onnx_model_folder(model_path)
        self.threads, self.workers = threads, workers
        self._model = None  # loaded in this process only when it answers here

    def generate(self, prompt: str, params: GenerationParams) -> str:
        if params.do_sample:
            raise ValueError("the onnxruntime engine decodes greedily only")
        if self._model is None:
            self._model = load_genai_model(self.folder, self.threads)
        return self.decode(greedy_tokens(self._model, self.prompt_ids(prompt), params.max_new_tokens))

    def decode(self, tokens: Sequence[int]) -> str:
        return clean_answer(self.tokenizer.decode(list(tokens), skip_special_tokens=True))

    def generate_batch(self, prompts: Sequence[str], params: GenerationParams) -> list[str]:
        """One at a time: GenAI derives padding from the pad token, which SmolLM2's chat template also uses."""
        return [self.generate(prompt, params) for prompt in prompts]

    def generate_each(self, prompts: Sequence[str], params: GenerationParams,
                      done: Callable[[int, str], None]) -> None:
        """Answer every prompt, calling `done(position, answer)` in this thread as each answer arrives; with several
        workers, each answers one prompt at a time on its own copy of the model, so the answers are those of
        `generate`. On an error or Ctrl-C the workers are stopped at once."""
        if params.do_sample:
            raise ValueError("the onnxruntime engine decodes greedily only")
        workers = min(self.workers, len(prompts))
        if workers <= 1:
            for position, prompt in enumerate(prompts):
                done(position, self.generate(prompt, params))
            return
        pool: list[_Worker] = []
        todo = list(enumerate(prompts))[::-1]  # popped from the end: question order
        busy: dict[Any, tuple[_Worker, int]] = {}

        def feed(worker: _Worker) -> None:
            if todo:
                position, prompt = todo.pop()
                worker.send(self.prompt_ids(prompt), params.max_new_tokens)
                busy[worker.stdout] = (worker, position)

        try:
            pool.extend(_Worker(self.folder, self.threads) for _ in range(workers))
            for worker in pool:
                feed(worker)
            with selectors.DefaultSelector() as selector:
                for worker in pool:
                    selector.register(worker.stdout, selectors.EVENT_READ)
                while busy:
                    for key, _ in selector.select():
                        worker, position = busy.pop(key.fileobj)
                        tokens = worker.receive()
                        feed(worker)
                        done(position, self.decode(tokens))
        finally:
            for worker in pool:
                worker.stop()


class _Worker:
    """One worker process (ragstudy.llms._onnx_worker). It runs in a session of its own, so a terminal's Ctrl-C
    reaches only the answering process, which stops it; it exits by itself when its stdin closes."""

    def __init__(self, folder: Path, threads: int) -> None:
        root = str(Path(__file__).resolve().parents[2])  # this checkout's ragstudy, whatever is installed
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.errors = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # never a pipe that could fill up
        self.process = subprocess.Popen([sys.executable, "-m", "ragstudy.llms._onnx_worker", str(folder),
                                         str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.errors, text=True, encoding="utf-8", env=env,
                                        start_new_session=True)
        self.stdout = self.process.stdout

    def send(self, ids: Sequence[int], max_new_tokens: int) -> None:
        with contextlib.suppress(OSError):  # it has exited: receive() says why
            self.process.stdin.write(json.dumps({"ids": list(ids), "max_new_tokens": max_new_tokens}) + "\n")
            self.process.stdin.flush()

    def receive(self) -> list[int]:
        reply: dict = {}
        while not reply and (line := self.stdout.readline()):
            try:
                reply = json.loads(line)
            except ValueError:  # a library's own message on stdout: not a reply
                continue
            reply = reply if isinstance(reply, dict) else {}
        if "tokens" in reply:
            return [int(token) for token in reply["tokens"]]
        if "error" in reply:
            problem = reply["error"]
        else:
            self.process.wait()
            self.errors.seek(0)
            tail = " | ".join(self.errors.read().strip().splitlines()[-3:])
            problem = f"it exited with code {self.process.returncode} ({tail or 'no message'})"
        raise StudyInputError(f"the onnxruntime LLM engine failed in a worker process: {problem}; answers so far "
                              "are cached (pass --threads N, N the number of cores, to answer in this process only)")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()
        self.errors.close()


def answer_workers(threads: int, folder: Path | None = None) -> int:
    """Worker processes answering side by side: one per `threads` cores, and no more than the available memory
    holds copies of the export in `folder` (each worker loads its own), at least one."""
    workers = max(1, (os.cpu_count() or 1) // max(1, threads))
    if folder is not None and workers > 1:
        size = sum(path.stat().st_size for path in Path(folder).iterdir() if path.is_file())
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):  # not on this platform: cores decide
            return workers
        workers = max(1, min(workers, int(0.8 * available) // max(1, size)))
    return workers


def import_onnx_genai() -> None:
    try:
        import onnxruntime_genai  # noqa: F401
    except ImportError as exc:
        raise StudyInputError(f"the onnxruntime LLM engine needs onnxruntime-genai ({exc}): pip install "
                              f"{ONNX_GENAI_PIN}, or pass --llm-engine torch") from None


def onnx_model_folder(model_path: str) -> Path:
    """Export a local transformers model folder once to an ONNX Runtime GenAI folder, cached under
    <project cache>/models/onnx/ by the folder's name, config and weight file sizes."""
    source = Path(model_path)
    if not (source / "config.json").is_file():
        raise StudyInputError(f"the onnxruntime LLM engine needs a local model folder, got {model_path!r}; pass "
                              "--llm PATH (a folder with config.json) or --llm-engine torch")
    # the source's own files (not the manifest the project cache keeps beside a converted model: the key stays)
    files = {p.name: p.stat().st_size for p in sorted(source.iterdir()) if p.is_file() and p.name != FOLDER_MANIFEST}
    digest = sha256_text(stable_json({"config": (source / "config.json").read_text(encoding="utf-8"),
                                      "files": files, "precision": "fp32", "engine": ONNX_GENAI_PIN}))[:16]
    target = cache_dir() / "models" / "onnx" / f"{source.name}-{digest}"
    # a truncated or replaced weight file, or an export made before manifests existed, is set aside and exported again
    if usable_folder(target, "ONNX Runtime GenAI export"):
        return target
    import_onnx_genai()
    tmp = target.with_name(target.name + ".partial")
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
    record_folder(tmp / "model", engine=ONNX_GENAI_PIN, precision="fp32")
    shutil.rmtree(target, ignore_errors=True)  # a folder left without genai_config.json
    (tmp / "model").rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    return target


def _runs(device: str, dtype: str) -> None:
    if device != "cpu" or dtype != "float32":
        raise StudyInputError(f"the onnxruntime LLM engine runs float32 on the CPU, not {dtype} on {device}; "
                              "pass --llm-engine torch")


def _preferred(config) -> bool:
    """A model shipped in wheels (the lite profile's) on the CPU in float32 (measured there), when
    onnxruntime-genai is installed (else a warning: torch is about half as fast)."""
    profile = config.profile
    if wheel_llm(profile.llm) is None or (profile.device, profile.dtype) != ("cpu", "float32"):
        return False
    import importlib.util

    if importlib.util.find_spec("onnxruntime_genai") is None:
        logger.warning("onnxruntime-genai is not installed: the lite LLM runs on torch, about half as fast "
                       "(pip install %s)", ONNX_GENAI_PIN)
        return False
    return True


SPEC = register_engine("onnxruntime",
                       lambda path, device, dtype, threads: OnnxChatModel(
                           path, threads, answer_workers(threads, onnx_model_folder(path))),
                       runs=_runs, preferred=_preferred, check=lambda config: import_onnx_genai(), order=1,
                       description="ONNX Runtime GenAI, fp32, CPU, one prompt at a time in each worker process "
                                   "(one per --threads cores)")
