"""The verdict checked across retrievers (ragstudy.scoring.verdict_across): hand-made verdicts of three retrievers that
disagree at one budget and agree at another check the words (where the best strategy changes, which of
paragraph's differences is significant only under some retrievers), the by-retriever table and its round trip
through the declared file; a real several-retriever run of the bundled sample is scored in tests/test_retrieval_eval.py."""

from __future__ import annotations

import pandas as pd
import pytest

from ragstudy import results
from ragstudy.scoring.verdict import verdict
from ragstudy.scoring.verdict_across import CrossVerdict
from ragstudy_cli import app

DISPLAY = {"paragraph": "Paragraph", "fixed-size": "Fixed-size", "newline": "Blank-line"}


def _verdict(means: dict[str, dict[str, float]], pairs: list[tuple]):
    summary = pd.DataFrame([{"strategy": s, "strategy_display": DISPLAY[s], "budget": b, "metric": "hit", "n": 30,
                             "mean": m, "ci_low": m - 0.1, "ci_high": m + 0.1}
                            for b, by in means.items() for s, m in by.items()],
                           columns=list(results.RETRIEVAL_SUMMARY.columns))
    paired = pd.DataFrame([{"budget": b, "metric": "hit", "strategy_a": a, "strategy_b": o, "n": 30, "mean_diff": d,
                            "ci_low": lo, "ci_high": hi, "p_wilcoxon": p, "p_holm": p}
                           for b, a, o, d, lo, hi, p in pairs], columns=list(results.RETRIEVAL_PAIRED.columns))
    return verdict(summary, paired)


def _insignificant(budget: str, d: float = 0.02) -> list[tuple]:
    return [(budget, "paragraph", "fixed-size", d, -0.05, 0.09, 0.4),
            (budget, "paragraph", "newline", d, -0.05, 0.09, 0.5)]


@pytest.fixture()
def cross() -> CrossVerdict:
    same_500 = {"paragraph": 0.3, "fixed-size": 0.2, "newline": 0.25}
    dense = _verdict({"500": same_500, "1000": {"paragraph": 0.40, "fixed-size": 0.38, "newline": 0.45}},
                     _insignificant("500") + [("1000", "paragraph", "fixed-size", 0.02, -0.05, 0.09, 0.6),
                                              ("1000", "paragraph", "newline", -0.05, -0.12, 0.02, 0.3)])
    bm25 = _verdict({"500": same_500, "1000": {"paragraph": 0.60, "fixed-size": 0.45, "newline": 0.50}},
                    _insignificant("500") + [("1000", "paragraph", "fixed-size", 0.15, 0.05, 0.25, 0.004),
                                             ("1000", "newline", "paragraph", -0.10, -0.2, 0.01, 0.08)])
    hybrid = _verdict({"500": same_500, "1000": {"paragraph": 0.55, "fixed-size": 0.50, "newline": 0.52}},
                      _insignificant("500") + _insignificant("1000", 0.05))
    return CrossVerdict({"dense": dense, "bm25": bm25, "hybrid": hybrid})


def test_the_words_say_where_the_conclusion_changes(cross: CrossVerdict) -> None:
    assert cross.best_changes("500") is None and cross.difference_changes("500") == []
    assert cross.budget_sentence("500") is None  # every retriever agrees at 500 characters
    assert cross.best_changes("1000") == {"Blank-line": ["dense"], "Paragraph": ["bm25", "hybrid"]}
    assert cross.sentences() == [
        "At 1,000 characters Paragraph is best under bm25 and hybrid, but Blank-line under dense. "
        "Paragraph's lead over Fixed-size is significant only under bm25."]
    assert cross.headline() == (
        "Checked under 3 retrievers (dense, bm25 and hybrid), on the hit rate: the best strategy changes with the "
        "retriever (at 1,000 characters Blank-line under dense, Paragraph under bm25 and hybrid) and is the same at "
        "the other budgets. Which of Paragraph's differences reach significance (Holm p < 0.05 with a CI that "
        "excludes 0) depends on the retriever: 0 of 4 under dense, 1 of 4 under bm25 and 0 of 4 under hybrid; they "
        "disagree on 1, at 1,000 characters.")


