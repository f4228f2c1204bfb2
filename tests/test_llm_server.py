"""The OpenAI-compatible server backend against a real server: `transformers serve` with the lite SmolLM2 folder on
127.0.0.1 (a free port), started by the test and stopped afterwards. Checks: down servers and unknown model names
fail up front naming the URL, answers equal the in-process greedy answers, come back in input order, are cached
under the served model name, and requests are spread over the servers given."""

from __future__ import annotations

import pytest
from test_chroma_server import free_port

from ragstudy.errors import StudyInputError
from ragstudy.llms import AnswerCache, CachedGenerator, GenerationParams
from ragstudy.llms.server_engine import ServerGenerator, api_base, check_servers, local_server

PROMPTS = ["Rispondi con una parola: di che colore è il cielo?", "Qual è la capitale d'Italia?",
           "Scrivi il numero che viene dopo il due.", "Come si chiama il satellite della Terra?"]


@pytest.fixture(scope="module")
def smollm2_server():
    """(url, model name) of `transformers serve` on the converted SmolLM2 (the tests' tiny LLM); the process is stopped afterwards."""
    from ragstudy.models import WHEEL_SMOLLM2, resolve_llm

    folder = resolve_llm(WHEEL_SMOLLM2, "test")
    with local_server(folder, wait_s=180) as (url, _):
        yield url, folder


def test_server_urls_are_normalised_and_checked() -> None:
    assert api_base("http://127.0.0.1:8000") == api_base("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    with pytest.raises(StudyInputError, match="127.0.0.1:8000.*not an http"):
        api_base("127.0.0.1:8000")


def test_a_server_that_is_down_fails_up_front_naming_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(StudyInputError, match=f"LLM server {url} is unreachable"):
        check_servers([url], "any-model")


@pytest.mark.slow
def test_server_answers_equal_in_process_answers_and_are_cached(smollm2_server, tmp_path) -> None:
    url, folder = smollm2_server
    with pytest.raises(StudyInputError, match=f"LLM server {url} does not serve model 'phi-3'.*{folder}"):
        check_servers([url], "phi-3")

    params = GenerationParams(max_new_tokens=12)
    cache = AnswerCache(tmp_path / "answers.jsonl")
    # the same server under two spellings stands in for two servers
    served = ServerGenerator([url, url + "/v1"], folder, params, cache, concurrency=4)
    answers = served.generate_many(PROMPTS, desc="server")
    assert (served.generated, served.cached) == (len(PROMPTS), 0)
    assert sum(served.requests.values()) == len(PROMPTS) and len(served.requests) == 2

    local = CachedGenerator(folder, "local-folder", "cpu", "float32", params, AnswerCache(tmp_path / "local.jsonl"))
    assert answers == [local(prompt) for prompt in PROMPTS]  # same chat template, greedy, fp32: same text
    assert all(answers)

    again = ServerGenerator([url], folder, params, AnswerCache(tmp_path / "answers.jsonl"))
    assert again.generate_many(PROMPTS) == answers and (again.generated, again.cached) == (0, len(PROMPTS))
    assert not again.requests  # nothing was sent
    # keyed by the served model's name, apart from in-process answers of a model with the same name
    in_process = CachedGenerator(folder, folder, "cpu", "float32", params, cache)
    assert all(in_process.key(p) not in cache for p in PROMPTS)


@pytest.mark.slow
def test_the_study_config_points_at_the_server(smollm2_server, tmp_path) -> None:
    from ragstudy.config import StudyConfig
    from ragstudy.llms import check_generator, make_generator

    url, folder = smollm2_server
    config = StudyConfig.resolve(profile="lite", strategies="newline", llm_servers=url, llm_server_model=folder,
                                 max_new_tokens=4, concurrency=2)
    check_generator(config)
    generator = make_generator(config)
    assert generator.generate_many(PROMPTS[:2]) == [generator(p) for p in PROMPTS[:2]]
    wrong = StudyConfig.resolve(profile="lite", strategies="newline", llm_servers=url, llm_server_model="nope")
    with pytest.raises(StudyInputError, match=f"{url} does not serve model 'nope'"):
        check_generator(wrong)


def test_a_server_generator_without_a_model_name_is_one_line_before_any_request() -> None:
    """check_servers refuses a missing model name itself (a ServerGenerator can be made without a StudyConfig,
    whose validation would have named one), before asking any server."""
    with pytest.raises(StudyInputError, match="--llm-server needs --llm-server-model NAME"):
        check_servers(["http://127.0.0.1:9/v1"], None)
