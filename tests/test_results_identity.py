"""A results folder never mixes configurations (ragstudy.grid.runidentity): real BM25 retrieval-only runs (no model to
load) write `run_identity.json`; a run refuses to write beside another configuration's files, scoring refuses to
compare them unless asked, and hand-edited retrieval files are named — rows of a question deleted, `in_k` zeroed,
rows for a question past the end, a listed strategy's file deleted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from ragstudy_cli import app

QUESTIONS = ["Per quanti anni si conservano i fascicoli?", "Come si accede al portale?",
             "Dove si inviano le richieste di assistenza?"]


@pytest.fixture(scope="module")
def questions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("identity-qa")
    (folder / "Questions.csv").write_text("questions\n" + "\n".join(QUESTIONS) + "\n", encoding="utf-8")
    (folder / "Oracle.csv").write_text("oracle\nDieci anni.\nCon SPID.\nAll'indirizzo assistenza@esempio.it.\n",
                                       encoding="utf-8")
    return folder / "Questions.csv"


def chain(pdf_dir: Path, questions: Path, out: Path, retriever: str, strategies: str, budgets: str = "300,900"
          ) -> int:

    return app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--documents", str(pdf_dir),
                                  "--questions", str(questions), "--output-dir", str(out), "--strategies", strategies,
                                  "--budgets", budgets, "--retriever", retriever,
                                  "--db-dir", f"{out}-db"]))  # its own Chroma folders: the default is the repository's


def score(out: Path, *extra: str) -> int:

    return app.main(["score-retrieval", "--results-dir", str(out), "--no-plot", "--n-resamples", "100", *extra])


@pytest.fixture(scope="module")
def runs(pdf_dir: Path, questions: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("identity-runs")
    folders = {"bm25": root / "bm25", "parents": root / "parents"}
    assert chain(pdf_dir, questions, folders["bm25"], "bm25", "newline,fixed-size") == 0
    assert chain(pdf_dir, questions, folders["parents"], "bm25-parents", "newline,fixed-size") == 0
    return folders


def member(out: Path, strategy: str, retriever: str = "bm25") -> Path:
    """A strategy's variant folder in a run's grid (ragstudy.grid.variants)."""
    return out / "variants" / f"{strategy}__{retriever}__raw"


def copy_run(runs: dict[str, Path], tmp_path: Path, name: str = "bm25") -> Path:
    out = tmp_path / name
    shutil.copytree(runs[name], out, ignore=shutil.ignore_patterns(".ragstudy-run.lock"))
    return out


def error_line(capsys: pytest.CaptureFixture) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def test_each_file_records_the_configuration_that_wrote_it(runs: dict[str, Path]) -> None:
    files = json.loads((member(runs["bm25"], "fixed-size") / "run_identity.json").read_text())["files"]
    entry = files["retrieval_fixed-size.csv"]
    assert entry["run"]["retriever"] == "bm25" and entry["run"]["questions"] == 3
    from ragstudy.config import PROFILES
    from ragstudy.models import model_label

    # the lite profile's embedding model (its label), run by the onnx backend
    assert entry["run"]["embedding"].startswith(model_label(PROFILES["lite"].embedding))
    assert entry["run"]["embedding_backend"] == "onnx"
    assert entry["strategy"]["name"] == "fixed-size" and entry["strategy"]["params"]["parent"]["chunk_size"] == 800
    assert len(entry["sha256"]) == 64 and "chunks_fixed-size.csv" in files


def test_a_run_refuses_a_folder_holding_another_configurations_files(runs, pdf_dir, questions, tmp_path,
                                                                     capsys) -> None:
    out = copy_run(runs, tmp_path)
    def written() -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".ragstudy-run.lock"}

    before = written()
    assert chain(pdf_dir, questions, out, "bm25-parents", "fixed-size") == 2
    line = error_line(capsys)
    assert f"{out}: variants.csv lists the variant newline__bm25__raw (retriever bm25), and this run adds " \
        "fixed-size__bm25-parents__raw without that retriever (its retrievers: bm25-parents)" in line \
        and "own --output-dir" in line
    assert written() == before  # nothing written
    assert chain(pdf_dir, questions, out, "bm25", "fixed-size") == 0  # the same configuration may add to it


def test_scoring_refuses_files_of_two_configurations_unless_asked(runs, pdf_dir, questions, tmp_path,
                                                                   capsys) -> None:
    """fixed-size's variant folder replaced by the same variant of a run ranked for a larger budget (another
    configuration; variants.csv's labels still true): refused, unless --allow-mixed-configurations."""
    out = copy_run(runs, tmp_path)
    assert chain(pdf_dir, questions, tmp_path / "larger", "bm25", "fixed-size", budgets="300,1200") == 0
    shutil.rmtree(member(out, "fixed-size"))
    shutil.copytree(member(tmp_path / "larger", "fixed-size"), member(out, "fixed-size"))
    assert score(out) == 2
    line = error_line(capsys)
    assert "written by different configurations" in line and "retrieval_newline.csv: retriever bm25," in line
    assert "largest budget 900 chars" in line and "largest budget 1200 chars" in line
    assert "--allow-mixed-configurations" in line

    assert app.main(["report", "--results-dir", str(out)]) == 2  # the report refuses the same folder
    assert "written by different configurations" in error_line(capsys)
    assert score(out, "--allow-mixed-configurations") == 0
    assert "MIXED CONFIGURATIONS" in (out / "retrieval_summary.md").read_text()


