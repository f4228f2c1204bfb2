"""Bad input, round four, the rest (issue 38): a run never replaces another configuration's results nor writes in
or around the PDFs or into / or ~; evidence that matches nothing, or is too short to mean anything, is refused before
a verdict; a plug-in retriever's non-finite scores, too few units, errors and out-of-range units are named; a
hand-edited config.json or a stale decomposition is never scored; chunk quality reads CSV evidence; a review
workbook that is not one fails with one line. Each test injects the real fault."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from test_chunk_quality_script import results as cq_results  # noqa: F401  (a fixture)
from test_clean_text_layer import break_dir  # noqa: F401  (a fixture)
from test_results_identity import chain, copy_run, questions, runs  # noqa: F401  (fixtures)
from ragstudy_cli import app


def one_error(capsys: pytest.CaptureFixture, code: int) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err[-3000:]
    return lines[0]


def contents(folder: Path) -> dict[str, bytes]:
    """Every file of `folder` but its lock, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


# ------------------------------------------------------------------------------------------------ 1. lost data

def test_a_run_with_other_questions_never_replaces_the_same_strategies_files(runs, pdf_dir, tmp_path,
                                                                             capsys) -> None:
    """Other questions, the same strategies, the same folder: the earlier rankings were replaced silently (the
    refusal only fired when strategies would mix). Refused; the same configuration still re-runs (resume)."""
    out = copy_run(runs, tmp_path)
    other = tmp_path / "other.csv"
    other.write_text("questions\nChi firma il verbale?\nQuando scade la domanda?\n", encoding="utf-8")
    before = contents(out)
    line = one_error(capsys, chain(pdf_dir, other, out, "bm25", "newline,fixed-size"))
    assert line.startswith(f"error: {out / 'variants' / 'newline__bm25__raw'}: holds retrieval_newline.csv and ")
    assert "written by another configuration (retriever bm25," in line and "3 questions" in line
    assert "this run: retriever bm25," in line and "2 questions" in line
    assert line.endswith("this run would replace them, and the earlier results would be lost. Give this run its "
                         "own --output-dir, or move those files away")
    assert contents(out) == before  # nothing replaced, nothing added
    questions_file = Path(json.loads((out / "config.json").read_text())["questions_resolved"])
    assert chain(pdf_dir, questions_file, out, "bm25", "newline,fixed-size") == 0  # the same configuration: resumes


def test_an_answering_run_with_other_questions_never_replaces_the_dataset_files(pdf_dir, questions, tmp_path,
                                                                                capsys) -> None:
    """`ragstudy answer` into a folder whose DatasetNewLine files an answering run over other questions wrote (its
    run_identity.json says so): refused before anything is chunked, answered or written."""
    from ragstudy.config import StudyConfig
    from ragstudy.grid import runidentity

    out = tmp_path / "answers"
    out.mkdir()
    other = ["Chi firma il verbale?", "Quando scade la domanda?"]
    earlier = StudyConfig.resolve(profile="lite", strategies="newline", output_dir=str(out))
    for name in ("DatasetNewLine.csv", "DatasetNewLine.json"):
        (out / name).write_text("the earlier run's answers\n", encoding="utf-8")
    runidentity.record(out, earlier, other, "newline", [out / "DatasetNewLine.csv", out / "DatasetNewLine.json"])
    before = contents(out)
    line = one_error(capsys, app.main(app.chain_subcommand(["--profile", "lite", "--documents", str(pdf_dir),
                                                            "--questions",
                                                    str(questions), "--output-dir", str(out), "--strategies",
                                                    "newline", "--db-dir", str(tmp_path / "db")])))
    assert line.startswith(f"error: {out}: holds DatasetNewLine.csv and 1 more written by another configuration (")
    assert "2 questions" in line and "this run: " in line and "3 questions" in line
    assert "this run would replace them, and the earlier results would be lost" in line
    assert contents(out) == before


