"""Knowledge base: vectors shared across configurations (embedding cache, k-free collections) and parent rankings."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from itertools import islice
from pathlib import Path

import pytest

from ragstudy import registry
from ragstudy.config import StudyConfig
from ragstudy.pipeline import StageSettings, chunk_documents
from ragstudy.stores.knowledge_base import KnowledgeBase, TIE_DECIMALS, child_splitter, child_windows, collection_name
from ragstudy.text.textlayer import load_documents

QUERIES = ["Come ci si autentica per accedere al portale? SPID", "Per quanti anni si conservano i fascicoli?",
           "Entro quanti giorni risponde l'assistenza?", "firma digitale certificato qualificato"]


def cached(embedding, folder: Path):
    """The session's MiniLM (model shared, not reloaded) with its own vector cache and fresh counters."""
    from customembedding import VectorCache

    clone = copy.copy(embedding)
    clone.cache = VectorCache(folder)
    clone.texts_embedded = clone.cache_hits = 0
    return clone


def chunks(pdf_dir: Path, strategy: str, *set_params: str):
    config = StudyConfig.resolve(profile="lite", strategies=strategy, set_params=list(set_params))
    return config.strategy_params[strategy], chunk_documents(load_documents(pdf_dir),
                                                             StageSettings.of(config, strategy))


def knowledge_base(strategy: str, params, embedding, db: Path) -> KnowledgeBase:
    return KnowledgeBase(registry.get(strategy), params, embedding, embedding.model_id, db_dir=db)


def child_texts(kb: KnowledgeBase, chunked) -> list[str]:
    parents = [chunk.to_document() for item in chunked for chunk in item.chunks]
    return [child.page_content for child in child_windows(parents, child_splitter(kb.params))[0]]


def test_a_sweep_over_k_embeds_once(pdf_dir: Path, tmp_path: Path, minilm_embedding) -> None:
    embedding = cached(minilm_embedding, tmp_path / "vectors")
    k2, chunked = chunks(pdf_dir, "fixed-size", "fixed-size.k=2")
    k4, _ = chunks(pdf_dir, "fixed-size", "fixed-size.k=4")
    first_kb = knowledge_base("fixed-size", k2, embedding, tmp_path / "db")
    retriever2, first = first_kb.build(chunked)
    distinct = len(set(child_texts(first_kb, chunked)))
    assert first.embedded == embedding.texts_embedded == distinct and first.added == first.children
    assert first.reused == first.children - distinct  # a text seen twice in one build is embedded once
    retriever4, second = knowledge_base("fixed-size", k4, embedding, tmp_path / "db").build(chunked)
    assert second.collection == first.collection
    assert (second.embedded, second.added, second.reused) == (0, 0, second.children)
    assert embedding.texts_embedded == distinct  # no window ran through the model twice
    # k changes only what is read back
    assert retriever2.search_kwargs["k"] == 2 and retriever4.search_kwargs["k"] == 4
    two, four = ([doc.id for doc in r.invoke(QUERIES[0])] for r in (retriever2, retriever4))
    assert two and four[:len(two)] == two


