"""Retrieval-only runs: chunk (cached, pipeline.chunk_cached), index and rank the parents of every question deep
enough to fill the largest context budget with the variant's retriever (ragstudy/retrievers/), marking the parents
of the paper's k (`in_k`), and write `retrieval_<strategy>.csv`; ragstudy.scoring.budget_eval packs and scores the
budgets (docs/retrieval.md). run_retrieval runs each variant of the grid (ragstudy.grid.variants) through an
executor into `<output-dir>/variants/<id>/` and lists them in `<output-dir>/variants.csv`.
"""

from __future__ import annotations

import inspect
import sqlite3
import json
import logging
import math
import statistics
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Callable, Sequence

from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.grid import axes
from ragstudy.grid.embedahead import AheadReport, shared_embedding
from ragstudy.grid.executors import Executor, Task, capped, check_executor, pending, run_tasks
from ragstudy.grid.records import RetrievedParent, Variant
from ragstudy.grid.variants import variant_config
from ragstudy.pipeline import (StageSettings, StrategyReport, check_question_lengths, check_vector_store,
                               chunk_cache_path, chunk_cached, chunking_ahead, code_hash_of, model_labels, run_facts)
from ragstudy.results import VARIANT_RUN, ResultsFolder, read_questions, write_config, write_retrieval
from ragstudy.scoring.budgets import CHARS, Measure, llm_measure
from ragstudy.text.textlayer import load_documents

logger = logging.getLogger(__name__)


@dataclass
class RetrievalRun:
    """What one strategy (or one sweep configuration) did in a retrieval-only run."""

    strategy: str
    documents: int
    chunks: int
    chars_mean: float
    chars_cv: float
    index_seconds: float
    embedded: int
    reused: int
    outputs: list[str] = field(default_factory=list)
    # stage -> (wall seconds, CPU seconds of this process and its finished children): chunk, index, rank
    stages: dict[str, tuple[float, float]] = field(default_factory=dict)


def stage_clock() -> tuple[float, float]:
    """(wall clock, CPU seconds used so far by this process and its reaped children, e.g. chunking workers)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), time.process_time() + children.ru_utime + children.ru_stime


def stage_since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) since `start`, a stage_clock() reading."""
    now = stage_clock()
    return now[0] - start[0], now[1] - start[1]


def chunk_length_stats(chunked) -> tuple[int, float, float]:
    """(chunks, mean length, coefficient of variation of the length) of the parents, in characters."""
    lengths = [len(chunk.contents) for item in chunked for chunk in item.chunks]
    if not lengths:
        return 0, math.nan, math.nan
    mean = statistics.fmean(lengths)
    cv = statistics.pstdev(lengths) / mean if mean else math.nan
    return len(lengths), mean, cv


def _ranking_cache_path(collection: str, params, questions: Sequence[str], largest: int, measure: Measure,
                        retriever: str = "dense", lexical_key: str | None = None) -> Path:
    """The rankings' cache file (`collection`: a hash of the parents, child windows and embedding model)."""
    from ragstudy import lexical, retrievers
    from ragstudy.io import cache_dir, sha256_text, stable_json
    from ragstudy.retrievers.dense import INITIAL_DEPTH
    from ragstudy.stores import knowledge_base

    member = Path(inspect.getsourcefile(retrievers.get(retriever).make) or __file__)
    code = code_hash_of(Path(knowledge_base.__file__), Path(lexical.__file__), Path(__file__),
                        Path(retrievers.__file__).parent, member)
    key = sha256_text(stable_json({"collection": collection, "k": params.k, "largest": largest,
                                   "unit": [measure.unit, measure.name], "questions": list(questions), "code": code,
                                   "tie": knowledge_base.TIE_DECIMALS, "search": "exact", "depth": INITIAL_DEPTH,
                                   "retriever": retriever, "lexical": lexical_key}))
    suffix = "" if retriever == "dense" else f"-{retriever}"
    return cache_dir() / "rankings" / f"{collection}{suffix}-{key[:24]}.json"


