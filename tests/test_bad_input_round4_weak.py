"""Bad input, round four, the WEAK cases (issue 38 item 7) and the one decoder of a user's text files: each test
injects the real fault (a real file in the wrong encoding, a real over-long question, real flags) and checks the
one line a user gets."""

from __future__ import annotations

import codecs
import logging
from pathlib import Path

import pytest

from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.io import decode_user_text
from ragstudy.results import read_questions
from ragstudy.sweep import load_sweep


# ------------------------------------------------------------------------------- one decoder for CSV and YAML

def test_one_decoder_names_line_and_byte_and_each_caller_adds_its_advice(tmp_path: Path) -> None:
    raw = "questions\nUna?\nPerché?\n".encode("cp1252")
    csv_path = tmp_path / "Questions.csv"
    csv_path.write_bytes(raw)
    with pytest.raises(StudyInputError) as csv_error:
        read_questions(csv_path)
    assert str(csv_error.value) == (f"{csv_path} line 3: not UTF-8 text (byte 20 is 0xe9); a file saved by Excel as "
                                    "Windows-1252? Save it as 'CSV UTF-8', or convert it: iconv -f WINDOWS-1252 -t "
                                    "UTF-8 in.csv > out.csv")
    yaml_path = tmp_path / "study.yaml"
    yaml_path.write_bytes("profile: lite\n# perché\n".encode("cp1252"))
    with pytest.raises(StudyInputError) as yaml_error:
        StudyConfig.resolve(config_file=str(yaml_path), strategies="fixed-size")
    assert str(yaml_error.value) == (f"{yaml_path} line 2: not UTF-8 text (byte 21 is 0xe9); save it as UTF-8 (an "
                                     "editor's 'Save as... UTF-8'), then re-run")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_a_questions_csv_with_a_byte_order_mark_is_read_like_a_yaml_file(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "Questions.csv"
    path.write_text("questions\nPerché?\nQuando?\n", encoding=encoding)
    assert read_questions(path) == ["Perché?", "Quando?"]


def test_the_offset_counts_the_byte_order_mark_and_the_encoding_is_named() -> None:
    with pytest.raises(StudyInputError, match=r"^f\.csv line 2: not UTF-8 text \(byte 8 is 0xff\); FIX$"):
        decode_user_text(codecs.BOM_UTF8 + b"ab\ncd\xff", "f.csv", "FIX")
    broken = codecs.BOM_UTF16_LE + "a\nb".encode("utf-16-le") + b"\x00\xd8" + "c".encode("utf-16-le")
    with pytest.raises(StudyInputError, match=r"^f\.csv line 2: not UTF-16 text \(byte 8 is 0x00\); FIX$"):
        decode_user_text(broken, "f.csv", "FIX")


def test_a_prompt_file_in_windows_1252_is_one_error_naming_it(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes("Contesto: {context}\nDomanda: {query}. Perché?\n".encode("cp1252"))
    with pytest.raises(StudyInputError, match=rf"^{prompt} line 2: not UTF-8 text \(byte 43 is 0xe9\); save it as "
                                              "UTF-8, then re-run$"):
        StudyConfig.resolve(profile="lite", strategies="fixed-size", prompt_file=str(prompt))


def test_a_sweep_file_gets_the_yaml_advice(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_bytes("configs:\n  - strategy: fixed-size  # è\n".encode("cp1252"))
    with pytest.raises(StudyInputError, match=r"sweep\.yaml line 2: not UTF-8 text \(byte 37 is 0xe8\); save it as "
                                              "UTF-8"):
        load_sweep(sweep)


# ------------------------------------------------------------------------------- repeated questions: one warning

def test_a_thousand_repeated_questions_are_one_warning_that_counts_them(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "Questions.csv"
    path.write_text("questions\n" + "Come si accede?\n" * 1000 + "Chi conserva i fascicoli?\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ragstudy.results"):
        assert len(read_questions(path)) == 1001
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"{path}: 999 rows repeat an earlier question (line 3 repeats line 2 ('Come si accede?'), "
                        "line 4 repeats line 2 ('Come si accede?'), line 5 repeats line 2 ('Come si accede?'), and "
                        "996 more): each is answered and scored again; delete the repeated rows if that is not "
                        "intended"]