def test_identical_child_windows_in_other_collections_are_not_embedded_again(pdf_dir: Path, tmp_path: Path,
                                                                             minilm_embedding) -> None:
    """Other collections whose windows coincide (another db folder, a wider child window than any parent,
    another strategy with the same parents) read every vector from the cache."""
    embedding = cached(minilm_embedding, tmp_path / "vectors")
    narrow, chunked = chunks(pdf_dir, "newline", "newline.child_chunk_size=1000")
    wide, _ = chunks(pdf_dir, "newline", "newline.child_chunk_size=2000")
    kb = knowledge_base("newline", narrow, embedding, tmp_path / "db")
    texts = child_texts(kb, chunked)
    assert texts == [chunk.contents for item in chunked for chunk in item.chunks]  # windows are whole parents
    _, first = kb.build(chunked)
    assert first.embedded == len(set(texts)) > 0

    # the same configuration in a fresh Chroma folder (another --db-dir, or a Chroma server)
    _, moved = knowledge_base("newline", narrow, embedding, tmp_path / "db2").build(chunked)
    assert moved.collection == first.collection and moved.added == moved.children
    # child_chunk_size 1000 -> 2000: another collection, the same texts
    kb_wide = knowledge_base("newline", wide, embedding, tmp_path / "db")
    assert child_texts(kb_wide, chunked) == texts
    _, widened = kb_wide.build(chunked)
    assert widened.collection != first.collection and widened.added == widened.children
    # another strategy whose parents (hence windows) are the same texts under other ids
    twin = registry.register(replace(registry.get("newline"), name="newline-twin", folder="RAGNewLineTwin",
                                         dataset_name="DatasetNewLineTwin"))
    try:
        twin_chunked = chunk_documents(load_documents(pdf_dir), StageSettings.of(
            StudyConfig.resolve(profile="lite", strategies="newline-twin",
                                set_params=["newline-twin.child_chunk_size=1000"]), "newline-twin"))
        kb_twin = KnowledgeBase(twin, narrow, embedding, embedding.model_id, db_dir=tmp_path / "db")
        assert child_texts(kb_twin, twin_chunked) == texts
        _, other = kb_twin.build(twin_chunked)
    finally:
        registry.unregister("newline-twin")
    assert other.collection not in (first.collection, widened.collection) and other.added == other.children
    for stats in (moved, widened, other):
        assert stats.embedded == 0 and stats.reused == stats.children
    assert embedding.texts_embedded == len(set(texts))


def test_resume_and_a_new_embedding_instance_read_the_cache(pdf_dir: Path, tmp_path: Path, minilm_path: str,
                                                            minilm_embedding) -> None:
    from customembedding import CustomEmbedding

    params, chunked = chunks(pdf_dir, "newline")
    embedding = cached(minilm_embedding, tmp_path / "vectors")
    retriever, first = knowledge_base("newline", params, embedding, tmp_path / "db").build(chunked)
    ids = retriever.vectorstore.get(include=[])["ids"]
    retriever.vectorstore.delete(ids=ids[:5])  # an interrupted indexing run
    _, resumed = knowledge_base("newline", params, embedding, tmp_path / "db").build(chunked)
    assert resumed.added == 5 and resumed.embedded == 0
    # a later process: a new model instance on the same cache folder, a fresh Chroma folder
    later = CustomEmbedding(minilm_path, minilm_embedding.encoder, model_id=minilm_embedding.model_id,
                            cache_dir=tmp_path / "vectors")
    _, again = knowledge_base("newline", params, later, tmp_path / "db3").build(chunked)
    assert again.embedded == later.texts_embedded == 0 and later.cache_hits == again.children == first.children


def test_cached_vectors_equal_fresh_ones_and_keys_hold_the_exact_text(tmp_path: Path, minilm_embedding) -> None:
    embedding = cached(minilm_embedding, tmp_path / "vectors")
    texts = ["Il certificato dura tre anni.", "L'accesso è consentito dalle otto alle venti.",
             "Il certificato dura tre anni."]
    fresh = minilm_embedding.embed_documents(texts)
    stored = embedding.embed_documents(texts)
    assert embedding.texts_embedded == 2 and embedding.cache_hits == 1
    again = embedding.embed_documents(list(reversed(texts)))
    assert embedding.texts_embedded == 2 and again == list(reversed(stored))
    for a, b in zip(stored, fresh):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5
    # a query is embedded with its instruction: another string, another key, another vector
    instructed = copy.copy(embedding)
    instructed.query_instruction = "Given a question, retrieve passages"
    query = instructed.embed_query(texts[0])
    assert instructed.texts_embedded == 3 and query != stored[0]
    assert embedding.embed_query(texts[0]) == stored[0]  # no instruction: the same string as the passage
    # another dtype or model label never reads these vectors
    assert embedding.cache.get_many(embedding.model_label, "bfloat16", ["x"]) == {}
    assert embedding.cache.count(embedding.model_label) == 3