def _read_rankings(path: Path, count_key: str, questions: int) -> tuple[list[RetrievedParent], int] | None:
    """(rows, children or units) of a ranking cache, None when absent; a damaged one is set aside and rebuilt."""
    from ragstudy.results import RETRIEVAL_COLUMNS
    from ragstudy.stores.cachefile import json_object, read_json

    def parse(data: Any) -> tuple[list[RetrievedParent], int]:
        data = json_object(data, ("rows", count_key), "the file")
        count = data[count_key]
        if not isinstance(data["rows"], list) or not isinstance(count, int) or count < 0:
            raise ValueError(f"rows must be a list and {count_key} a count")
        rows = [RetrievedParent.from_dict(json_object(r, RETRIEVAL_COLUMNS, "a row", scalars=True))
                for r in data["rows"]]
        if any(not 0 <= r.question_index < questions for r in rows):
            raise ValueError("a question index is out of range")
        return rows, count

    return read_json(path, parse, "ranking cache")


def retrieve_strategy(stage: StageSettings, documents, questions: Sequence[str], embedding: Callable[[], Any],
                      output_dir: Path, measure: Measure = CHARS) -> RetrievalRun:
    """Chunk, export, index and rank one strategy with `stage.retriever`; write chunks_/sources_/retrieval_<strategy>
    into output_dir. Rankings are cached (_ranking_cache_path): a warm re-run neither opens Chroma nor loads the
    model, and reports every unit as reused (where the retriever embeds)."""
    from tqdm.auto import tqdm

    from ragstudy import registry, retrievers
    from ragstudy.io import atomic_write_text
    from ragstudy.results import write_chunks
    from ragstudy.stores.knowledge_base import collection_name

    strategy, params, largest = stage.strategy, stage.params, stage.largest
    member = retrievers.get(stage.retriever)
    started = time.perf_counter()
    clock = stage_clock()
    chunked = chunk_cached(stage, documents, embedding)
    stages = {"chunk": stage_since(clock)}
    outputs = [str(p) for p in write_chunks(chunked, strategy, output_dir)]
    collection = collection_name(registry.get(strategy), params, chunked, stage.embedder.model_id())
    ranker = member.make(retrievers.RetrievalInputs(stage, chunked, embedding))
    cache = _ranking_cache_path(collection, params, questions, largest, measure, member.name, ranker.cache_key())
    cached = _read_rankings(cache, "units", len(questions))
    if cached is not None:
        rows, units = cached
        embedded, reused, index_seconds = 0, units if member.vectors else 0, time.perf_counter() - started
        logger.info("%s: %s rankings of %d questions read from %s", strategy, member.name, len(questions), cache)
    else:
        clock = stage_clock()
        report = ranker.index()
        index_seconds = time.perf_counter() - started
        stages["index"] = stage_since(clock)
        embedded, reused = report.embedded, report.reused
        rows = []
        clock = stage_clock()
        label = strategy if member.name == "dense" else f"{strategy} ({member.name})"
        known = {str(chunk.doc_id) for item in chunked for chunk in item.chunks}
        for index, question in enumerate(tqdm(questions, desc=f"Ranking {label}", unit="question")):
            rows += checked_rows(rank_one(ranker, member, question, index, largest, measure, strategy), known,
                                 member.name, index, strategy)
        stages["rank"] = stage_since(clock)
        atomic_write_text(cache, json.dumps({"units": report.units, "retriever": member.name,
                                             "rows": [r.to_dict() for r in rows]}, ensure_ascii=False))
    outputs.append(str(write_retrieval(rows, output_dir, strategy)))
    chunks, chars_mean, chars_cv = chunk_length_stats(chunked)
    return RetrievalRun(strategy, len(documents), chunks, chars_mean, chars_cv, index_seconds, embedded, reused,
                        outputs, stages)


def rank_one(ranker: Any, member: Any, question: str, index: int, largest: int, measure: Measure, strategy: str
             ) -> list:
    """One question's ranking, as a list (any iterable `rank` returns is read here); a retriever from outside the
    repository (a plug-in) that raises is one StudyInputError naming it, the question and the fix (a built-in
    member's errors keep their own handling)."""
    try:
        rows = ranker.rank(question, index, largest, measure)
        return list(rows) if isinstance(rows, Iterable) else rows  # a generator runs here, inside the try
    except StudyInputError:
        raise
    except Exception as exc:
        module = getattr(member.make, "__module__", "") or ""
        if module.split(".")[0] == "ragstudy":
            raise
        raise StudyInputError(f"retriever {member.name!r} (module {module}) failed on question {index} ({strategy}): "
                              f"{type(exc).__name__}: {exc}. Fix the retriever, or rank with another --retriever; "
                              f"no retrieval file was written for {strategy}") from None


