"""A new axis of the grid is one declaration (ragstudy.grid.axes) plus the code that reads its value: here the child
windows' size, whose value the strategies' parameters already carry to the index (so no other code). Declared in
this file only, it expands the grid, names the variants, fills variants.csv, the sweep file's keys, and the groups
that the verdict is checked across (a 2 x 2 grid: two strategies x two window sizes, BM25: no model)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from ragstudy import retrievers
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.grid import axes
from ragstudy.scoring.evidence import default_evidence
from ragstudy_cli import app

REPO = Path(__file__).resolve().parents[1]


def _sizes(value, where: str) -> tuple[str, ...]:
    chosen = axes.split_values(value, where)
    if not all(size.isdigit() and int(size) > 0 for size in chosen):
        raise StudyInputError(f"{where} {value!r}: child windows are a positive number of characters")
    return chosen


def _windows(config, strategy: str, value: str):  # the code that reads its value: the strategy's child windows
    params = config.strategy_params[strategy]
    return replace(config, strategy_params={strategy: replace(params, child_chunk_size=int(value))})


WINDOWS = axes.Axis("child_windows", "child-window size", None, _sizes, short=lambda size: f"w{size}",
                    applies=lambda strategy, values: retrievers.get(values["retriever"]).unit == "children",
                    assign=_windows, default=("100", "300"))


@pytest.fixture
def windows_axis():
    axes.register_axis(WINDOWS)
    yield WINDOWS
    axes.AXES.remove(WINDOWS)


def test_a_new_axis_expands_the_grid_and_parses_in_sweep_files(windows_axis, tmp_path) -> None:
    from ragstudy.grid import variants
    from ragstudy.grid.sweep import load_sweep

    config = StudyConfig.resolve(profile="lite", strategies="fixed-size,newline", retriever="bm25,bm25-parents",
                                 retrieval_only=True, warn_unused=False)
    assert [v.id for v in variants.expand(config)] == [
        "fixed-size__bm25__raw__w100", "fixed-size__bm25__raw__w300", "fixed-size__bm25-parents__raw",
        "newline__bm25__raw__w100", "newline__bm25__raw__w300", "newline__bm25-parents__raw"]  # parents: n/a
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("grid:\n  - {strategy: newline, child_windows: [150, 250]}\n", encoding="utf-8")
    assert [c.axes for c in load_sweep(sweep).configs] == [{"child_windows": "150"}, {"child_windows": "250"}]
    sweep.write_text("configs:\n  - {strategy: newline, child_windows: big}\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match=r"configs\[0\]: child_windows 'big': child windows are a positive"):
        load_sweep(sweep)


@pytest.mark.slow
def test_a_two_by_two_grid_over_a_new_axis_gets_the_verdict_across_it(windows_axis, tmp_path) -> None:
    out = tmp_path / "grid"
    assert app.main(["retrieve", "--profile", "lite", "--strategies", "fixed-size,newline", "--retriever", "bm25",
                     "--limit", "5", "--budgets", "500,1000", "--output-dir", str(out),
                     "--db-dir", str(tmp_path / "db")]) == 0
    listed = pd.read_csv(out / "variants.csv", dtype=str)
    assert list(listed.columns) == ["id", "strategy", "params", "retriever", "text_layer", "embedding",
                                    "child_windows"]
    assert list(listed["child_windows"]) == ["100", "300", "100", "300"]
    recorded = json.loads((out / "variants" / "newline__bm25__raw__w100" / "config.json").read_text("utf-8"))
    assert recorded["strategy_params"]["newline"]["child_chunk_size"] == 100  # the variant's run read its value
    small, large = (pd.read_csv(out / "variants" / f"newline__bm25__raw__w{size}" / "retrieval_newline.csv")
                    for size in (100, 300))
    assert not small["contents"].equals(large["contents"]) or not small["score"].equals(large["score"])
    assert app.main(["score-retrieval", "--results-dir", str(out), "--no-plot", "--n-resamples", "200",
                     "--evidence", str(default_evidence(REPO / "Questions.csv"))]) == 0
    across = pd.read_csv(out / "retrieval_verdict_across.csv", dtype=str)
    assert list(dict.fromkeys(across["group"])) == ["w100", "w300"]  # the verdict across the new axis's groups
    summary = (out / "retrieval_summary.md").read_text(encoding="utf-8")
    assert "checked across child-window sizes" in summary
    for size in (100, 300):
        verdict = pd.read_csv(out / "groups" / f"w{size}" / "retrieval_verdict.csv", dtype=str)
        assert set(verdict["strategy"]) >= {"fixed-size", "newline"}