def test_a_variant_folder_of_another_retriever_is_refused_even_when_mixing_is_allowed(runs, tmp_path,
                                                                                      capsys) -> None:
    """fixed-size's whole variant folder replaced by the bm25-parents run's: variants.csv's row would label
    bm25-parents' rankings bm25. That is not a mix of configurations to compare on request but a false label
    (issue 51): refused, flag or not, naming the row and both retrievers."""
    out = copy_run(runs, tmp_path)
    shutil.rmtree(member(out, "fixed-size"))
    shutil.copytree(member(runs["parents"], "fixed-size", "bm25-parents"), member(out, "fixed-size"))
    for extra in ((), ("--allow-mixed-configurations",)):
        assert score(out, *extra) == 2
        line = error_line(capsys)
        assert "variants.csv row 3 (variant fixed-size__bm25__raw) says retriever 'bm25' but " in line
        assert "records retriever 'bm25-parents' (and id differs)" in line
    assert not (out / "retrieval_summary.md").exists()


def test_a_file_copied_in_from_another_run_is_refused(runs, tmp_path, capsys) -> None:
    out = copy_run(runs, tmp_path)
    shutil.copyfile(member(runs["parents"], "fixed-size", "bm25-parents") / "retrieval_fixed-size.csv",
                    member(out, "fixed-size") / "retrieval_fixed-size.csv")
    assert score(out) == 2
    assert "retrieval_fixed-size.csv changed since the run wrote it" in error_line(capsys)


def edit(path: Path, change) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    change(frame).to_csv(path, index=False)


@pytest.mark.parametrize("case, change, said", [
    ("question deleted", lambda f: f[f.question_index != "1"], "no rows for question_index 1 (of 3 questions)"),
    ("in_k zeroed", lambda f: f.assign(in_k="False"), "has in_k at ranks none, not the top ranks"),
    ("in_k not a prefix", lambda f: f.assign(in_k=(f["rank"] == "2").astype(str)), "has in_k at ranks [2]"),
    ("question past the end", lambda f: pd.concat([f, f[f.question_index == "0"].assign(question_index="7")]),
     "rows for question_index 7, which the run's questions file does not have"),
])
def test_hand_edited_retrieval_files_are_named(runs, tmp_path, capsys, case, change, said) -> None:
    out = copy_run(runs, tmp_path)
    edit(member(out, "fixed-size") / "retrieval_fixed-size.csv", change)
    assert score(out) == 2
    line = error_line(capsys)
    assert f"{member(out, 'fixed-size') / 'retrieval_fixed-size.csv'}: " in line and said in line


def test_a_listed_strategys_deleted_file_is_named(runs, tmp_path, capsys) -> None:
    out = copy_run(runs, tmp_path)
    (member(out, "fixed-size") / "retrieval_fixed-size.csv").unlink()
    assert score(out) == 2
    line = error_line(capsys)
    assert "config.json lists fixed-size but retrieval_fixed-size.csv is missing" in line


def test_dataset_files_of_two_configurations_are_not_scored_together(tmp_path: Path) -> None:
    """Answer runs: two Dataset files, each recorded by the run that wrote it (different LLMs)."""
    from Postprocessing import common
    from ragstudy import registry
    from ragstudy.config import StudyConfig
    from ragstudy.errors import StudyInputError
    from ragstudy.grid import runidentity
    from ragstudy.results import DatasetRow, write_dataset

    questions_path = tmp_path / "Questions.csv"
    questions_path.write_text("questions\n" + "\n".join(QUESTIONS) + "\n", encoding="utf-8")
    local = StudyConfig.resolve(profile="lite", strategies="newline,fixed-size")
    served = StudyConfig.resolve(profile="lite", strategies="newline,fixed-size", llm_servers=("http://h:1",),
                                 llm_server_model="served-llm")
    for strategy, config in (("newline", local), ("fixed-size", served)):
        rows = [DatasetRow(i, q, f"risposta {i}", ("contesto",), None, strategy) for i, q in enumerate(QUESTIONS)]
        paths = write_dataset(rows, tmp_path, registry.get(strategy).dataset_name)
        runidentity.record(tmp_path, config, QUESTIONS, strategy, paths)
    with pytest.raises(StudyInputError, match="written by different configurations") as caught:
        common.load_all_answers(tmp_path, QUESTIONS, questions_path)
    assert "LLM served-llm" in str(caught.value) and "DatasetNewLine.csv: retriever dense" in str(caught.value)
    answers = common.load_all_answers(tmp_path, QUESTIONS, questions_path, allow_mixed=True)
    assert sorted(a.strategy for a in answers) == ["fixed-size", "newline"]
