"""Run the study: answer every question of Questions.csv with each chunking strategy.

    ragstudy answer                      # all strategies, profile by hardware (paper on CUDA, else lite)
    ragstudy answer --profile lite --limit 5 --strategies fixed-size,newline
    ragstudy chunks        # export chunks_<strategy>.csv + sources, then stop

Writes one Dataset<Name>.{csv,json} per strategy (the paper's DatasetCustom/FixedSize/NewLine, then DatasetToken,
DatasetSentence, DatasetSemantic, DatasetMarkdown) and config.json into --output-dir. Chroma collections and
LLM answers are cached by content hash: an identical re-run re-embeds and regenerates nothing, and an interrupted
run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
import time


def build_parser(leave_out: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """The chain's flags, generated from the settings' declaration (ragstudy.config.study_settings); `leave_out`:
    settings without a flag here (`ragstudy answer` leaves out the other modes', ragstudy.config.MODE_SETTINGS)."""
    from ragstudy.config import add_study_arguments

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    return add_study_arguments(parser, leave_out)


def interrupted_message(flags: dict) -> str:
    """One line for Ctrl-C: what is kept and how to resume (no traceback)."""
    from ragstudy.io import cache_dir

    output = flags.get("output_dir") or "results"
    return (f"interrupted: every answer generated so far is saved in {cache_dir() / 'answers'}, embedded child "
            f"windows in the Chroma folders, finished strategies' files in {output}/; re-run the same command "
            "to resume without redoing that work")


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None, warn_unused: bool = True) -> int:
    """The chain on `argv`; `parser` is this parser as `ragstudy answer|retrieve|sweep|chunks` names and presets it.
    `warn_unused=False` (the study's runs): no warning about given settings that have no effect on this run."""
    from ragstudy.errors import StudyInputError

    try:  # the flags' choices come from the plug-in registries: a bad plug-in stops here, in one line
        args = (parser or build_parser()).parse_args(argv)
    except StudyInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "chromadb", "sentence_transformers", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import transformers  # quiet its per-load progress bars; ours (tqdm) remain

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    from ragstudy.config import config_from_args
    from ragstudy.errors import StudyInputError
    from ragstudy.pipeline import run_study
    from ragstudy.ranking import run_retrieval, unnamed_store_message

    flags = vars(args)
    sweep, evidence = args.sweep, args.evidence
    started = time.perf_counter()
    try:
        config = config_from_args(args, warn_unused)
        from ragstudy.embedders import check_embedding

        check_embedding(config)  # a bad --embedding stops here, before anything is written
        print(f"profile: {config.profile.name} ({config.origins['profile']}); LLM {config.profile.llm}; "
              f"embedding {config.profile.embedding}; device {config.profile.device}; "
              f"strategies: {', '.join(config.strategies)}", flush=True)
        if sweep:
            from ragstudy.sweep import run_sweep

            print_sweep(run_sweep(config, sweep, evidence))
            return 0
        reports = run_retrieval(config).reports() if config.retrieval_only else run_study(config)
    except StudyInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:  # a store that failed without naming itself: still one line
        print(f"error: {unnamed_store_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(interrupted_message(flags), file=sys.stderr)
        return 130
    print("\n| strategy | documents | chunks | embedded | reused | generated | cached |")
    print("|---|---|---|---|---|---|---|")
    for r in reports:
        print(f"| {r.strategy} | {r.documents} | {r.chunks} | {r.embedded} | {r.reused} | {r.generated} | "
              f"{r.cached} |")
    print(f"\noutputs in {config.output_dir}/ ({time.perf_counter() - started:.1f} s)")
    print(next_steps(config))
    return 0


def next_steps(config) -> str:
    """What the run wrote and the command that uses it next (`ragstudy study` runs them all)."""
    out = config.output_dir
    if config.chunks_only:
        return (f"wrote chunks_<strategy>.csv, sources_<strategy>.jsonl and config.json into {out}/; next: "
                f"ragstudy chunk-quality --results-dir {out} --no-hope")
    if config.retrieval_only:
        return (f"wrote variants.csv, config.json and one folder per variant (rankings, chunk tables, its config) "
                f"into {out}/variants/; next: "
                f"ragstudy score-retrieval --results-dir {out}  (then ragstudy report --results-dir {out})")
    return (f"wrote the Dataset files, chunks_/sources_<strategy> and config.json into {out}/; next: "
            f"ragstudy score-answers --results-dir {out}, ragstudy review --results-dir {out}, "
            f"ragstudy report --results-dir {out}")


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


if __name__ == "__main__":
    from ragstudy.io import exit_process

    exit_process(main())