def checked_rows(rows: Any, known: set[str], retriever: str, index: int, strategy: str) -> list:
    """A retriever's rows for question `index`, or a StudyInputError naming it, the question and the bad row."""
    where = f"retriever {retriever!r}, question {index} ({strategy})"
    fix = "fix the retriever's rank, or rank with another --retriever"
    if not isinstance(rows, list):  # rank_one made any iterable a list
        raise StudyInputError(f"{where}: rank returned {repr(rows)[:80]}, not a list of RetrievedParent; {fix}")
    for row in rows:
        if not isinstance(row, RetrievedParent) or row.question_index != index:
            raise StudyInputError(f"{where}: rank returned {str(row)[:80]!r}, not a RetrievedParent of this "
                                  f"question; {fix}")
        if row.doc_id not in known:
            raise StudyInputError(f"{where}: rank returned parent {row.doc_id!r}, not one of {strategy}'s "
                                  f"{len(known)} parents; {fix}")
        if not math.isfinite(float(row.score)):
            raise StudyInputError(f"{where}: rank scored parent {row.doc_id} {row.score}, not a finite number; {fix}")
    return rows


@dataclass(frozen=True)
class VariantSpec:
    """What one variant's run needs besides its inputs (documents, questions): the variant, its StudyConfig (the
    driver's paths, written into its config.json) and the run's facts (PDF hashes, models, date) as JSON."""

    variant: Variant
    config: StudyConfig
    facts: str


def run_variant(spec: VariantSpec, output_dir: Path, inputs: dict[str, Path]) -> None:
    """One variant's complete retrieval run into `output_dir` (config.json, run identity, chunk tables, rankings and
    variant_run.json), from `inputs` only: an executor runs it here, in a worker or as a Ray task."""
    from ragstudy.grid import runidentity
    from ragstudy.io import atomic_write_json
    from ragstudy.stores.knowledge_base import chroma_clients_closed

    config = spec.config
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    documents = load_documents(Path(inputs["documents"]))
    questions = read_questions(inputs["questions"], config.limit)
    write_config(output_dir, config, {**json.loads(spec.facts), "model_labels": model_labels(config),
                                      "variant": spec.variant.to_row()})
    strategy = spec.variant.strategy
    try:
        with chroma_clients_closed():
            run = retrieve_strategy(StageSettings.of(config, strategy), documents, questions,
                                    shared_embedding(config), output_dir, llm_measure(config))
    except StudyInputError:
        raise
    except (OSError, sqlite3.Error) as exc:  # a store that failed without naming itself: still one line, by id
        raise StudyInputError(unnamed_store_message(exc)) from exc
    runidentity.record(output_dir, config, questions, strategy, run.outputs)
    atomic_write_json(output_dir / VARIANT_RUN.name, {**asdict(run), "outputs": [Path(o).name for o in run.outputs]})


def relocate_variant(files: dict[str, bytes], paths: dict[str, str]) -> dict[str, bytes]:
    """A variant's files from a Ray worker with the driver's paths, run_identity.json's sha256s made again for them."""
    from ragstudy.grid.executors import translate
    from ragstudy.grid.runidentity import rehash

    return rehash(translate(files, paths))


def unnamed_store_message(exc: BaseException) -> str:
    """One line for a store failure that no layer named (the vector cache's SQLite, a stray OSError)."""
    from ragstudy.errors import store_error

    if isinstance(exc, sqlite3.Error):
        from customembedding import CACHE_FILE
        from ragstudy.io import cache_dir

        return str(store_error("vector cache", cache_dir() / "vectors" / CACHE_FILE, "reading or writing it failed",
                               exc, "its vectors are embedded again"))
    return str(store_error("file", getattr(exc, "filename", None) or "(unnamed)", "cannot be read or written", exc))


def read_variant_run(folder: Path) -> RetrievalRun:
    """A variant folder's variant_run.json (run_variant wrote it)."""
    data = json.loads((Path(folder) / VARIANT_RUN.name).read_text(encoding="utf-8"))
    data["stages"] = {k: tuple(v) for k, v in data.get("stages", {}).items()}
    data["outputs"] = [str(Path(folder) / name) for name in data.get("outputs", [])]
    return RetrievalRun(**data)


