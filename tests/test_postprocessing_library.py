"""The Postprocessing library's shape: metrics registered with the function that computes them, the bootstrap
flags defined once for every script, and scripts that import only library modules."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from Postprocessing import answer_metrics as am
from Postprocessing import cli, metric_catalogue

REPO = Path(__file__).resolve().parents[1]
POSTPROCESSING = REPO / "Postprocessing"


def _is_script(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # deferred imports included
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


MY_FILES = ("common", "cli", "formatting", "survey_stats", "metric_catalogue", "answer_metrics", "answer_scoring",
            "review", "survey", "plots", "offline_data", "score_answers", "build_review", "analyse_survey",
            "score_retrieval", "judge_chunks", "write_report")


@pytest.mark.parametrize("name", MY_FILES)
def test_no_postprocessing_module_imports_a_script(name):
    scripts = {f"Postprocessing.{p.stem}" for p in POSTPROCESSING.glob("*.py") if _is_script(p)}
    assert "Postprocessing.evaluation_metrics" in scripts and "Postprocessing.answer_metrics" not in scripts
    assert _imported_modules(POSTPROCESSING / f"{name}.py") & scripts == set()


def test_every_answer_scorer_computes_exactly_the_metrics_it_registers():
    hyps, refs = ["la città è bella", "il gatto dorme"], ["la città bella", "un cane dorme"]
    config = am.MetricsConfig(n_resamples=50)
    for name in ("bleu", "rouge"):  # the offline, model-free ones
        scorer = metric_catalogue.scorer(name)
        values = scorer.items(hyps, refs, config)
        assert list(values) == list(scorer.metrics)
        assert all(len(v) == 2 and all(metric_catalogue.get(m).scale[0] <= x <= metric_catalogue.get(m).scale[1]
                                       for x in v) for m, v in values.items())
        assert all(metric_catalogue.get(m).scorer == name for m in scorer.metrics)
    corpus = metric_catalogue.scorer("bleu").corpus[am.CORPUS_BLEU](hyps, refs, config)
    assert corpus.low <= corpus.point <= corpus.high and corpus.signature.startswith("nrefs:1")
    assert metric_catalogue.get(am.CORPUS_BLEU).aggregation == "corpus"
    assert list(metric_catalogue.scorers())[:4] == ["bleu", "rouge", "meteor", "bertscore"]
    assert metric_catalogue.decimals("BLEU") == 2 and metric_catalogue.decimals("METEOR") == 3


def test_a_metric_registered_twice_with_other_facts_is_refused():
    with pytest.raises(ValueError, match="registers metric name .BLEU., which metric .BLEU. already uses"):
        metric_catalogue.register_metric("BLEU", "answers", "something else", True)


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="x")
    cli.add_bootstrap_args(parser)
    return parser.parse_args(list(argv))


def test_bootstrap_flags_have_one_set_of_defaults():
    args = _parse()
    assert (args.n_resamples, args.seed, args.confidence) == (10_000, 0, 0.95)
    assert _parse("--n-resamples", "5", "--confidence=0.9").confidence == 0.9


@pytest.mark.parametrize(("argv", "message"), [
    (["--confidence", "1.5"], "--confidence 1.5: must be between 0 and 1"),
    (["--confidence=0"], "--confidence 0.0: must be between 0 and 1"),
    (["--n-resamples", "0"], "--n-resamples 0: must be at least 1"),
])
def test_bad_bootstrap_flag_exits_2_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        _parse(*argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_script_rejects_a_bad_confidence_before_reading_anything(tmp_path):
    proc = subprocess.run([sys.executable, "Postprocessing/evaluation_metrics.py", "--results-dir",
                           str(tmp_path / "none"), "--confidence", "1.5"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "--confidence 1.5: must be between 0 and 1" in proc.stderr