def test_a_run_with_other_strategy_parameters_never_replaces_its_files(runs, pdf_dir, tmp_path, capsys) -> None:

    out = copy_run(runs, tmp_path)
    questions_file = json.loads((out / "config.json").read_text())["questions_resolved"]
    before = contents(out)
    code = app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--documents", str(pdf_dir),
                                          "--questions",
                                  questions_file, "--output-dir", str(out), "--strategies", "fixed-size",
                                  "--budgets", "300,900", "--retriever", "bm25", "--db-dir", f"{out}-db",
                                  "--set", "fixed-size.chunk_size=600"]))
    line = one_error(capsys, code)
    assert line.startswith(f"error: {out / 'variants' / 'fixed-size__bm25__raw'}: holds retrieval_fixed-size.csv and "
                           "2 more written with other fixed-size "
                           "parameters than this run's; this run would replace them")
    assert contents(out) == before


def test_the_filesystem_root_is_refused_before_anything_is_written() -> None:
    """`--output-dir /` wrote six files into / (as root). Checked on the output folder itself, not through a run:
    with the check broken, a run here would write into this machine's root."""
    from ragstudy.errors import StudyInputError
    from ragstudy.results import check_output_location

    with pytest.raises(StudyInputError, match=r"^/: --output-dir is the filesystem root; the results would be "
                                              r"written among the system's folders\. Pass a folder of its own"):
        check_output_location("/", None)


@pytest.mark.parametrize("where", ["home", "documents", "inside", "above"])
def test_results_never_go_into_the_root_the_home_folder_or_around_the_pdfs(where, pdf_dir, questions, tmp_path,
                                                                           monkeypatch, capsys) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    documents = tmp_path / "project" / "pdfs"
    shutil.copytree(pdf_dir, documents)
    out = {"home": tmp_path / "home", "documents": documents, "inside": documents / "results",
           "above": tmp_path / "project"}[where]
    before = contents(tmp_path)
    line = one_error(capsys, chain(documents, questions, out, "bm25", "fixed-size"))
    said = {"home": "--output-dir is the home folder; the results would be written among your own files",
            "documents": "--output-dir is the --documents folder; the results would be written among the PDFs",
            "inside": f"--output-dir is inside the --documents folder {documents}; the results would be written",
            "above": f"--output-dir holds the --documents folder {documents}; the results would be written"}[where]
    assert line.startswith(f"error: {out}: {said}") and "Pass a folder of its own, e.g. --output-dir" in line
    assert contents(tmp_path) == before and not (documents / "results").exists()


def test_a_study_never_goes_into_its_documents_folder(pdf_dir, tmp_path, capsys) -> None:
    from ragstudy_cli import study

    documents = tmp_path / "pdfs"
    shutil.copytree(pdf_dir, documents)
    line = one_error(capsys, study.main(["--documents", str(documents), "--output-dir", str(documents),
                                         "--profile", "lite"]))
    assert line.startswith(f"error: {documents}: --output-dir is the --documents folder; the results would be "
                           "written among the PDFs")
    assert sorted(p.name for p in documents.iterdir()) == sorted(p.name for p in pdf_dir.iterdir())


# ----------------------------------------------------------------------------------- 2. meaningless numbers

def score(out: Path, *extra: str) -> int:

    return app.main(["score-retrieval", "--results-dir", str(out), "--no-plot", "--n-resamples", "100", *extra])


IN_THE_PDFS = "conserva i fascicoli per dieci anni dalla chiusura"  # conftest.TEST_PARAGRAPHS
IN_NO_PDF = ["Il rinnovo del passaporto richiede una fotografia recente in formato tessera.",
             "Le domande di iscrizione alla mensa scolastica si presentano entro il mese di luglio."]