def test_collection_name_ignores_k_but_not_what_shapes_the_vectors(pdf_dir: Path) -> None:
    spec = registry.get("fixed-size")
    params, chunked = chunks(pdf_dir, "fixed-size")
    base = collection_name(spec, params, chunked, "minilm")
    assert collection_name(spec, replace(params, k=9), chunked, "minilm") == base
    assert collection_name(spec, replace(params, child_chunk_size=150), chunked, "minilm") != base
    assert collection_name(spec, replace(params, child_chunk_overlap=20), chunked, "minilm") != base
    assert collection_name(spec, params, chunked, "minilm@bfloat16") != base
    _, other_parents = chunks(pdf_dir, "fixed-size", "fixed-size.chunk_size=300")
    assert collection_name(spec, params, other_parents, "minilm") != base


@pytest.fixture(scope="module")
def built_newline(pdf_dir: Path, tmp_path_factory: pytest.TempPathFactory, minilm_embedding):
    params, chunked = chunks(pdf_dir, "newline")
    kb = knowledge_base("newline", params, minilm_embedding, tmp_path_factory.mktemp("rank-db"))
    retriever, stats = kb.build(chunked)
    return kb, retriever, stats


def brute_force_windows(kb: KnowledgeBase, query: str) -> list[tuple[str, float, str]]:
    """(child id, distance, parent) of every child window the collection stores, scored in plain Python (math.fsum
    of squared differences: no numpy, no index), best first, ties broken by child id."""
    stored = kb.vectorstore.get(include=["embeddings", "metadatas"])
    vector = [float(x) for x in kb.embedding.embed_query(query)]
    scored = [(cid, math.fsum((float(a) - b) ** 2 for a, b in zip(row, vector)), meta["doc_id"])
              for cid, row, meta in zip(stored["ids"], stored["embeddings"], stored["metadatas"])]
    return sorted(scored, key=lambda item: (round(item[1], TIE_DECIMALS), item[0]))


def brute_force_ranking(kb: KnowledgeBase, query: str) -> list[tuple[str, float]]:
    """Parents by their best window in brute_force_windows."""
    best: dict[str, float] = {}
    for _, distance, parent in brute_force_windows(kb, query):
        best.setdefault(parent, distance)
    return list(best.items())


def same_ranking(ranked, expected) -> bool:
    return [r.document.id for r in ranked] == [pid for pid, _ in expected] and all(
        r.score == pytest.approx(d, abs=1e-9) for r, (_, d) in zip(ranked, expected))


def test_rank_orders_parents_by_their_best_window(built_newline) -> None:
    kb, _, stats = built_newline
    for query in QUERIES:
        expected = brute_force_ranking(kb, query)
        for depth in (1, 3, 7):
            ranked = kb.rank(query, depth)
            assert same_ranking(ranked, expected[:depth])
            assert [r.rank for r in ranked] == list(range(1, depth + 1))
    top = kb.rank(QUERIES[0], 1)[0]
    assert "SPID" in top.document.page_content
    assert {"doc_id", "path", "page_start", "page_end"} <= set(top.document.metadata)
    everything = kb.rank(QUERIES[1], 10_000)  # deeper than the collection: every parent once
    assert len(everything) == len({r.document.id for r in everything}) == len(brute_force_ranking(kb, QUERIES[1]))
    assert all(a.score <= b.score + 10 ** -TIE_DECIMALS for a, b in zip(everything, everything[1:]))


def test_rank_agrees_with_the_retriever(built_newline) -> None:
    kb, retriever, _ = built_newline
    for query in QUERIES:
        parents = [doc.id for doc in retriever.invoke(query)]
        assert [r.document.id for r in kb.rank(query, len(parents))] == parents