def test_the_same_best_strategy_with_other_significant_differences_is_said_apart(cross: CrossVerdict) -> None:
    """Paragraph best under both retrievers at both budgets, but its lead over Fixed-size significant only under
    bm25 at 1,000 characters: the headline says first that the best strategy does not change, then where only the
    significance does (it used to say "the conclusion changes with the retriever")."""
    weaker = _verdict({"500": {"paragraph": 0.3, "fixed-size": 0.2, "newline": 0.25},
                       "1000": {"paragraph": 0.55, "fixed-size": 0.50, "newline": 0.52}},
                      _insignificant("500") + _insignificant("1000", 0.05))
    two = CrossVerdict({"bm25": cross.verdicts["bm25"], "hybrid": weaker})
    assert two.best_changes("1000") is None and two.difference_changes("1000")
    assert two.headline() == ("Checked under 2 retrievers (bm25 and hybrid), on the hit rate: the best strategy is the "
                              "same under every retriever at every budget (Paragraph at every budget). Which of "
                              "Paragraph's differences reach significance (Holm p < 0.05 with a CI that excludes 0) "
                              "depends on the retriever: 1 of 4 under bm25 and 0 of 4 under hybrid; they disagree on "
                              "1, at 1,000 characters.")
    assert "the conclusion changes" not in two.headline()
    assert two.sentences() == ["At 1,000 characters, Paragraph's lead over Fixed-size is significant only under bm25."]


def test_opposite_significant_differences_are_both_named(cross: CrossVerdict) -> None:
    flipped = _verdict({"1000": {"paragraph": 0.30, "fixed-size": 0.45, "newline": 0.20}},
                       [("1000", "paragraph", "fixed-size", -0.15, -0.25, -0.05, 0.01),
                        ("1000", "paragraph", "newline", 0.10, 0.02, 0.2, 0.03)])
    two = CrossVerdict({"bm25": cross.verdicts["bm25"], "dense": flipped})
    sentence = two.budget_sentence("1000")
    assert sentence.startswith("At 1,000 characters ")
    assert "Paragraph is significantly higher than Fixed-size under bm25; significantly lower than Fixed-size " \
           "under dense." in sentence
    assert "Paragraph's lead over Blank-line is significant only under dense." in sentence


def test_agreeing_retrievers_say_so(cross: CrossVerdict) -> None:
    same = CrossVerdict({"dense": cross.verdicts["hybrid"], "bm25": cross.verdicts["hybrid"]})
    assert same.sentences() == []
    assert "the conclusion is the same under every retriever" in same.headline()


def test_the_across_table_has_one_row_per_group_and_budget(cross: CrossVerdict, tmp_path) -> None:
    frame = cross.to_frame()
    assert list(frame.columns[:len(results.RETRIEVAL_VERDICT_ACROSS.columns)]) == \
        list(results.RETRIEVAL_VERDICT_ACROSS.columns)
    assert [(r.group, r.budget) for r in frame.itertuples()] == [
        (name, b) for name in ("dense", "bm25", "hybrid") for b in ("500", "1000")]
    row = frame[(frame["group"] == "bm25") & (frame["budget"] == "1000")].iloc[0]
    assert (row["best"], row["best_value"], row["reference_value"]) == ("paragraph", 0.6, 0.6)
    assert (row["diff:fixed-size"], row["ci_low:fixed-size"], row["p_holm:fixed-size"],
            row["significant:fixed-size"]) == (0.15, 0.05, 0.004, 1)
    assert row["diff:newline"] == pytest.approx(0.10) and row["significant:newline"] == 0  # turned round, CI has 0
    assert frame[frame["group"] == "dense"].iloc[1]["best"] == "newline"
    assert row["changes"] == cross.budget_sentence("1000")
    results.write_table(tmp_path, results.RETRIEVAL_VERDICT_ACROSS, frame)
    back = results.read_table(tmp_path, results.RETRIEVAL_VERDICT_ACROSS)
    assert list(back["budget"]) == list(frame["budget"]) and back["changes"].fillna("").tolist() == \
        frame["changes"].tolist()
    older = tmp_path / "older"  # a folder scored before groups: retrieval_verdict_by_retriever.csv, `retriever`
    older.mkdir()
    frame.rename(columns={"group": "retriever"}).to_csv(older / "retrieval_verdict_by_retriever.csv", index=False)
    assert results.read_table(older, results.RETRIEVAL_VERDICT_ACROSS)["group"].tolist() == frame["group"].tolist()


