"""The clean text layer (`text_layer: clean`): the paragraph strategy's cleaning applied to the shared text layer,
with chunk offsets and pages still right; the setting as a flag, a config key and a sweep axis; the cache keys that
keep raw and clean apart; and the cleaning/segmentation decomposition of retrieval_eval."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO_ROOT
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.pipeline import StageSettings, chunk_documents
from ragstudy.results import read_chunks, write_chunks
from ragstudy.scoring.evidence import NormalizedText, normalize_for_match
from ragstudy.text.textlayer import CLEAN, load_documents, read_pdf, with_text_layer
from ragstudy_cli import app

SAMPLE = REPO_ROOT / "Documents"
HEAD = "Linee guida sulla conservazione digitale - edizione 2024"
# a sentence that runs from the foot of page 1 (hyphenated) onto page 2, a footnote at the foot of page 1
BEFORE_BREAK = "Il pacchetto di archiviazione viene firmato digitalmente dal responsabile della conserva-"
AFTER_BREAK = "zione prima del trasferimento al sistema di conservazione esterno."
EVIDENCE = "firmato digitalmente dal responsabile della conservazione prima del trasferimento"


def _page_break_pdf(path: Path, pages: int = 3) -> Path:
    """A small manual with a running head and 'Pagina N di M' on every page, a sentence hyphenated across the break
    from page 1 to page 2 and a footnote at the foot of page 1."""
    import pymupdf

    doc = pymupdf.open()
    body = ["La conservazione dei documenti informatici segue le regole tecniche vigenti.",
            "Ogni documento è versato nel sistema entro trenta giorni dalla sua registrazione.",
            "Il responsabile verifica l'integrità degli archivi ogni sei mesi e redige un verbale."]
    for number in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 40), HEAD, fontsize=9, fontname="helv")
        y = 170  # below the header band (top 15 %), where body text is
        lines = body if number != 2 else [AFTER_BREAK, *body]
        for line in lines:
            page.insert_text((72, y), line, fontsize=11, fontname="helv")
            y += 40
        if number == 1:
            page.insert_text((72, 700), BEFORE_BREAK, fontsize=11, fontname="helv")
            page.insert_text((72, 760), "1 Vedi le regole tecniche sul documento informatico.", fontsize=8,
                             fontname="helv")
        page.insert_text((280, 810), f"Pagina {number} di {pages}", fontsize=9, fontname="helv")
    doc.save(path)
    doc.close()
    return path


@pytest.fixture(scope="module")
def break_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("page-break")
    _page_break_pdf(folder / "manuale_pagine.pdf")
    return folder


def test_clean_layer_joins_a_sentence_across_the_page_break_and_drops_heads_and_page_numbers(break_dir):
    document = read_pdf(break_dir / "manuale_pagine.pdf")
    raw, clean = document.text_layer, with_text_layer(document, CLEAN).text_layer
    assert raw.text.count(HEAD) == 3 and len(re.findall(r"Pagina \d di 3", raw.text)) == 3  # furniture in raw
    assert HEAD not in clean.text and "Pagina" not in clean.text
    assert clean.layer == "clean" and len(clean.page_starts) == document.page_count == 3
    evidence = normalize_for_match(EVIDENCE)
    assert evidence in normalize_for_match(clean.text) and evidence not in normalize_for_match(raw.text)
    joined = clean.text.index("della conservazione prima")  # hyphen undone, no blank line at the break
    # the characters before the break are on page 1, those after it on page 2; the footnote stays on page 1
    assert clean.page_of(joined) == 1 and clean.page_of(clean.text.index("zione prima") + 1) == 2
    assert clean.page_of(clean.text.index("1 Vedi le regole")) == 1
    assert clean.text.startswith(body_start := "La conservazione dei documenti")
    assert clean.text[clean.page_starts[2]:].startswith(body_start)  # page 3 starts at its first body line


@pytest.mark.parametrize("strategy", ["fixed-size", "newline", "sentence"])
def test_clean_chunk_exports_round_trip_and_keep_their_pages(strategy, break_dir, tmp_path):
    config = StudyConfig.resolve(profile="lite", strategies=strategy, documents=str(break_dir), text_layer="clean")
    chunked = chunk_documents(load_documents(break_dir), StageSettings.of(config, strategy))
    write_chunks(chunked, strategy, tmp_path)
    rows, sources = read_chunks(tmp_path, strategy)
    source = sources[str(break_dir / "manuale_pagine.pdf")]
    assert source.layer == "clean" and HEAD not in source.text
    assert source == chunked[0].source  # what is written is what is read back
    for row in rows:
        start, end = row["start_end_idx"]
        assert source.text[start:end] == row["contents"]
        assert (int(row["metadata"]["page_start"]), int(row["metadata"]["page_end"])) == source.pages_of(start, end)
    crossing = [r for r in rows if "conservazione prima" in r["contents"]]
    assert crossing and all(r["metadata"]["page_start"] == 1 and r["metadata"]["page_end"] >= 2 for r in crossing)


def test_text_layer_setting_is_validated_recorded_and_keys_the_caches(break_dir):
    from ragstudy.pipeline import StageSettings, chunk_cache_path

    documents = load_documents(break_dir)
    raw = StudyConfig.resolve(profile="lite", strategies="fixed-size,paragraph", documents=str(break_dir))
    clean = StudyConfig.resolve(profile="lite", strategies="fixed-size,paragraph", documents=str(break_dir),
                                text_layer="clean")
    assert raw.text_layer == "raw" and clean.to_dict()["text_layer"] == "clean"  # config.json records it
    assert StudyConfig.from_dict(clean.to_dict()).text_layer == "clean"
    def key(config, strategy):  # a strategy that reads the text layer: a cache entry and chunk ids per layer
        return chunk_cache_path(StageSettings.of(config, strategy), documents)

    assert key(raw, "fixed-size") != key(clean, "fixed-size") and key(raw, "paragraph") == key(clean, "paragraph")
    raw_ids = {c.doc_id for c in chunk_documents(documents, StageSettings.of(raw, "fixed-size"))[0].chunks}
    clean_ids = {c.doc_id for c in chunk_documents(documents, StageSettings.of(clean, "fixed-size"))[0].chunks}
    assert raw_ids.isdisjoint(clean_ids)
    with pytest.raises(StudyInputError, match="--text-layer 'cleaned' is not one of raw, clean"):
        StudyConfig.resolve(profile="lite", strategies="fixed-size", text_layer="cleaned")
    with pytest.raises(StudyInputError, match=r"an answering run takes one text layer \(raw\); text layers are "
                                              r"compared by `ragstudy retrieve`"):
        StudyConfig.resolve(profile="lite", strategies="fixed-size", text_layer="raw,clean")


def test_text_layer_is_a_sweep_axis(tmp_path):
    from ragstudy.grid.sweep import load_sweep

    path = tmp_path / "sweep.yaml"
    path.write_text("configs:\n  - {strategy: newline, text_layer: clean}\n"
                    "grid:\n  - {strategy: fixed-size, params: {chunk_size: [400]}, text_layer: [raw, clean]}\n",
                    encoding="utf-8")
    sweep = load_sweep(path)
    assert [(c.strategy, c.axes["text_layer"]) for c in sweep.configs] == [
        ("newline", "clean"), ("fixed-size", "raw"), ("fixed-size", "clean")]
    path.write_text("configs:\n  - {strategy: newline, text_layer: tidy}\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match="text_layer 'tidy' is not one of raw, clean"):
        load_sweep(path)


def test_one_retrieval_only_run_over_both_layers_and_its_decomposition(break_dir, tmp_path, monkeypatch):
    """`--text-layer raw,clean` ranks every strategy on both layers (BM25: no model), and retrieval_eval splits
    paragraph − fixed-size into cleaning + segmentation, exactly, with paired CIs."""
    from ragstudy.ranking import run_retrieval

    questions = tmp_path / "Questions.csv"
    questions.write_text("questions\nChi firma il pacchetto di archiviazione prima del trasferimento?\n"
                         "Ogni quanto si verifica l'integrità degli archivi?\n", encoding="utf-8")
    evidence = tmp_path / "evidence.csv"
    pd.DataFrame([{"question_index": 0, "evidence": EVIDENCE},
                  {"question_index": 1, "evidence": "verifica l'integrità degli archivi ogni sei mesi"}]
                 ).to_csv(evidence, index=False)
    out = tmp_path / "run"
    config = StudyConfig.resolve(profile="lite", strategies="paragraph,fixed-size", documents=str(break_dir),
                                 questions=str(questions), output_dir=str(out), retrieval_only=True,
                                 retriever="bm25", budgets="150,400", text_layer="raw,clean",
                                 db_dir=str(tmp_path / "db"))
    run_retrieval(config)
    from ragstudy.results import open_run

    grid = {v.id: v for v in open_run(out).variants()}  # the text layer is an axis; paragraph reads none
    assert sorted(grid) == ["fixed-size__bm25__clean", "fixed-size__bm25__raw", "paragraph__bm25"]
    clean = out / "variants" / "fixed-size__bm25__clean"
    assert json.loads((clean / "config.json").read_text(encoding="utf-8"))["text_layer"] == "clean"
    clean_source = json.loads((clean / "sources_fixed-size.jsonl").read_text(encoding="utf-8"))
    assert clean_source["text_layer"] == "clean" and HEAD not in clean_source["text"]
    raw_source = out / "variants" / "fixed-size__bm25__raw" / "sources_fixed-size.jsonl"
    assert "text_layer" not in json.loads(raw_source.read_text(encoding="utf-8"))
    written = app.main(["score-retrieval", "--results-dir", str(out), "--evidence", str(evidence), "--no-plot",
                                   "--n-resamples", "200"])
    assert written == 0
    table = pd.read_csv(out / "retrieval_decomposition.csv", dtype={"budget": str})  # the raw/clean groups' split
    assert table.equals(pd.read_csv(out / "groups" / "raw" / "retrieval_decomposition.csv", dtype={"budget": str}))
    assert set(table["part"]) == {"total", "cleaning", "segmentation"}
    assert list(dict.fromkeys(table["metric"])) == ["hit", "hit_contiguous"]  # the verdict's two readings
    for _, part in table.groupby(["metric", "budget"]):
        parts = part.set_index("part")["mean_diff"]
        assert parts["total"] == pytest.approx(parts["cleaning"] + parts["segmentation"])
    summary = (out / "retrieval_summary.md").read_text(encoding="utf-8")
    assert "Cleaning or segmentation?" in summary and "Cleaning alone (fixed-size clean − raw)" in summary
    from Postprocessing import write_report

    _, page, _ = write_report.build(out, generated="test")
    assert "Cleaning or segmentation?" in page and "segmentation: paragraph − fixed-size clean" in page


def test_decomposition_parts_are_paired_differences_with_their_bootstrap_ci():
    from ragstudy.scoring.decomposition import decompose
    from ragstudy.scoring.stats import compare_paired

    rng = np.random.default_rng(3)
    hits = {name: rng.integers(0, 2, 40).astype(float) for name in ("paragraph", "raw", "clean")}

    def frame(rows):
        return pd.DataFrame([{"strategy": s, "budget": "1000", "question_index": i, "hit": v}
                             for s, values in rows for i, v in enumerate(values)])

    raw = frame([("paragraph", hits["paragraph"]), ("fixed-size", hits["raw"])])
    clean = frame([("fixed-size", hits["clean"])])
    parts = {p.part: p for p in decompose(raw, clean, ["1000"], n_resamples=500, seed=7)}
    expected = compare_paired(hits["clean"], hits["raw"], 500, 7)
    assert (parts["cleaning"].mean_diff, parts["cleaning"].ci_low, parts["cleaning"].ci_high) == pytest.approx(
        (expected.mean_diff, expected.ci_low, expected.ci_high))
    assert parts["total"].mean_diff == pytest.approx(hits["paragraph"].mean() - hits["raw"].mean())
    assert parts["segmentation"].mean_diff == pytest.approx(hits["paragraph"].mean() - hits["clean"].mean())


def test_a_run_over_several_pairs_of_text_layers_splits_each_pair_and_names_it(tmp_path: Path) -> None:
    """Cleaning vs segmentation is a group-by over the text-layer axis: with two retrievers × two text layers the
    run's top-level table holds both pairs' splits, each named by its other axes, and its summary shows both (the
    first pair's split alone, unnamed, was all it showed)."""
    from Postprocessing.score_retrieval import pairs_decomposition, text_layer_pairs
    from ragstudy import results
    from ragstudy.grid.variants import Group
    from ragstudy.scoring.decomposition import markdown

    def group(retriever: str, layer: str) -> Group:
        return Group({"retriever": retriever, "text_layer": layer, "embedding": "wheel:multilingual-e5-small"}, {},
                     shown=("retriever", "text_layer"))

    groups = [group(r, layer) for r in ("dense", "bm25") for layer in ("raw", "clean")]
    scored = {}
    for g, diff in zip(groups, (0.25, None, -0.5, None)):
        scored[g.label] = tmp_path / g.id
        if diff is not None:  # a split is written into the raw group's folder
            results.write_table(scored[g.label], results.RETRIEVAL_DECOMPOSITION, pd.DataFrame(
                [{"budget": "1000", "metric": "hit", "part": part, "n": 40, "mean_diff": diff, "ci_low": diff - 0.1,
                  "ci_high": diff + 0.1, "p_wilcoxon": 0.01} for part in ("total", "cleaning", "segmentation")]))
    pairs = text_layer_pairs(groups)
    assert [(raw.label, clean.label) for raw, clean in pairs] == [("dense / raw", "dense / clean"),
                                                                  ("bm25 / raw", "bm25 / clean")]
    table = pairs_decomposition(pairs, scored)
    assert table.groupby("group", sort=False)["mean_diff"].first().to_dict() == {"dense": 0.25, "bm25": -0.5}
    text = markdown(table)
    assert "| dense | 1,000 chars | +0.250 [0.150, 0.350]" in text and "| bm25 | 1,000 chars | −0.500" in text
    single = pairs_decomposition(pairs[:1], scored)  # one pair: its table as it is, no group column
    assert "group" not in single.columns and "- At 1,000 characters" in markdown(single)


# ------------------------------------------------------------------------------------------------ real PDFs

def _repeated_lines(pages: list[str], share: float = 0.5) -> set[str]:
    """Running heads and feet as a reader sees them in the raw layer: lines (digits ignored) among the first or
    last two of a page that come back on at least `share` of the pages (a repeated table header is not one)."""
    counts: Counter = Counter()
    for page in pages:
        lines = [re.sub(r"\d+", "#", line.strip()) for line in page.split("\n") if len(line.strip()) > 3]
        counts.update(set(lines[:2] + lines[-2:]))
    return {line for line, n in counts.items() if n >= max(2, share * len(pages))}


def _page_texts(source) -> list[str]:
    ends = [*source.page_starts[1:], len(source.text)]
    return [source.text[a:b] for a, b in zip(source.page_starts, ends)]


def _assert_heads_gone(heads: set[str], clean) -> None:
    """Each running head of the raw layer is a line of at most one clean page (a title page may print the same
    words as its content: the cover of a manual with its edition)."""
    for head in heads:
        pages = [page for page, text in enumerate(_page_texts(clean))
                 if head in {re.sub(r"\d+", "#", line.strip()) for line in text.split("\n")}]
        assert len(pages) <= 1, f"{clean.path}: running head {head!r} still on pages {[p + 1 for p in pages]}"


def _check_pages(document) -> None:
    """Every block of the clean layer, cut at page starts, is on the raw page it is mapped to: its words appear
    there in the same order (furniture lines removed from inside a block may leave gaps)."""
    raw = [normalize_for_match(text) for text in _page_texts(document.text_layer)]
    clean = with_text_layer(document, CLEAN).text_layer
    for page, text in enumerate(_page_texts(clean)):
        for block in text.split("\n\n"):
            at = 0
            for word in filter(None, map(normalize_for_match, block.split())):
                at = raw[page].find(word, at)
                assert at >= 0, f"{document.path} page {page + 1}: {word!r} of {block[:80]!r} not on that page"
                at += len(word)


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLE.glob("*.pdf")))
def test_sample_running_heads_go_and_every_block_stays_on_its_page(name):
    document = read_pdf(SAMPLE / name)
    clean = with_text_layer(document, CLEAN).text_layer
    heads = _repeated_lines(_page_texts(document.text_layer))
    if document.page_count >= 3:
        assert heads, f"{name}: the sample PDFs print a running head or page number on every page"
    _assert_heads_gone(heads, clean)
    _check_pages(document)


