"""Answer scores beside their floors: the shuffled-oracle floor, the context-copy baseline and the evidence
reference, and the signal check that decides whether strategy comparisons on answers are findings.

A fake generator answers the bundled questions: with the oracle or the evidence the check passes and the
comparisons are worded as findings; with another question's oracle it fails and they are "not interpretable"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from Postprocessing import answer_baselines
from Postprocessing.reportkit import inputs as report_inputs
from Postprocessing.reportkit.blocks import Table, Text
from Postprocessing.reportkit.report_sections import answers_section
from ragstudy import results
from ragstudy.grid.records import DatasetRow
from ragstudy.scoring.evidence import load_evidence_file
from ragstudy_cli import app

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = results.read_questions(REPO / "Questions.csv")
ORACLE = results.read_oracle(REPO / "Oracle.csv")
EVIDENCE = {i: " ".join(t.text for t in q.texts)
            for i, q in load_evidence_file(REPO / "sample" / "evidence.json", QUESTIONS).items()}
STRATEGIES = {"paragraph": "DatasetCustom", "fixed-size": "DatasetFixedSize"}
Generator = Callable[[int], str]


def test_the_derangement_moves_every_question_and_is_seeded() -> None:
    order = answer_baselines.derangement(49, seed=3)
    assert sorted(order) == list(range(49)) and all(j != i for i, j in enumerate(order))
    assert order == answer_baselines.derangement(49, seed=3) != answer_baselines.derangement(49, seed=4)
    with pytest.raises(ValueError, match="at least 2 items"):
        answer_baselines.derangement(1, seed=0)
    assert answer_baselines.context_copy([("abcdef", "ghi")], 9) == ["abcdef\n\ng"]


def _context(i: int) -> tuple[str, ...]:
    """What a retriever might give: another question's topic first, the evidence later in the passage."""
    other = ORACLE[(i + 7) % len(ORACLE)]
    return (f"{other} {QUESTIONS[(i + 3) % len(QUESTIONS)]}", EVIDENCE.get(i, ORACLE[(i + 11) % len(ORACLE)]))


def _study(tmp_path: Path, generator: Generator) -> Path:
    """A results folder whose two strategies' answers come from `generator`, scored with BLEU and ROUGE."""
    folder = tmp_path / "run"
    folder.mkdir()
    for strategy, name in STRATEGIES.items():
        rows = [DatasetRow(i, q, generator(i), _context(i), (), strategy) for i, q in enumerate(QUESTIONS)]
        results.write_dataset(rows, folder, name)
    (folder / "config.json").write_text(json.dumps({"models": {"llm": "fake-generator"}}), encoding="utf-8")
    code = app.main(["score-answers", "--results-dir", str(folder), "--questions", str(REPO / "Questions.csv"),
                                    "--oracle", str(REPO / "Oracle.csv"), "--metrics", "bleu,rouge",
                                    "--evidence", str(REPO / "sample" / "evidence.json"), "--n-resamples", "300",
                                    "--threads", "1"])
    assert code == 0
    return folder


def _answers_text(folder: Path) -> tuple[str, list[str]]:
    section = answers_section(report_inputs.load(folder), report_inputs.Strategies.from_registry())
    texts = [b.text for b in section.blocks if isinstance(b, Text)]
    words = [str(row[-1]) for b in section.blocks if isinstance(b, Table) and b.table_id == "answers-paired"
             for row in b.rows]
    return texts[0], words


@pytest.mark.parametrize("generator", [lambda i: ORACLE[i], lambda i: EVIDENCE.get(i, ORACLE[i])],
                         ids=["oracle", "evidence"])
def test_answers_that_carry_signal_pass_the_check_and_are_compared_as_findings(tmp_path, generator) -> None:
    folder = _study(tmp_path, generator)
    baselines = results.read_table(folder, results.METRICS_BASELINES)
    assert set(baselines["baseline"]) == {"shuffled_oracle", "context_copy", "evidence"}
    item = baselines[baselines["diff"].notna()]
    checked = item[item["baseline"] != "evidence"]  # the evidence is a reference to read beside, not a bar to pass
    assert (checked["llm_above"] == 1).all(), checked[checked["llm_above"] != 1]
    floor = item[(item["baseline"] == "shuffled_oracle") & (item["metric"] == "ROUGE-1")]
    assert (floor["mean"] < 0.25).all() and (floor["n"] == len(QUESTIONS)).all()
    assert (item.loc[item["baseline"] == "evidence", "n"] == len(EVIDENCE)).all()
    run = json.loads((folder / "metrics_run.json").read_text(encoding="utf-8"))
    assert run["signal"]["with_signal"] == run["signal"]["checked"] and "ROUGE-1" in run["signal"]["checked"]
    lead, words = _answers_text(folder)
    assert lead.startswith("Signal check: The answers of fake-generator score above the shuffled-oracle floor and "
                           "above the context-copy baseline") and "are findings" in lead
    assert words and not any("not interpretable" in w for w in words)
    md = (folder / "metrics_summary.md").read_text(encoding="utf-8")
    assert "## Floors and references" in md and "(not interpretable)" not in md


def test_answers_at_the_floor_fail_the_check_and_are_not_interpretable(tmp_path) -> None:
    other = answer_baselines.derangement(len(ORACLE), seed=99)  # another question's oracle, not the floor's
    folder = _study(tmp_path, lambda i: ORACLE[other[i]])
    run = json.loads((folder / "metrics_run.json").read_text(encoding="utf-8"))
    assert run["signal"]["with_signal"] == [] and run["signal"]["above_floor_only"] == []
    lead, words = _answers_text(folder)
    assert lead == ("Signal check: The answers of fake-generator do not differ from the shuffled-oracle floor (each "
                    "question's reference scored against another question's) for every strategy: answer metrics "
                    "cannot compare the strategies here.")
    assert words and all(w.startswith("not interpretable") for w in words)
    md = (folder / "metrics_summary.md").read_text(encoding="utf-8")
    assert md.splitlines()[2].startswith("**Signal check.** The answers of fake-generator do not differ")
    assert "Not interpretable (no signal" in md


def test_copying_the_context_is_no_signal(tmp_path) -> None:
    """Answers that paste the start of the context beat the floor only as much as the copy baseline does."""
    folder = _study(tmp_path, lambda i: "\n\n".join(_context(i))[:120])
    run = json.loads((folder / "metrics_run.json").read_text(encoding="utf-8"))
    assert run["signal"]["with_signal"] == []
    lead, _ = _answers_text(folder)
    assert "answer metrics cannot compare the strategies here" in lead


def test_the_signal_sentence_says_where_the_answers_beat_the_floor_metric_by_metric() -> None:
    """Above the floor for every strategy on one metric, for the best strategy only on another, for none on a third:
    the sentence names each, as the report's Answers section opens with it."""
    check = answer_baselines.Signal(
        "Qwen2.5-Coder-0.5B-Instruct", ("BLEU", "ROUGE-L", "BERTScore F1"), ("ROUGE-L",), (),
        {"paragraph": 120, "fixed-size": 110, "newline": 100},
        {"BLEU": (), "ROUGE-L": ("paragraph", "fixed-size", "newline"), "BERTScore F1": ("paragraph",)})
    sentence = check.to_dict()["sentence"]
    assert sentence.startswith("The answers of Qwen2.5-Coder-0.5B-Instruct score above the shuffled-oracle floor")
    assert sentence.endswith("Against the shuffled-oracle floor alone: above it for every strategy on ROUGE-L; for "
                             "paragraph only on BERTScore F1; for no strategy on BLEU.")