@dataclass(frozen=True)
class GridRun:
    """What a retrieval-only run over a grid wrote: the variants, their folders and what each run did."""

    output_dir: Path
    variants: tuple[Variant, ...]
    folders: dict[str, Path]
    runs: dict[str, RetrievalRun]
    ahead: AheadReport = field(default_factory=AheadReport)  # the embed-ahead phase (ragstudy.grid.embedahead)

    def windows_embedded(self) -> int:
        """Passages (child windows, parents) run through a model by the whole run: in the embed-ahead phase, and
        by the variants themselves (what that phase left to them)."""
        return self.ahead.passages_embedded + sum(run.embedded for run in self.runs.values())

    def embedded_for(self, variant_id: str) -> int:
        """The passages embedded for one variant: by itself, and by the embed-ahead phase for it (the texts it
        would have embedded first, run in-process without that phase)."""
        return self.runs[variant_id].embedded + self.ahead.by_variant.get(variant_id, 0)

    def reports(self) -> list[StrategyReport]:
        per_strategy = len(self.variants) == len({v.strategy for v in self.variants})
        return [StrategyReport(v.strategy if per_strategy else v.id, r.documents, r.chunks,
                               embedded=self.embedded_for(v.id), reused=r.reused - self.ahead.by_variant.get(v.id, 0),
                               outputs=r.outputs)
                for v in self.variants for r in [self.runs[v.id]]]


def run_retrieval(config: StudyConfig, sweep: Any = None, executor: Executor | None = None) -> GridRun:
    """Every variant of the run's grid (grid.variants.expand) ranked retrieval-only into `<output-dir>/variants/<id>/`
    by `executor` (default: the config's). A variant that fails is named after the others have run (they are kept;
    a re-run computes only what is missing or was done under another key)."""
    from ragstudy.grid.variants import expand

    grid = expand(config, sweep)
    executor = executor or config.executor()
    check_executor(executor)  # a Ray address where no head node answers: one line, before anything is read or written
    documents = load_documents(Path(config.documents))
    questions = read_questions(config.questions, config.limit)
    first = variant_config(config, grid[0], config.output_dir)
    check_vector_store(first)  # a Chroma server that is down stops the run before anything is written or chunked
    check_question_lengths(first)  # after the fail-fast checks: it may load the embedding model's tokenizer
    folder = ResultsFolder(config.output_dir, config.documents).prepare()  # locked before anything is written in it
    try:
        return _run_grid(config, grid, documents, questions, folder.path, executor)
    finally:
        folder.release()


def merged_grid(output_dir: Path, grid: Sequence[Variant], config: StudyConfig,
                documents: dict[str, str] | None = None) -> list[Variant]:
    """The folder's variants after this run: its own list when that holds this run's variants (a narrower re-run),
    else this run's plus those listed whose every axis value is n/a or one this run has. A StudyInputError names a
    listed variant under a value this run lacks (it would be compared with this run's), one kept that ran over other
    documents (`documents`: PDF name -> sha256), and a row its own record contradicts (check_variant_records)."""
    from ragstudy.config import option_of
    from ragstudy.grid.variants import run_axes
    from ragstudy.results import VARIANTS, check_variant_records, read_variants

    listed = read_variants(output_dir)
    ids = {v.id for v in grid}
    check_variant_records(output_dir, listed, skip=ids)  # this run's own variants are written again
    kept = [v for v in listed if v.id not in ids]
    _check_documents(output_dir, kept, documents)
    if all(v in listed for v in grid):
        return listed
    has = {name: {*values, *(v.value(name) for v in grid)} for name, values in run_axes(config).items()}
    for v in kept:
        lacking = [(name, value) for name, value in v.values if value != "n/a" and value not in has.get(name, {value})]
        if lacking:
            name, value = lacking[0]
            axis = axes.get(name)
            new = ", ".join(sorted(ids - {x.id for x in listed}))
            raise StudyInputError(
                f"{output_dir}: {VARIANTS.name} lists the variant {v.id} ({axis.word} {value}), and this run adds "
                f"{new} without that {axis.word} (its {axis.word}s: {', '.join(sorted(has[name]))}): one folder "
                f"holds one grid. Add {value} to {option_of(axis.setting)}, give this run its own --output-dir, or "
                "move those files away")
    return [*grid, *kept]


