"""make-qa: generate a question set with verbatim evidence and answers from the PDFs in a folder.

    ragstudy make-qa --documents Documents/ --n 60 --llm-server http://gpu:8000 \\
        --llm-server-model anakin87/Phi-3.5-mini-ITA --out qa/
    ragstudy make-qa --documents Documents/ --n 20 --profile paper --out qa/      # in-process, on CUDA
    ragstudy make-qa --out qa/ --read-review qa/review.xlsx                        # write the accepted set

Writes Questions.csv, Oracle.csv, evidence.csv, make_qa.json, candidates.jsonl, qa_report.md and review.xlsx into
--out. Answers are cached like the study's: a re-run generates nothing, an interrupted run resumes. Exit 0 when
at least one item was kept, 3 when none was (the report says why), 2 on bad input, 130 on Ctrl-C.
See docs/make-qa.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.io import tell
from ragstudy.qagen.filters import Thresholds
from ragstudy.results import QA_REPORT, Written, written_by

DEFAULTS = Thresholds()
NONE_KEPT = 3
# the study's settings make-qa takes, by name (flags as the study's: llm_servers is --llm-server)
STUDY_FLAGS = ("documents", "profile", "llm", "device", "dtype", "threads", "llm_servers", "llm_server_model",
               "concurrency", "llm_timeout", "llm_engine")
DEFAULT_DOCUMENTS = "Documents"


def _number(convert: Callable[[str], Any], kind: str, fits: Callable[[Any], bool], outside: str,
            hint: str) -> Callable[[str], Any]:
    """An argparse type: the value read by `convert`, refused unless it `fits` (a filter threshold outside 0..1
    would be silently off: a copy threshold of 5 drops nothing, an answer support of -1 keeps everything)."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}; {hint}") from None
        if not fits(value):  # NaN too
            raise argparse.ArgumentTypeError(f"{text} {outside}; {hint}")
        return value

    return parse


share = _number(float, "a number", lambda v: 0.0 <= v <= 1.0, "is outside 0..1", "give a share from 0 to 1, e.g. 0.5")
count = _number(int, "a whole number", lambda v: v >= 1, "is less than 1", "give 1 or more, e.g. 20")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="make-qa", allow_abbrev=False, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="qa", help="output folder (default: qa/)")
    parser.add_argument("--n", type=count, default=60, help="questions wanted (default 60)")
    parser.add_argument("--candidates", type=count,
                        help="passages to try at most (default: 2 x --n, capped by what the documents offer)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0); generation is greedy")
    parser.add_argument("--span-share", type=share, default=0.25,
                        help="share of passages that cross a block or a page break (default 0.25)")
    parser.add_argument("--max-new-tokens", type=count, default=384, help="generation length limit (default 384)")
    parser.add_argument("--evidence-by", choices=("code", "model"), default="code",
                        help="code (default): the code chooses each passage's evidence (a run of whole sentences) and "
                             "the model writes only the question and the answer about it, what a small model does "
                             "well; model: the model sees the whole passage and quotes the evidence itself")
    parser.add_argument("--overwrite", action="store_true", help="replace another set in --out")
    parser.add_argument("--read-review", metavar="WORKBOOK", nargs="?", const="",
                        help="read the reviewed workbook (default: --out/review.xlsx) and write the accepted set")
    parser.add_argument("--reference", action="append", metavar="QUESTIONS.csv:EVIDENCE",
                        help="a human-written set whose question/evidence overlap the report shows beside the "
                             "generated one (repeatable; default: the bundled Questions.csv:sample/evidence.json)")
    from ragstudy.config import study_settings
    from ragstudy.settings import add_arguments

    # the study's own declarations (ragstudy.config), so these flags read and check exactly as evaluation_chain.py's
    add_arguments(parser, [item for item in study_settings() if item.name in STUDY_FLAGS], defer=True)
    filters = parser.add_argument_group("filters (docs/make-qa.md)")
    filters.add_argument("--copy-threshold", type=share, default=DEFAULTS.copy_threshold,
                         help="drop a question with more than this share of its content words in the evidence "
                              f"(default {DEFAULTS.copy_threshold})")
    filters.add_argument("--answer-support", type=share, default=DEFAULTS.answer_support,
                         help="keep an answer only when at least this share of its content words are in the "
                              f"evidence (default {DEFAULTS.answer_support})")
    filters.add_argument("--answer-recovered", type=share, default=DEFAULTS.recovered,
                         help="keep an item only when the model, asked its question with only the evidence, replies "
                              "with at least this share of the drafted answer's content words, or the drafted answer "
                              f"holds this share of the reply's (default {DEFAULTS.recovered})")
    filters.add_argument("--duplicate-threshold", type=share, default=DEFAULTS.duplicate_threshold,
                         help="Jaccard of content words at which a question duplicates an earlier one "
                              f"(default {DEFAULTS.duplicate_threshold})")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def _references(given: list[str] | None) -> list[tuple[Path, Path]] | None:
    """--reference values as (questions, evidence) pairs; None (the bundled sample) when none is given."""
    if not given:
        return None
    pairs = []
    for value in given:
        questions, sep, evidence = value.rpartition(":")
        if not sep or not questions:
            raise StudyInputError(f"--reference {value!r}: expected QUESTIONS.csv:EVIDENCE (e.g. "
                                  "../shared/qa/Questions.csv:../shared/qa/evidence.csv)")
        missing = [path for path in (questions, evidence) if not Path(path).is_file()]
        if missing:
            raise StudyInputError(f"--reference {value}: no such file {', '.join(missing)}; give QUESTIONS.csv:EVIDENCE "
                                  "of a set that exists (e.g. Questions.csv:sample/evidence.json)")
        pairs.append((Path(questions), Path(evidence)))
    return pairs


