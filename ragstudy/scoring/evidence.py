"""Evidence: the evidence files, the text normalisation evidence is matched under, locating evidence in a
strategy's source text, and the character-span metrics of a context against it.

Every reader here raises EvidenceError (a StudyInputError) naming the file and row. The file formats and how
evidence is matched and placed: docs/retrieval.md ("Evidence"); the span metrics' definitions: docs/metrics.md.
"""

from __future__ import annotations

import logging
import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ragstudy.errors import StudyInputError
from ragstudy.io import PROJECT_ROOT
from ragstudy.scoring.groundtruth import load_evidence

logger = logging.getLogger(__name__)

Span = tuple[str, int, int]  # (document key, start, end) on one text per document

MIN_PIECE = 16  # normalised characters: shorter evidence pieces located on their own are likely chance matches
MIN_EVIDENCE = 4  # normalised characters (letters and digits): shorter evidence ("e", "12", "art") occurs almost
# anywhere, so a hit on it means nothing; such a record is refused naming it
NEAR = 4000  # normalised characters after the previous piece where the next piece is looked for first


class EvidenceError(StudyInputError):
    """An evidence file is missing or malformed (the message names the file and row)."""


# ------------------------------------------------------------------------------------------------ span metrics

def merged_length(spans: Iterable[tuple[int, int]]) -> int:
    """Characters covered by the union of [start, end) spans."""
    total, reach = 0, -math.inf  # reach: the furthest end counted so far (spans come sorted by start)
    for start, end in sorted(spans):
        if end > max(start, reach):
            total += end - max(start, reach)
            reach = end
    return total


@dataclass(frozen=True)
class SpanScores:
    recall: float
    precision: float
    iou: float
    intersection: int
    evidence_chars: int
    retrieved_chars: int


def intersection_length(a: Iterable[tuple[int, int]], b: Iterable[tuple[int, int]]) -> int:
    """Characters in both unions of [start, end) intervals."""
    b = list(b)
    return merged_length((max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if min(e1, e2) > max(s1, s2))


def score_spans(evidence: Sequence[Span], retrieved: Sequence[Span], retrieved_chars: int,
                unlocated_chars: int = 0) -> SpanScores:
    """Recall, precision and IoU of `retrieved` spans against `evidence` spans (definitions: docs/metrics.md).
    `retrieved_chars` is Σ len(r) in the same unit as the spans; `unlocated_chars` is evidence that could not be
    placed on the text: it counts in |E| and is never retrieved."""
    documents = {doc for doc, _, _ in evidence}
    intersection, evidence_chars = 0, unlocated_chars
    for doc in documents:
        ev = [(s, e) for d, s, e in evidence if d == doc]
        evidence_chars += merged_length(ev)
        intersection += intersection_length(ev, [(s, e) for d, s, e in retrieved if d == doc])
    recall = intersection / evidence_chars if evidence_chars else 0.0
    precision = intersection / retrieved_chars if retrieved_chars else 0.0
    denominator = retrieved_chars + evidence_chars - intersection
    iou = intersection / denominator if denominator else 0.0
    return SpanScores(recall, precision, iou, intersection, evidence_chars, retrieved_chars)


@dataclass(frozen=True)
class ContextScores:
    """Metrics of one question's context (parents in rank order) against its located evidence."""

    hit: float  # the whole evidence is inside the context
    span_recall: float
    span_precision: float
    span_iou: float
    reciprocal_rank: float  # 1 / rank of the parent that completes the evidence (0: never complete)


def context_scores(evidence: Sequence[Span], parents: Sequence[tuple[Sequence[Span], int]],
                   unlocated_chars: int = 0) -> ContextScores:
    """Score a context given as parents in rank order, each (its spans, its length in the spans' unit). The
    reciprocal rank is 1/r for the first r such that parents 1..r together contain the whole evidence (for evidence
    inside one parent: the rank of the first parent containing it); hit is whether the whole context does."""
    spans = [span for parent_spans, _ in parents for span in parent_spans]
    scores = score_spans(evidence, spans, sum(length for _, length in parents), unlocated_chars)
    complete = scores.evidence_chars > 0 and scores.intersection == scores.evidence_chars
    reciprocal = 0.0
    if complete:
        so_far: list[Span] = []
        for rank, (parent_spans, _) in enumerate(parents, start=1):
            so_far += parent_spans
            if score_spans(evidence, so_far, 1).intersection == scores.evidence_chars:
                reciprocal = 1.0 / rank
                break
    return ContextScores(float(complete), scores.recall, scores.precision, scores.iou, reciprocal)


# ---------------------------------------------------------------------------------------- normalised texts

_QUOTES = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u201c": '"', "\u201d": '"',
           "\u201e": '"', "\u00ab": '"', "\u00bb": '"'}


