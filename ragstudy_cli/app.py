"""`ragstudy SUBCOMMAND [flags]`: every job of the study behind one command.

Each subcommand is the parser and the run of one entry point, with the same flags and behaviour as the script the
paper named (`ragstudy answer` is `python evaluation_chain.py`, `ragstudy score-answers` is
`python Postprocessing/evaluation_metrics.py`, ...); `ragstudy study` runs the whole study in order. Only the
chosen subcommand's module is imported, so `ragstudy --help` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragstudy.io import INTERRUPTED, exit_process

PROG = "ragstudy"


@dataclass(frozen=True)
class Command:
    """One subcommand: the module whose `build_parser` it uses, the script the paper runs it as, and for the chain's
    variants the mode it fixes (retrieval-only, chunks-only, a sweep)."""

    name: str
    summary: str
    module: str
    script: str
    mode: str = ""  # "", "retrieval_only", "chunks_only", "sweep": a variant of the chain
    own_main: bool = False  # the module's main(argv, parser) does its own logging and error handling (make-qa)

    @property
    def prog(self) -> str:
        return f"{PROG} {self.name}"

    @property
    def is_chain(self) -> bool:
        return self.module == "evaluation_chain"

    @property
    def implied_modes(self) -> tuple[str, ...]:
        """The mode settings this subcommand fixes (a sweep is retrieval-only too)."""
        return {"retrieval_only": ("retrieval_only",), "chunks_only": ("chunks_only",),
                "sweep": ("sweep", "retrieval_only")}.get(self.mode, ())

    def left_out(self) -> tuple[str, ...]:
        """The chain's mode settings this subcommand's parser does not offer: every one (its own mode is fixed),
        but the sweep's --sweep, which carries its FILE."""
        from ragstudy.config import MODE_SETTINGS

        return tuple(m for m in MODE_SETTINGS if m != "sweep" or self.mode != "sweep") if self.is_chain else ()

    def load(self):
        return importlib.import_module(self.module)

    def parser(self) -> argparse.ArgumentParser:
        """The subcommand's parser: its module's `build_parser()`, named `ragstudy NAME`, its mode fixed and the
        other modes' flags left out."""
        if self.module == "ragstudy_cli.study":
            return self.load().build_parser()
        parser = self.load().build_parser(self.left_out()) if self.is_chain else self.load().build_parser()
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
        argv = list(argv)
        module = self.load()
        if self.module == "ragstudy_cli.study":
            return module.main(argv)
        if self.mode == "sweep" and argv and not argv[0].startswith("-"):
            argv = ["--sweep", *argv]
        refused = self.foreign_mode_flag(argv[:argv.index("--")] if "--" in argv else argv)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
        if self.is_chain:
            return module.main(argv, parser=self.parser())
        if self.own_main:
            return module.main(argv, parser=self.parser())
        from Postprocessing import cli

        return cli.run_script(self.parser, module.run, argv)


CHAIN = "evaluation_chain.py"
COMMANDS: tuple[Command, ...] = (
    Command("study", "the whole study in order: answers, retrieval at equal budgets, scores, chunk quality, the "
                     "report; reuses what is cached, prints the verdict", "ragstudy_cli.study", "(none)"),
    Command("answer", "answer every question with each strategy through the LLM (the paper's chain): Dataset files",
            "evaluation_chain", CHAIN),
    Command("retrieve", "retrieval-only run: rank every strategy's parents for every question, load no LLM",
            "evaluation_chain", CHAIN, "retrieval_only"),
    Command("sweep", "a grid of strategy x parameter settings, retrieval-only, scored at every budget",
            "evaluation_chain", CHAIN, "sweep"),
    Command("chunks", "export every strategy's chunks (chunks_<strategy>.csv, sources_<strategy>.jsonl), no model",
            "evaluation_chain", CHAIN, "chunks_only"),
    Command("score-retrieval", "score a retrieval-only run at equal context budgets: hit, span metrics, MRR, oracle "
                               "overlap, paired tests, the verdict", "Postprocessing.retrieval_eval",
            "Postprocessing/retrieval_eval.py"),
    Command("score-answers", "score the answers against the oracle: BLEU, ROUGE, METEOR, BERTScore, paired tests",
            "Postprocessing.evaluation_metrics", "Postprocessing/evaluation_metrics.py"),
    Command("chunk-quality", "judge the chunks: intrinsic statistics, evidence retrieval at own k, HOPE",
            "Postprocessing.chunk_quality", "Postprocessing/chunk_quality.py"),
    Command("review", "the blinded review workbook for human raters (output.xlsx, answer key, rater sheet)",
            "Postprocessing.preprocessing_files", "Postprocessing/preprocessing_files.py"),
    Command("survey", "analyse the raters' survey (interview_answers.xlsx): counts, tests, plots",
            "Postprocessing.interview_analysis", "Postprocessing/interview_analysis.py"),
    Command("report", "one self-contained page (report.html + report.md) from a results folder, the verdict first",
            "Postprocessing.report", "Postprocessing/report.py"),
    Command("make-qa", "draft questions, oracle answers and verbatim evidence from your own PDFs with an LLM, for "
                       "review (docs/make-qa.md)", "ragstudy.qagen.command", "tools/make_qa.py", own_main=True),
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