def test_any_group_label_and_axis_word_the_best_first_then_significance(cross: CrossVerdict) -> None:
    """Groups of variants (g35a's grid labels them "dense · e5-small"): the best strategy is the same in every
    group while which of Paragraph's differences reach significance is not. The first thing said is that the best
    strategy is the same under every setting; the significance follows apart, and "the conclusion changes" is never
    said."""
    weaker = _verdict({"500": {"paragraph": 0.3, "fixed-size": 0.2, "newline": 0.25},
                       "1000": {"paragraph": 0.55, "fixed-size": 0.50, "newline": 0.52}},
                      _insignificant("500") + _insignificant("1000", 0.05))
    groups = CrossVerdict({"bm25 · e5-small": cross.verdicts["bm25"], "hybrid · e5-small": weaker}, axis="setting")
    headline = groups.headline()
    assert headline.startswith("Checked under 2 settings (bm25 · e5-small and hybrid · e5-small), on the hit rate: "
                               "the best strategy is the same under every setting at every budget (Paragraph at "
                               "every budget).")
    assert "conclusion changes" not in headline and "retriever" not in headline
    significance = groups.significance_sentence()
    assert headline.index(significance) > headline.index("the best strategy is the same")
    assert significance == ("Which of Paragraph's differences reach significance (Holm p < 0.05 with a CI that "
                            "excludes 0) depends on the setting: 1 of 4 under bm25 · e5-small and 0 of 4 under "
                            "hybrid · e5-small; they disagree on 1, at 1,000 characters.")
    assert groups.sentences() == ["At 1,000 characters, Paragraph's lead over Fixed-size is significant only under "
                                  "bm25 · e5-small."]
    assert groups.per_group_lines()[0].startswith("Under bm25 · e5-small: Over 30 questions, the best hit rate is ")


def test_differences_with_the_same_outcomes_are_named_together(cross: CrossVerdict) -> None:
    """Two of Paragraph's leads significant only under bm25: one sentence names both, not one sentence each (the
    box once listed 19 differences in a row)."""
    means = {"1000": {"paragraph": 0.60, "fixed-size": 0.45, "newline": 0.44}}
    strong = _verdict(means, [("1000", "paragraph", "fixed-size", 0.15, 0.05, 0.25, 0.004),
                              ("1000", "paragraph", "newline", 0.16, 0.06, 0.26, 0.003)])
    two = CrossVerdict({"bm25": strong, "hybrid": _verdict(means, _insignificant("1000", 0.15))})
    assert two.sentences() == ["At 1,000 characters, Paragraph's lead over Fixed-size and Blank-line is significant "
                               "only under bm25."]
    assert two.best_sentence().endswith("the best strategy is the same under every retriever at every budget "
                                        "(Paragraph at 1,000 characters).")


def test_verdicts_on_different_metrics_are_refused(cross: CrossVerdict) -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match="same --verdict-metric"):
        CrossVerdict({"dense": cross.verdicts["dense"], "bm25": replace(cross.verdicts["bm25"], metric="mrr")})


# ---------------------------------------------------------------- a real run of the bundled sample, two retrievers