@lru_cache(maxsize=65536)
def _fold_char(ch: str) -> str:
    """One character -> its letters and digits after NFKC, NFKD without combining marks, case folding."""
    ch = _QUOTES.get(ch, ch)
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", ch))
    return "".join(f for c in decomposed if not unicodedata.combining(c) for f in c.casefold() if f.isalnum())


def normalize_for_match(text: str) -> str:
    """What evidence and contexts are compared on (the rule: docs/retrieval.md, "Evidence")."""
    return "".join(_fold_char(ch) for ch in text)


@dataclass(frozen=True)
class NormalizedText:
    """A text's normalised form and, for each normalised character, its offset in the original."""

    text: str
    offsets: np.ndarray

    @classmethod
    def of(cls, raw: str) -> "NormalizedText":
        folded = [_fold_char(ch) for ch in raw]
        return cls("".join(folded), np.asarray([i for i, f in enumerate(folded) for _ in f], dtype=np.int64))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Normalised interval of the original [start, end)."""
        lo, hi = np.searchsorted(self.offsets, [start, end], side="left")
        return int(lo), int(hi)


def _longest_prefix(needle: str, haystack: str, start: int) -> tuple[int, int]:
    """(length, position) of the longest prefix of `needle` found in `haystack`, preferring [start, start+NEAR)."""
    def find(piece: str) -> int:
        near = haystack.find(piece, start, start + NEAR + len(piece)) if start > 0 else -1
        return near if near >= 0 else haystack.find(piece)

    lo, hi = 0, len(needle) + 1  # found(lo) holds, found(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if find(needle[:mid]) >= 0:
            lo = mid
        else:
            hi = mid
    return lo, (find(needle[:lo]) if lo else -1)


def locate(evidence: str, text: str) -> tuple[list[tuple[int, int]], int]:
    """Place normalised `evidence` on normalised `text`: intervals found (whole, else the longest pieces of at
    least MIN_PIECE characters, left to right) and the number of evidence characters not placed."""
    whole = text.find(evidence)
    if whole >= 0:
        return [(whole, whole + len(evidence))], 0
    pieces: list[tuple[int, int]] = []
    unlocated = pos = cursor = 0
    while pos < len(evidence):
        length, where = _longest_prefix(evidence[pos:], text, cursor)
        tail_nearby = pos + length == len(evidence) and pieces and cursor <= where < cursor + NEAR
        if where >= 0 and (length >= MIN_PIECE or tail_nearby):
            pieces.append((where, where + length))
            cursor, pos = where + length, pos + length
        else:
            unlocated += 1
            pos += 1
    return pieces, unlocated


# ----------------------------------------------------------------------------------------------- evidence

BUNDLED_QUESTIONS = PROJECT_ROOT / "Questions.csv"
BUNDLED_EVIDENCE = PROJECT_ROOT / "sample" / "evidence.json"


def default_evidence(run: Mapping | str | Path | None) -> Path | None:
    """The evidence a run is scored against when none is given, the one rule every stage follows:
    sample/evidence.json when the run answered the bundled Questions.csv, else None (no evidence): evidence is
    never assumed for another questions file. `run`: a run's config.json (its `questions_resolved` or `questions`)
    or the questions file itself."""
    questions = (run.get("questions_resolved") or run.get("questions")) if isinstance(run, Mapping) else run
    if questions and Path(questions).is_file() and BUNDLED_QUESTIONS.is_file() \
            and Path(questions).samefile(BUNDLED_QUESTIONS) and BUNDLED_EVIDENCE.is_file():
        return BUNDLED_EVIDENCE
    return None


@dataclass(frozen=True)
class EvidenceText:
    text: str
    document: str | None  # PDF file name; None: any indexed document


@dataclass(frozen=True)
class QuestionEvidence:
    """Everything a question's answer needs: the context must contain every text (several rows allowed)."""

    question_index: int
    texts: tuple[EvidenceText, ...]


