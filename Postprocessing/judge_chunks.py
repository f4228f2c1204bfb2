"""Judge the chunking itself, per strategy, side by side: intrinsic chunk statistics, retrieval metrics from
evidence spans, and HOPE (concept unity, semantic independence, information preservation).

Reads what ragstudy answer wrote into --results-dir: chunks_<strategy>.csv + sources_<strategy>.jsonl (from
any run, --chunks-only included), the Dataset files (retrieved contexts; for retrieval metrics), config.json
(which models; for HOPE and token counts), and metrics_per_question.csv when ragstudy score-answers
ran (for the Spearman correlations between chunk metrics and answer metrics).

    ragstudy chunk-quality --results-dir results                 # everything, HOPE on 3 PDFs
    ragstudy chunk-quality --results-dir results --no-hope       # seconds, no model calls
    ragstudy chunk-quality --results-dir results --hope-passages 8 --hope-windows 8

Cross-strategy measures (coverage, boundaries, evidence overlap) use one reference text per PDF: the ground
truth's body text (--groundtruth, default sample/groundtruth) or, for PDFs it does not describe, the shared
PyMuPDF text layer. Writes chunk_quality.md / .csv (strategy x metric, mean [CI at --confidence]) and per-item CSVs
(chunk_quality_chunks.csv, chunk_quality_questions.csv, chunk_quality_hope.csv, chunk_quality_correlation.csv)
plus chunk_quality_run.json into --out-dir (default: the results folder). HOPE's LLM calls go through the
study's answer cache: a re-run regenerates nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from Postprocessing import cli, common
from Postprocessing.answer_metrics import BERTSCORE, METEOR, ROUGE_KEYS
from Postprocessing.common import DataError
from ragstudy import registry, results
from ragstudy.io import PROJECT_ROOT as REPO_ROOT, torch_threads
from ragstudy.scoring.budget_metrics import CONTEXT_CHARS, SPAN_METRICS
from ragstudy.settings import Setting, record

logger = logging.getLogger(__name__)

DEFAULT_GROUNDTRUTH = REPO_ROOT / "sample" / "groundtruth"
DEFAULT_CORRELATE = (ROUGE_KEYS["rougeL"], METEOR, BERTSCORE[2])  # ROUGE-L, METEOR, BERTScore F1
# the span metrics are the budget metrics' (ragstudy.scoring.budget_metrics), computed here on the chain's own contexts
PER_QUESTION_CHUNK_METRICS = ("hit_at_1", "hit_at_k", *SPAN_METRICS,
                              "retrieved_chars_mean", "retrieved_boundary_quality", "retrieved_noise_share")


# ----------------------------------------------------------------------------------------------- the metrics

def intrinsic_rows(export, references, token_counter, tolerance: int, ci):
    """Intrinsic metric rows of one strategy and its per-chunk facts (a DataFrame)."""
    import pandas as pd

    from Postprocessing.chunkeval import intrinsic
    from Postprocessing.chunkeval.tables import estimate, point

    s = export.strategy
    contents = [row["contents"] for row in export.rows]
    sources = [export.sources[row["path"]].text for row in export.rows]
    facts = intrinsic.chunk_facts(export.chunks, contents, sources, references, token_counter, tolerance)
    chars = intrinsic.length_summary([f.chars for f in facts])
    tokens = intrinsic.length_summary([f.tokens for f in facts])
    spans: dict[str, list[tuple[int, int]]] = {}
    for chunk in export.chunks:
        spans.setdefault(chunk.path, []).append((chunk.start, chunk.end))
    with_body = [f.boundary_ok for f in facts if f.boundary_ok is not None]
    n = len(facts)
    rows = [
        point(s, "chunks", n, n),
        estimate(s, "chars_mean", [f.chars for f in facts], ci),
        point(s, "chars_variance", chars["variance"], n), point(s, "chars_cv", chars["cv"], n),
        estimate(s, "tokens_mean", [f.tokens for f in facts], ci),
        point(s, "tokens_variance", tokens["variance"], n), point(s, "tokens_cv", tokens["cv"], n),
        point(s, "overlap_ratio", intrinsic.overlap_ratio(spans), n),
        point(s, "coverage", intrinsic.coverage(export.chunks, references), len(references),
              note="share of reference characters"),
        estimate(s, "boundary_quality", with_body, ci, note=f"tolerance {tolerance} characters"),
        estimate(s, "midword_cut_rate", [f.midword_cut_share for f in facts], ci),
        estimate(s, "noise_chunk_share", [float(f.body_chars == 0) for f in facts], ci),
    ]
    frame = pd.DataFrame([{"strategy": s, **asdict(f)} for f in facts])
    return rows, frame


def retrieval_rows(export, dataset: list[dict], dataset_file: Path, evidence, evidence_file: Path, references,
                   tolerance: int, hit_threshold: float, ci):
    """Retrieval metric rows of one strategy and its per-question values (a DataFrame)."""
    import pandas as pd

    from Postprocessing.chunkeval.data import check_question, retrieved_chunks
    from Postprocessing.chunkeval.chain_retrieval import question_retrieval
    from Postprocessing.chunkeval.tables import estimate

    records = []
    skipped_unanswerable = 0
    context_sizes = [float(sum(len(str(c)) for c in row.get("contexts") or [])) for row in dataset]
    for i, row in enumerate(dataset):
        qi = row["question_index"]
        if evidence.total is not None and not 0 <= qi < evidence.total:
            raise DataError(f"{dataset_file} row {i}: question_index {qi} has no record in {evidence_file} "
                            f"({evidence.total} records)")
        record = evidence.records.get(qi, UNANSWERABLE)
        if record.question is not None:
            check_question(row, dataset_file, i, record.question, evidence_file)
        chunks = retrieved_chunks(row, dataset_file, i, export)
        if not record.answerable:
            skipped_unanswerable += 1
            continue
        spans = list(record.spans)
        result = question_retrieval(qi, chunks, spans, hit_threshold)
        boundary = [float(references[c.document].near_boundary(c.ref_end, tolerance)) for c in chunks
                    if c.ref_end is not None]
        values = asdict(result)
        for name, metric in zip(("recall", "precision", "iou"), SPAN_METRICS):
            values[metric] = values.pop(name)
        records.append({
            "strategy": export.strategy, **values,
            "retrieved_boundary_quality": sum(boundary) / len(boundary) if boundary else None,
            "retrieved_noise_share": sum(c.ref_end is None for c in chunks) / len(chunks) if chunks else None,
        })
    frame = pd.DataFrame(records)
    note = f"{skipped_unanswerable} unanswerable question(s) left out" if skipped_unanswerable else ""
    rows = []
    for metric in ("hit_at_1", "hit_at_k", *SPAN_METRICS):
        values = frame[metric].tolist() if len(frame) else []
        rows.append(estimate(export.strategy, metric, values, ci, note=note))
    rows.append(estimate(export.strategy, CONTEXT_CHARS, context_sizes, ci))  # every question, as prompted
    return rows, frame


def hope_floor(export, references, documents: Sequence[str], windows, llms, embedder, settings, statements):
    """HOPE items of the strategy's floor: random cuts of the same documents with its own chunk lengths
    (hope.random_cuts), scored the same way; each item labelled with the strategy and `<measure>_random`."""
    from dataclasses import replace

    from Postprocessing.chunkeval import hope

    lengths: dict[str, list[int]] = {}
    for row, chunk in zip(export.rows, export.chunks, strict=True):
        if chunk.document in documents:
            lengths.setdefault(chunk.document, []).append(len(row["contents"]))
    cuts = hope.random_cuts({name: references[name].text for name in documents}, lengths, settings.seed,
                            export.strategy + hope.FLOOR_SALT)
    items = hope.evaluate_strategy(export.strategy + hope.FLOOR_SALT, cuts, windows, llms, embedder, settings,
                                   statements)
    return [replace(item, strategy=export.strategy, measure=item.measure + hope.FLOOR) for item in items]


def hope_rows(exports, references, documents: Sequence[str], llms, embedder, settings, ci):
    """HOPE items for every strategy on `documents` and on its floor (random cuts of its chunk lengths), and the
    summary rows: each measure, its floor, and the strategy's lead over the floor."""
    from dataclasses import replace

    import pandas as pd

    from Postprocessing.chunkeval import hope
    from Postprocessing.chunkeval.tables import difference, estimate, point

    windows = hope.sample_windows([(name, references[name].text) for name in documents], settings)
    statements: dict = {}
    items, rows = [], []
    for export in exports:
        passages = [hope.Passage(row["doc_id"], chunk.document, row["contents"])
                    for row, chunk in zip(export.rows, export.chunks, strict=True) if chunk.document in documents]
        strategy_items = hope.evaluate_strategy(export.strategy, passages, windows, llms, embedder, settings,
                                                statements)
        floor_items = hope_floor(export, references, documents, windows, llms, embedder, settings, statements)
        items += strategy_items + floor_items
        summary = hope.summarize(strategy_items, settings)
        floor = hope.summarize([replace(i, measure=i.measure.removesuffix(hope.FLOOR)) for i in floor_items],
                               settings)
        for measure in hope.MEASURES:
            failures, floor_failures = summary[measure].failures, floor[measure].failures
            rows.append(estimate(export.strategy, measure, summary[measure].scores, ci, failures,
                                 note=f"{failures} item(s) failed to parse" if failures else ""))
            rows.append(estimate(export.strategy, measure + hope.FLOOR, floor[measure].scores, ci, floor_failures,
                                 note=f"{floor_failures} item(s) failed to parse" if floor_failures else ""))
            rows.append(difference(export.strategy, measure + hope.LEAD, summary[measure].scores,
                                   floor[measure].scores, ci))
        aggregate = summary[hope.AGGREGATE]
        if aggregate.mean is not None:
            rows.append(point(export.strategy, hope.AGGREGATE, aggregate.mean, len(aggregate.scores),
                              note=f"weights {settings.weights}"))
    frame = pd.DataFrame([asdict(item) for item in items],
                         columns=["strategy", "measure", "item", "score", "failure", "detail"])
    return rows, frame


