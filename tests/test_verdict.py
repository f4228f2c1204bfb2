"""The verdict at the top: at each budget the best strategy and the reference (paragraph) against each other one,
from the tables retrieval_eval.py already computed. Hand-made tables check the argmax, ties, the sign of a pair
stored the other way round, the wording that flips with Holm's p, an absent reference and the file's round trip; a
real retrieval-only run (MiniLM, two generated PDFs) checks the script's stdout, retrieval_summary.md and the
report against retrieval_summary.csv and retrieval_paired.csv."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ragstudy import results
from ragstudy.scoring.verdict import Verdict, verdict
from ragstudy_cli import app

DISPLAY = {"paragraph": "Paragraph", "fixed-size": "Fixed-size", "newline": "Blank-line"}


def _summary(means: dict[str, dict[str, float]], n: int = 40) -> pd.DataFrame:
    """retrieval_summary.csv rows of the hit metric: budget -> strategy -> mean (CI ± 0.1)."""
    return pd.DataFrame([{"strategy": s, "strategy_display": DISPLAY.get(s, s), "budget": budget, "metric": "hit",
                          "n": n, "mean": mean, "ci_low": mean - 0.1, "ci_high": mean + 0.1}
                         for budget, by_strategy in means.items() for s, mean in by_strategy.items()],
                        columns=list(results.RETRIEVAL_SUMMARY.columns))


def _paired(rows: list[tuple]) -> pd.DataFrame:
    """retrieval_paired.csv rows: (budget, a, b, mean_diff, ci_low, ci_high, p_holm)."""
    return pd.DataFrame([{"budget": budget, "metric": "hit", "strategy_a": a, "strategy_b": b, "n": 40,
                          "mean_diff": d, "ci_low": low, "ci_high": high, "p_wilcoxon": p / 3, "p_holm": p}
                         for budget, a, b, d, low, high, p in rows], columns=list(results.RETRIEVAL_PAIRED.columns))


MEANS = {"500": {"paragraph": 0.5, "fixed-size": 0.3, "newline": 0.45},
         "1000": {"paragraph": 0.6, "fixed-size": 0.7, "newline": 0.7},
         "k": {"paragraph": 0.55, "fixed-size": 0.65, "newline": 0.5}}


def _pairs(p_500: float = 0.02) -> pd.DataFrame:
    return _paired([
        ("500", "paragraph", "fixed-size", 0.2, 0.05, 0.35, p_500),
        ("500", "newline", "paragraph", -0.05, -0.2, 0.1, 0.6),  # stored the other way round
        ("500", "fixed-size", "newline", -0.15, -0.3, 0.0, 0.1),
        ("1000", "paragraph", "fixed-size", -0.1, -0.25, 0.05, 0.3),
        ("1000", "paragraph", "newline", -0.1, -0.2, 0.02, 0.3),
        ("k", "paragraph", "fixed-size", -0.1, -0.2, -0.01, 0.04),  # Holm p < 0.05 but ... see below
        ("k", "paragraph", "newline", 0.05, -0.05, 0.15, 0.049),  # Holm p < 0.05, CI includes 0
    ])


def test_best_is_the_argmax_and_ties_are_named():
    v = verdict(_summary(MEANS), _pairs())
    assert [b.budget for b in v.budgets] == ["500", "1000", "k"]  # numeric budgets ascending, then k
    for b in v.budgets:
        top = max(MEANS[b.budget].values())
        assert {s.strategy for s in b.best} == {s for s, m in MEANS[b.budget].items() if m == top}
    assert [s.strategy for s in v.budgets[1].best] == ["fixed-size", "newline"]
    lines = v.lines()
    assert "best hit rate Paragraph, 0.500 [0.400, 0.600]." in lines[1]
    assert "best hit rate 0.700, tied between Fixed-size and Blank-line. Paragraph: 0.600 [0.500, 0.700]." in lines[2]


def test_differences_are_reference_minus_other_whichever_way_the_pair_was_stored():
    v = verdict(_summary(MEANS), _pairs())
    at_500 = {d.strategy: d for d in v.budgets[0].differences}
    assert (at_500["fixed-size"].mean_diff, at_500["fixed-size"].ci_low, at_500["fixed-size"].ci_high) == (
        0.2, 0.05, 0.35)
    assert (at_500["newline"].mean_diff, at_500["newline"].ci_low, at_500["newline"].ci_high) == (0.05, -0.1, 0.2)
    assert at_500["newline"].p_holm == 0.6 and at_500["newline"].n == 40
    assert all(d.strategy != "paragraph" for b in v.budgets for d in b.differences)  # not against itself


@pytest.mark.parametrize("p_holm, significant", [(0.02, True), (0.0499, True), (0.05, False), (0.3, False)])
def test_the_significant_wording_flips_at_the_holm_threshold(p_holm, significant):
    line = verdict(_summary(MEANS), _pairs(p_holm)).lines()[1]
    claim = ("Paragraph's hit rate is 0.200 higher than Fixed-size's (difference +0.200 [0.050, 0.350], "
             f"Holm p = {p_holm:.3f}): significant at 0.05.")
    assert (claim in line) == significant
    assert ("No difference between Paragraph and the 2 other strategies is significant at 0.05 after Holm's "
            "correction" in line) == (not significant)
    if significant:
        assert "The other 1 difference is not significant at 0.05 after Holm's correction." in line
    else:
        assert f"(lowest Holm p: Paragraph − Fixed-size +0.200 [0.050, 0.350], p = {p_holm:.3f})" in line


def test_a_difference_whose_ci_includes_zero_is_not_called_significant():
    v = verdict(_summary(MEANS), _pairs())
    at_k = {d.strategy: d for d in v.budgets[2].differences}
    assert at_k["fixed-size"].significant and not at_k["newline"].significant
    line = v.lines()[3]
    assert line.startswith("At each strategy's own k (n = 40 questions scored; contexts of different sizes, not an "
                           "equal budget)")
    assert "Paragraph's hit rate is 0.100 lower than Fixed-size's (difference −0.100 [−0.200, −0.010], " \
           "Holm p = 0.040): significant at 0.05." in line
    assert "(Paragraph − Blank-line: Holm p = 0.049 but its CI +0.050 [−0.050, 0.150] includes 0, so it is not " \
           "counted.)" in line


def test_a_pair_that_was_not_compared_is_said_so():
    pairs = _pairs()
    v = verdict(_summary(MEANS), pairs[~((pairs.budget == "1000") & (pairs.strategy_b == "newline"))])
    line = v.lines()[2]
    assert "Not compared with Blank-line: fewer than two questions scored for both." in line
    assert "The difference between Paragraph and Fixed-size is not significant at 0.05 after Holm's correction " \
           "(−0.100 [−0.250, 0.050], p = 0.300)." in line
    headers, rows = v.table()
    assert rows[1][headers.index("Paragraph − Blank-line")].text == "–"


def test_without_the_reference_only_the_best_is_shown():
    means = {b: {s: m for s, m in by.items() if s != "paragraph"} for b, by in MEANS.items()}
    pairs = _pairs()
    v = verdict(_summary(means), pairs[(pairs.strategy_a != "paragraph") & (pairs.strategy_b != "paragraph")])
    assert not v.reference_present and all(not b.differences for b in v.budgets)
    header, *lines = v.lines()
    assert "the reference strategy 'paragraph' is not in this run, so only the best strategy at each budget is " \
           "shown and no difference is tested" in header
    assert lines[0] == "At 500 characters (n = 40 questions scored): best hit rate Blank-line, 0.450 [0.350, 0.550]."
    assert v.table()[0] == ["budget", "n", "best hit rate"]


def test_another_reference_and_metric_and_tokens():
    v = verdict(_summary(MEANS), _pairs(), reference="fixed-size", unit="tokens")
    assert v.reference_display == "Fixed-size"
    at_500 = {d.strategy: d for d in v.budgets[0].differences}
    assert (at_500["paragraph"].mean_diff, at_500["paragraph"].ci_low, at_500["paragraph"].ci_high) == (
        -0.2, -0.35, -0.05)
    assert v.lines()[1].startswith("At 500 tokens (n = 40 questions scored)")
    with pytest.raises(ValueError, match="no 'mrr' rows"):
        verdict(_summary(MEANS), _pairs(), metric="mrr")


def test_the_file_round_trips(tmp_path):
    v = verdict(_summary(MEANS), _pairs(), confidence=0.9)
    results.write_table(tmp_path, results.RETRIEVAL_VERDICT, v.to_frame())
    back = Verdict.from_frame(results.read_table(tmp_path, results.RETRIEVAL_VERDICT))
    assert back == v  # every pair compared: no NaN
    assert "[90 % bootstrap CI]" in back.lines()[0]
    pairs = _pairs()
    absent = verdict(_summary(MEANS), pairs[pairs.strategy_b != "newline"])
    results.write_table(tmp_path, results.RETRIEVAL_VERDICT, absent.to_frame())
    again = Verdict.from_frame(results.read_table(tmp_path, results.RETRIEVAL_VERDICT))
    assert again.lines() == absent.lines() and again.table() == absent.table()
    assert math.isnan(next(d for d in again.budgets[1].differences if d.strategy == "newline").mean_diff)


def test_the_verdict_file_is_not_mistaken_for_a_ranking(tmp_path):
    (tmp_path / "retrieval_verdict.csv").write_text("x\n", encoding="utf-8")
    (tmp_path / "retrieval_paragraph.csv").write_text("x\n", encoding="utf-8")
    assert results.ranked_strategies(tmp_path) == ["paragraph"]


# ------------------------------------------------------------------------------------- a real retrieval-only run

EVIDENCE = ("question_index,evidence\n0,conserva i fascicoli per dieci anni dalla chiusura\n"
            "1,\"autenticarsi con SPID oppure con la Carta d'identità\nelettronica\"\n"
            "2,ricevono risposta entro cinque giorni lavorativi\n")


def retrieval_run(pdf_dir, questions_csv, base, strategies: str):
    """A retrieval-only run of `strategies` over the generated PDFs into base/results (budgets 150 and 600,
    fixed-size cut at 200 characters without overlap) and the evidence file beside it: (folder, evidence)."""
    out = base / "results"
    assert app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--documents", str(pdf_dir),
                                  "--questions", str(questions_csv), "--output-dir", str(out), "--db-dir",
                                  str(base / "db"), "--strategies", strategies, "--budgets", "150,600",
                                  "--set", "fixed-size.chunk_size=200", "--set", "fixed-size.chunk_overlap=0"])) == 0
    evidence = base / "evidence.csv"
    evidence.write_text(EVIDENCE, encoding="utf-8")
    return out, evidence


@pytest.fixture(scope="module")
def evaluated_run_reused(pdf_dir, questions_csv, tmp_path_factory):
    """A retrieval-only run of paragraph, fixed-size and newline over the generated PDFs, evaluated by
    retrieval_eval.py: (folder, its stdout)."""
    import contextlib
    import io


    base = tmp_path_factory.mktemp("verdict-run")
    out, evidence = retrieval_run(pdf_dir, questions_csv, base, "paragraph,fixed-size,newline")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                                    "--n-resamples", "200"]) == 0
    return out, stdout.getvalue()


def _read(folder, table):
    return results.read_table(folder, table)


def test_the_run_s_verdict_equals_its_summary_and_paired_tables(evaluated_run_reused):
    out, _ = evaluated_run_reused
    summary, paired = _read(out, results.RETRIEVAL_SUMMARY), _read(out, results.RETRIEVAL_PAIRED)
    v = Verdict.from_frame(_read(out, results.RETRIEVAL_VERDICT))
    assert (v.metric, v.reference, v.reference_display, v.unit) == ("hit", "paragraph", "Paragraph", "chars")
    assert [b.budget for b in v.budgets] == ["150", "600", "k"]
    hit = summary[summary.metric == "hit"]
    for b in v.budgets:
        at = hit[hit.budget == b.budget].set_index("strategy")
        assert {s.strategy for s in b.best} == set(at.index[at["mean"] == at["mean"].max()])  # the argmax, ties
        assert b.n_range == (at["n"].min(), at["n"].max()) == (3, 3)
        for s in (*b.best, b.reference):
            assert (s.mean, s.ci_low, s.ci_high, s.n) == tuple(at.loc[s.strategy, ["mean", "ci_low", "ci_high", "n"]])
        assert {d.strategy for d in b.differences} == {"fixed-size", "newline"}
        for d in b.differences:
            row = paired[(paired.budget == b.budget) & (paired.metric == "hit")
                         & (paired[["strategy_a", "strategy_b"]].apply(set, axis=1) == {"paragraph", d.strategy})]
            r = row.iloc[0]
            sign = 1 if r.strategy_a == "paragraph" else -1
            assert d.mean_diff == pytest.approx(sign * r.mean_diff)
            assert sorted([d.ci_low, d.ci_high]) == pytest.approx(sorted([sign * r.ci_low, sign * r.ci_high]))
            assert (d.p_holm, d.n) == (r.p_holm, r.n)
            assert d.significant == (r.p_holm < 0.05 and (r.ci_low > 0 or r.ci_high < 0))
    for line, b in zip(v.lines()[1:], v.budgets, strict=True):
        assert "(n = 3 questions scored" in line
        for s in b.best:
            assert s.display in line


def test_stdout_and_the_markdown_start_with_the_verdict(evaluated_run_reused):
    out, stdout = evaluated_run_reused
    from ragstudy.scoring.verdict import verdict_setting

    v = Verdict.from_frame(_read(out, results.RETRIEVAL_VERDICT))
    sentence = v.headline(**verdict_setting(results.read_config(out).raw))
    top = ("# Retrieval at equal context budgets (chars)\n\n## Verdict\n\n"  # one sentence, then the matrix
           f"**{sentence}**\n\n{v.matrix_markdown()}")
    assert stdout.startswith(top)
    assert (out / "retrieval_summary.md").read_text(encoding="utf-8").startswith(top)
    details = stdout.index("### Details\n\n" + v.markdown())  # the prose and the differences after the matrix
    headers, rows = v.table()
    assert details < stdout.index("| " + " | ".join(headers) + " |")
    assert stdout.index("## Verdict") < details < stdout.index("## Hit rate")


def test_the_report_shows_the_box_first(evaluated_run_reused):
    from test_report import parse

    from Postprocessing import write_report

    out, _ = evaluated_run_reused
    page, md, _ = write_report.build(out, generated="test")
    parsed = parse(page)
    assert parsed.sections[0] == "verdict" and "verdict" not in parsed.notes
    v = Verdict.from_frame(_read(out, results.RETRIEVAL_VERDICT))
    header, *lines = v.lines()
    import html

    for line in (header, *lines):
        assert f">{html.escape(line, quote=True)}<" in page and line in md
    assert md.index("## Verdict") < md.index("## Setup")
    table = parsed.table("verdict-table")
    h = {name: i for i, name in enumerate(table["headers"])}
    for row, b in zip(table["rows"], v.budgets, strict=True):
        for d in b.differences:
            cell = row[h[f"Paragraph − {d.display}"]]
            assert [float(cell[k]) for k in ("data-value", "data-ci-low", "data-ci-high")] == [
                d.mean_diff, d.ci_low, d.ci_high]


def test_another_reference_and_a_wrong_one(evaluated_run_reused, tmp_path, capsys):

    out, _ = evaluated_run_reused
    evidence = tmp_path / "evidence.csv"
    evidence.write_text(EVIDENCE, encoding="utf-8")
    common = ["--results-dir", str(out), "--evidence", str(evidence), "--no-plot", "--n-resamples", "50",
              "--out-dir", str(tmp_path / "other")]
    assert app.main(["score-retrieval", *common, "--reference", "parragraph"]) == 2
    assert "--reference parragraph: not a strategy of this evaluation (strategies: paragraph, fixed-size, newline)" \
        in capsys.readouterr().err
    assert app.main(["score-retrieval", *common, "--reference", "newline", "--strategies", "fixed-size,newline"]) == 0
    v = Verdict.from_frame(_read(tmp_path / "other", results.RETRIEVAL_VERDICT))
    assert v.reference == "newline" and [d.strategy for d in v.budgets[0].differences] == ["fixed-size"]
    capsys.readouterr()
    assert app.main(["score-retrieval", *common, "--strategies", "fixed-size,newline"]) == 0
    no_paragraph = Verdict.from_frame(_read(tmp_path / "other", results.RETRIEVAL_VERDICT))
    assert not no_paragraph.reference_present
    assert capsys.readouterr().out.split("\n### Details\n\n")[1].startswith(no_paragraph.lines()[0])


def test_a_damaged_verdict_file_stops_the_report_with_a_message(tmp_path, capsys):
    from Postprocessing import write_report

    v = verdict(_summary(MEANS), _pairs())
    frame = v.to_frame().astype({"n": object})
    frame.loc[0, "n"] = "many"
    results.write_table(tmp_path, results.RETRIEVAL_VERDICT, frame)
    assert app.main(["report", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "retrieval_verdict.csv: not a verdict table as ragstudy score-retrieval writes it" in err
    assert "ragstudy score-retrieval --results-dir" in err


def test_the_confidence_level_given_is_the_one_every_written_file_states(pdf_dir, questions_csv, tmp_path):
    """The chain, retrieval_eval.py --confidence 0.9 (with its plot) and the report: every table records 0.9 and no
    written text file says "95 %" (the inline plotly.js of HTML pages holds URL-encoded "%20"-style escapes only,
    hence the look-ahead; PNG/PDF plots are binary and not searched)."""
    import re

    from Postprocessing import write_report

    out, evidence = retrieval_run(pdf_dir, questions_csv, tmp_path, "paragraph,fixed-size")
    assert app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--n-resamples", "200",
                                "--confidence", "0.9"]) == 0
    assert app.main(["report", "--results-dir", str(out)]) == 0
    for table in (results.RETRIEVAL_SUMMARY, results.RETRIEVAL_PAIRED, results.RETRIEVAL_VERDICT):
        assert set(_read(out, table)["confidence"]) == {0.9}
    assert set(_read(out, results.RETRIEVAL_SUMMARY)["n_resamples"]) == {200}
    written = [p for p in out.rglob("*") if p.is_file() and p.suffix in (".csv", ".md", ".html", ".json", ".jsonl")]
    assert {"report.html", "report.md", "retrieval_summary.md", "retrieval_hit_rate.html"} <= {p.name for p in written}
    stated = re.compile(r"95 ?%(?![0-9A-F]{2})")
    for path in written:
        found = stated.search(path.read_text(encoding="utf-8"))
        assert found is None, f"{path.name}: {found.string[max(found.start() - 80, 0):found.end() + 20]!r}"
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "90 % bootstrap CI" in (out / "retrieval_summary.md").read_text(encoding="utf-8") and "90 % CI" in md


# ------------------------------------------------------------------------------- the readable box (issue 35 item 4)

def _sentences(text: str) -> list[str]:
    """Sentences of `text`: split after . ! ? followed by a space and a capital (decimals like 0.05 stay whole)."""
    import re

    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text.strip()) if s]


def test_the_headline_is_one_sentence_naming_the_best_its_budgets_and_how_sure():
    v = verdict(_summary(MEANS), _pairs())
    sentence = v.headline(retriever="dense", embedder="e5")
    assert _sentences(sentence) == [sentence] and sentence.endswith(".")
    assert sentence.startswith("With the dense retriever and the e5 embedder (n = 40 questions), the best hit rate is "
                               "Paragraph at 500 characters; Fixed-size and Blank-line (tied) at 1,000 characters; "
                               "Fixed-size at each strategy's own k; ")
    # the best's own paired tests: Fixed-size − Paragraph at k is significant (the pair was stored the other way
    # round), Fixed-size − Blank-line at k was not compared, Paragraph − Fixed-size at 500 is, − Blank-line is not
    assert sentence.endswith("over the other one at each strategy's own k, 1 of 2 at 500 characters and none at "
                             "1,000 characters.")
    pairs = _pairs(p_500=0.3)
    quiet = verdict(_summary(MEANS), pairs[pairs.budget != "k"]).headline()
    assert quiet.startswith("Over 40 questions, the best hit rate is ")
    assert quiet.endswith("the best's lead over the others is not significant (Holm p < 0.05, CI excluding 0) at "
                          "any budget.")


def test_the_matrix_has_a_row_per_strategy_and_a_column_per_budget_with_the_best_marked():
    summary = _summary(MEANS)
    v = verdict(summary, _pairs())
    headers, rows = v.matrix()
    assert headers == ["strategy", "500 chars", "1,000 chars", "own k"]
    assert [row[0].text for row in rows] == ["Paragraph", "Fixed-size", "Blank-line"]
    assert all(len(row) == 1 + len(v.budgets) for row in rows)
    best = {(row[0].text, headers[i]) for row in rows for i, cell in enumerate(row) if cell.best}
    assert best == {("Paragraph", "500 chars"), ("Fixed-size", "1,000 chars"), ("Blank-line", "1,000 chars"),
                    ("Fixed-size", "own k")}
    marked = {(row[0].text, headers[i]) for row in rows for i, cell in enumerate(row) if cell.text.endswith(" †")}
    assert marked == {("Fixed-size", "500 chars"), ("Paragraph", "own k")}  # significantly below the best
    for row in rows:  # every number is the summary's mean, with its CI behind it
        for header, cell in zip(headers[1:], row[1:], strict=True):
            budget = {"own k": "k"}.get(header, header.split(" ")[0].replace(",", ""))
            r = summary[(summary.budget == budget) & (summary.strategy_display == row[0].text)].iloc[0]
            assert (cell.value, cell.ci, cell.text.split(" ")[0]) == (r["mean"], (r.ci_low, r.ci_high),
                                                                       f"{r['mean']:.3f}")
    md = v.matrix_markdown()
    assert "| Paragraph | **0.500** | 0.600 | 0.550 † |" in md
    assert "| Fixed-size | 0.300 † | **0.700** | **0.650** |" in md
    assert md.rstrip().endswith(v.legend()) and "Bold: the best at that budget; †: significantly below it" in md


def test_a_verdict_file_written_before_the_matrix_still_reads(tmp_path):
    """A retrieval_verdict.csv without the score and versus_best rows: no matrix, and the headline counts the
    reference's significant differences instead of the best's."""
    v = verdict(_summary(MEANS), _pairs())
    frame = v.to_frame()
    assert set(frame["role"]) == {"best", "reference", "score", "difference", "versus_best"}
    back = Verdict.from_frame(frame)
    assert back.matrix() == v.matrix() and back.headline() == v.headline()
    old = Verdict.from_frame(frame[~frame["role"].isin(["score", "versus_best"])])
    assert not old.has_matrix() and old.matrix_markdown() == "" and old.lines() == v.lines()
    assert old.headline().endswith("; 2 of Paragraph's 6 differences with the other strategies are significant "
                                   "(Holm p < 0.05, CI excluding 0).")