def load_evidence_records(path: str | Path) -> list:
    """`sample/evidence.json` as ragstudy.scoring.groundtruth.EvidenceRecord's (one per Questions.csv row, offsets on
    the ground-truth text)."""
    path = Path(path)
    if not path.is_file():
        raise EvidenceError(f"{path}: evidence file not found; pass --evidence FILE")
    try:
        return load_evidence(path)
    except ValueError as exc:
        raise EvidenceError(str(exc)) from exc


def load_evidence_file(path: str | Path, questions: Sequence[str] | None = None,
                       questions_file: str | Path = "Questions.csv") -> dict[int, QuestionEvidence]:
    """Evidence per answerable question from `sample/evidence.json` (ragstudy.scoring.groundtruth) or a hand-written CSV
    (question_index, evidence (verbatim text), optional pdf and question; several rows per question allowed; other
    columns ignored). Questions without evidence (unanswerable) are absent.

    With `questions` (every row of `questions_file`), each record must belong to them: a question_index past the
    last row is an error naming the evidence file and row, and so is a question text (the JSON's `question`, the
    CSV's optional `question` column) that differs from that row's, so evidence is never scored against another
    questions file (same questions in another order included)."""
    path = Path(path)
    if not path.is_file():
        raise EvidenceError(f"{path}: evidence file not found; pass --evidence FILE (.json or .csv)")
    if path.suffix.lower() == ".json":
        records = load_evidence_records(path)
        if questions is not None:
            for i, r in enumerate(records):
                _check_question(f"{path} record {i}", r.question_index, r.question, questions, questions_file)
        for i, r in enumerate(records):
            for e in r.evidence if r.answerable else ():
                check_long_enough(e.text, f"{path} record {i} (question_index {r.question_index})")
        return {r.question_index: QuestionEvidence(r.question_index, tuple(EvidenceText(e.text, r.document)
                                                                          for e in r.evidence))
                for r in records if r.answerable and r.evidence}
    return _load_evidence_csv(path, questions, questions_file)


def check_long_enough(text: str, where: str) -> None:
    """An EvidenceError naming `where` when `text` has letters or digits but fewer than MIN_EVIDENCE of them: such
    evidence occurs almost anywhere, and a hit on it means nothing."""
    found = normalize_for_match(text)
    if found and len(found) < MIN_EVIDENCE:
        raise EvidenceError(f"{where}: evidence {text.strip()!r} has {len(found)} letter(s) or digit(s), fewer than "
                            f"the {MIN_EVIDENCE} a passage needs to mean anything (it occurs almost anywhere); copy "
                            "the sentence that answers the question from the PDF, or delete the row (a question "
                            "without evidence counts as unanswerable)")


EVIDENCE_OUTSIDE_NAMED = 5  # questions a warning about evidence in PDFs outside the run names one by one


def check_evidence_pdfs(evidence: Mapping[int, QuestionEvidence], pdf_names: Iterable[str], evidence_path: str | Path,
                        run: str) -> list[int]:
    """The questions whose evidence names a PDF that is not among the run's `pdf_names` (such a question is left out
    of the evidence metrics: ragstudy.scoring.budget_eval), after one warning naming the evidence file, those questions
    and the PDFs. When that is every question with evidence, an EvidenceError: nothing could be scored."""
    names = {Path(name).name for name in pdf_names}
    outside = {index: pdfs for index, item in sorted(evidence.items())
               if (pdfs := sorted({t.document for t in item.texts if t.document and t.document not in names}))}
    if not outside:
        return []
    pdfs = ", ".join(sorted({pdf for found in outside.values() for pdf in found}))
    if len(outside) == len(evidence):
        raise EvidenceError(f"{evidence_path}: the evidence of every question names a PDF that is not in {run} "
                            f"({pdfs}), so none can be scored; pass the run's own evidence file, or run with those "
                            "PDFs in --documents")
    shown = ", ".join(str(index) for index in list(outside)[:EVIDENCE_OUTSIDE_NAMED])
    more = f" and {len(outside) - EVIDENCE_OUTSIDE_NAMED} more" if len(outside) > EVIDENCE_OUTSIDE_NAMED else ""
    logger.warning("%s: the evidence of %d of %d questions (question_index %s%s) names a PDF that is not in %s (%s): "
                   "those questions are left out of the evidence scores; add the PDFs to --documents and re-run, "
                   "or fix the evidence's pdf column", evidence_path, len(outside), len(evidence), shown, more, run,
                   pdfs)
    return list(outside)