def test_rank_breaks_ties_between_identical_windows_by_id(tmp_path: Path, minilm_embedding) -> None:
    from conftest import write_test_pdf

    docs = tmp_path / "docs"
    docs.mkdir()
    write_test_pdf(docs / "ripetuto.pdf", pages=6)  # six identical pages: every window has five exact twins
    params, chunked = chunks(docs, "newline")
    kb = knowledge_base("newline", params, minilm_embedding, tmp_path / "db")
    kb.build(chunked)
    ranked = kb.rank("firma digitale", 6)
    scores = {round(r.score, TIE_DECIMALS) for r in ranked}
    assert len(scores) == 1  # the six copies of the paragraph tie ...
    assert [r.document.id for r in ranked] == [doc_id for doc_id, _ in brute_force_ranking(kb, "firma digitale")[:6]]
    assert [r.document.id for r in ranked] == sorted(r.document.id for r in ranked)  # ... and come in id order


def test_rank_before_build_or_with_a_bad_depth_is_an_error(pdf_dir: Path, tmp_path: Path, minilm_embedding,
                                                           built_newline) -> None:
    from ragstudy.errors import StudyInputError

    params, _ = chunks(pdf_dir, "newline")
    with pytest.raises(RuntimeError, match="build"):
        knowledge_base("newline", params, minilm_embedding, tmp_path / "db").rank("x", 3)
    with pytest.raises(StudyInputError, match="depth"):
        built_newline[0].rank("x", 0)


def test_rank_and_the_retriever_search_every_window_not_chromas_approximate_index(pdf_dir: Path, tmp_path: Path,
                                                                                  minilm_embedding) -> None:
    """Chroma's HNSW search is approximate and its graph depends on the build (on the shared PDFs two builds of one
    collection ranked differently): ranking and the chain's retriever must not consult it at all."""
    params, chunked = chunks(pdf_dir, "newline", "newline.child_chunk_size=40")  # ~5 windows a parent
    kb = knowledge_base("newline", params, minilm_embedding, tmp_path / "db")
    retriever, _ = kb.build(chunked)
    query = QUERIES[2]
    nearest = kb.vectorstore.similarity_search_with_score(query, k=5)  # the same distance as Chroma's, to 1e-6
    exact = dict(kb.windows.nearest(kb.embedding.embed_query(query)))
    assert all(exact[doc.id] == pytest.approx(d, abs=1e-6) for doc, d in nearest)

    def refuse(*args, **kwargs):
        raise AssertionError("Chroma's approximate search was consulted")

    for name in ("similarity_search", "similarity_search_with_score", "similarity_search_by_vector",
                 "similarity_search_by_vector_with_relevance_scores", "similarity_search_with_relevance_scores"):
        object.__setattr__(kb.vectorstore, name, refuse)
    expected = brute_force_ranking(kb, query)
    assert same_ranking(kb.rank(query, len(expected)), expected)
    in_k = list(dict.fromkeys(parent for _, _, parent in brute_force_windows(kb, query)[:params.k]))
    assert [doc.id for doc in retriever.invoke(query)] == in_k


def test_a_collection_built_another_way_with_a_poor_graph_ranks_alike(pdf_dir: Path, tmp_path: Path,
                                                                      minilm_embedding) -> None:
    """The same windows put in backwards, into an HNSW graph of beams 1 and M 2 (an approximate search over it misses
    neighbours: the ranking before the exact search failed here): the rankings must not see how it was built."""
    params, chunked = chunks(pdf_dir, "newline", "newline.child_chunk_size=40")
    first = knowledge_base("newline", params, minilm_embedding, tmp_path / "a")
    first.build(chunked)
    stored = first.vectorstore.get(include=["embeddings", "metadatas", "documents"])
    second = knowledge_base("newline", params, minilm_embedding, tmp_path / "b")
    name = collection_name(registry.get("newline"), params, chunked, minilm_embedding.model_id)
    poor = {"hnsw:search_ef": 1, "hnsw:construction_ef": 1, "hnsw:M": 2}
    collection = second._client().get_or_create_collection(name, metadata=poor)
    backwards = slice(None, None, -1)
    collection.add(ids=stored["ids"][backwards], embeddings=list(stored["embeddings"][backwards]),
                   metadatas=stored["metadatas"][backwards], documents=stored["documents"][backwards])
    _, stats = second.build(chunked)
    assert stats.embedded == 0 and stats.added == 0  # every window was already there, put in backwards
    for query in QUERIES:
        assert [(r.document.id, r.score) for r in second.rank(query, 10)] == [
            (r.document.id, r.score) for r in first.rank(query, 10)]