def _generator(args: argparse.Namespace):
    """(generator, model name, backend) from the study's config resolution."""
    from ragstudy.config import StudyConfig
    from ragstudy.llms import answering_model, check_generator, make_generator, resolved_engine

    flags = {name: getattr(args, name) for name in STUDY_FLAGS if name != "profile"}
    flags["documents"] = flags["documents"] or DEFAULT_DOCUMENTS
    config = StudyConfig.resolve(profile=args.profile, strategies="newline",
                                 **{k: v for k, v in flags.items() if v is not None})
    check_generator(config)
    generator = make_generator(config)
    label = answering_model(config).label
    if config.llm_servers:
        return generator, label, "openai-chat-completions"
    import torch
    import transformers  # quiet its per-load progress bars; ours (tqdm) remain

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(config.resolved_threads())
    torch.manual_seed(0)
    return generator, label, f"in-process:{resolved_engine(config)}"


def make_qa_set(args: argparse.Namespace) -> Written:
    """`ragstudy make-qa`: draft the question set (or read its review back) into --out; what it wrote, with exit code
    NONE_KEPT when no candidate passed the filters."""
    from ragstudy.qagen.run import QaSettings, make_qa, read_review

    out = Path(args.out)
    if args.read_review is not None:
        review = read_review(out, Path(args.read_review) if args.read_review else None)
        tell(f"review read back: {review.accepted} accepted ({review.edited} edited, {review.overridden} despite "
             f"a filter), {review.rejected} rejected; set written to {out}/")
        return written_by(out, "make-qa")
    thresholds = Thresholds(answer_support=args.answer_support, copy_threshold=args.copy_threshold,
                            duplicate_threshold=args.duplicate_threshold, recovered=args.answer_recovered)
    settings = QaSettings(documents=Path(args.documents or DEFAULT_DOCUMENTS), out=out, n=args.n, candidates=args.candidates,
                          seed=args.seed, span_share=args.span_share, max_new_tokens=args.max_new_tokens,
                          thresholds=thresholds, overwrite=args.overwrite, reference=_references(args.reference),
                          evidence_by=args.evidence_by)
    generator, model, backend = _generator(args)
    result = make_qa(settings, generator, model, backend)
    tell("\n".join(["\n| filter | dropped | left |\n|---|---|---|",
                    *(f"| {name} | {dropped} | {left} |" for name, dropped, _, left in result.cascade),
                    f"\n{result.kept} of {result.candidates} candidates kept ({result.generated} generated, "
                    f"{result.cached} from the cache); outputs in {out}/ (report: {QA_REPORT.path(out)})"]))
    if result.kept == 0:
        why = " (the lite model is plumbing only: its items are never valid)" if result.unfit else ""
        tell(f"error: no candidate passed the filters{why}; see {QA_REPORT.path(out)}", problem=True)
        return written_by(out, "make-qa", NONE_KEPT)
    return written_by(out, "make-qa")