@pytest.fixture(scope="module")
def several(tmp_path_factory: pytest.TempPathFactory):
    """A retrieval-only run of the bundled sample (12 questions, paragraph and fixed-size) ranked with dense and
    bm25, scored by retrieval_eval.py given the parent folder."""

    root = tmp_path_factory.mktemp("across")
    out = root / "run"
    assert app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--strategies",
                                          "paragraph,fixed-size",
                                  "--retriever", "dense,bm25", "--limit", "12", "--budgets", "500,1000",
                                  "--db-dir", str(root / "db"), "--output-dir", str(out)])) == 0
    assert app.main(["score-retrieval", "--results-dir", str(out), "--no-plot", "--n-resamples", "200"]) == 0
    return out


@pytest.mark.slow
def test_the_parent_folder_is_scored_per_retriever_and_compared(several) -> None:
    from Postprocessing.reportkit.inputs import ranked_folders
    from ragstudy.scoring.verdict import all_verdicts

    folders = ranked_folders(several)[1]  # each group's scores: <out>/groups/<group>/
    assert list(folders) == ["dense", "bm25"]
    for folder in folders.values():  # each retriever's folder has the tables of a one-retriever run
        for table in (results.RETRIEVAL_PER_QUESTION, results.RETRIEVAL_SUMMARY, results.RETRIEVAL_PAIRED,
                      results.RETRIEVAL_VERDICT):
            assert results.read_table(folder, table) is not None, (folder, table.name)
        assert results.RETRIEVAL_SUMMARY_MD.path(folder).is_file()
    assert results.RETRIEVAL_VERDICT.path(several).is_file() is False  # the parent holds the comparison only
    frame = results.read_table(several, results.RETRIEVAL_VERDICT_ACROSS)
    assert [(r.group, r.budget) for r in frame.itertuples()] == [
        (name, b) for name in ("dense", "bm25") for b in ("500", "1000", "k")]
    cross = CrossVerdict.read(folders)
    for name, folder in folders.items():
        v = all_verdicts(results.read_table(folder, results.RETRIEVAL_VERDICT))[0]
        assert cross.verdicts[name] == v
        for b in v.budgets:  # the numbers are the folder's own verdict's, none re-estimated
            row = frame[(frame["group"] == name) & (frame["budget"] == b.budget)].iloc[0]
            assert row["best"] == " = ".join(s.strategy for s in b.best) and row["best_value"] == b.best[0].mean
            d = b.differences[0]
            assert d.strategy == "fixed-size"
            assert (row["diff:fixed-size"], row["ci_low:fixed-size"], row["ci_high:fixed-size"],
                    row["p_holm:fixed-size"]) == pytest.approx((d.mean_diff, d.ci_low, d.ci_high, d.p_holm))
    md = results.RETRIEVAL_SUMMARY_MD.path(several).read_text(encoding="utf-8")
    assert cross.headline() in md and all(sentence in md for sentence in cross.sentences())
    for name, v in cross.verdicts.items():
        assert f"### Under {name}" in md and v.table()[1][0][2].text in md


@pytest.mark.slow
def test_the_report_shows_the_statement_below_the_headline(several, tmp_path) -> None:
    from Postprocessing import write_report
    from Postprocessing.reportkit.inputs import main_group_source, ranked_folders
    from ragstudy.scoring.verdict import verdict_setting

    folders = ranked_folders(several)[1]
    cross = CrossVerdict.read(folders)
    lead = cross.verdicts["dense"].headline(**verdict_setting(results.read_config(main_group_source(several)[0]).raw))
    for page, page_md, _ in (write_report.build(several, generated="test"),  # the parent folder itself
                             write_report.build(tmp_path, generated="test", retrieval_dir=several)):  # as study
        assert lead.startswith("With the dense retriever and the ")  # the main retriever's headline leads the box
        assert page_md.index(lead) < page_md.index(cross.headline())  # the statement below it
        for text in (cross.headline(), *cross.sentences(), *cross.per_group_lines()):
            assert text in page_md
        assert cross.headline() in page