def _check_documents(output_dir: Path, kept: Sequence[Variant], documents: dict[str, str] | None) -> None:
    """The variants left in place ran over this run's documents (PDF names and sha256), else a StudyInputError."""
    from ragstudy.results import VARIANTS, documents_difference, recorded_documents, variant_folder

    elsewhere = [(v, found) for v in kept for found in [recorded_documents(variant_folder(output_dir, v.id))]
                 if documents is not None and found is not None and found != documents]
    if elsewhere:
        difference = documents_difference((elsewhere[0][0].id, elsewhere[0][1]), ("this run", documents))
        ids = [v.id for v, _ in elsewhere]
        shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        raise StudyInputError(f"{output_dir}: holds the variants {shown} "
                              f"({VARIANTS.name}) run over other documents than this run's ({difference}); they "
                              "would be compared as one run. Give this run its own --output-dir, run those variants' "
                              "strategies too, or move those files away")


def _run_grid(config: StudyConfig, grid: Sequence[Variant], documents, questions: Sequence[str], output_dir: Path,
              executor: Executor | None) -> GridRun:
    """run_retrieval's work once the output folder is locked: one executors.Task per variant, keyed by what
    determines its files (runidentity.variant_key), so that a finished variant is skipped only under the same key."""
    import pandas as pd

    from ragstudy.grid import embedahead, runidentity
    from ragstudy.grid.executors import session
    from ragstudy.grid.variants import variant_config as config_of
    from ragstudy.results import VARIANTS, check_layout, variant_folder, write_table

    check_layout(output_dir)  # an earlier version's layout is never mixed into this one
    listed = merged_grid(output_dir, grid, config, {Path(d.path).name: d.sha256 for d in documents})
    folders = {v.id: variant_folder(output_dir, v.id) for v in grid}
    configs = {v.id: config_of(config, v, folders[v.id]) for v in grid}
    for v in grid:  # never beside another configuration's files
        runidentity.check_output_folder(folders[v.id], configs[v.id], questions)
    facts = run_facts(config, documents)
    write_config(output_dir, config, facts)
    write_table(output_dir, VARIANTS, pd.DataFrame([v.to_row() for v in listed]))
    facts_json = json.dumps(facts, ensure_ascii=False, default=str)
    inputs = {"documents": Path(config.documents), "questions": Path(config.questions)}
    code = runidentity.code_hash()
    tasks = [Task(v.id, run_variant, VariantSpec(v, configs[v.id], facts_json), folders[v.id], inputs,
                  runidentity.variant_key(configs[v.id], questions, facts, v.to_row(), code), relocate_variant)
             for v in grid]
    todo = {task.id for task in pending(tasks)}
    executor = capped(executor or config.executor(), len(todo))  # never more worker processes than variants to run

    def not_cached(strategy: str) -> bool:  # the slow bulk step (markdown's PDF conversion) of a variant to compute
        return any(v.strategy == strategy and v.id in todo and
                   not chunk_cache_path(StageSettings.of(configs[v.id], strategy), documents).is_file() for v in grid)

    with chunking_ahead(config, documents, not_cached) if executor.kind == "inprocess" else nullcontext(), \
            session(executor) if todo else nullcontext():  # the same processes embed ahead, then run the variants
        ahead = embedahead.run([v for v in grid if v.id in todo], configs, questions, executor,
                               lambda cfg, strategy: chunk_cached(StageSettings.of(cfg, strategy), documents,
                                                                  shared_embedding(cfg)))
        outcomes = run_tasks(tasks, executor)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        named = "; ".join(str(o.error) for o in failed)  # each "variant <id>: <error>"
        raise StudyInputError(f"{len(failed)} of {len(grid)} variants failed ({named}); the others are kept in "
                              f"{output_dir / 'variants'}: fix the cause and re-run the same command (only what is "
                              "missing is computed)")
    runs = {v.id: read_variant_run(folders[v.id]) for v in grid}
    for vid in set(runs) - todo:  # done earlier under the same key: this run embedded nothing for it
        runs[vid] = replace(runs[vid], embedded=0, reused=runs[vid].reused + runs[vid].embedded, index_seconds=0.0,
                            stages={})
    return GridRun(output_dir, tuple(grid), folders, runs, ahead)