def test_evidence_that_occurs_in_no_pdf_is_refused_before_any_verdict(runs, tmp_path, capsys, caplog) -> None:
    """Hit 0.000 everywhere and a verdict printed, with only a note inside retrieval_summary.md: refused."""
    out = copy_run(runs, tmp_path)
    evidence = tmp_path / "evidence.csv"
    evidence.write_text("question_index,evidence\n" + "".join(f'{i},"{text}"\n' for i, text in enumerate(IN_NO_PDF)),
                        encoding="utf-8")
    before = contents(out)
    line = one_error(capsys, score(out, "--evidence", str(evidence)))
    assert line == (f"error: {evidence}: the evidence of none of its 2 answerable questions occurs in the run's PDFs "
                    "(2 of 2 matched no strategy's text): it belongs to other PDFs, or its passages are not copied "
                    "verbatim from them. Pass the evidence of these PDFs (ragstudy make-qa drafts it), or score "
                    "without --evidence (the oracle overlap)")
    assert contents(out) == before  # no verdict, no summary
    evidence.write_text(f'question_index,evidence\n0,"{IN_THE_PDFS}"\n1,"{IN_NO_PDF[0]}"\n', encoding="utf-8")
    assert score(out, "--evidence", str(evidence)) == 0  # one of two found: scored, with a warning naming the other
    assert ("the evidence of 1 of 2 answerable questions occurs in none of the run's PDFs (question_index 1): "
            "they are scored as misses") in caplog.text  # a warning: on stderr in a terminal


@pytest.mark.parametrize("form", ["csv", "json"])
def test_evidence_too_short_to_mean_anything_is_refused_naming_the_record(form, tmp_path, capsys) -> None:
    from ragstudy.scoring.evidence import MIN_EVIDENCE, EvidenceError, load_evidence_file

    if form == "csv":
        path = tmp_path / "evidence.csv"
        path.write_text(f'question_index,evidence\n0,"{IN_THE_PDFS}"\n1,e\n', encoding="utf-8")
        where = f"{path} line 3"
    else:
        path = tmp_path / "evidence.json"
        shutil.copyfile(Path(__file__).resolve().parents[1] / "sample" / "evidence.json", path)
        records = json.loads(path.read_text(encoding="utf-8"))
        first = next(i for i, r in enumerate(records) if r["answerable"] and r["evidence"])
        span = records[first]["evidence"][0]
        span["text"], span["end"] = "e", span["start"] + 1  # a well-formed record whose passage is one letter
        path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
        where = f"{path} record {first} (question_index {records[first]['question_index']})"
    with pytest.raises(EvidenceError) as caught:
        load_evidence_file(path)
    assert str(caught.value) == (f"{where}: evidence 'e' has 1 letter(s) or digit(s), fewer than the {MIN_EVIDENCE} a "
                                 "passage needs to mean anything (it occurs almost anywhere); copy the sentence that "
                                 "answers the question from the PDF, or delete the row (a question without evidence "
                                 "counts as unanswerable)")
    assert MIN_EVIDENCE == 4  # docs/retrieval.md and docs/troubleshooting.md state it


BEHAVIOURS = {  # a plug-in retriever's unit_ranking, misbehaving in one way each (unit 0 is a short parent)
    "nan-scores": lambda n: [(i, float("nan") if i == 1 else 1.0) for i in range(n)],
    "inf-scores": lambda n: [(i, float("inf")) for i in range(n)],
    "one-unit": lambda n: [(0, 1.0)],
    "out-of-range": lambda n: [(n + 5, 1.0)],
    "raises": None,  # the second question raises
}


@pytest.fixture
def misbehaving():
    """Plug-in retrievers registered as an outside package registers one (@register_retriever on a UnitRetriever
    subclass defined outside ragstudy); unregistered afterwards."""
    from ragstudy import retrievers
    from ragstudy.retrievers.units import UnitRetriever

    for name, ranking in BEHAVIOURS.items():
        def unit_ranking(self, question, ranking=ranking):
            if ranking is None:
                if "portale" in question:
                    raise RuntimeError("the index server went away")
                return [(i, 1.0) for i in range(len(self.corpus.texts))]
            return ranking(len(self.corpus.texts))

        retrievers.register_retriever(name, unit="parents")(type(f"Plugin_{name}", (UnitRetriever,),
                                                                  {"unit_ranking": unit_ranking}))
    yield
    for name in BEHAVIOURS:
        retrievers.RETRIEVERS.unregister(name)


