"""`ragstudy SUBCOMMAND [flags]`: every job of the study behind one command.

Each subcommand is a parser and a library job (ragstudy.answering.chain for `answer`, `retrieve`, `sweep` and `chunks`,
the Postprocessing job modules for the scores, the review, the survey and the report, ragstudy.qagen.command for
`make-qa`) run by ragstudy_cli.jobs; `ragstudy study` composes the same jobs (ragstudy_cli.study). The paper's
script paths (`python evaluation_chain.py`, `python Postprocessing/retrieval_eval.py`, ...) are shims onto these
subcommands (`run_as`), with their old flags. A subcommand's modules are imported when it runs, so `ragstudy --help`
answers at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragstudy.io import INTERRUPTED, exit_process

PROG = "ragstudy"


@dataclass(frozen=True)
class Command:
    """One subcommand: its parser (`build`), its job (the library function that takes its typed settings, made
    from the parsed flags, and returns what it wrote: docs/python.md), the runner in ragstudy_cli.jobs that calls
    the job on the command line (logging, the printed lines, errors as one line and an exit code), the script the
    paper runs it as, and for the chain's variants the mode it fixes (retrieval-only, chunks-only, a sweep). Each
    is "module:function", imported when the subcommand runs."""

    name: str
    summary: str
    build: str  # returns the parser (the chain's takes the settings it leaves out)
    job: str
    run: str  # runner(job, args) -> exit code
    script: str
    mode: str = ""  # "", "retrieval_only", "chunks_only", "sweep": a variant of the chain
    chain: bool = False  # the chain's flags (ragstudy.answering.chain): its mode fixed, the other modes' flags left out

    @property
    def prog(self) -> str:
        return f"{PROG} {self.name}"

    @property
    def implied_modes(self) -> tuple[str, ...]:
        """The mode settings this subcommand fixes (a sweep is retrieval-only too)."""
        return {"retrieval_only": ("retrieval_only",), "chunks_only": ("chunks_only",),
                "sweep": ("sweep", "retrieval_only")}.get(self.mode, ())

    def left_out(self) -> tuple[str, ...]:
        """The chain's mode settings this subcommand's parser does not offer: every one (its own mode is fixed),
        but the sweep's --sweep, which carries its FILE."""
        from ragstudy.config import MODE_SETTINGS

        return tuple(m for m in MODE_SETTINGS if m != "sweep" or self.mode != "sweep") if self.chain else ()

    def parser(self) -> argparse.ArgumentParser:
        """The subcommand's parser, named `ragstudy NAME`; for the chain, its mode fixed and the other modes' flags
        left out."""
        build = _function(self.build)
        parser = build(self.left_out()) if self.chain else build()
        parser.prog = self.prog
        if self.mode in ("retrieval_only", "chunks_only"):
            parser.set_defaults(**{self.mode: True})
            parser.description = f"{self.summary}. The flags of `{PROG} answer`.\n\n" + (parser.description or "")
        elif self.mode == "sweep":
            parser.usage = f"{self.prog} FILE.yaml [flags of '{PROG} answer']"
            for action in parser._actions:  # noqa: SLF001 (argparse offers no public way to make a flag required)
                if action.dest == "sweep":
                    action.required = True
            parser.description = f"{self.summary}: `{PROG} sweep FILE.yaml`; every flag of `{PROG} answer` " \
                                 "applies.\n\n" + (parser.description or "")
        return parser

    def foreign_mode_flag(self, argv: Sequence[str]) -> str | None:
        """One line for the first flag in `argv` of a mode this subcommand does not run (`ragstudy answer
        --retrieval-only`): which subcommand runs that mode; None when there is none."""
        from ragstudy.config import option_of

        for name in self.left_out():
            flag = option_of(name)
            if any(arg == flag or arg.startswith(f"{flag}=") for arg in argv):
                if name in self.implied_modes:
                    return f"`{self.prog}` is {name.replace('_', '-')} already: drop {flag}"
                owner = next(c for c in COMMANDS if c.mode == name)
                run = f"a sweep is `{owner.prog} FILE.yaml`" if name == "sweep" \
                    else f"the {name.replace('_', '-')} run is `{owner.prog}`"
                return f"{flag} is not a flag of `{self.prog}`: {run}, with the other flags unchanged"
        return None

    def main(self, argv: Sequence[str]) -> int:
        """Run the subcommand on `argv` (its flags, without the subcommand's name); the exit code."""
        from ragstudy.errors import StudyInputError

        argv = list(argv)
        if self.mode == "sweep" and argv and not argv[0].startswith("-"):
            argv = ["--sweep", *argv]
        refused = self.foreign_mode_flag(argv[:argv.index("--")] if "--" in argv else argv)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
        try:  # the flags' choices come from the plug-in registries: a bad plug-in stops here, in one line
            args = self.parser().parse_args(argv)
        except StudyInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _function(self.run)(_function(self.job), args)


