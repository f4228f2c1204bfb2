"""Config and sweep YAML files are bounded before they are expanded, and read in the encodings editors save:
an alias bomb, a Windows-1252 file, a UTF-16 file (issue 38, items 5 and 6). In-process, tiny files."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.grid.sweep import load_sweep

BOMB = "strategy_params:\n  fixed-size:\n    a: &a [" + ",".join(['"lol"'] * 9) + "]\n" + "".join(
    f"    {name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n" for prev, name in zip("abcdefgh", "bcdefghi"))


def test_an_alias_bomb_under_strategy_params_is_one_short_line_in_small_memory(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB, encoding="utf-8")
    assert len(BOMB) < 700
    tracemalloc.start()
    try:
        with pytest.raises(StudyInputError) as caught:
            StudyConfig.resolve(config_file=str(path), profile="lite", strategies="fixed-size")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert message.startswith(f"{path}: expands to more than 100,000 values once its aliases")
    assert len(message) < 300 and peak < 50 << 20


def test_a_self_referring_alias_and_a_deep_document_are_refused(tmp_path: Path) -> None:
    recursive = tmp_path / "recursive.yaml"
    recursive.write_text("strategy_params: &a\n  fixed-size: *a\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match="an alias refers to the mapping or list that contains it"):
        StudyConfig.resolve(config_file=str(recursive), profile="lite", strategies="fixed-size")
    deep = tmp_path / "deep.yaml"
    deep.write_text("strategy_params: " + "[" * 200 + "]" * 200 + "\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match="nested deeper than 64 levels"):
        StudyConfig.resolve(config_file=str(deep), profile="lite", strategies="fixed-size")


def test_a_huge_config_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * (2 << 20) + "\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match=r"huge.yaml: the config file is larger than 1 MiB"):
        StudyConfig.resolve(config_file=str(path), profile="lite", strategies="fixed-size")


def test_a_windows_1252_config_names_the_byte_and_asks_for_utf8(tmp_path: Path) -> None:
    path = tmp_path / "cp1252.yaml"
    path.write_bytes("retriever: bm25  # café\n".encode("cp1252"))
    with pytest.raises(StudyInputError, match=r"cp1252.yaml line 1: not UTF-8 text \(byte 22 is 0xe9\); save it as UTF-8"):
        StudyConfig.resolve(config_file=str(path), profile="lite", strategies="fixed-size")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_bytes("# café\nconfigs:\n  - strategy: fixed-size\n".encode("cp1252"))
    with pytest.raises(StudyInputError, match=r"sweep.yaml line 1: not UTF-8 text \(byte 5 is 0xe9\)"):
        load_sweep(sweep)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig"])
def test_a_config_with_a_byte_order_mark_is_read(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "bom.yaml"
    path.write_text("retriever: bm25  # café\n", encoding=encoding)
    config = StudyConfig.resolve(config_file=str(path), profile="lite", strategies="fixed-size",
                                 retrieval_only=True)
    assert config.to_dict()["retriever"] == "bm25"


def test_retrieve_with_a_windows_1252_config_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "cp1252.yaml"
    path.write_bytes("retriever: bm25  # café\n".encode("cp1252"))
    result = subprocess.run([sys.executable, "-m", "ragstudy_cli", "retrieve", "--profile", "lite", "--config",
                             str(path), "--output-dir", str(tmp_path / "out"), "--db-dir", str(tmp_path / "db")],
                            cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert errors == [f"error: {path} line 1: not UTF-8 text (byte 22 is 0xe9); save it as UTF-8 (an editor's "
                      "'Save as... UTF-8'), then re-run"]
    assert not (tmp_path / "out").exists()
