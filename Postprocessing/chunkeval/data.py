"""Load what evaluation_chain.py wrote (chunk exports, Dataset files) and the ground truth, and align every
strategy's chunks to the common per-document reference."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from Postprocessing.common import DataError, csv_row
from ragstudy import registry, results
from ragstudy.grid.records import normalize_ws

from .align import AlignedChunk, ReferenceDoc, align_document, document_name, groundtruth_reference, \
    textlayer_reference

logger = logging.getLogger(__name__)

MIN_MATCHED_SHARE = 0.5  # below this, a reference and a strategy's text probably describe different PDFs


def text_layer_strategies() -> list[str]:
    """Registered strategies whose source text is the shared PyMuPDF text layer (the reference fallback)."""
    return [spec.name for spec in registry.specs() if spec.source_kind == "text-layer"]


def discover_strategies(results_dir: Path) -> list[str]:
    """Strategies with a chunk export (chunks_<name>.csv) in `results_dir`, in the paper's order."""
    names = results.exported_strategies(results_dir)
    if not names:
        raise DataError(f"no chunks_<strategy>.csv in {results_dir}: run `ragstudy chunks "
                        f"--output-dir {results_dir}` (or a full run) first")
    return names


@dataclass(frozen=True)
class StrategyExport:
    """One strategy's chunk export, with every chunk aligned to its document's reference."""

    strategy: str
    rows: tuple[dict, ...]  # load_chunk_export rows, in file order
    sources: Mapping[str, Any]  # path -> ragstudy SourceText
    chunks: tuple[AlignedChunk, ...]  # aligned, same order as rows
    matched_share: Mapping[str, float]  # document -> share of its reference matched by this strategy's text

    def by_doc_id(self) -> dict[str, AlignedChunk]:
        return {c.doc_id: c for c in self.chunks}


def load_export(results_dir: Path, strategy: str) -> tuple[list[dict], dict]:
    from ragstudy.results import read_chunks as load_chunk_export

    csv_path = Path(results_dir) / f"chunks_{strategy}.csv"
    try:
        rows, sources = load_chunk_export(results_dir, strategy)
    except FileNotFoundError as exc:
        raise DataError(f"{exc.filename}: missing; re-run `ragstudy chunks` (or `ragstudy answer`)") from exc
    for i, row in enumerate(rows):
        if row["path"] not in sources:
            raise DataError(f"{csv_row(csv_path, i)}: path {row['path']} has no text in sources_{strategy}.jsonl; "
                            "the two files come from different runs: re-run ragstudy answer")
        start, end = row["start_end_idx"]
        if sources[row["path"]].text[start:end] != row["contents"]:
            raise DataError(f"{csv_row(csv_path, i)}: start_end_idx [{start}, {end}] does not point at the chunk's "
                            f"contents in sources_{strategy}.jsonl; re-export the chunks")
    return rows, sources


def load_references(exports: Mapping[str, tuple[list[dict], dict]], groundtruth_dir: Path | None
                    ) -> dict[str, ReferenceDoc]:
    """One reference per document: its ground-truth body text when `groundtruth_dir` describes it, else the
    shared text layer (from a baseline's export, or read from the PDF)."""
    paths: dict[str, str] = {}
    for _, sources in exports.values():
        for path in sources:
            paths.setdefault(document_name(path), path)
    groundtruth = {}
    if groundtruth_dir is not None:
        from ragstudy.scoring.groundtruth import load_groundtruth_dir

        try:
            groundtruth = load_groundtruth_dir(groundtruth_dir)
        except ValueError as exc:
            raise DataError(str(exc)) from exc
    references: dict[str, ReferenceDoc] = {}
    for name, path in sorted(paths.items()):
        if name in groundtruth:
            references[name] = groundtruth_reference(groundtruth[name])
            continue
        text = next((exports[s][1][p].text for s in text_layer_strategies() if s in exports
                     for p in exports[s][1] if document_name(p) == name), None)
        if text is None:
            from ragstudy.text.textlayer import read_pdf

            if not Path(path).is_file():
                raise DataError(f"{name}: no ground truth in {groundtruth_dir}, no baseline export and the PDF "
                                f"{path} is gone; pass --groundtruth DIR or export a baseline strategy too")
            text = read_pdf(Path(path)).text_layer.text
        references[name] = textlayer_reference(name, text)
        if groundtruth_dir is not None:
            logger.warning("%s: no ground truth in %s; using the PDF's text layer as its reference", name,
                           groundtruth_dir)
    return references


