"""What each subcommand does on the command line around its job: logging, the lines it prints, and bad input,
a failing store or Ctrl-C as one line and an exit code. The jobs themselves are library functions that take their
settings and return what they wrote (ragstudy.answering.chain, the Postprocessing job modules, ragstudy.qagen.command);
`ragstudy study` composes the same functions (ragstudy_cli.study)."""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.io import INTERRUPTED, REPORT_LOGGER
from ragstudy.results import Written

Job = Callable[[argparse.Namespace], Written]


class _Shown(logging.Handler):
    """The jobs' reports (ragstudy.io.tell) as they are, on the stdout of the moment (`ragstudy study` redirects it
    into its log), a problem on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
        stream.write(self.format(record) + "\n")
        stream.flush()


def show_reports() -> None:
    """What the jobs tell their user is printed, once, whatever the logging set-up of the command (idempotent)."""
    told = logging.getLogger(REPORT_LOGGER)
    if not any(isinstance(handler, _Shown) for handler in told.handlers):
        told.addHandler(_Shown())
    told.setLevel(logging.INFO)
    told.propagate = False  # not a second time, with a log prefix, through the root logger


def run_direct(job: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """A command that is its own runner (`ragstudy study`): the job's exit code."""
    return job(args)


def guarded(job: Callable[[], int], errors: tuple[type[BaseException], ...] = (),
            describe: Callable[[BaseException], str] = str, interrupted: str | None = None) -> int:
    """`job()`'s exit code; bad input (and `errors`, in `describe`'s words) -> one line on stderr, exit 2; Ctrl-C
    -> the `interrupted` line, exit 130 (without one, Ctrl-C goes on up)."""
    try:
        return job()
    except StudyInputError as exc:
        message = str(exc)
    except errors as exc:
        message = describe(exc)
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        print(interrupted, file=sys.stderr)
        return INTERRUPTED
    print(f"error: {message}", file=sys.stderr)
    return 2


# ------------------------------------------------------------------------------------ the Postprocessing jobs

def run_script_job(job: Callable[[Any], Written], args: argparse.Namespace) -> int:
    """A scoring, review, survey or report subcommand: INFO logs on stderr, the job on the typed settings its
    parameter names (ragstudy.settings.record) made from the flags, its exit code."""
    import inspect

    from Postprocessing.cli import setup_logging

    setup_logging(args.verbose)
    settings = next(iter(inspect.signature(job, eval_str=True).parameters.values())).annotation
    return guarded(lambda: job(settings.of(args)).exit_code)


# ---------------------------------------------------------------------------------------------- the chain

def quiet_libraries() -> None:
    """The chain's libraries log at WARNING and transformers shows no per-load progress bar (ours, tqdm, remain)."""
    for noisy in ("httpx", "chromadb", "sentence_transformers", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def store_message(exc: BaseException) -> str:
    """A store that failed without naming itself, in one line (ragstudy.ranking.unnamed_store_message)."""
    from ragstudy.ranking import unnamed_store_message

    return unnamed_store_message(exc)


def run_chain_job(job: Callable, args: argparse.Namespace) -> int:
    """`ragstudy answer|retrieve|chunks`: the chain job its flags name, its table and what to run next."""
    return _chain_runner(args, lambda config, started: print_chain_run(job(config), time.perf_counter() - started))


def run_sweep_job(job: Callable, args: argparse.Namespace) -> int:
    """`ragstudy sweep FILE`: the sweep (ragstudy.grid.sweep.run_sweep) on the chain's settings, its table and plot."""
    return _chain_runner(args, lambda config, started: print_sweep(job(config, args.sweep, args.evidence)))


def _chain_runner(args: argparse.Namespace, run_job: Callable[[Any, float], None]) -> int:
    """A chain subcommand: its logging, its config from the flags (profile line printed first), `run_job(config,
    started)`, store failures and Ctrl-C as one line."""
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_libraries()
    from ragstudy.answering import chain
    from ragstudy.config import config_from_args

    started = time.perf_counter()

    def run() -> int:
        config = config_from_args(args)
        print(profile_line(config), flush=True)
        run_job(config, started)
        return 0

    retrieval = bool(getattr(args, "retrieval_only", None) or getattr(args, "sweep", None))  # no answers
    return guarded(run, (OSError, sqlite3.Error), store_message, chain.interrupted_message(args.output_dir, retrieval))


def profile_line(config) -> str:
    """The run's profile, models, device and strategies, printed first (the LLM: the model that answers, served or
    in-process, llms.answering_model)."""
    from ragstudy.llms import answering_model

    return (f"profile: {config.profile.name} ({config.origins['profile']}); LLM {answering_model(config).name}; "
            f"embedding {config.profile.embedding}; device {config.profile.device}; "
            f"strategies: {', '.join(config.strategies)}")


def print_chain_run(done, seconds: float) -> None:
    """A chain run's table (per strategy: documents, chunks, vectors and answers made or reused), where its outputs
    are and what to run next."""
    from ragstudy.answering.chain import next_steps

    print("\n| strategy | documents | chunks | embedded | reused | generated | cached |")
    print("|---|---|---|---|---|---|---|")
    for r in done.reports:
        print(f"| {r.strategy} | {r.documents} | {r.chunks} | {r.embedded} | {r.reused} | {r.generated} | "
              f"{r.cached} |")
    print(f"\noutputs in {done.config.output_dir}/ ({seconds:.1f} s)")
    print(next_steps(done.config))


def print_sweep(result) -> None:
    """The sweep's table on stdout and its hit-rate plot beside the tables (HTML; PNG/PDF when Chromium is there)."""
    from Postprocessing.budget_plots import sweep_figure, write_plots
    from ragstudy.results import SWEEP_PLOT

    notes: list[str] = []
    write_plots(sweep_figure(result.summary, list(result.labels)), result.output_dir, SWEEP_PLOT.stem, notes)
    print(result.summary.to_string(index=False, max_colwidth=40))
    for note in notes:
        print(f"note: {note}")
    print(f"\nsweep of {len(result.summary)} configurations in {result.seconds:.0f} s; evidence {result.evidence}; "
          f"tables in {result.output_dir}/sweep_summary.csv and sweep_best.csv")


# ------------------------------------------------------------------------------------------------- make-qa

def file_message(exc: BaseException) -> str:
    return f"{getattr(exc, 'filename', None) or 'a file'}: {getattr(exc, 'strerror', None) or exc}"


def run_make_qa(job: Job, args: argparse.Namespace) -> int:
    """`ragstudy make-qa`: the question set its flags ask for (ragstudy.qagen.command.make_qa_set)."""
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "urllib3", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return guarded(lambda: job(args).exit_code, (OSError,), file_message,
                   "interrupted: every generation so far is saved in the answer cache; re-run the same command to "
                   "resume without regenerating it")
