"""docs/cli.md, docs/config.md and docs/outputs.md are generated from the code (python -m ragstudy_cli.reference):
the committed copies must be what the code generates now, and the pages must cover every subcommand, flag, YAML key
and results table."""

from __future__ import annotations

from pathlib import Path

import evaluation_chain
from ragstudy import results
from ragstudy_cli import app, reference

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
    for action in (a for a in evaluation_chain.build_parser()._actions if a.dest != "help"):
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