def align_export(strategy: str, rows: list[dict], sources: dict, references: Mapping[str, ReferenceDoc]
                 ) -> StrategyExport:
    from tqdm.auto import tqdm

    alignments = {}
    for path, source in tqdm(sources.items(), desc=f"Aligning {strategy}", unit="pdf", disable=len(sources) < 2):
        alignments[path] = align_document(source.text, references[document_name(path)])
    matched = {references[document_name(p)].name: a.matched_share for p, a in alignments.items()}
    for name, share in matched.items():
        if share < MIN_MATCHED_SHARE:
            logger.warning("%s: %s text matches only %.0f%% of the %s reference: is the ground truth for this "
                           "PDF?", name, strategy, 100 * share, references[name].kind)
    chunks = tuple(alignments[row["path"]].align_chunk(row["doc_id"], row["path"], *row["start_end_idx"],
                                                      len(row["contents"])) for row in rows)
    return StrategyExport(strategy, tuple(rows), sources, chunks, matched)


def dataset_path(results_dir: Path, strategy: str) -> Path | None:
    """The strategy's Dataset file (JSON preferred: its lists need no decoding), or None."""
    stem = registry.get(strategy).dataset_name
    for suffix in (".json", ".csv"):
        path = Path(results_dir) / f"{stem}{suffix}"
        if path.is_file():
            return path
    return None


def load_dataset(path: Path, strategy: str) -> list[dict]:
    """Rows of a Dataset file (this project's format or the paper's), read by ragstudy.results, as dicts with
    `contexts` and `sources` lists (sources empty for the paper's files, which did not record them)."""
    dataset = results.read_dataset(path, strategy, None, require_answers=False)
    return [{**row.to_record(), "sources": [vars(s).copy() for s in row.sources or ()]} for row in dataset.rows]


def retrieved_chunks(row: dict, path: Path, i: int, export: StrategyExport) -> list[AlignedChunk]:
    """The aligned chunks a Dataset row retrieved, found by doc_id (or, without one, by their text)."""
    by_id = export.by_doc_id()
    chunks = []
    sources = row["sources"] or [{}] * len(row["contexts"])  # the paper's files record no sources: match by text
    for j, (source, context) in enumerate(zip(sources, row["contexts"], strict=True)):
        chunk = by_id.get(source.get("doc_id") or "")
        if chunk is None:
            chunk = next((c for c, r in zip(export.chunks, export.rows) if r["contents"] == context), None)
        if chunk is None:
            raise DataError(f"{path} row {i} (question_index {row['question_index']}), retrieved item {j}: chunk "
                            f"{source.get('doc_id')} is not in chunks_{export.strategy}.csv; the Dataset and the "
                            "chunk export come from different runs: re-run ragstudy answer")
        chunks.append(chunk)
    return chunks


def check_question(row: dict, path: Path, i: int, evidence_question: str, evidence_path: Path) -> None:
    if normalize_ws(str(row["question"])) != normalize_ws(evidence_question):
        raise DataError(f"{path} row {i}: question_index {row['question_index']} is {str(row['question'])[:60]!r} "
                        f"but {evidence_path} has {evidence_question[:60]!r}: the evidence file belongs to another "
                        "Questions.csv")


def documents_subset(references: Mapping[str, ReferenceDoc], count: int | None, names: Sequence[str] | None
                     ) -> list[str]:
    """Document names HOPE runs on: the given names, else the first `count` by name."""
    available = sorted(references)
    if names:
        unknown = [n for n in names if n not in references]
        if unknown:
            raise DataError(f"--hope-documents names unknown documents {unknown}; known: {available}")
        return list(names)
    return available[:count] if count else available