def lock_is_free(folder: Path) -> bool:
    """Whether another open file description can take the output folder's flock now."""
    import fcntl
    import os

    fd = os.open(folder / ".ragstudy-run.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.parametrize("name, said", [
    ("nan-scores", "question 0 (newline): unit_ranking scored unit 1 nan, not a finite number; fix its unit_ranking, "
                   "or rank with another --retriever"),
    ("inf-scores", "question 0 (newline): unit_ranking scored unit 0 inf, not a finite number; fix its unit_ranking, "
                   "or rank with another --retriever"),
    ("out-of-range", "question 0 (newline): unit_ranking returned unit {bad}, not one of the {n} units (0..{last}); "
                     "fix its unit_ranking, or rank with another --retriever"),
    ("raises", "(module test_bad_input_round4b) failed on question 1 (newline): RuntimeError: the index server went "
               "away. Fix the retriever, or rank with another --retriever; no retrieval file was written for "
               "newline"),
])
def test_a_misbehaving_plugin_retriever_is_one_line_and_leaves_no_results_nor_lock(misbehaving, name, said, pdf_dir,
                                                                                   questions, tmp_path,
                                                                                   capsys) -> None:
    out = tmp_path / "out"
    line = one_error(capsys, chain(pdf_dir, questions, out, name, "newline"))
    import pandas as pd

    variant = out / "variants" / f"newline__{name}__raw"
    n = len(pd.read_csv(variant / "chunks_newline.csv"))  # the parents: this retriever's units
    named = f"retriever {name!r}" + (" " if name == "raises" else ", ")
    assert line.startswith(f"error: 1 of 1 variants failed (variant newline__{name}__raw: ")  # named by id
    assert named + said.format(bad=n + 5, n=n, last=n - 1) in line
    assert not (variant / "retrieval_newline.csv").exists() and not (variant / "run_identity.json").exists()
    assert lock_is_free(out)  # the output folder's lock was released: the next run may start


def test_a_plugin_retriever_ranking_too_few_parents_is_named_in_the_summary_and_on_stderr(misbehaving, pdf_dir,
                                                                                          questions, tmp_path,
                                                                                          caplog) -> None:
    """One unit scored at "equal budgets" of 300 and 900 characters with no note: the contexts are the one parent
    whatever the budget. Decided: scored, with a warning on stderr and a note in retrieval_summary.md."""
    out = tmp_path / "out"
    assert chain(pdf_dir, questions, out, "one-unit", "newline,fixed-size") == 0
    evidence = tmp_path / "evidence.csv"
    evidence.write_text(f'question_index,evidence\n0,"{IN_THE_PDFS}"\n', encoding="utf-8")
    assert score(out, "--evidence", str(evidence)) == 0
    said = ("newline: the retriever's ranking ended before filling the budget (3 of 3 questions at 300 chars, 3 of 3 "
            "questions at 900 chars) although the strategy's text could fill it; those contexts are smaller than the "
            "budget, so the comparison is not at equal budgets there (a retriever must rank parents until the "
            "largest budget is overfilled)")
    assert said in caplog.text and said in (out / "retrieval_summary.md").read_text(encoding="utf-8")
    caplog.clear()
    bm25 = tmp_path / "bm25"
    assert chain(pdf_dir, questions, bm25, "bm25", "newline,fixed-size") == 0
    assert score(bm25, "--evidence", str(evidence)) == 0
    assert "ranking ended before filling" not in caplog.text  # a retriever that ranks enough is not named


# ------------------------------------------------------------------------------- 3. a results folder not whole

