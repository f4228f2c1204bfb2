"""argparse abbreviations are refused: `--retrieval` is not `--retrieval-only` (issue 38, WEAK)."""

import pytest

from ragstudy_cli import app


@pytest.mark.parametrize("name", ["answer", "study", "report", "make-qa"])
def test_abbreviated_flag_refused(name, capsys):
    flag = {"answer": "--retrieval", "study": "--retrieval", "report": "--results", "make-qa": "--documen"}[name]
    assert app.main([name, flag, "x"]) == 2
    # the abbreviation itself is named: a parser that expands it would only name the stray value ("... x")
    assert f"unrecognized arguments: {flag} x" in capsys.readouterr().err
