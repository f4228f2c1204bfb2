"""The study: chunk every PDF with each strategy, index it, answer every question, write the paper's Dataset files."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from . import registry
from .chunks import ChunkedDocument, export_chunks
from .config import StudyConfig
from .errors import StudyInputError
from .io import atomic_write_json, atomic_write_text
from .models import embedding_tokenizer, make_embedding, make_generator, model_label
from .textlayer import PdfDocument, load_documents

logger = logging.getLogger(__name__)

QUESTION_COLUMN = "questions"


def read_questions(path: str | Path, limit: int | None = None) -> list[str]:
    """Questions from the `questions` column; errors name the file and row."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise StudyInputError(f"{path}: questions file not found. Pass --questions FILE (a CSV with a "
                              f"'{QUESTION_COLUMN}' column).")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise StudyInputError(f"{path}: the file is empty; it needs a header '{QUESTION_COLUMN}' and one question "
                              "per row.") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise StudyInputError(f"{path}: not a readable UTF-8 CSV ({exc})") from exc
    if QUESTION_COLUMN not in frame.columns:
        raise StudyInputError(f"{path}: no '{QUESTION_COLUMN}' column (found: {', '.join(map(str, frame.columns))}). "
                              f"Rename the column holding the questions to '{QUESTION_COLUMN}'.")
    questions = [str(q).strip() for q in frame[QUESTION_COLUMN]]
    if not questions:
        raise StudyInputError(f"{path}: no questions (the '{QUESTION_COLUMN}' column is empty).")
    for index, question in enumerate(questions):
        if not question:
            raise StudyInputError(f"{path}: row {index + 1} (line {index + 2}) has an empty question. Fill it in "
                                  "or delete the row.")
    return questions[:limit] if limit else questions


def chunker_context(config: StudyConfig) -> registry.ChunkerContext:
    """What chunkers may ask for: the study's embedding model, loaded on first request and then reused."""
    loaded: dict[str, object] = {}

    def embedding():
        if "embedding" not in loaded:
            loaded["embedding"] = make_embedding(config)
        return loaded["embedding"]

    def tokenizer():
        if "tokenizer" not in loaded:
            loaded["tokenizer"] = embedding_tokenizer(config)
        return loaded["tokenizer"]

    return registry.ChunkerContext(embedding=embedding, tokenizer=tokenizer,
                                   embedding_label=model_label(config.profile.embedding))


def chunk_documents(documents: Sequence[PdfDocument], strategy: str, config: StudyConfig) -> list[ChunkedDocument]:
    from tqdm.auto import tqdm

    spec = registry.get(strategy)
    chunker = spec.make_chunker(config.strategy_params[strategy], chunker_context(config))
    return [chunker.chunk(doc, strategy) for doc in tqdm(documents, desc=f"Chunking {strategy}", unit="pdf",
                                                          disable=len(documents) < 2)]


def index_strategy(config: StudyConfig, strategy: str, chunked: Sequence[ChunkedDocument], embedding):
    """Index a strategy's chunks; returns (ParentDocumentRetriever, IndexStats)."""
    from .knowledge_base import KnowledgeBase

    spec = registry.get(strategy)
    db_dir = Path(config.db_dir) / spec.folder if config.db_dir else None
    kb = KnowledgeBase(spec, config.strategy_params[strategy], embedding, embedding.model_id, db_dir=db_dir)
    return kb.build(chunked)


def build_retriever(config: StudyConfig, strategy: str):
    """Read the documents, chunk and index them with one strategy; returns (retriever, IndexStats)."""
    documents = load_documents(Path(config.documents))
    return index_strategy(config, strategy, chunk_documents(documents, strategy, config), make_embedding(config))


def build_prompt(template: str, context: str, query: str) -> str:
    # replace, not str.format: questions and contexts may contain braces
    return template.replace("{context}", context).replace("{query}", query)


@dataclass
class StrategyReport:
    strategy: str
    documents: int
    chunks: int
    embedded: int = 0
    reused: int = 0
    generated: int = 0
    cached: int = 0
    outputs: list[str] = field(default_factory=list)


def answer_questions(retriever, generator, questions: Sequence[str], template: str, strategy: str) -> list[dict]:
    from tqdm.auto import tqdm

    rows = []
    for index, question in enumerate(tqdm(questions, desc=f"Answering {strategy}", unit="question")):
        docs = retriever.invoke(question)
        contexts = [doc.page_content for doc in docs]
        answer = generator(build_prompt(template, "\n\n".join(contexts), question))
        if not answer:
            logger.warning("%s: empty answer to question %d", strategy, index)
        sources = [{"doc_id": doc.id or doc.metadata.get("doc_id"), "path": doc.metadata.get("path"),
                    "page_start": doc.metadata.get("page_start"), "page_end": doc.metadata.get("page_end")}
                   for doc in docs]
        rows.append({"question_index": index, "question": question, "answer": answer, "contexts": contexts,
                     "sources": sources, "strategy": strategy})
    return rows


def write_dataset(rows: list[dict], output_dir: Path, dataset_name: str) -> list[Path]:
    """Write `<dataset_name>.json` and `.csv` (lists JSON-encoded in CSV cells), atomically."""
    import pandas as pd

    json_path, csv_path = output_dir / f"{dataset_name}.json", output_dir / f"{dataset_name}.csv"
    atomic_write_json(json_path, rows)
    flat = [{**row, "contexts": json.dumps(row["contexts"], ensure_ascii=False),
             "sources": json.dumps(row["sources"], ensure_ascii=False)} for row in rows]
    columns = ["question_index", "question", "answer", "contexts", "sources", "strategy"]
    atomic_write_text(csv_path, pd.DataFrame(flat, columns=columns).to_csv(index=False))
    return [csv_path, json_path]


def run_study(config: StudyConfig) -> list[StrategyReport]:
    """Run every configured strategy end to end; returns what each did (for the summary and tests)."""
    import torch

    torch.set_num_threads(config.resolved_threads())
    output_dir = Path(config.output_dir)
    documents = load_documents(Path(config.documents))
    questions = [] if config.chunks_only else read_questions(config.questions, config.limit)
    resolved = config.to_dict()
    resolved["documents_sha256"] = {doc.path: doc.sha256 for doc in documents}
    resolved["model_labels"] = {"llm": model_label(config.profile.llm),
                                "embedding": model_label(config.profile.embedding)}
    atomic_write_json(output_dir / "config.json", resolved)
    embedding = generator = None
    reports = []
    for strategy in config.strategies:
        chunked = chunk_documents(documents, strategy, config)
        report = StrategyReport(strategy, len(documents), sum(len(c.chunks) for c in chunked))
        report.outputs += [str(p) for p in export_chunks(chunked, strategy, output_dir)]
        if not config.chunks_only:
            embedding = embedding or make_embedding(config)
            generator = generator or make_generator(config)
            retriever, stats = index_strategy(config, strategy, chunked, embedding)
            report.embedded, report.reused = stats.embedded, stats.reused
            before = (generator.generated, generator.cached)
            rows = answer_questions(retriever, generator, questions, config.prompt_template, strategy)
            report.generated, report.cached = generator.generated - before[0], generator.cached - before[1]
            report.outputs += [str(p) for p in write_dataset(rows, output_dir, registry.get(strategy).dataset_name)]
        reports.append(report)
    return reports