def test_a_hand_edited_config_json_is_refused_by_scoring_and_the_report(runs, tmp_path, capsys) -> None:
    """`retriever: dense` written into config.json over bm25 rankings: the report's headline said "With the dense
    retriever ..." while run_identity.json says bm25. Both refuse it, naming both files."""
    from Postprocessing import write_report

    out = copy_run(runs, tmp_path)
    variant = out / "variants" / "fixed-size__bm25__raw"  # fixed-size's run in the grid
    assert score(out) == 0  # scored as the run wrote it (the oracle overlap)
    capsys.readouterr()
    config = json.loads((variant / "config.json").read_text(encoding="utf-8"))
    config["retriever"] = "dense"
    (variant / "config.json").write_text(json.dumps(config), encoding="utf-8")
    said = (f"error: {variant / 'config.json'} says retriever dense but {variant / 'run_identity.json'} records "
            "retriever "
            "bm25 for retrieval_fixed-size.csv, the configuration that wrote it: config.json was edited or comes from "
            "another run, and the scores and the report would describe a run that did not happen. Restore "
            "config.json (re-run ragstudy answer with the same flags into this folder rewrites it), or re-run "
            "into its own --output-dir")
    before = contents(out)
    assert one_error(capsys, score(out)) == said
    assert one_error(capsys, app.main(["report", "--results-dir", str(out)])) == said
    assert contents(out) == before  # nothing rescored, no page written
    config["retriever"] = "bm25"
    config["strategy_params"]["fixed-size"]["k"] = 9  # each strategy's own k, as the summary reports it
    (variant / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert "says fixed-size parameters other values but" in one_error(capsys, score(out))


def test_a_stale_decomposition_is_removed_by_rescoring_and_never_reported(break_dir, tmp_path, caplog) -> None:
    """Once the run has one text layer, re-scoring left the old retrieval_decomposition.csv and the report still
    showed "Cleaning or segmentation?" from it."""
    import pandas as pd

    from Postprocessing import write_report
    from ragstudy.config import StudyConfig
    from ragstudy.ranking import run_retrieval
    from test_clean_text_layer import EVIDENCE

    questions_file = tmp_path / "Questions.csv"
    questions_file.write_text("questions\nChi firma il pacchetto di archiviazione prima del trasferimento?\n",
                              encoding="utf-8")
    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 0, "evidence": EVIDENCE}]).to_csv(evidence, index=False)
    out = tmp_path / "run"
    run_retrieval(StudyConfig.resolve(profile="lite", strategies="paragraph,fixed-size", documents=str(break_dir),
                                      questions=str(questions_file), output_dir=str(out), retrieval_only=True,
                                      retriever="bm25", budgets="150,400", text_layer="raw,clean",
                                      db_dir=str(tmp_path / "db")))
    rescore = ["--results-dir", str(out), "--evidence", str(evidence), "--no-plot", "--n-resamples", "100"]

    assert app.main(["score-retrieval", *rescore]) == 0
    assert "Cleaning or segmentation?" in write_report.build(out, generated="test")[1]
    grid = pd.read_csv(out / "variants.csv", keep_default_na=False)  # the clean variants moved away by hand
    for name in grid[grid["text_layer"] == "clean"]["id"]:
        shutil.rmtree(out / "variants" / name)
    grid[grid["text_layer"] != "clean"].to_csv(out / "variants.csv", index=False)
    assert "Cleaning or segmentation?" not in write_report.build(out, generated="test")[1]  # not from a stale file
    assert app.main(["score-retrieval", *rescore]) == 0
    assert not (out / "retrieval_decomposition.csv").exists()  # re-scoring removed it
    assert "Cleaning or segmentation?" not in (out / "retrieval_summary.md").read_text(encoding="utf-8")
    assert "retrieval_decomposition.csv: removed: it came from an earlier scoring" in caplog.text


# ------------------------------------------------------------------- 4. chunk quality reads the CSV evidence