@pytest.mark.slow  # ~90 s on a loaded 2-core machine: four real PDFs (one of 184 pages) read in both layers
def test_shared_pdfs_keep_pages_and_join_page_break_evidence(shared_pdfs):
    """On the real PDFs of ../shared: every clean block on its page; each page-break evidence of ../shared/qa is
    contiguous in the clean layer (not in the raw one) and starts on its page; a running head is gone."""
    qa = shared_pdfs.parent / "qa" / "evidence.csv"
    if not qa.is_file():
        pytest.skip(f"{qa} is absent (CI and dev machines provide ../shared)")
    evidence = pd.read_csv(qa)
    page_breaks = evidence[evidence["boundary"] == "page"]
    assert len(page_breaks) >= 2
    with_heads = 0
    for pdf, rows in page_breaks.groupby("pdf"):
        document = read_pdf(shared_pdfs / pdf)
        _check_pages(document)
        clean = with_text_layer(document, CLEAN).text_layer
        normalized = NormalizedText.of(clean.text)
        for row in rows.itertuples():
            needle = normalize_for_match(row.evidence)
            assert needle not in normalize_for_match(document.text_layer.text)
            at = normalized.text.find(needle)
            assert at >= 0, f"{pdf} question {row.question_index}: page-break evidence not contiguous in clean"
            assert clean.page_of(int(normalized.offsets[at])) == row.page
            end = int(normalized.offsets[at + len(needle) - 1])
            assert clean.page_of(end) == row.page + 1
        heads = _repeated_lines(_page_texts(document.text_layer))  # none where heads change with the chapter
        _assert_heads_gone(heads, clean)
        with_heads += bool(heads)
    assert with_heads >= 2  # the PA guidelines repeat a running head or foot on every page
