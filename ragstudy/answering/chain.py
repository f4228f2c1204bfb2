"""Run the study: answer every question of Questions.csv with each chunking strategy.

    ragstudy answer                      # all strategies, profile by hardware (paper on CUDA, else lite)
    ragstudy answer --profile lite --limit 5 --strategies fixed-size,newline
    ragstudy chunks        # export chunks_<strategy>.csv + sources, then stop

Writes one Dataset<Name>.{csv,json} per strategy (the paper's DatasetCustom/FixedSize/NewLine, then DatasetToken,
DatasetSentence, DatasetSemantic, DatasetMarkdown) and config.json into --output-dir. Chroma collections and
LLM answers are cached by content hash: an identical re-run re-embeds and regenerates nothing, and an interrupted
run resumes where it stopped.
"""
# (the docstring is the help of `ragstudy answer|retrieve|sweep|chunks`; this module holds their jobs: `run_chain`
# for the answering, retrieval-only and chunks-only runs, the sweep through ragstudy.grid.sweep)

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragstudy.config import StudyConfig
    from ragstudy.results import Written


def build_parser(leave_out: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """The chain's flags, generated from the settings' declaration (ragstudy.config.study_settings); `leave_out`:
    settings without a flag here (`ragstudy answer` leaves out the other modes', ragstudy.config.MODE_SETTINGS)."""
    from ragstudy.config import add_study_arguments

    return add_study_arguments(argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False), leave_out)


@dataclass(frozen=True)
class ChainRun:
    """What a chain run did: its settings, one report per strategy (documents, chunks, vectors and answers made or
    reused), its seconds, and the files it wrote."""

    config: "StudyConfig"
    reports: tuple[Any, ...]
    seconds: float

    @property
    def written(self) -> "Written":
        """The files of the run folder (results.written_by)."""
        from ragstudy.results import written_by

        return written_by(self.config.output_dir, "answer")


def run_chain(config: "StudyConfig") -> ChainRun:
    """The run `config` names (answering, retrieval-only or chunks-only) into config.output_dir; a bad embedding
    model stops it before anything is written."""
    from ragstudy.answering import llm_axis
    from ragstudy.pipeline import run_study
    from ragstudy.ranking import run_retrieval

    started = time.perf_counter()
    config.check_embedders()
    if config.retrieval_only:
        reports = run_retrieval(config).reports()
    elif len(llm_axis.llm_specs(config)) > 1:  # the LLM axis: one answering run per LLM, in groups/<id>/
        reports = run_llm_groups(config)
    else:
        if not config.chunks_only:
            llm_axis.check_single(config)
        reports = run_study(config)
    return ChainRun(config, tuple(reports), time.perf_counter() - started)


def run_llm_groups(config: "StudyConfig") -> list:
    """The LLM axis (ragstudy.answering.llm_axis): each LLM answers into its group folder, all checked first."""
    import pandas as pd

    from ragstudy import results
    from ragstudy.answering.llm_axis import GROUPS_DIR, group_configs
    from ragstudy.errors import StudyInputError
    from ragstudy.llms import answering_model, check_generator
    from ragstudy.pipeline import run_study

    groups = group_configs(config)
    for _, _, sub in groups:
        check_generator(sub)  # a missing wheel or a bad folder for the second LLM fails before the first answers
    folder = results.ResultsFolder(config.output_dir, config.documents).prepare()  # held while the groups run
    try:
        if results.dataset_files(folder.path):
            raise StudyInputError(f"{folder.path} holds the answers of a run with one LLM (Dataset files); answer "
                                  "with several LLMs into another --output-dir")
        results.write_table(folder.path, results.ANSWER_GROUPS, pd.DataFrame(
            [{"group": gid, "llm": spec, "model": answering_model(sub).label, "folder": f"{GROUPS_DIR}/{gid}"}
             for gid, spec, sub in groups], columns=list(results.ANSWER_GROUPS.columns)))
        return [report for _, _, sub in groups for report in run_study(sub)]
    finally:
        folder.release()


def interrupted_message(output_dir: str | None, retrieval: bool = False) -> str:
    """One line for Ctrl-C: what is kept and how to resume (no traceback). `retrieval`: a retrieval-only run or a
    sweep, which answers nothing: its finished variants are kept, and only the others are computed again."""
    from ragstudy.io import cache_dir

    output = output_dir or "results"
    if retrieval:
        return (f"interrupted: every finished variant is kept in {output}/variants/, chunks, vectors and rankings "
                f"in {cache_dir()}; re-run the same command to compute only the variants that did not finish")
    return (f"interrupted: every answer generated so far is saved in {cache_dir() / 'answers'}, embedded child "
            f"windows in the Chroma folders, finished strategies' files in {output}/; re-run the same command "
            "to resume without redoing that work")


def next_steps(config: "StudyConfig") -> str:
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