def test_the_chunk_quality_stage_reads_the_csv_evidence_make_qa_writes(cq_results, tmp_path) -> None:
    """`ragstudy study --evidence evidence.csv` stopped at the chunk-quality stage with "cannot read JSON ...
    regenerate it with tools/make_sample_corpus.py": the stage reads the CSV as score-retrieval does, and scores
    the same hits as with the JSON form of the same evidence."""
    from test_chunk_quality_script import P1, P2, _args, _table

    assert app.main(["chunk-quality", *_args(cq_results, "--no-hope")]) == 0
    by_json = _table(cq_results)
    evidence = tmp_path / "evidence.csv"  # question 2 has no row: unanswerable; question 1 names no PDF
    evidence.write_text(f'question_index,evidence,pdf\n0,"{P1}",manuale.pdf\n1,"{P2.split(".")[0]}",\n',
                        encoding="utf-8")
    args = _args(cq_results, "--no-hope")
    args[args.index("--evidence") + 1] = str(evidence)
    assert app.main(["chunk-quality", *args]) == 0
    by_csv = _table(cq_results)
    for strategy in ("paragraph", "fixed-size"):
        for metric in ("hit_at_1", "hit_at_k"):
            assert by_csv[(strategy, metric)].mean == by_json[(strategy, metric)].mean, (strategy, metric)
        assert by_csv[(strategy, "span_recall")].mean == pytest.approx(by_json[(strategy, "span_recall")].mean,
                                                                         abs=0.01)
        assert by_csv[(strategy, "span_iou")].n == 2  # the two answerable questions


# --------------------------------------------------------------------------- 5. workbooks and plug-in errors

@pytest.mark.parametrize("form", ["xls", "csv", "truncated", "renamed-csv"])
def test_a_workbook_saved_as_xls_or_csv_or_truncated_is_one_line(form, tmp_path, capsys) -> None:
    """A raters' workbook (ragstudy survey) or a make-qa review workbook saved as .xls or .csv, or cut short: an
    InvalidFileException or BadZipFile traceback. One line naming the file and the fix; nothing written."""
    from ragstudy.errors import StudyInputError
    from ragstudy.qagen import outputs
    from test_postprocessing_review import SYNTHETIC, _synthetic_xlsx

    results = tmp_path / "results"
    results.mkdir()
    shutil.copyfile(SYNTHETIC / "answer_key.csv", results / "answer_key.csv")
    xlsx = _synthetic_xlsx(tmp_path / "filled.xlsx")
    if form == "xls":  # what a spreadsheet program writes for "Excel 97-2003": an OLE2 compound file
        path = results / "interview_answers.xls"
        path.write_bytes(bytes.fromhex("d0cf11e0a1b11ae1") + b"\0" * 504)
    elif form == "csv":
        path = results / "interview_answers.csv"
        shutil.copyfile(SYNTHETIC / "interview_answers.csv", path)
    elif form == "truncated":  # a copy interrupted halfway
        path = results / "interview_answers.xlsx"
        path.write_bytes(xlsx.read_bytes()[:xlsx.stat().st_size // 2])
    else:  # a CSV saved under the .xlsx name
        path = results / "interview_answers.xlsx"
        shutil.copyfile(SYNTHETIC / "interview_answers.csv", path)
    fix = "save it again as an Excel workbook (.xlsx) from the spreadsheet program (File > Save as > Excel workbook)"
    line = one_error(capsys, app.main(["survey", "--results-dir", str(results), "--answers", str(path),
                                                      "--no-plots"]))
    if form in ("xls", "csv"):
        assert line.startswith(f"error: {path}: a .{form} file, not an .xlsx raters' workbook; {fix}, or start "
                               "again from the one ragstudy review (")
    else:
        assert line.startswith(f"error: {path}: not a readable .xlsx raters' workbook (truncated, or another format "
                               "saved under an .xlsx name: BadZipFile: ")
        assert fix in line
    assert not (results / "survey").exists()
    with pytest.raises(StudyInputError) as caught:  # the make-qa review workbook, read back the same way
        outputs.read_workbook(path, {})
    assert str(caught.value).startswith(f"{path}: ") and "review workbook" in str(caught.value)
    assert str(caught.value).endswith(f"{fix}, or start again from the one ragstudy make-qa wrote")
