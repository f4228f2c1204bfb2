"""The LLM as an axis of the answer comparison: `--llm a,b` answers every question with each strategy once per LLM,
each LLM's answers a complete answering run in `<output>/groups/<id>/` (docs/running.md, "Several LLMs"). One LLM:
the run is as it always was, its files in `<output>` itself.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.grid.axes import get

GROUPS_DIR = "groups"


def llm_specs(config: Any) -> tuple[str, ...]:
    """The LLMs of a run (`--llm a,b`: the declared `llm` axis's values), in the order given, duplicates dropped."""
    return get("llm").values(config, "--llm")


def group_id(spec: str) -> str:
    """The folder name of one LLM's answers: the `llm` axis's short form (axes.llm_id)."""
    return get("llm").short(spec)


def validate(config: Any, named: Any) -> None:
    """Several LLMs (the axis's one rule, axes.check_run, refuses them where nothing is answered): answered by
    in-process models (a server serves one model name), each into a folder of its own."""
    specs = llm_specs(config)
    if len(specs) == 1:
        return
    if config.llm_servers:
        raise StudyInputError(f"{named('llm')} {config.profile.llm}: the LLM servers serve one model "
                              f"({named('llm_server_model')}); compare several LLMs in-process, or run once per server")
    ids = [group_id(spec) for spec in specs]
    clash = sorted({i for i in ids if [x.lower() for x in ids].count(i.lower()) > 1})
    if clash:
        raise StudyInputError(f"{named('llm')} {config.profile.llm}: two LLMs would answer into the same folder "
                              f"groups/{clash[0]}; name each LLM once")


def group_configs(config: Any) -> list[tuple[str, str, Any]]:
    """(group id, LLM, its run's config) for each LLM of the run."""
    out = Path(config.output_dir)
    return [(group_id(spec), spec, replace(config, profile=replace(config.profile, llm=spec),
                                           output_dir=str(out / GROUPS_DIR / group_id(spec))))
            for spec in llm_specs(config)]


def check_single(config: Any) -> None:
    """A run with one LLM never writes beside the groups of a run with several."""
    if read_groups(config.output_dir):
        raise StudyInputError(f"{config.output_dir} holds the answers of several LLMs (answer_groups.csv); answer "
                              "with one LLM into another --output-dir, or pass --llm with those LLMs again")


def read_groups(folder: str | Path) -> list[tuple[str, str, Path]]:
    """(group id, LLM, folder) of each group an answering run with several LLMs wrote into `folder`; [] for a run
    with one LLM. A group id is checked as a name: it never leads outside `folder`."""
    from ragstudy import results

    folder = Path(folder)
    if not results.ANSWER_GROUPS.path(folder).is_file():
        return []
    frame = results.read_table(folder, results.ANSWER_GROUPS)
    groups = []
    for row, (gid, spec) in enumerate(zip(frame["group"], frame["llm"]), start=2):
        if group_id(str(spec)) != gid:
            raise StudyInputError(f"{results.ANSWER_GROUPS.path(folder)} row {row}: group {gid!r} is not the "
                                  f"folder name of the LLM {spec!r}; the file was edited: re-run `ragstudy answer "
                                  f"--llm ...` into {folder}")
        groups.append((gid, str(spec), folder / GROUPS_DIR / gid))
    return groups
