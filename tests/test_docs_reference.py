"""docs/cli.md, docs/config.md and docs/outputs.md are generated from the code (python -m ragstudy_cli.reference):
the committed copies must be what the code generates now, and the pages must cover every subcommand, flag, YAML key,
results table and every other file the project writes (each writer names its files from those declarations)."""

from __future__ import annotations

from pathlib import Path

from ragstudy import results
from ragstudy_cli import app, reference
from ragstudy.answering import chain

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_reference_pages_are_up_to_date() -> None:
    assert reference.stale() == [], "run `python -m ragstudy_cli.reference` and commit docs/cli.md, config.md, outputs.md"


def test_the_check_finds_a_stale_page(tmp_path: Path) -> None:
    for name, make in reference.PAGES.items():
        (tmp_path / name).write_text(make(), encoding="utf-8")
    assert reference.main(["--check", "--docs", str(tmp_path)]) == 0
    (tmp_path / "config.md").write_text("old\n", encoding="utf-8")
    assert reference.stale(tmp_path) == ["config.md"]
    assert reference.main(["--check", "--docs", str(tmp_path)]) == 1


def test_cli_page_has_every_subcommand_and_flag() -> None:
    page = reference.cli_page()
    for command in app.COMMANDS:
        assert f"## `ragstudy {command.name}`" in page
        if not command.mode:
            for action in (a for a in command.parser()._actions if a.dest != "help"):
                for option in action.option_strings:
                    assert f"`{option}`" in page, (command.name, option)
    for action in (a for a in chain.build_parser()._actions if a.dest != "help"):
        for option in action.option_strings:
            assert f"`{option}`" in page


def test_config_page_has_every_yaml_key() -> None:
    from ragstudy import config

    page = reference.config_page()
    for key in config.yaml_keys():
        assert f"| `{key}` |" in page, key
    row = next(line for line in page.splitlines() if line.startswith("| `llm_timeout` |"))  # the old README missed it
    assert "`--llm-timeout`" in row and "float" in row and "600" in row


def test_outputs_page_lists_every_declared_table_with_its_columns() -> None:
    page = reference.outputs_page()
    for table in results.TABLES.values():
        assert f"`{table.name}`" in page or f"`{table.subdir}/{table.name}`" in page
        for column in table.columns:
            assert f"`{column}`" in page


def test_outputs_page_lists_every_file_the_project_writes() -> None:
    page = reference.outputs_page()
    for output in results.OUTPUTS.values():
        where = f"{output.subdir}/{output.name}" if output.subdir else output.name
        row = next((line for line in page.splitlines() if line.startswith(f"| `{where}`")), None)
        assert row is not None, where
        assert output.holds and output.holds.split(";")[0].split("(")[0].strip() in row, where
        assert all(f"`{suffix}`" in row for suffix in output.also), where
        assert all(f"`{column}`" in row for column in output.columns), where
    for name in ("run_identity.json", "answer_key.csv", "output.xlsx", "interview_answers.xlsx", "study.json",
                 "review.xlsx", "report.html", "config.json", "sources_<strategy>.jsonl"):
        assert f"`{name}`" in page or f"/{name}`" in page, name


def test_the_writers_name_their_files_from_the_declarations() -> None:
    """What docs/outputs.md lists is what is written: each writer takes its file names from ragstudy.results."""
    from Postprocessing import common, review, score_retrieval
    from ragstudy.grid import runidentity
    from ragstudy.qagen import outputs as qa
    from ragstudy_cli import study

    assert runidentity.IDENTITY_FILE == results.RUN_IDENTITY.name
    assert results.ResultsFolder.LOCK_NAME == results.RUN_LOCK.name
    assert (review.KEY_NAME, review.WORKBOOK_NAME, review.TEMPLATE_NAME) == (
        results.ANSWER_KEY.name, results.REVIEW_WORKBOOK.name, results.SURVEY_TEMPLATE.name)
    assert (study.LEDGER, study.LOG, study.STUDY_LOCK) == (
        results.STUDY_LEDGER.name, results.STUDY_LOG.name, results.STUDY_LOCK.name)
    assert common.CLEANED_ORACLE_NAME == results.CLEANED_ORACLE.name
    assert score_retrieval.PLOT_STEM == results.RETRIEVAL_PLOT.stem
    assert (qa.QUESTIONS, qa.ORACLE, qa.EVIDENCE, qa.SIDECAR, qa.CANDIDATES, qa.REPORT, qa.WORKBOOK) == tuple(
        o.name for o in results.OUTPUT_GROUPS["A question set (`ragstudy make-qa --out QA`)"])
    assert qa.EVIDENCE_COLUMNS == results.QA_EVIDENCE.columns


def test_a_declared_output_matches_its_files_and_nothing_else() -> None:
    assert results.declared_output("answers/DatasetCustom.json") is results.DATASET_FILES
    assert results.declared_output("retrieval/variants/fixed-size__bm25__raw/retrieval_fixed-size.csv") is \
        results.RANKINGS
    assert results.declared_output("retrieval/variants.csv") is results.VARIANTS
    assert results.declared_output("retrieval/variants/paragraph__bm25/variant_run.json") is results.VARIANT_RUN
    assert results.declared_output("retrieval/retrieval_summary.csv") is results.RETRIEVAL_SUMMARY
    assert results.declared_output("retrieval_hit_rate.png") is results.RETRIEVAL_PLOT
    assert results.declared_output("survey/plots/pie.png") is results.SURVEY_PLOTS
    assert results.declared_output("pie.png") is None  # a survey figure lies in survey/plots/
    assert results.declared_output("answers/notes.txt") is None