def test_windows_given_their_neighbours_vectors_are_found_and_written_again(pdf_dir: Path, tmp_path: Path,
                                                                           minilm_embedding, caplog) -> None:
    """A damaged store, or one another model of the same size filled under this model's name: each window of the
    collection holds its neighbour's vector (put there through chromadb's own API). The next build compares them with
    the vector cache, writes the wrong ones again from it and ranks as the clean collection did."""
    import logging

    import numpy as np

    embedding = cached(minilm_embedding, tmp_path / "vectors")
    params, chunked = chunks(pdf_dir, "newline")
    clean = knowledge_base("newline", params, embedding, tmp_path / "db")
    _, built = clean.build(chunked)
    expected = [[(r.document.id, r.score) for r in clean.rank(query, 10)] for query in QUERIES]
    collection = clean._client().get_collection(built.collection)
    stored = collection.get(include=["embeddings"])
    shifted = np.roll(np.asarray(stored["embeddings"]), 1, axis=0)  # window i gets window i-1's vector
    collection.update(ids=stored["ids"], embeddings=shifted)
    moved = int((np.abs(shifted - stored["embeddings"]).max(axis=1) > 0).sum())  # twins' vectors are the same
    assert moved > len(stored["ids"]) // 2

    again = knowledge_base("newline", params, embedding, tmp_path / "db")
    with caplog.at_level(logging.WARNING, logger="ragstudy.stores.knowledge_base"):
        _, stats = again.build(chunked)
    assert [[(r.document.id, r.score) for r in again.rank(query, 10)] for query in QUERIES] == expected
    assert (stats.replaced, stats.added, stats.embedded) == (moved, 0, 0)  # from the vector cache, not the model
    assert f"collection {built.collection} held other vectors than the vector cache's for {moved} of its " \
           f"{len(stored['ids'])} child windows" in caplog.text and str(tmp_path / "db") in caplog.text
    assert np.array_equal(collection.get(ids=stored["ids"], include=["embeddings"])["embeddings"],
                          stored["embeddings"])  # written back: the next run finds the collection whole
    _, third = knowledge_base("newline", params, embedding, tmp_path / "db").build(chunked)
    assert third.replaced == 0


def test_exact_windows_rank_best_first_with_ties_by_id_and_refuse_a_foreign_vector() -> None:
    from ragstudy.errors import StudyInputError
    from ragstudy.stores.knowledge_base import ExactWindows

    windows = ExactWindows.of(["c", "a", "b", "d"], [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8]])
    assert list(windows.nearest([1.0, 0.0])) == [("b", 0.0), ("c", 0.0), ("d", pytest.approx(0.8)), ("a", 2.0)]
    assert list(ExactWindows.of([], []).nearest([1.0, 0.0])) == []  # an empty collection ranks nothing
    with pytest.raises(StudyInputError, match="3 dimensions, the collection's windows 2"):
        list(windows.nearest([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="4 ids"):
        ExactWindows.of(["a", "b", "c", "d"], [[1.0, 0.0]])


def test_ranked_parents_search_the_windows_once_however_deep_they_are_read(built_newline, monkeypatch) -> None:
    """dense reads deeper and deeper until its largest budget is filled: one search per question, not one per depth."""
    from ragstudy.stores.knowledge_base import ExactWindows

    kb = built_newline[0]
    vector = kb.embedding.embed_query(QUERIES[1])
    searches: list[int] = []
    nearest_rows = ExactWindows.nearest_rows
    monkeypatch.setattr(ExactWindows, "nearest_rows", lambda self, v: searches.append(1) or nearest_rows(self, v))
    parents = kb.ranked_parents(vector)
    read = list(islice(parents, 1)) + list(islice(parents, 2)) + list(islice(parents, 4))
    assert len(searches) == 1
    assert [(r.document.id, r.score, r.rank) for r in read] == [
        (r.document.id, r.score, r.rank) for r in islice(kb.ranked_parents(vector), 7)]
