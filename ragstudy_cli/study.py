"""`ragstudy study`: the whole study in order, from the PDFs to the verdict, into one results folder.

    results/answers/     the chain (Dataset files, chunks, config.json), the answer scores, chunk quality
    results/retrieval/   the retrieval-only run at equal budgets (all strategies) and its scores and verdict
    results/report.html  (and report.md) the page: the verdict first
    results/study.json   what each stage read and wrote (content hashes), so a re-run recomputes nothing
    results/study.log    every stage's own output

The retrieval verdict comes first: the retrieval run, its scores and a first report.html need no LLM, and the study
prints the verdict then; the answering stages follow (answers, answer scores beside their floors, chunk quality) and
the report is written again. A study stopped while answering leaves the first report, which says what is missing.

Each stage is the job of the subcommand of the same name (the same library function, given its settings); the study
only chooses the folders, so that no later step refuses what an earlier one wrote (the answering run and the
retrieval-only run each have their own folder). A stage is skipped when its settings, the code, its inputs and the
files it wrote last time are unchanged (sha256); a stage that runs again still reuses every cache (answers, vectors,
chunks, rankings). What a stage wrote is what its job returns: the files its command writes, by their declarations
in ragstudy.results.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import logging
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ragstudy import results
from ragstudy.errors import StudyInputError
from ragstudy.io import sha256_file
from ragstudy.grid.runidentity import code_hash  # the stages' keys: one hash of the project's code
from ragstudy_cli.jobs import store_message

LEDGER = results.STUDY_LEDGER.name
LOG = results.STUDY_LOG.name
STUDY_LOCK = results.STUDY_LOCK.name
# Rough seconds of each stage on a first run of the bundled sample (lite profile, 2 cores), for the time-left
# estimate until this folder's own study.json has measured ones.
FIRST_RUN_SECONDS = {"answers": 480.0, "retrieval": 240.0, "retrieval scores": 60.0, "first report": 20.0,
                     "answer scores": 60.0, "chunk quality": 30.0, "report": 20.0}
# the stages that generate and score answers: the first report (retrieval only) is written when one of them is to run
ANSWER_STAGES = ("answers", "answer scores", "chunk quality")
STUDY_RETRIEVERS = ("dense", "bm25", "hybrid")  # the retrieval stage's default: the verdict checked across them
CHAIN_MODES = ("--retrieval-only", "--chunks-only", "--sweep", "--output-dir")


class StudyParser(argparse.ArgumentParser):
    """The study's own flags; every other flag is the chain's, parsed by its parser (`parse`): the parsed flags
    carry them as `chain` (and `argv`, as given, for the log)."""

    def parse_args(self, args: Sequence[str] | None = None, namespace: None = None) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        own, _, chain = parse(argv, self)
        own.chain, own.argv = chain, argv
        return own


def build_parser() -> argparse.ArgumentParser:
    parser = StudyParser(
        prog="ragstudy study", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="ragstudy study [--output-dir DIR] [--evidence FILE] [--oracle FILE] [--hope] [--force] "
              "[flags of 'ragstudy answer' ...]",
        description=__doc__,
        epilog="Every other flag is a flag of `ragstudy answer` and goes to both runs, e.g. "
               "--profile, --documents DIR, --questions Q.csv, --limit N, --strategies, --config FILE; the lists of "
               "--retriever, --text-layer and --embedding are the retrieval stage's grid (the answers use the dense "
               "chain and the first of each). See docs/cli.md.")
    parser.add_argument("--output-dir", help="the study's folder (default: the --config file's output_dir:, "
                                             "else results)")
    parser.add_argument("--evidence", help="evidence file for the retrieval scores and chunk quality (default: "
                                           "sample/evidence.json for the bundled Questions.csv, else none: the "
                                           "retrieval verdict then uses the oracle overlap)")
    parser.add_argument("--oracle", help="oracle answers (default: Oracle.csv beside the questions file)")
    parser.add_argument("--hope", action="store_true",
                        help="also compute HOPE in the chunk-quality stage, with its floor (offline with the "
                             "profile's LLM; a few hundred LLM calls, so off by default: docs/metrics.md gives the "
                             "time)")
    parser.add_argument("--force", action="store_true",
                        help="run every stage even if study.json says it is up to date (caches are still used)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging into study.log")
    return parser


def parse(argv: Sequence[str], parser: argparse.ArgumentParser | None = None
          ) -> tuple[argparse.Namespace, list[str], argparse.Namespace]:
    """(the study's own flags, the chain's flags as given, the chain's flags parsed): a bad flag exits 2."""
    from ragstudy.answering.chain import build_parser as chain_parser_of

    args, rest = (parser or build_parser()).parse_known_args(list(argv))
    chain_parser = chain_parser_of()
    chain_parser.prog = "ragstudy study"
    for flag in rest:
        if flag.split("=")[0] in CHAIN_MODES:
            chain_parser.error(f"{flag.split('=')[0]}: the study runs both the answering and the retrieval-only run "
                               "into folders of its own; run `ragstudy answer|retrieve|sweep|chunks` for one run")
    return args, rest, chain_parser.parse_args(rest)


# ---------------------------------------------------------------------------------------------- fingerprints

def run_inputs(config) -> dict[str, str]:
    """sha256 of the files a run reads: every PDF of its documents folder, its questions file and the oracle beside
    them (its settings are the stage's own part of the key: run_settings)."""
    found: dict[str, str] = {}
    documents = Path(config.documents)
    for pdf in sorted(documents.glob("*.pdf")) if documents.is_dir() else []:
        found[f"documents/{pdf.name}"] = sha256_file(pdf)
    questions = Path(config.questions)
    for path in (questions, questions.with_name("Oracle.csv")):
        if path.is_file():
            found[str(path)] = sha256_file(path)
    return found


# -------------------------------------------------------------------------------------------------- stages

@dataclass
class Stage:
    """One stage: its job (`run`, returning what it wrote) and the settings it runs with (its part of the key)."""

    name: str
    what: str
    settings: dict
    run: Callable[[], results.Written]
    needs: tuple[str, ...] = ()
    inputs: dict[str, str] = field(default_factory=dict)
    only_before: tuple[str, ...] = ()  # run only when one of these later stages runs too (the first report)
    strategies: tuple[str, ...] = ()  # the strategies a run stage runs (answers, retrieval)
    config: Any = None  # a run stage's StudyConfig (answers, retrieval)


@dataclass
class Ledger:
    """study.json: per stage, the key it ran under, the files it wrote (sha256) and its seconds."""

    path: Path
    stages: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> "Ledger":
        """The ledger in `path`; absent, or damaged (a warning names it), an empty one: every stage is then checked
        again, each reading its own caches (the ledger is only a record of what ran)."""
        if not path.is_file():
            return cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stages = data.get("stages") if isinstance(data, dict) else None
            if not isinstance(stages, dict) or not all(
                    isinstance(record, dict) and isinstance(record.get("wrote", {}), dict) for record in stages.values()):
                raise ValueError("not a record of stages")
            return cls(path, dict(stages))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            logging.getLogger(__name__).warning("%s is damaged (%s: %s): every stage runs again, each from its caches",
                                                path, type(exc).__name__, str(exc)[:120])
            return cls(path)

    def write(self) -> None:
        from ragstudy.io import atomic_write_text

        atomic_write_text(self.path, json.dumps({"stages": self.stages}, indent=1, default=str) + "\n")  # in order

    def key(self, stage: Stage, code: str) -> str:
        needed = {name: self.stages.get(name, {}).get("wrote", {}) for name in stage.needs}
        blob = json.dumps({"settings": stage.settings, "code": code, "inputs": stage.inputs, "needs": needed},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def up_to_date(self, stage: Stage, key: str, root: Path) -> bool:
        record = self.stages.get(stage.name)
        if not record or record.get("key") != key or not record.get("wrote"):
            return False
        return all((root / rel).is_file() and sha256_file(root / rel) == sha for rel, sha in record["wrote"].items())


def plan(args: argparse.Namespace, chain_args: argparse.Namespace, root: Path) -> list[Stage]:
    """The study's stages in order, each the job of its subcommand with the settings the study gives it."""
    from Postprocessing.judge_chunks import ChunkQualitySettings, judge_chunks
    from Postprocessing.score_answers import ScoreAnswersSettings, score_answers
    from Postprocessing.score_retrieval import ScoreRetrievalSettings, score_retrieval
    from Postprocessing.write_report import ReportSettings, write_report
    from ragstudy.answering.llm_axis import GROUPS_DIR, group_id, llm_specs
    from ragstudy.config import config_from_args
    from ragstudy.grid import axes
    from ragstudy.scoring.evidence import default_evidence

    answers, retrieval = root / "answers", root / "retrieval"
    retrieval_config = ranked_config(chain_args, output_dir=str(retrieval))  # a bad setting stops here, exit 2
    if not retrieval_config.origins.get("retriever"):  # the retrieval stage's default; a flag or config key wins
        retrieval_config = replace(retrieval_config, retriever=",".join(STUDY_RETRIEVERS),
                                   origins={**retrieval_config.origins, "retriever": "ragstudy study's default"})
    one = axes.one_each(retrieval_config)  # the answers: the dense chain, the first of the other axes' lists
    answer_config = config_from_args(argparse.Namespace(**{**vars(chain_args), **one, "workers": None, "ray": None,
                                                           "output_dir": str(answers)}), warn_unused=False)
    llms = llm_specs(answer_config)  # the LLM axis: one answering run per LLM (answers/groups/<id>/)
    check_study_files(args, answer_config)
    bundled = default_evidence(answer_config.questions)
    evidence = args.evidence or (str(bundled) if bundled else None)
    oracle = args.oracle
    extra_inputs = {p: sha256_file(Path(p)) for p in (args.evidence, args.oracle) if p and Path(p).is_file()}
    report_out = str(results.REPORT_HTML.path(root))
    rs_args = ScoreRetrievalSettings(results_dir=str(retrieval), evidence=evidence, oracle=oracle)
    # the same evidence as the retrieval scores: the answer scores' extractive reference
    as_args = ScoreAnswersSettings(results_dir=str(answers), evidence=evidence, oracle=oracle)
    judged = answers / GROUPS_DIR / group_id(llms[0]) if len(llms) > 1 else answers  # the first LLM's answers
    cq_args = ChunkQualitySettings(results_dir=str(judged), evidence=evidence or "none", no_hope=not args.hope)
    rp_args = ReportSettings(results_dir=str(answers), retrieval_dir=str(retrieval), out=report_out, oracle=oracle)
    first_args = ReportSettings(results_dir=str(retrieval), out=report_out, oracle=oracle)
    inputs_a, inputs_r = {**run_inputs(answer_config), **extra_inputs}, {**run_inputs(retrieval_config), **extra_inputs}
    # the retrieval verdict first: it needs no LLM; the report is written then, and again once the answers are scored
    return [
        Stage("retrieval", f"rank {len(retrieval_config.strategies)} strategies' parents for every question, no LLM",
              run_settings(retrieval_config), chain_stage(retrieval_config), inputs=inputs_r,
              strategies=tuple(retrieval_config.strategies), config=retrieval_config),
        Stage("retrieval scores", "score retrieval at equal budgets; the verdict", asdict(rs_args),
              lambda: score_retrieval(rs_args), needs=("retrieval",), inputs=extra_inputs),
        Stage("first report", "the report of the retrieval stage, the verdict first (the answers follow)",
              asdict(first_args), lambda: write_report(first_args), needs=("retrieval", "retrieval scores"),
              only_before=ANSWER_STAGES),
        Stage("answers", f"answer {len(answer_config.strategies)} strategies' questions through the LLM",
              run_settings(answer_config), chain_stage(answer_config), inputs=inputs_a,
              strategies=tuple(answer_config.strategies), config=answer_config),
        Stage("answer scores", "score the answers against the oracle, beside their floors", asdict(as_args),
              lambda: score_answers(as_args), needs=("answers",), inputs=inputs_a),
        Stage("chunk quality", "chunk statistics and evidence retrieval at own k" + (", HOPE" if args.hope else ""),
              asdict(cq_args), lambda: judge_chunks(cq_args), needs=("answers", "answer scores"), inputs=inputs_a),
        Stage("report", "the report page, the verdict first", asdict(rp_args), lambda: write_report(rp_args),
              needs=("answers", "retrieval", "retrieval scores", "answer scores", "chunk quality")),
    ]


def check_study_files(args: argparse.Namespace, config) -> None:
    """What the later stages read, checked before stage 1 (the retrieval and answering stages take minutes): the
    --evidence and --oracle files exist, and the oracle (--oracle, else Oracle.csv beside the questions) has one
    answer per question. A StudyInputError naming the file."""
    for flag, value in (("--evidence", args.evidence), ("--oracle", args.oracle)):
        if value and not Path(value).is_file():
            raise StudyInputError(f"{flag} {value}: no such file; pass an existing file, or leave {flag} out (the "
                                  "study's default is in `ragstudy study --help`). Nothing was run")
    questions = Path(config.questions)
    oracle = Path(args.oracle) if args.oracle else questions.with_name("Oracle.csv")
    if oracle.is_file() and questions.is_file():
        results.oracle_answers(oracle, questions)


def run_settings(config) -> dict:
    """A run stage's settings as its key records them: the resolved configuration but the settings that never change
    results (config.result_settings: threads, --workers/--ray, timeouts), its profile's every value (the LLM's answer
    length, dtype, ...) included."""
    from ragstudy.config import result_settings

    return {**result_settings(config), "profile": asdict(config.profile)}


def chain_stage(config) -> Callable[[], results.Written]:
    """A run stage: the chain's job on `config`, its table printed into the log; the run folder's files."""
    def run() -> results.Written:
        from ragstudy.answering.chain import run_chain
        from ragstudy_cli.jobs import print_chain_run, profile_line, quiet_libraries

        started = time.perf_counter()
        quiet_libraries()
        print(profile_line(config), flush=True)
        done = run_chain(config)
        print_chain_run(done, time.perf_counter() - started)
        return done.written

    return run


# ------------------------------------------------------------------------------------------------ running

class Progress:
    """One display for the whole study: stage i of n, a bar over the stages weighted by their expected seconds, and
    the time left (from this folder's last measured stage times, else a first-run guess)."""

    def __init__(self, stages: Sequence[Stage], expected: dict[str, float]) -> None:
        from tqdm import tqdm

        self.expected = expected
        self.total = sum(expected.values()) or 1.0
        self.bar = tqdm(total=round(self.total), unit="s", file=sys.stderr, dynamic_ncols=True, position=0,
                        bar_format="{desc} |{bar}| {percentage:3.0f}% · {elapsed}{postfix}")
        self.n = len(stages)
        self.started = time.perf_counter()

    def start(self, i: int, stage: Stage, done_expected: float) -> None:
        left = sum(self.expected.values()) - done_expected
        self.bar.set_description_str(f"study stage {i}/{self.n}: {stage.name}")
        self.bar.set_postfix_str(f"~{_duration(left)} left" if left > 1 else "nearly done")
        self.bar.refresh()

    def finish(self, stage: Stage) -> None:
        self.bar.update(round(self.expected.get(stage.name, 0.0)))

    def close(self, stopped: bool = False) -> None:
        elapsed = _duration(time.perf_counter() - self.started)
        self.bar.set_postfix_str(f"stopped after {elapsed}" if stopped else f"done in {elapsed}")
        self.bar.close()


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class AboveTheBar(logging.StreamHandler):
    """A stage's warnings and errors on the terminal, each on a line of its own above the study's progress bar
    (tqdm.write clears the bar, writes the line, draws the bar again), never glued to the end of the bar's line."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # as logging.StreamHandler: a record that cannot be written is reported, not raised
            self.handleError(record)


@contextlib.contextmanager
def stage_output(log_path: Path, verbose: bool):
    """A stage's printed output and INFO logs go to study.log; warnings and errors still reach the terminal, and
    so do the stages' own progress bars (tqdm on stderr)."""
    root_logger = logging.getLogger()
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setLevel(logging.DEBUG if verbose else logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    console = AboveTheBar(sys.stderr)
    console.setLevel(logging.WARNING)
    console.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved = root_logger.handlers[:], root_logger.level
    root_logger.handlers = [handler, console]  # the stages' logging.basicConfig then leaves them as they are
    root_logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    finally:
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(buffer.getvalue())
        root_logger.handlers, level = saved
        root_logger.setLevel(level)
        handler.close()


def main(argv: Sequence[str] | None = None) -> int:
    """`ragstudy study` on `argv` (None: sys.argv[1:]); the exit code (a bad flag exits 2)."""
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The study its parsed flags ask for (`build_parser`: the chain's flags in `args.chain`); the exit code."""
    started = time.perf_counter()
    chain_args = args.chain

    from ragstudy.io import release_folder

    try:
        root = study_root(args, chain_args)
        from ragstudy.results import check_output_location

        check_output_location(root, ranked_config(chain_args).documents)  # never among the PDFs or in / or ~
        root.mkdir(parents=True, exist_ok=True)
        lock_study(root)  # before anything is planned or written: one study at a time in a folder
    except StudyInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {args.output_dir or 'the study folder'}: cannot create it ({exc.strerror}); pass a writable "
              "--output-dir", file=sys.stderr)
        return 2
    try:
        try:
            stages = plan(args, chain_args, root)
            check_leftovers(root, stages)
        except StudyInputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return run_stages(args, root, stages, started)
    finally:
        release_folder(root, STUDY_LOCK)


def study_root(args: argparse.Namespace, chain_args: argparse.Namespace) -> Path:
    """The study's folder: --output-dir, else the --config file's `output_dir:`, else `results`."""
    if args.output_dir:
        return Path(args.output_dir)
    return Path(ranked_config(chain_args).output_dir)  # the file's key, else the setting's default


def ranked_config(chain_args: argparse.Namespace, **given: Any) -> Any:
    """The config of the study's retrieval stage (every axis list; `given` settings override the flags); a bad
    setting is a StudyInputError."""
    from ragstudy.config import config_from_args

    llm = getattr(chain_args, "llm", None)  # the LLM axis compares answers: the retrieval stage reads the first LLM
    first = {"llm": llm.split(",")[0].strip()} if isinstance(llm, str) and "," in llm else {}
    return config_from_args(argparse.Namespace(**{**vars(chain_args), "retrieval_only": True, **first, **given}),
                            warn_unused=False)


def lock_study(root: Path) -> None:
    """The study folder's lock (like a run's output folder and a Chroma folder): a second study into it stops with
    one line naming the folder and the pid of the study holding it."""
    from ragstudy.io import lock_folder

    lock_folder(root, STUDY_LOCK, "study folder", "--output-dir")


def check_leftovers(root: Path, stages: Sequence[Stage]) -> None:
    """A study re-run with fewer strategies would fold an earlier run's files (retrieval_<s>.csv, Dataset files,
    chunk exports of strategies it does not run) into its verdict and scores: a StudyInputError naming them."""
    from ragstudy import registry

    wanted = {name for stage in stages for name in stage.strategies}  # the answering and the retrieval run's
    left = []
    for folder in sorted({p.parent for p in (root / "retrieval").rglob("retrieval_*.csv")}):
        left += [results.retrieval_path(folder, s) for s in results.ranked_strategies(folder) if s not in wanted]
    answers = root / "answers"
    for spec in registry.specs():
        if spec.name not in wanted:
            left += [p for p in results.dataset_paths(answers, spec) if p.is_file()]
    left += [answers / f"chunks_{s}.csv" for s in results.exported_strategies(answers) if s not in wanted]
    if left:
        shown = ", ".join(str(p.relative_to(root)) for p in left[:3]) + (f" and {len(left) - 3} more"
                                                                          if len(left) > 3 else "")
        raise StudyInputError(f"{root}: holds {shown} of strategies this study does not run (it runs "
                              f"{', '.join(sorted(wanted))}); they would be scored into its verdict as if this "
                              "run had made them. Give this study its own --output-dir, run it with those "
                              "strategies too, or move those files away")


def run_stages(args: argparse.Namespace, root: Path, stages: Sequence[Stage], started: float) -> int:
    """Run the stages that are not up to date, record each in the ledger; the exit code."""
    ledger = Ledger.read(root / LEDGER)
    code = code_hash()
    log_path = root / LOG
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n##### {time.strftime('%Y-%m-%d %H:%M:%S')} ragstudy study "
                  f"{' '.join(args.argv)}\n")
    keys = {}
    todo = []
    for stage in stages:  # what is up to date, from what the earlier stages wrote last time
        keys[stage.name] = ledger.key(stage, code)
        if args.force or not ledger.up_to_date(stage, keys[stage.name], root) or any(s in todo for s in stage.needs):
            todo.append(stage.name)
    for stage in stages:  # a stage that only serves later ones (the first report) is dropped when none of them runs
        if stage.only_before and stage.name in todo and not any(s in todo for s in stage.only_before):
            todo.remove(stage.name)
    expected = {s.name: (ledger.stages.get(s.name, {}).get("seconds") or FIRST_RUN_SECONDS[s.name])
                if s.name in todo else 0.0 for s in stages}
    progress = Progress(stages, expected)
    done_expected, ran = 0.0, []
    for i, stage in enumerate(stages, 1):
        progress.start(i, stage, done_expected)
        if stage.name not in todo:
            progress.finish(stage)
            continue
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n===== stage {i}/{len(stages)}: {stage.name} ({stage.what})\n")
        started_at = time.time()
        t0 = time.perf_counter()
        cause = None
        try:
            with stage_output(log_path, args.verbose):
                wrote = stage.run()
            exit_code = wrote.exit_code
        except (StudyInputError, OSError, sqlite3.Error) as exc:  # one line, as the subcommand would print it
            cause = f"error: {exc if isinstance(exc, StudyInputError) else store_message(exc)}"
            wrote, exit_code = None, 2
        except KeyboardInterrupt:
            progress.close(stopped=True)
            print(f"interrupted in stage {i} ({stage.name}): what it finished is cached; re-run `ragstudy study` "
                  "with the same flags to resume", file=sys.stderr)
            return 130
        seconds = time.perf_counter() - t0
        if exit_code or wrote is None:
            progress.close(stopped=True)  # ends the bar's line: the cause starts a line of its own
            if cause is not None:  # into study.log too, with the stage's own output
                with open(log_path, "a", encoding="utf-8") as log:
                    log.write(cause + "\n")
                print(cause, file=sys.stderr)
            print(f"error: stage {i}/{len(stages)} ({stage.name}) stopped with exit code {exit_code}; its output is in "
                  f"{log_path} (the message above says what to fix); re-run `ragstudy study` to resume",
                  file=sys.stderr)
            ledger.write()
            return int(exit_code)
        files = sorted(str(path.relative_to(root)) for path in wrote.files if path.is_relative_to(root))
        ledger.stages.pop(stage.name, None)  # re-inserted: the ledger lists the stages in the order they last ran
        ledger.stages[stage.name] = {"key": ledger.key(stage, code), "settings": stage.settings,
                                     "seconds": round(seconds, 1), "started": round(started_at, 3),
                                     "finished": round(time.time(), 3),
                                     "wrote": {rel: sha256_file(root / rel) for rel in files}}
        ledger.write()
        ran.append(stage.name)
        if stage.only_before:  # the first report: the retrieval verdict now, before any answer is generated
            progress.bar.clear()
            print("\n".join(verdict_lines(root)) + f"\n(written to {results.REPORT_HTML.path(root)} after "
                  f"{_duration(time.perf_counter() - started)}; the answering stages follow, then the report again)\n",
                  flush=True)
            progress.bar.refresh()
        done_expected += expected[stage.name]
        progress.finish(stage)
    progress.close()
    print(closing_summary(root, stages, ran, time.perf_counter() - started))
    return 0


def verdict_lines(root: Path) -> list[str]:
    """The retrieval verdict's sentence, the check across groups, each group's strategy × budget matrix and
    where the details are (empty before it is scored)."""
    from Postprocessing.reportkit.inputs import group_axis, main_group_source, ranked_folders
    from ragstudy import results
    from ragstudy.scoring.verdict import all_verdicts, verdict_setting
    from ragstudy.scoring.verdict_across import CrossVerdict

    lines: list[str] = []
    if not (root / "retrieval").is_dir():
        return lines
    main, folders = ranked_folders(root / "retrieval")  # several groups of variants: the first one's verdict leads
    frame = results.read_table(main, results.RETRIEVAL_VERDICT)
    if frame is not None and len(frame):
        verdict = all_verdicts(frame)[0]  # the main verdict (the report shows the others below it)
        config = results.read_config(main_group_source(root / "retrieval")[0]).raw
        lines += [verdict.headline(**verdict_setting(config)), ""]
        cross = CrossVerdict.scored(folders, group_axis(root / "retrieval"))
        if cross is not None:
            lines += [cross.headline(), ""]
        for label, v in (cross.verdicts if cross is not None else {"": verdict}).items():
            if v.has_matrix():
                lines += [*([f"Under {label}:"] if label else []), v.matrix_markdown(legend=False)]
        if verdict.has_matrix():  # the legend once, after the matrices
            lines += [verdict.legend(), ""]
        lines += [f"Every difference in words, with its CI and Holm p: "
                  f"{results.RETRIEVAL_SUMMARY_MD.path(root / 'retrieval')} and the report's details.", ""]
    return lines


def closing_summary(root: Path, stages: Sequence[Stage], ran: Sequence[str], seconds: float) -> str:
    """The verdict's headline and lines, what was written where, and what to run next."""

    from Postprocessing.reportkit.inputs import ranked_folders

    lines = verdict_lines(root)
    folders = ranked_folders(root / "retrieval")[1] if (root / "retrieval").is_dir() else {}
    cached = [s.name for s in stages if s.name not in ran]
    lines.append(f"study {'computed ' + ', '.join(ran) if ran else 'recomputed nothing'}"
                 + (f" ({', '.join(cached)} up to date)" if ran and cached else "") + f" in {_duration(seconds)}.")
    lines += [f"  {results.REPORT_HTML.path(root)}   the report: open it in a browser (the verdict first)",
              f"  {root / 'answers'}/   Dataset files, answer scores (metrics_*), chunk quality (chunk_quality*)",
              f"  {root / 'retrieval'}/   rankings, retrieval_summary.md, retrieval_verdict.csv, hit-rate plot"
              + (f" (one folder per variant in variants/, the scores of each group of variants in groups/: "
                 f"{'; '.join(folders)})" if len(folders) > 1 else " (one folder per variant in variants/)"),
              f"  {root / LOG}   every stage's output",
              "next: ragstudy review --results-dir " + str(root / "answers") + " (blinded workbook for raters), "
              "ragstudy sweep sweeps/hope_eight.yaml --output-dir " + str(root / "sweep") + ", or the study on your "
              "PDFs: ragstudy study --documents DIR --questions Q.csv --output-dir DIR2 (docs/running.md)"]
    return "\n".join(lines)

