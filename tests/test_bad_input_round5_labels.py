"""Bad input, round five (issue 51, items 1 and 2): a results folder whose labels or documents no longer match its
runs is never scored as if they did. Real BM25 grids (no model to load) over the generated PDFs; each test injects
the real fault by hand: a swapped variants.csv column, an id that is a path, a variant folder linked to another
run's, a second run over other PDFs into the same folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from ragstudy_cli import app
from test_bad_input_round4b import contents, one_error
from test_results_identity import questions  # noqa: F401  (a fixture: Questions.csv with Oracle.csv beside it)

pytestmark = pytest.mark.slow  # each module fixture runs a grid of BM25 variants (~10 s)


def retrieve(documents: Path, questions: Path, out: Path, strategies: str, *axes: str) -> int:
    return app.main(["retrieve", "--profile", "lite", "--documents", str(documents), "--questions", str(questions),
                     "--output-dir", str(out), "--strategies", strategies, "--budgets", "300,900",
                     "--db-dir", f"{out}-db", *axes])


def score(out: Path) -> int:
    return app.main(["score-retrieval", "--results-dir", str(out), "--no-plot", "--n-resamples", "100"])


@pytest.fixture(scope="module")
def grid(pdf_dir: Path, questions: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """newline and fixed-size under bm25 and bm25-parents, raw and clean: 8 variants, 4 groups."""
    out = tmp_path_factory.mktemp("labels") / "grid"
    assert retrieve(pdf_dir, questions, out, "newline,fixed-size", "--retriever", "bm25,bm25-parents",
                    "--text-layer", "raw,clean") == 0
    return out


def copy_run(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("*.lock"))
    return to


def swap_column(out: Path, column: str, one: str, other: str) -> None:
    """variants.csv with `one` and `other` swapped in `column`, as a hand edit would leave it."""
    frame = pd.read_csv(out / "variants.csv", dtype=str, keep_default_na=False)
    frame[column] = frame[column].map({one: other, other: one}).fillna(frame[column])
    frame.to_csv(out / "variants.csv", index=False)


# ------------------------------------------------------------------------ 1. the labels are the runs' own

@pytest.mark.parametrize("column, one, other, row, said, recorded", [
    ("retriever", "bm25", "bm25-parents", "row 2 (variant newline__bm25__raw)", "'bm25-parents'", "'bm25'"),
    ("text_layer", "raw", "clean", "row 2 (variant newline__bm25__raw)", "'clean'", "'raw'"),
    ("strategy", "newline", "fixed-size", "row 2 (variant newline__bm25__raw)", "'fixed-size'", "'newline'"),
    ("params", "{}", '{"chunk_size": 500}', "row 2 (variant newline__bm25__raw)", "'{\"chunk_size\": 500}'",
     "'{}'"),
])
def test_a_hand_swapped_variants_csv_column_is_refused_by_scoring_and_the_report(
        grid, tmp_path, capsys, column, one, other, row, said, recorded) -> None:
    """Swapping bm25 and bm25-parents (or raw and clean) in variants.csv scored bm25-parents' rankings as bm25's,
    exit 0, and the sentence across retrievers said the opposite of the truth. Every axis a row claims is checked
    against the variant's own config.json; scoring and the report refuse in one line naming the row, the column and
    both values, and write nothing."""
    out = copy_run(grid, tmp_path / "run")
    swap_column(out, column, one, other)
    before = contents(out)
    line = one_error(capsys, score(out))
    assert line == (f"error: {out / 'variants.csv'} {row} says {column} {said} but "
                    f"{out / 'variants' / 'newline__bm25__raw' / 'config.json'}, the run that made the variant, "
                    f"records {column} {recorded}: variants.csv or the variant's folder was edited or comes from another "
                    "run, and the scores would carry labels that did not make them. Restore variants.csv, or re-run `ragstudy retrieve` "
                    "into a fresh --output-dir (finished work is cached)")
    assert one_error(capsys, app.main(["report", "--results-dir", str(out)])) == line
    assert contents(out) == before  # no groups/, no verdict, no report


def test_a_renamed_variant_folder_is_refused(grid, tmp_path, capsys) -> None:
    """Two variant folders swapped by name: each row's id is checked against the id its folder's run recorded."""
    out = copy_run(grid, tmp_path / "run")
    variants = out / "variants"
    (variants / "newline__bm25__raw").rename(variants / "x")
    (variants / "newline__bm25-parents__raw").rename(variants / "newline__bm25__raw")
    (variants / "x").rename(variants / "newline__bm25-parents__raw")
    line = one_error(capsys, score(out))
    assert "row 2 (variant newline__bm25__raw) says retriever 'bm25' but" in line
    assert "records retriever 'bm25-parents' (and id differs)" in line


def test_a_rerun_into_a_folder_whose_kept_rows_lie_is_refused(grid, pdf_dir, questions, tmp_path,  # noqa: F811
                                                               capsys) -> None:
    """A run of fewer strategies keeps the other variants' rows of variants.csv: a lie in them is refused before
    anything is written, instead of being written back as this run's grid."""
    out = copy_run(grid, tmp_path / "run")
    swap_column(out, "retriever", "bm25", "bm25-parents")
    before = contents(out)
    line = one_error(capsys, retrieve(pdf_dir, questions, out, "fixed-size", "--retriever", "bm25,bm25-parents",
                                      "--text-layer", "raw,clean"))
    assert line.startswith(f"error: {out / 'variants.csv'} row 2 (variant newline__bm25__raw) says retriever "
                           "'bm25-parents' but ")
    assert contents(out) == before