# ----------------------------------------------------------------------------------------------- the models

def study_config(results_dir: Path, profile: str | None):
    """The study config HOPE and token counts use: the run's (config.json, via ragstudy.results), or `profile`'s
    defaults when there is no config.json or `--profile` names another profile."""
    from ragstudy.config import StudyConfig
    from ragstudy.results import CONFIG_NAME, read_config

    record = read_config(results_dir) if (Path(results_dir) / CONFIG_NAME).is_file() else None
    recorded = StudyConfig.of_run(record) if record is not None else None
    if recorded is not None and profile in (None, recorded.profile.name):
        return recorded
    name = profile or (record.raw.get("profile") if record else None)
    if recorded is None:
        logger.warning("no usable config.json in %s: using the %s profile's models", results_dir,
                       name or "default")
    return StudyConfig.resolve(profile=name, strategies=",".join(data_strategies(results_dir)) or None)


def data_strategies(results_dir: Path) -> list[str]:
    """Registered strategies that have a chunk export here (unregistered exports need no config)."""
    from ragstudy import registry
    from ragstudy.results import exported_strategies

    registered = set(registry.available())
    return [name for name in exported_strategies(results_dir) if name in registered]


def make_token_counter(kind: str, config):
    from Postprocessing.chunkeval.intrinsic import word_counts

    if kind == "words":
        return word_counts, "whitespace words"
    from transformers import AutoTokenizer

    from ragstudy.models import resolve_embedding

    path = resolve_embedding(config.profile.embedding, config.origins.get("embedding", "config"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise DataError(f"cannot load the tokenizer of {config.profile.embedding} ({exc}); pass --tokens words "
                        "or a profile whose embedding model is available offline") from exc
    tokenizer.model_max_length = 10 ** 9  # counting only: silence the "longer than the model" warning

    def count(texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    return count, f"tokenizer of {config.profile.embedding}"


# ----------------------------------------------------------------------------------------------- the script

HOPE_GROUP = ("HOPE (sample sizes; defaults fit ~10 min for 3 strategies x 3 PDFs with the lite profile on a 2-core "
              "CPU)")


def settings() -> tuple[Setting, ...]:
    """This script's flags (shared ones from Postprocessing.cli)."""
    from ragstudy.config import profile_names

    def hope(name: str, help: str, **facts: Any) -> Setting:
        return Setting(name, help, group=HOPE_GROUP, **facts)

    return (
        cli.RESULTS_DIR.but(help="folder ragstudy answer wrote"),
        cli.OUT_DIR,
        cli.STRATEGIES.but(default_doc="every chunks_<strategy>.csv present"),
        Setting("groundtruth", "folder of ground-truth JSON ('none': text layer only)",
                default=str(DEFAULT_GROUNDTRUTH)),
        cli.EVIDENCE.but(help="evidence file, one record per Questions.csv row ('none': skip retrieval metrics)",
                         default_doc="sample/evidence.json when the run answered the bundled Questions.csv, else "
                         "none"),
        Setting("boundary_tolerance", "a chunk end within this many characters of a sentence/block end is a clean "
                "end", type=int, default=5),
        Setting("hit_threshold", "hit@k: share of evidence characters the retrieved parents must contain",
                type=float, default=0.9),
        Setting("tokens", "token counts with the embedding model's tokenizer or whitespace words",
                choices=lambda: ("embedding", "words"), default="embedding"),
        Setting("profile", "models for HOPE and token counts", choices=profile_names,
                default_doc="the run's config.json profile"),
        hope("no_hope", "skip HOPE (no model calls)", kind="switch"),
        hope("hope_documents", "a number N (the first N PDFs by name) or comma-separated PDF names", default="3"),
        hope("hope_passages", "focus passages per strategy", type=int, default=4),
        hope("hope_questions", "questions per passage", type=int, default=3),
        hope("hope_si_questions", "questions per passage answered twice for semantic independence", type=int,
             default=2),
        hope("hope_rag_passages", "passages retrieved for semantic independence and info preservation", type=int,
             default=2),
        hope("hope_windows", "sentence windows for information preservation", type=int, default=4),
        hope("hope_window_sentences", "sentences per window", type=int, default=3),
        hope("hope_max_passage_chars", "passages are cut to this many characters inside prompts", type=int,
             default=1200),
        hope("hope_weights", "weights of concept unity, semantic independence, information preservation",
             default="1,1,1"),
        Setting("metrics_per_question", "answer metrics for the correlations",
                default_doc="<results-dir>/metrics_per_question.csv when present"),
        Setting("correlate_with", "answer metrics shown in the Markdown correlation table (the CSV has all)",
                default=",".join(DEFAULT_CORRELATE)),
        *cli.bootstrap_settings(seed_help="seed of bootstrap and HOPE sampling"),
        cli.THREADS,
    )


def build_parser() -> argparse.ArgumentParser:
    return cli.script_parser(__doc__, settings())


ChunkQualitySettings = record("ChunkQualitySettings", settings())  # the job's typed settings (docs/python.md)


def _optional_path(value: str | None) -> Path | None:
    return None if value is None or value.strip().lower() in ("", "none") else Path(value)


def hope_settings(args: ChunkQualitySettings):
    from Postprocessing.chunkeval.hope import HopeSettings

    try:
        weights = tuple(float(w) for w in args.hope_weights.split(","))
        return HopeSettings(passages=args.hope_passages, questions=args.hope_questions,
                            si_questions=args.hope_si_questions, rag_passages=args.hope_rag_passages,
                            windows=args.hope_windows, window_sentences=args.hope_window_sentences,
                            max_passage_chars=args.hope_max_passage_chars, seed=args.seed, weights=weights)
    except ValueError as exc:
        raise DataError(f"HOPE settings: {exc}") from exc


def retrieval_section(args: ChunkQualitySettings, results_dir: Path, exports, references, ci, notes: list[str]):
    """Retrieval rows of every strategy that has a Dataset file, and the per-question frames."""
    from Postprocessing.chunkeval import data

    from ragstudy.scoring.evidence import default_evidence

    evidence_file = default_evidence(common.read_run_config(results_dir)) if args.evidence is None \
        else _optional_path(args.evidence)
    if evidence_file is None:
        notes.append("retrieval metrics skipped: no evidence file (pass --evidence FILE; sample/evidence.json is "
                     "used only for a run on the bundled Questions.csv)")
        return [], []
    if not evidence_file.is_file():
        notes.append(f"retrieval metrics skipped: evidence file {evidence_file} not found")
        return [], []

    from ragstudy.results import check_stale_datasets

    evidence = read_evidence(evidence_file, results_dir, references, notes)  # EvidenceError: one line, exit 2
    paths = {}
    for export in exports:
        path = data.dataset_path(results_dir, export.strategy)
        if path is None:
            notes.append(f"{export.strategy}: no Dataset file in {results_dir}, no retrieval metrics (run "
                         "`ragstudy answer`, not `ragstudy chunks`)")
            continue
        paths[export.strategy] = path
    check_stale_datasets(results_dir, list(paths.values()), "error")  # an earlier run's file is not compared
    datasets = {strategy: data.load_dataset(path, strategy) for strategy, path in paths.items()}
    differs = question_sets_note(datasets, paths)
    if differs:
        logger.warning("%s", differs)
        notes.append(differs)
    rows, frames = [], []
    for export in exports:
        if export.strategy not in datasets:
            continue
        path = paths[export.strategy]
        r, f = retrieval_rows(export, datasets[export.strategy], path, evidence, evidence_file, references,
                              args.boundary_tolerance, args.hit_threshold, ci)
        rows += r
        frames.append(f)
    k = {name: p.get("k") for name, p in common.read_run_config(results_dir).get("strategy_params", {}).items()}
    notes.append(f"retrieval: evidence {evidence_file}; hit = evidence recall >= {args.hit_threshold}; k (child "
                 f"windows) per strategy: {k or 'unknown'}")
    return rows, frames


@dataclass(frozen=True)
class SpanRecord:
    """One question's evidence on the reference texts: (document, start, end) spans; `question` is the evidence
    file's own question text (checked against the Dataset rows) or None when the file carries none."""

    question: str | None
    answerable: bool
    spans: tuple[tuple[str, int, int], ...]


UNANSWERABLE = SpanRecord(None, False, ())


@dataclass(frozen=True)
class SpanEvidence:
    """question_index -> SpanRecord; `total`: the questions the file covers (None: not known, as for a CSV beside
    a run whose questions file is gone; a question without rows is then unanswerable)."""

    records: dict[int, SpanRecord]
    total: int | None


def read_evidence(path: Path, results_dir: Path, references, notes: list[str]) -> SpanEvidence:
    """Evidence per Questions.csv row, in either form score-retrieval reads: sample/evidence.json (offsets on the
    ground-truth text) or the CSV question_index,evidence[,pdf] that make-qa writes (verbatim passages, each placed
    on its PDF's reference text, or on every reference when `pdf` is empty, under the normalisation the retrieval
    scores use). A passage found on no reference text leaves its question out, with a note."""
    from ragstudy.scoring.evidence import load_evidence_file, load_evidence_records

    if path.suffix.lower() == ".json":
        loaded = load_evidence_records(path)
        return SpanEvidence({i: SpanRecord(r.question, r.answerable, tuple((r.document, e.start, e.end)
                                                                           for e in r.evidence))
                             for i, r in enumerate(loaded)}, len(loaded))
    from ragstudy import results

    questions, questions_path = results.open_run(results_dir).questions()
    by_question = load_evidence_file(path, questions, questions_path or "Questions.csv")
    records: dict[int, SpanRecord] = {}
    normalized: dict[str, Any] = {}  # each reference text normalised once
    lost = []
    for index, item in by_question.items():
        spans = [span for text in item.texts
                 for span in place_on_references(text.text, text.document, references, normalized)]
        if spans:
            records[index] = SpanRecord(None, True, tuple(spans))
        else:
            lost.append(index)
    if lost:
        message = (f"{path}: the evidence of question_index {', '.join(map(str, lost))} was found on no reference "
                   "text (the PDFs' ground truth or text layer): left out of the retrieval metrics")
        logger.warning("%s", message)
        notes.append(message)
    return SpanEvidence(records, len(questions) if questions else None)


def place_on_references(text: str, document: str | None, references, normalized: dict[str, Any]
                        ) -> list[tuple[str, int, int]]:
    """(document, start, end) spans of a verbatim passage on the reference texts: on `document`'s when named, else
    on the reference that holds most of it; [] when no piece of it is found. `normalized` caches the normalised
    reference texts."""
    from ragstudy.scoring.evidence import NormalizedText, locate, normalize_for_match

    needle = normalize_for_match(text)
    best: tuple[int, str, list[tuple[int, int]]] | None = None
    for name in ([document] if document else sorted(references)):
        if name not in references:
            continue
        if name not in normalized:
            normalized[name] = NormalizedText.of(references[name].text)
        pieces, lost = locate(needle, normalized[name].text)
        if pieces and (best is None or lost < best[0]):
            best = (lost, name, pieces)
    if best is None:
        return []
    _, name, pieces = best
    offsets = normalized[name].offsets
    return [(name, int(offsets[lo]), int(offsets[hi - 1]) + 1) for lo, hi in pieces]


def question_sets_note(datasets: dict[str, list[dict]], paths: dict[str, Path]) -> str:
    """Empty when every strategy's Dataset file answers the same questions, else a warning naming each file, how
    many questions it holds and which are missing: their means are then over different questions."""
    sets = {s: {row["question_index"] for row in rows} for s, rows in datasets.items()}
    if len({frozenset(v) for v in sets.values()}) <= 1:
        return ""
    union = set().union(*sets.values())
    parts = []
    for strategy, indices in sets.items():
        missing = sorted(union - indices)
        parts.append(f"{paths[strategy].name} {len(indices)} questions"
                     + (f" (lacks question_index {', '.join(map(str, missing[:5]))}"
                        f"{' …' if len(missing) > 5 else ''})" if missing else ""))
    return ("strategies are compared over different question sets: " + "; ".join(parts)
            + ": their retrieval means are not comparable; re-run ragstudy answer so every strategy answers the "
              "same questions")


def hope_section(args: ChunkQualitySettings, config, exports, references, ci, notes: list[str]):
    """HOPE rows and items (None when --no-hope), and the seconds HOPE took."""
    if args.no_hope:
        return [], None, None
    from Postprocessing.chunkeval import data
    from Postprocessing.chunkeval.hope import llms_from_generator
    from ragstudy.llms import answering_model, make_generator

    settings = hope_settings(args)
    spec = args.hope_documents.strip()
    documents = data.documents_subset(references, int(spec) if spec.isdigit() else None,
                                      None if spec.isdigit() else [s.strip() for s in spec.split(",")])
    generator = make_generator(config)
    started = time.perf_counter()
    rows, items = hope_rows(exports, references, documents, llms_from_generator(generator, settings),
                            config.embedder.load(), settings, ci)
    seconds = time.perf_counter() - started
    notes.append(f"HOPE: {answering_model(config).name} + {config.profile.embedding} on {len(documents)} PDF(s) "
                 f"({', '.join(documents)}); {settings.passages} passages x {settings.questions} questions, "
                 f"{settings.windows} windows, seed {settings.seed}; {generator.generated} LLM calls generated, "
                 f"{generator.cached} from cache; {seconds:.0f} s. Information preservation picks among up to 4 "
                 "statements (chance 0.25 with 4); the aggregate averages the measures that have scores")
    return rows, items, seconds


def correlation_section(args: ChunkQualitySettings, results_dir: Path, per_question, notes: list[str]):
    """Spearman correlations of per-question chunk metrics with the answer metrics, and those metrics' names."""
    import pandas as pd

    from Postprocessing.chunkeval.tables import spearman_table

    from ragstudy.results import METRICS_PER_QUESTION

    metrics_file = Path(args.metrics_per_question or METRICS_PER_QUESTION.path(results_dir))
    if not len(per_question):
        return [], []
    if not metrics_file.is_file():
        notes.append(f"no correlations: {metrics_file} not found (run ragstudy score-answers)")
        return [], []
    answers = pd.read_csv(metrics_file)
    for key in ("strategy", "question_index"):
        if key not in answers.columns:
            raise DataError(f"{metrics_file}: no {key!r} column; is it the table of `ragstudy score-answers`, "
                            "metrics_per_question.csv?")
    skip = {"strategy", "strategy_display", "question_index", "question"}
    answer_metrics = [c for c in answers.columns if c not in skip and pd.api.types.is_numeric_dtype(answers[c])]
    merged = per_question.merge(answers, on=["strategy", "question_index"], how="inner")
    notes.append(f"correlations: {len(merged)} question x strategy pairs from {metrics_file}")
    return spearman_table(merged, PER_QUESTION_CHUNK_METRICS, answer_metrics), answer_metrics


def load_aligned(args: ChunkQualitySettings, results_dir: Path):
    """Chunk exports aligned to one reference per PDF: (strategies, references, exports, notes, groundtruth dir)."""
    from Postprocessing.chunkeval import data

    from ragstudy.registry import parse_strategies

    strategies = (list(parse_strategies(args.strategies)) if args.strategies is not None  # '' is an error
                  else data.discover_strategies(results_dir))
    groundtruth_dir = _optional_path(args.groundtruth)
    if groundtruth_dir is not None and not groundtruth_dir.is_dir():
        logger.warning("%s not found: references are the PDFs' text layers (no ground truth)", groundtruth_dir)
        groundtruth_dir = None
    raw = {s: data.load_export(results_dir, s) for s in strategies}
    references = data.load_references(raw, groundtruth_dir)
    exports = [data.align_export(s, *raw[s], references) for s in strategies]
    notes = [f"references: {sum(r.kind == 'groundtruth' for r in references.values())} ground-truth body texts, "
             f"{sum(r.kind == 'textlayer' for r in references.values())} text layers"]
    for export in exports:
        shares = ", ".join(f"{d} {100 * v:.0f}%" for d, v in sorted(export.matched_share.items()))
        notes.append(f"{export.strategy}: reference matched by its source text: {shares}")
    return strategies, references, exports, notes, groundtruth_dir


def hope_floor_lines(rows, display) -> str:
    """The floor's sentences (hope.floor_sentences) as Markdown lines; '' when HOPE was not computed."""
    from Postprocessing.chunkeval.hope import LEAD, floor_sentences

    leads = [(r.strategy, r.metric, r.mean, r.ci_low, r.ci_high) for r in rows if r.metric.endswith(LEAD)]
    sentences = floor_sentences(leads, lambda s: display.get(s, s))
    if not sentences:
        return ""
    return ("Each HOPE measure is also computed on its floor: chunks cut at random offsets of the same documents with "
            "the strategy's own chunk lengths (`<measure>_random`), scored the same way; `<measure>_over_random` is "
            "the strategy's lead over it (two-sample bootstrap CI).\n\n" + "".join(f"- {s}\n" for s in sentences))


def summary_markdown(results_dir: Path, rows, strategies, correlations, answer_metrics, notes, correlate_with: str
                     ) -> str:
    from Postprocessing.chunkeval.tables import markdown_correlations, markdown_summary

    display = {s.name: s.display_name for s in registry.specs()}
    md = [f"# Chunk quality: {results_dir}\n", markdown_summary(rows, strategies, display)]
    floor = hope_floor_lines(rows, display)
    if floor:
        md.append("### HOPE against its floor\n\n" + floor)
    if correlations:
        shown = [m for m in correlate_with.split(",") if m in answer_metrics] or answer_metrics
        md.append("### Chunk metrics vs answer metrics\n\n" + markdown_correlations(correlations, shown))
    md.append("### Notes\n\n" + "".join(f"- {n}\n" for n in notes))
    return "\n".join(md)


def write_tables(out_dir: Path, rows, report: str, chunk_frames, per_question, hope_items, correlations, ci
                 ) -> dict[str, Path]:
    """Write every table atomically; returns the paths written."""
    import pandas as pd

    from Postprocessing.chunkeval.tables import to_frame
    from ragstudy import results

    written = {"summary_csv": results.write_table(out_dir, results.CHUNK_QUALITY,
                                                  to_frame(rows).assign(**ci.columns())),  # how its CIs were made
               "summary_md": results.CHUNK_QUALITY_MD.path(out_dir),
               "run_json": results.CHUNK_QUALITY_RUN.path(out_dir),
               "chunks_csv": results.write_table(out_dir, results.CHUNK_QUALITY_CHUNKS,
                                                 pd.concat(chunk_frames, ignore_index=True))}
    common.atomic_write_text(written["summary_md"], report)
    optional = {"questions_csv": (results.CHUNK_QUALITY_QUESTIONS, per_question if len(per_question) else None),
                "hope_csv": (results.CHUNK_QUALITY_HOPE, hope_items),
                "correlation_csv": (results.CHUNK_QUALITY_CORRELATION,
                                    pd.DataFrame([asdict(c) for c in correlations]) if correlations else None)}
    for key, (table, frame) in optional.items():
        if frame is not None:
            written[key] = results.write_table(out_dir, table, frame)
    return written


def judge_chunks(args: ChunkQualitySettings) -> results.Written:
    """`ragstudy chunk-quality`: load and align, compute every section, write the tables; the files it wrote."""
    import pandas as pd

    from ragstudy.scoring.stats import CiSettings

    started = time.perf_counter()
    results_dir = Path(args.results_dir)
    out_dir = Path(args.out_dir or results_dir)
    ci = CiSettings(args.n_resamples, args.seed, args.confidence)
    strategies, references, exports, notes, groundtruth_dir = load_aligned(args, results_dir)
    config = study_config(results_dir, args.profile) if args.tokens == "embedding" or not args.no_hope else None
    if config is not None:
        import torch

        torch.set_num_threads(torch_threads(args.threads))
    token_counter, token_label = make_token_counter(args.tokens, config)
    notes.append(f"tokens: {token_label}")

    rows, chunk_frames = [], []
    for export in exports:
        r, f = intrinsic_rows(export, references, token_counter, args.boundary_tolerance, ci)
        rows += r
        chunk_frames.append(f)
    retrieval, question_frames = retrieval_section(args, results_dir, exports, references, ci, notes)
    hope, hope_items, hope_seconds = hope_section(args, config, exports, references, ci, notes)
    rows += retrieval + hope
    per_question = pd.concat(question_frames, ignore_index=True) if question_frames else pd.DataFrame()
    correlations, answer_metrics = correlation_section(args, results_dir, per_question, notes)

    report = summary_markdown(results_dir, rows, strategies, correlations, answer_metrics, notes,
                              args.correlate_with)
    written = write_tables(out_dir, rows, report, chunk_frames, per_question, hope_items, correlations, ci)
    seconds = time.perf_counter() - started
    info = {"results_dir": str(results_dir), "strategies": strategies, "groundtruth": str(groundtruth_dir),
            "evidence": args.evidence, "boundary_tolerance": args.boundary_tolerance,
            "hit_threshold": args.hit_threshold, "tokens": token_label, "ci": asdict(ci),
            "hope": None if args.no_hope else {**asdict(hope_settings(args)), "documents": args.hope_documents,
                                                "seconds": hope_seconds},
            "seconds": seconds, "notes": notes}
    common.atomic_write_text(written["run_json"], json.dumps(info, indent=2, ensure_ascii=False, default=str))
    common.tell_report(report, out_dir, seconds)
    return results.written_by(out_dir, "chunk-quality")

