"""The test session's own plumbing, which keeps `pytest -n 2` fast and its workers apart: each worker's project cache
starts with copies (never links) of the models the README's study built, the caches a test makes for itself
hard-link the worker's, and every chain run a test starts in a subprocess indexes into its own Chroma root, never
the repository's RAG*/db."""

from __future__ import annotations

from pathlib import Path

from conftest import SHARED_RESULTS, own_db_dir, seed_built_models, seed_from_user_runs, user_study_is_current


def test_the_test_session_copies_the_users_built_models_and_never_links_them(tmp_path: Path) -> None:
    """conftest seeds each worker's cache with the models the README's study built: finished folders only, as
    copies (damaging one in a test leaves the user's intact), and nothing but models (no answers, no rankings)."""
    user = tmp_path / "user"
    (user / "models" / "SmolLM2").mkdir(parents=True)
    (user / "models" / "SmolLM2" / "model.safetensors").write_bytes(b"w" * 64)
    (user / "models" / "e5.partial").mkdir()  # an export still being written, or one a killed run left
    (user / "models" / "SmolLM2.corrupt-20261202T101500Z").mkdir()
    (user / "onnx" / "677a8e").mkdir(parents=True)
    (user / "answers").mkdir()
    (user / "answers" / "answers.jsonl").write_text("{}\n", encoding="utf-8")
    session = tmp_path / "session"
    assert seed_built_models(session, user) == ["models", "onnx"]
    assert sorted(p.name for p in (session / "models").iterdir()) == ["SmolLM2"]
    assert (session / "onnx" / "677a8e").is_dir() and not (session / "answers").exists()
    copy = session / "models" / "SmolLM2" / "model.safetensors"
    assert not copy.is_symlink()
    copy.write_bytes(b"damaged")  # in place, as the damage tests do
    assert (user / "models" / "SmolLM2" / "model.safetensors").read_bytes() == b"w" * 64
    assert seed_built_models(tmp_path / "fresh", tmp_path / "no study") == []


def test_the_test_session_copies_the_users_vectors_and_chunks_and_nothing_else(tmp_path: Path) -> None:
    """Each worker's cache also starts with copies of the vectors and chunks of the user's runs (content-keyed: found
    only for the very same input), never their answers or rankings, and never links: a test's runs write into them."""
    from customembedding import VectorCache

    user = tmp_path / "user"
    stored = VectorCache(user / "vectors")
    stored.put_many("m", "float32", [("k", [1.0, 0.0])])
    stored.close()
    (user / "chunks").mkdir()
    (user / "chunks" / "paragraph-abc.json").write_text("[]", encoding="utf-8")
    (user / "chunks" / "fixed-abc.json.partial").write_text("[", encoding="utf-8")
    for name in ("answers", "rankings"):
        (user / name).mkdir()
        (user / name / "x.jsonl").write_text("{}\n", encoding="utf-8")
    session = tmp_path / "session"
    assert SHARED_RESULTS == ("vectors", "chunks")
    assert seed_from_user_runs(session, SHARED_RESULTS, user) == ["vectors", "chunks"]
    assert sorted(p.name for p in session.iterdir()) == ["chunks", "vectors"]
    assert [p.name for p in (session / "chunks").iterdir()] == ["paragraph-abc.json"]  # finished files only
    copied = VectorCache(session / "vectors")
    assert copied.get_many("m", "float32", ["k"])["k"] == [1.0, 0.0]
    copied.put_many("m", "float32", [("new", [0.0, 1.0])])  # written in the session's copy only
    copied.close()
    assert VectorCache(user / "vectors").count("m") == 1
    assert not any(p.is_symlink() or p.stat().st_nlink > 1 for p in session.rglob("*") if p.is_file())
    assert seed_from_user_runs(tmp_path / "fresh", SHARED_RESULTS, tmp_path / "no study") == []


def test_the_users_caches_are_seeded_only_after_a_study_under_this_very_code(tmp_path: Path) -> None:
    """A ledger whose retrieval and answering stages carry the keys `ragstudy study` gives them now (this code, these
    settings and inputs) lets the session start from the study's caches; no ledger, a stage missing, or a key from
    other code or settings does not."""
    import json

    from ragstudy.grid.runidentity import code_hash
    from ragstudy_cli import study

    root = tmp_path / "results"
    assert not user_study_is_current(root)  # no study ran there
    args = study.build_parser().parse_args(["--output-dir", str(root)])
    stages = {stage.name: stage for stage in study.plan(args, args.chain, root)}
    ledger = study.Ledger(root / study.LEDGER)
    record = {name: {"key": ledger.key(stages[name], code_hash()), "wrote": {}} for name in ("retrieval", "answers")}
    root.mkdir()
    (root / study.LEDGER).write_text(json.dumps({"stages": record}), encoding="utf-8")
    assert user_study_is_current.__wrapped__(root)
    edited = {name: {**value, "key": ledger.key(stages[name], "another code")} for name, value in record.items()}
    (root / study.LEDGER).write_text(json.dumps({"stages": edited}), encoding="utf-8")
    assert not user_study_is_current.__wrapped__(root)
    (root / study.LEDGER).write_text(json.dumps({"stages": {"retrieval": record["retrieval"]}}), encoding="utf-8")
    assert not user_study_is_current.__wrapped__(root)  # the answers never ran


def test_a_chain_run_from_a_test_gets_its_own_chroma_root(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert own_db_dir(["--retrieval-only", "--output-dir", out]) == [
        "--retrieval-only", "--output-dir", str(out), "--db-dir", str(tmp_path / "out-db")]
    named = ["--output-dir", str(out), "--db-dir", str(tmp_path / "mine")]
    assert own_db_dir(named) == named
    server = ["--output-dir", str(out), "--chroma-server", "http://127.0.0.1:1"]
    assert own_db_dir(server) == server


def test_a_tests_own_caches_link_the_sessions_models_and_a_damage_by_replacement_stays_there(tmp_path: Path) -> None:
    """The caches a test makes for itself (one per executor) hard-link the session's models instead of copying 2 GB
    each; the damage tests replace a file (test_cache_files.damage), which leaves the session's file whole."""
    from test_cache_files import damage

    session = tmp_path / "session"
    (session / "onnx" / "677a8e").mkdir(parents=True)
    (session / "onnx" / "677a8e" / "model.onnx").write_bytes(b"w" * 64)
    (session / "onnx" / "677a8e" / ".model.onnx.lock").touch()
    own = tmp_path / "own"
    assert seed_built_models(own, session, link=True) == ["onnx"]
    linked = own / "onnx" / "677a8e" / "model.onnx"
    assert linked.stat().st_ino == (session / "onnx" / "677a8e" / "model.onnx").stat().st_ino
    assert not (own / "onnx" / "677a8e" / ".model.onnx.lock").exists()
    damage(linked, "truncated")
    assert linked.read_bytes() == b"w" * 32
    assert (session / "onnx" / "677a8e" / "model.onnx").read_bytes() == b"w" * 64