def _function(where: str) -> Callable:
    """`module:function`, imported now (only the chosen subcommand's modules are loaded)."""
    import importlib

    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


CHAIN = ("ragstudy.answering.chain:build_parser", "ragstudy.answering.chain:run_chain",
         "ragstudy_cli.jobs:run_chain_job", "evaluation_chain.py")
SCRIPT_JOB = "ragstudy_cli.jobs:run_script_job"
COMMANDS: tuple[Command, ...] = (
    Command("study", "the whole study in order: answers, retrieval at equal budgets, scores, chunk quality, the "
                     "report; reuses what is cached, prints the verdict", "ragstudy_cli.study:build_parser",
            "ragstudy_cli.study:run", "ragstudy_cli.jobs:run_direct", "(none)"),
    Command("answer", "answer every question with each strategy through the LLM (the paper's chain): Dataset files",
            *CHAIN, chain=True),
    Command("retrieve", "retrieval-only run: rank every strategy's parents for every question, load no LLM",
            *CHAIN, "retrieval_only", chain=True),
    Command("sweep", "a grid of strategy x parameter settings, retrieval-only, scored at every budget",
            "ragstudy.answering.chain:build_parser", "ragstudy.grid.sweep:run_sweep", "ragstudy_cli.jobs:run_sweep_job",
            "evaluation_chain.py", "sweep", chain=True),
    Command("chunks", "export every strategy's chunks (chunks_<strategy>.csv, sources_<strategy>.jsonl), no model",
            *CHAIN, "chunks_only", chain=True),
    Command("score-retrieval", "score a retrieval-only run at equal context budgets: hit, span metrics, MRR, oracle "
                               "overlap, paired tests, the verdict", "Postprocessing.score_retrieval:build_parser",
            "Postprocessing.score_retrieval:score_retrieval", SCRIPT_JOB, "Postprocessing/retrieval_eval.py"),
    Command("score-answers", "score the answers against the oracle: BLEU, ROUGE, METEOR, BERTScore, paired tests",
            "Postprocessing.score_answers:build_parser", "Postprocessing.score_answers:score_answers", SCRIPT_JOB,
            "Postprocessing/evaluation_metrics.py"),
    Command("chunk-quality", "judge the chunks: intrinsic statistics, evidence retrieval at own k, HOPE",
            "Postprocessing.judge_chunks:build_parser", "Postprocessing.judge_chunks:judge_chunks", SCRIPT_JOB,
            "Postprocessing/chunk_quality.py"),
    Command("review", "the blinded review workbook for human raters (output.xlsx, answer key, rater sheet)",
            "Postprocessing.build_review:build_parser", "Postprocessing.build_review:build_review", SCRIPT_JOB,
            "Postprocessing/preprocessing_files.py"),
    Command("survey", "analyse the raters' survey (interview_answers.xlsx): counts, tests, plots",
            "Postprocessing.analyse_survey:build_parser", "Postprocessing.analyse_survey:analyse_survey",
            SCRIPT_JOB, "Postprocessing/interview_analysis.py"),
    Command("report", "one self-contained page (report.html + report.md) from a results folder, the verdict first",
            "Postprocessing.write_report:build_parser", "Postprocessing.write_report:write_report", SCRIPT_JOB,
            "Postprocessing/report.py"),
    Command("make-qa", "draft questions, oracle answers and verbatim evidence from your own PDFs with an LLM, for "
                       "review (docs/make-qa.md)", "ragstudy.qagen.command:build_parser",
            "ragstudy.qagen.command:make_qa_set", "ragstudy_cli.jobs:run_make_qa", "tools/make_qa.py"),
)
BY_NAME = {c.name: c for c in COMMANDS}