def test_an_id_that_is_a_path_never_reads_another_runs_folder(grid, tmp_path, capsys) -> None:
    """An id `../../other/variants/<id>` made scoring read another run's folder, outside the results folder, exit 0:
    ids read back are checked as the names they were made as."""
    out = copy_run(grid, tmp_path / "run")
    copy_run(grid, tmp_path / "other")
    frame = pd.read_csv(out / "variants.csv", dtype=str, keep_default_na=False)
    frame.loc[0, "id"] = "../../other/variants/newline__bm25__raw"
    frame.to_csv(out / "variants.csv", index=False)
    shutil.rmtree(out / "variants" / "newline__bm25__raw")
    line = one_error(capsys, score(out))
    assert line.startswith(f"error: {out / 'variants.csv'} row 2: id: '../../other/variants/newline__bm25__raw' is "
                           "not a name: use letters, digits, '-', '_' and '.' only")
    assert line.endswith("restore variants.csv, or re-run `ragstudy retrieve` into a fresh --output-dir (finished "
                         "work is cached)")
    assert not (tmp_path / "other" / "retrieval_verdict_by_retriever.csv").exists()


def test_a_variant_folder_linked_to_another_runs_is_refused(grid, tmp_path, capsys) -> None:
    out = copy_run(grid, tmp_path / "run")
    other = copy_run(grid, tmp_path / "other")
    shutil.rmtree(out / "variants" / "newline__bm25__raw")
    (out / "variants" / "newline__bm25__raw").symlink_to(other / "variants" / "newline__bm25__raw")
    line = one_error(capsys, score(out))
    assert line.startswith(f"error: {out / 'variants.csv'} row 2: the folder of variant newline__bm25__raw, ")
    assert f"leads outside {(out / 'variants').resolve()} (to {(other / 'variants' / 'newline__bm25__raw').resolve()})" \
        in line and "put the variant's own folder there" in line


# ------------------------------------------------------------------- 2. one run, one set of documents

@pytest.fixture(scope="module")
def one_pdf(pdf_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first of pdf_dir's two PDFs alone (the same bytes)."""
    folder = tmp_path_factory.mktemp("one-pdf")
    shutil.copyfile(pdf_dir / "manuale_a.pdf", folder / "manuale_a.pdf")
    return folder


def test_a_second_run_over_other_documents_into_the_same_folder_is_refused(one_pdf, pdf_dir, questions,  # noqa: F811
                                                                          tmp_path, capsys) -> None:
    """`retrieve --strategies fixed-size,newline` over one PDF, then `--documents two-pdfs --strategies fixed-size`
    into the same folder: exit 0, and the verdict compared fixed-size over 2 PDFs with newline over 1. Refused, as
    other questions are, naming the PDFs; re-running every strategy over the two PDFs is allowed."""
    out = tmp_path / "run"
    assert retrieve(one_pdf, questions, out, "fixed-size,newline", "--retriever", "bm25") == 0
    before = contents(out)
    line = one_error(capsys, retrieve(pdf_dir, questions, out, "fixed-size", "--retriever", "bm25"))
    assert line == (f"error: {out}: holds the variants newline__bm25__raw (variants.csv) run over other documents "
                    "than this run's (newline__bm25__raw over 1 PDF(s), this run over 2: manuale_b.pdf only in this "
                    "run's); they would be compared as one run. Give this run its own --output-dir, run those "
                    "variants' strategies too, or move those files away")
    assert contents(out) == before
    assert retrieve(pdf_dir, questions, out, "fixed-size,newline", "--retriever", "bm25") == 0  # every variant again
    assert score(out) == 0


def test_scoring_refuses_a_folder_whose_variants_ran_over_different_documents(one_pdf, pdf_dir,  # noqa: F811
                                                                              questions, tmp_path, capsys) -> None:
    """A variant's folder copied in from a run over other PDFs (its own run_identity.json intact, the same retriever
    and questions): scoring compared them, exit 0. Each variant's config.json records its PDFs' names and hashes."""
    out, two = tmp_path / "run", tmp_path / "two"
    assert retrieve(one_pdf, questions, out, "fixed-size,newline", "--retriever", "bm25") == 0
    assert retrieve(pdf_dir, questions, two, "fixed-size", "--retriever", "bm25") == 0
    shutil.rmtree(out / "variants" / "fixed-size__bm25__raw")
    shutil.copytree(two / "variants" / "fixed-size__bm25__raw", out / "variants" / "fixed-size__bm25__raw")
    line = one_error(capsys, score(out))
    assert line == (f"error: {out}: its variants were run over different documents (fixed-size__bm25__raw over 2 "
                    "PDF(s), newline__bm25__raw over 1: manuale_b.pdf only in fixed-size__bm25__raw's); they would be "
                    "compared as one run. Re-run `ragstudy retrieve` with every variant over one --documents folder "
                    "into a fresh --output-dir (finished work is cached)")
    assert one_error(capsys, app.main(["report", "--results-dir", str(out)])) == line