def _check_question(where: str, index: int, text: str | None, questions: Sequence[str],
                    questions_file: str | Path) -> None:
    """`index` is a row of `questions` and, when the evidence carries its question's text, that row's text."""
    from ragstudy.grid.records import normalize_ws, short

    if index >= len(questions):
        raise EvidenceError(f"{where}: question_index {index} is not a row of {questions_file} ({len(questions)} "
                            "questions, 0-based): the evidence belongs to another questions file; pass the run's "
                            "evidence with --evidence, or fix the row")
    if text and normalize_ws(text) != normalize_ws(questions[index]):
        raise EvidenceError(f"{where}: question {index} is {short(text, 60)!r} but row {index} of {questions_file} is "
                            f"{short(questions[index], 60)!r}: the evidence belongs to another questions file (or "
                            "another order); pass the matching --evidence or --questions")


def _load_evidence_csv(path: Path, questions: Sequence[str] | None,
                       questions_file: str | Path) -> dict[int, QuestionEvidence]:
    from ragstudy.grid.records import read_strict_csv

    try:
        table = read_strict_csv(path, ("question_index", "evidence"),
                                "the hand-written evidence format question_index,evidence[,pdf]")
    except StudyInputError as exc:
        raise EvidenceError(str(exc)) from None
    texts: dict[int, list[EvidenceText]] = {}
    for line, row in table.records():
        where = f"{path} line {line}"
        raw = row["question_index"].strip()
        if not raw.isdigit():
            raise EvidenceError(f"{where}: question_index {row['question_index']!r} is not a 0-based row number "
                                "of Questions.csv")
        index = int(raw)
        if questions is not None:
            _check_question(where, index, row.get("question", "").strip() or None, questions, questions_file)
        evidence = row["evidence"]
        if not normalize_for_match(evidence):
            raise EvidenceError(f"{where}: empty evidence (no letters or digits); fill it in or delete the row "
                                "(a question without rows counts as unanswerable)")
        check_long_enough(evidence, where)
        pdf = (row.get("pdf") or "").strip()
        texts.setdefault(index, []).append(EvidenceText(evidence, Path(pdf).name if pdf else None))
    if not texts:
        raise EvidenceError(f"{path}: no evidence rows under the header")
    return {i: QuestionEvidence(i, tuple(t)) for i, t in sorted(texts.items())}


# ------------------------------------------------------------------------------- evidence on a strategy's text

@dataclass(frozen=True)
class LocatedEvidence:
    spans: tuple[Span, ...]  # on the normalised source texts, keyed by source path
    unlocated: int  # normalised evidence characters not found in the strategy's text
    documents_missing: bool  # an evidence document is not among the strategy's sources


class SourceIndex:
    """A strategy's source texts, normalised once, to place evidence and parents on."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.paths = sorted(sources)
        self.raw = dict(sources)
        self._normalized: dict[str, NormalizedText] = {}
        self.by_name: dict[str, list[str]] = {}
        for p in self.paths:
            self.by_name.setdefault(Path(p).name, []).append(p)

    def normalized(self, path: str) -> NormalizedText:
        if path not in self._normalized:
            self._normalized[path] = NormalizedText.of(self.raw[path])
        return self._normalized[path]

    def span(self, path: str, start: int, end: int) -> tuple[Span, int]:
        """A raw [start, end) of `path` as a normalised span, and its normalised length."""
        lo, hi = self.normalized(path).span(start, end)
        return (path, lo, hi), hi - lo

    def locate(self, evidence: QuestionEvidence) -> LocatedEvidence:
        spans: list[Span] = []
        unlocated = 0
        missing = False
        for item in evidence.texts:
            needle = normalize_for_match(item.text)
            candidates = self.by_name.get(item.document, []) if item.document else self.paths
            if item.document and not candidates:
                missing = True
                unlocated += len(needle)
                continue
            best: tuple[int, list[tuple[int, int]], str] | None = None
            for path in candidates:
                pieces, lost = locate(needle, self.normalized(path).text)
                if best is None or lost < best[0]:
                    best = (lost, pieces, path)
                if lost == 0:
                    break
            lost, pieces, path = best if best is not None else (len(needle), [], "")
            unlocated += lost
            spans += [(path, s, e) for s, e in pieces]
        return LocatedEvidence(tuple(spans), unlocated, missing)