def overview() -> str:
    """`ragstudy --help`: every subcommand with its one line, and where to read more."""
    width = max(len(c.name) for c in COMMANDS)
    lines = [f"usage: {PROG} SUBCOMMAND [flags]    ({PROG} SUBCOMMAND --help for its flags)", "",
             "Paragraph-based chunking for RAG: does layout-aware paragraph chunking beat naive chunking on your "
             "PDFs?", "", "subcommands:"]
    lines += [f"  {c.name:<{width}}  {c.summary}" for c in COMMANDS]
    lines += ["", f"Start with `{PROG} study` (the bundled sample: Documents/, Questions.csv, Oracle.csv); it writes "
                  "results/report.html.", "Reference: docs/cli.md (every flag), docs/config.md (every YAML key), "
                  "docs/outputs.md (every file)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        if len(argv) > 1 and argv[0] == "help" and argv[1] in BY_NAME:
            return _exit_code(lambda: BY_NAME[argv[1]].main(["--help"]))
        print(overview())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    command = BY_NAME.get(name)
    if command is None:
        print(f"{PROG}: unknown subcommand {name!r}; choose one of: {', '.join(BY_NAME)} ({PROG} --help)",
              file=sys.stderr)
        return 2
    from ragstudy_cli.jobs import show_reports

    show_reports()
    code = _exit_code(lambda: command.main(rest))
    if code == INTERRUPTED:  # Ctrl-C: end here, whoever called main (the console script, `python -m ragstudy_cli`)
        exit_process(code)
    return code


def _exit_code(run: Callable[[], int]) -> int:
    """`run()`'s exit code, including argparse's (--help exits 0, a bad flag 2)."""
    try:
        return int(run() or 0)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def console() -> None:
    """The `ragstudy` console script (pyproject.toml)."""
    exit_process(main())


CHAIN_MODE_FLAGS = {"--sweep": "sweep", "--retrieval-only": "retrieve", "--chunks-only": "chunks"}  # first wins


def chain_subcommand(argv: Sequence[str]) -> list[str]:
    """The chain's flags as `python evaluation_chain.py` took them -> the subcommand that runs that mode, with its
    flags: --sweep FILE -> `sweep --sweep FILE` (a sweep is retrieval-only: --retrieval-only is dropped),
    --retrieval-only -> `retrieve`, --chunks-only -> `chunks` (the flag dropped: the subcommand is that mode), else
    `answer`; a second mode flag is left for the subcommand to refuse."""
    argv = list(argv)
    own = argv[:argv.index("--")] if "--" in argv else argv
    for flag, name in CHAIN_MODE_FLAGS.items():
        if any(arg == flag or arg.startswith(f"{flag}=") for arg in own):
            implied = "--retrieval-only" if name == "sweep" else flag
            return [name, *(a for a in argv if a != implied)]
    return ["answer", *argv]


def run_as(name: str) -> None:
    """An old script path (`python Postprocessing/retrieval_eval.py FLAGS`): `ragstudy NAME FLAGS`, its exit code."""
    exit_process(main([name, *sys.argv[1:]]))


def run_chain_script() -> None:
    """`python evaluation_chain.py FLAGS`: the subcommand of the mode its flags name (chain_subcommand)."""
    exit_process(main(chain_subcommand(sys.argv[1:])))
