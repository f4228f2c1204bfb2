"""Each setting is declared once (ragstudy.config, Postprocessing.cli): the chain's parser, the accepted YAML keys,
the scripts' parsers and the help texts' defaults are generated from that declaration."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import re
from pathlib import Path

import pytest
import yaml

from Postprocessing import cli
from ragstudy import config as cfg
from ragstudy import llms, retrievers
from ragstudy.answering import chain
from ragstudy.config import PROFILES, StudyConfig, config_from_args, study_settings
from ragstudy.errors import StudyInputError

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = ("score_retrieval", "score_answers", "judge_chunks", "write_report", "build_review",
           "analyse_survey")  # the jobs of the paper's scripts (retrieval_eval.py, evaluation_metrics.py, ...)
BASE = {"profile": "lite", "strategies": "newline"}
# settings that only make sense with another one (the config refuses them alone)
COMPANIONS = {"retriever": {"retrieval_only": True}, "embedding_server": {"embedding_server_model": "m"},
              "embedding_server_model": {"embedding_server": "http://127.0.0.1:9"},
              "llm_servers": {"llm_server_model": "m"}}
# the chain's flags at 5b6e930, before the parser was generated: every one still parses
OLD_CHAIN_FLAGS = (
    "--documents --questions --output-dir --profile --strategies --limit --chunks-only --config --llm --embedding "
    "--device --dtype --max-new-tokens --prompt-file --paragraph-mode --set --embedding-dtype --threads "
    "--embedding-threads --db-dir --retrieval-only --budgets --budget-unit --retriever --sweep --evidence "
    "--llm-batch-size --llm-engine --llm-server --llm-server-model --concurrency --llm-timeout --chroma-server "
    "--embedding-backend --embedding-server --embedding-server-model --embedding-timeout -v --verbose").split()
OLD_SCRIPT_FLAGS = {
    "score_retrieval": "--results-dir --evidence --oracle --questions --allow-questions-mismatch --out-dir "
                      "--strategies --budgets --no-plot --reference --verdict-metric --n-resamples --seed "
                      "--confidence -v --verbose",
    "score_answers": "--results-dir --out-dir --questions --oracle --format --allow-partial --cleaned-oracle "
                          "--reference --clean --no-clean-answers --metrics --rouge-tokenizer --bertscore-model "
                          "--bertscore-layers --bertscore-batch-size --n-resamples --seed --confidence --threads -v",
    "judge_chunks": "--results-dir --out-dir --strategies --groundtruth --evidence --boundary-tolerance "
                     "--hit-threshold --tokens --profile --no-hope --hope-documents --hope-passages --hope-questions "
                     "--hope-si-questions --hope-rag-passages --hope-windows --hope-window-sentences "
                     "--hope-max-passage-chars --hope-weights --metrics-per-question --correlate-with --n-resamples "
                     "--seed --confidence --threads -v",
    "write_report": "--results-dir --oracle --out --screenshot --width --height -v",
    "build_review": "--results-dir --out-dir --questions --oracle --format --allow-partial --seed "
                           "--fixed-order --raters -v",
    "analyse_survey": "--results-dir --answers --key --no-key --out-dir --skip-malformed --no-plots -v",
}
HAND_WRITTEN_DEFAULT = re.compile(r"\(default|default:|default \d|\bdefault [A-Za-z/._-]+\)")


def _declared(name: str):
    return next(item for item in study_settings() if item.name == name)


def _default(name: str):
    if name == "embedding_backend":
        return PROFILES[BASE["profile"]].embedding_backend
    if name in cfg._MODEL_KEYS:
        return getattr(PROFILES[BASE["profile"]], name)
    return _declared(name).default


def _sample(name: str):
    """A valid value other than the default, chosen from the declaration (type, kind, choices)."""
    item = _declared(name)
    if item.kind == "switch":
        return True
    if item.kind == "list":
        choices = item.choice_values()
        return [next(c for c in choices if c != _default(name))] if choices else [300, 600]
    if item.kind == "append":
        return ["http://127.0.0.1:9"]
    choices = item.choice_values()
    if choices:
        return next(choice for choice in choices if choice != _default(name))
    return {int: 3, float: 30.0}.get(item.type, "sample-value")


def _argv(values: dict) -> list[str]:
    """`values` as the command line a user would type, flags taken from the declaration."""
    argv: list[str] = []
    for name, value in values.items():
        option = _declared(name).option
        kind = _declared(name).kind
        if kind == "switch":
            argv += [option] if value else []
        elif kind == "append":
            for part in value:
                argv += [option, part]
        elif kind == "list":
            argv += [option, value if isinstance(value, str) else ",".join(str(v) for v in value)]
        else:
            argv += [option, str(value)]
    return argv


def _value(config: StudyConfig, name: str):
    return getattr(config.profile, name) if name in cfg._MODEL_KEYS else getattr(config, name)


def _expected(name: str, value):
    """A list as the config keeps it: a tuple where the field's default is one, else comma-joined names."""
    if not isinstance(value, list):
        return value
    return tuple(value) if isinstance(_default(name), tuple) else ",".join(value)


FLAG_SETTINGS = [name for name in (*cfg._MODEL_KEYS, *cfg._RUN_KEYS) if _declared(name).option]


def test_each_setting_is_declared_once_and_every_field_is_declared():
    settings = study_settings()
    names = [item.name for item in settings]
    assert len(names) == len(set(names)), "a setting declared twice"
    options = [option for item in settings if item.option for option in (item.option, *item.aliases)]
    assert len(options) == len(set(options)), "two settings share a flag"
    fields = {item.name for item in dataclasses.fields(StudyConfig)} - {"origins"}
    assert fields <= set(names)
    model_fields = {item.name for item in dataclasses.fields(cfg.ModelProfile)} - {"name", "embedding_backend"}
    assert set(cfg._MODEL_KEYS) == model_fields
    assert set(cfg._RUN_KEYS) == fields - {"profile", "strategies", "strategy_params"}
    assert all(item.group in cfg.GROUPS for item in settings if item is not cfg.VERBOSE)
    rows = cfg.describe_settings()
    assert [row["name"] for row in rows] == names
    assert set(rows[0]) == {"name", "flag", "yaml_key", "type", "default", "choices", "help", "group"}
    budgets = next(row for row in rows if row["name"] == "budgets")
    assert (budgets["flag"], budgets["yaml_key"], budgets["type"], budgets["default"]) == (
        "--budgets", "budgets", "list of int", "500,1000,2000,4000")


@pytest.mark.parametrize("name", FLAG_SETTINGS)
def test_every_run_setting_is_reachable_as_a_flag_and_as_a_yaml_key(name, tmp_path):
    value = _sample(name)
    values = {**COMPANIONS.get(name, {}), name: value}
    from_flag = config_from_args(chain.build_parser().parse_args(_argv({**BASE, **values})))
    assert _value(from_flag, name) == _expected(name, value) != _default(name)
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({**BASE, **values}), encoding="utf-8")
    from_file = StudyConfig.resolve(config_file=str(study))
    assert _value(from_file, name) == _expected(name, value)
    assert _value(StudyConfig.from_dict(from_file.to_dict()), name) == _expected(name, value)  # config.json


def test_the_prompt_template_is_a_yaml_key_and_the_prompt_file_its_flag(tmp_path):
    assert _declared("prompt_template").option is None and _declared("prompt_file").option == "--prompt-file"
    template = "Context: {context} Question: {query}"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(template, encoding="utf-8")
    args = chain.build_parser().parse_args([*_argv(BASE), "--prompt-file", str(prompt)])
    assert config_from_args(args).prompt_template == template
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({**BASE, "prompt_template": template}), encoding="utf-8")
    assert StudyConfig.resolve(config_file=str(study)).prompt_template == template


def test_the_yaml_keys_and_the_parser_agree(tmp_path):
    parser = chain.build_parser()
    dests = {action.dest for action in parser._actions} - {"help"}
    keys = set(cfg.yaml_keys())
    not_in_yaml = {item.name for item in study_settings() if not item.yaml}
    assert not_in_yaml == {"config_file", "set_params", "paragraph_mode", "sweep", "evidence", "verbose"}
    assert dests - not_in_yaml == keys - {"strategy_params", "prompt_template"}  # those two: --set, --prompt-file
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({**BASE, "colour": "red", "paragraph_mode": "paper"}), encoding="utf-8")
    with pytest.raises(StudyInputError, match="unknown settings colour, paragraph_mode"):
        StudyConfig.resolve(config_file=str(study))


def test_a_yaml_value_outside_the_choices_names_the_key_and_the_file(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({**BASE, "budget_unit": "words"}), encoding="utf-8")
    with pytest.raises(StudyInputError) as refused:
        StudyConfig.resolve(config_file=str(study))
    assert str(refused.value) == f"`budget_unit:` in {study} must be one of chars, tokens, got 'words'"
    with pytest.raises(SystemExit) as stop:
        chain.build_parser().parse_args(["--budget-unit", "words"])
    assert stop.value.code == 2 and "--budget-unit: invalid choice: 'words'" in capsys.readouterr().err


def test_flags_win_over_the_file_and_messages_name_the_flag(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({**BASE, "concurrency": 2, "max_new_tokens": 11, "llm_servers": ["http://a"]}),
                     encoding="utf-8")
    args = chain.build_parser().parse_args(["--config", str(study), "--concurrency", "5"])
    with pytest.raises(StudyInputError, match=re.escape(f"`llm_servers:` in {study} needs --llm-server-model")):
        config_from_args(args)
    args = chain.build_parser().parse_args(["--config", str(study), "--concurrency", "5",
                                                       "--llm-server-model", "m", "--max-new-tokens", "7"])
    config = config_from_args(args)
    assert (config.concurrency, config.profile.max_new_tokens) == (5, 7)
    assert config.origins["max_new_tokens"] == "--max-new-tokens"
    with pytest.raises(StudyInputError, match="^--llm-server needs --llm-server-model"):
        StudyConfig.resolve(**BASE, llm_servers="http://a")


def test_every_old_chain_flag_still_parses():
    options = {option for action in chain.build_parser()._actions for option in action.option_strings}
    assert set(OLD_CHAIN_FLAGS) <= options


def _help_of(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {action.option_strings[0]: str(action.help) for action in parser._actions if action.option_strings}


def test_help_shows_the_declared_defaults_and_no_hand_written_one(monkeypatch):
    helps = _help_of(chain.build_parser())
    assert helps["--budgets"].endswith("(default: 500,1000,2000,4000)")
    assert helps["--llm-timeout"].endswith("(default: 600)")
    assert helps["--max-new-tokens"].endswith("(default: the profile's: paper 5000, lite 96)")
    assert helps["--strategies"].endswith("(default: the paper's strategies (registered paper=True) when answering, "
                                          "every registered strategy for --chunks-only and --retrieval-only)")
    for item in study_settings():
        if item.option:
            assert not HAND_WRITTEN_DEFAULT.search(str(item.help() if callable(item.help) else item.help)), item.name
            if item.default_text() is not None:
                assert helps[item.option].endswith(f"(default: {item.default_text()})"), item.name
    # a default changes in one place and the help follows
    monkeypatch.setitem(PROFILES, "lite", dataclasses.replace(PROFILES["lite"], max_new_tokens=77))
    helps = _help_of(chain.build_parser())
    assert helps["--max-new-tokens"].endswith("lite 77)")
    assert "(default: every question)" in " ".join(chain.build_parser().format_help().split())


def test_generated_help_keeps_a_percent_sign_and_formats_each_kind():
    from ragstudy.settings import Setting, add_arguments

    parser = argparse.ArgumentParser(prog="x")
    add_arguments(parser, [Setting("share", "share in % of pages", type=float, default=0.5),
                           Setting("sizes", "sizes", kind="list", type=int, default=(1, 2)),
                           Setting("fast", "go fast", kind="switch"),
                           Setting("mode", "mode", choices=lambda: ("a", "b"), default="a")])
    text = " ".join(parser.format_help().split())
    assert "share in % of pages (default: 0.5)" in text and "sizes (default: 1,2)" in text
    assert "go fast" in text and "go fast (default" not in text and "{a,b}" in text
    args = parser.parse_args(["--share", "0.25", "--sizes", "3,4", "--fast", "--mode", "b"])
    assert (args.share, args.sizes, args.fast, args.mode) == (0.25, "3,4", True, "b")
    parser = argparse.ArgumentParser(prog="x")
    add_arguments(parser, [Setting("names", "names", kind="list", choices=lambda: ("p", "q"), default="p"),
                           Setting("plugins", "plugins", kind="list", choices=lambda: ("r",), list_choices=False)])
    text = " ".join(parser.format_help().split())
    assert "--names {p,q}[,...] names (default: p)" in text and "--plugins PLUGINS plugins" in text
    assert parser.parse_args(["--plugins", "r,s", "--names", "p,q"]).plugins == "r,s"  # a list: its resolver checks


def test_choices_come_from_one_place(monkeypatch):
    known_retrievers, known_engines = retrievers.names(), llms.names()
    monkeypatch.setattr(retrievers, "names", lambda: (*known_retrievers, "splade"))
    monkeypatch.setattr(llms, "names", lambda: (*known_engines, "llamacpp"))
    args = chain.build_parser().parse_args(["--retriever", "splade", "--llm-engine", "llamacpp"])
    assert (args.retriever, args.llm_engine) == ("splade", "llamacpp")
    assert "splade" in chain.build_parser().format_help()


def test_help_imports_no_strategy_and_their_choices_are_still_checked(capsys):
    import subprocess
    import sys

    code = ("import sys; from ragstudy.answering import chain; chain.build_parser().format_help(); "
            "print(sorted(m for m in sys.modules if m.startswith(('RAG', 'langchain', 'torch'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    paragraph_mode = next(row for row in cfg.describe_settings() if row["name"] == "paragraph_mode")
    assert paragraph_mode["choices"] == ("layout", "paper")  # the docs list them
    assert chain.build_parser().parse_args(["--paragraph-mode", "paper"]).paragraph_mode == "paper"
    with pytest.raises(SystemExit) as stop:
        chain.build_parser().parse_args(["--paragraph-mode", "papers"])
    assert stop.value.code == 2 and "--paragraph-mode papers: must be one of layout, paper" in capsys.readouterr().err


def test_the_study_arguments_can_be_added_to_any_parser():
    parser = argparse.ArgumentParser(prog="ragstudy run")
    parser.add_argument("--extra")
    cfg.add_study_arguments(parser)
    args = parser.parse_args(["--profile", "lite", "--strategies", "newline", "--extra", "x", "--limit", "2"])
    assert config_from_args(args).limit == 2 and args.extra == "x"


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_build_their_parsers_from_the_declaration(script):
    module = importlib.import_module(f"Postprocessing.{script}")
    settings = module.settings()
    parser = module.build_parser()
    options = {option for action in parser._actions for option in action.option_strings}
    assert set(OLD_SCRIPT_FLAGS[script].split()) <= options
    declared = {option for item in (*settings, cli.VERBOSE) for option in (item.option, *item.aliases)}
    assert options - {"-h", "--help"} == declared
    shared = {item.name: item for item in cli.SHARED}
    helps = _help_of(parser)
    for item in settings:
        if item.name in shared:  # a shared flag: its script may word it for itself, never change its form
            same = shared[item.name]
            assert (item.option, item.aliases, item.type, item.kind) == (same.option, same.aliases, same.type,
                                                                         same.kind), (script, item.name)
        help_text = item.help() if callable(item.help) else item.help
        assert not HAND_WRITTEN_DEFAULT.search(help_text), (script, item.name)
        if item.default_text() is not None:
            assert helps[item.option].endswith(f"(default: {item.default_text()})"), (script, item.name)
    defaults = vars(parser.parse_args([]))
    for item in settings:
        assert defaults[item.name] == (bool(item.default) if item.kind == "switch" else item.default)


def test_shared_flags_keep_one_meaning_across_scripts():
    args = [importlib.import_module(f"Postprocessing.{s}").build_parser().parse_args([]) for s in SCRIPTS]
    assert {a.results_dir for a in args} == {"results"}
    bootstrap = [a for a in args if hasattr(a, "confidence")]
    assert len(bootstrap) == 3 and {(a.n_resamples, a.seed, a.confidence) for a in bootstrap} == {(10_000, 0, 0.95)}
    review = importlib.import_module("Postprocessing.analyse_survey").build_parser()
    assert review.parse_args(["--no-plots"]).no_plot and review.parse_args(["--no-plot"]).no_plot


def test_threads_have_one_default_in_the_chain_and_every_script(monkeypatch, tmp_path):
    """--threads: half the cores (ragstudy.io.torch_threads) for the chain and for each script that sets torch's
    threads; the scripts used to default to 1 while the chain took half the cores."""
    import torch

    from Postprocessing import score_answers

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert StudyConfig.resolve(**BASE).resolved_threads() == 4
    with_threads = [s for s in SCRIPTS if "threads" in vars(importlib.import_module(f"Postprocessing.{s}")
                                                             .build_parser().parse_args([]))]
    assert {"score_answers", "judge_chunks"} <= set(with_threads)
    set_to: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    args = score_answers.build_parser().parse_args(["--results-dir", str(tmp_path / "absent")])
    with pytest.raises(StudyInputError):  # no results there: it stops after setting the threads
        score_answers.score_answers(score_answers.ScoreAnswersSettings.of(args))
    assert set_to == [4]


def test_no_parser_is_written_by_hand():
    files = [REPO / "ragstudy" / "answering" / "chain.py", *sorted((REPO / "Postprocessing").glob("*.py"))]
    hand_written = [path.name for path in files if "add_argument(" in path.read_text(encoding="utf-8")]
    assert hand_written == []


def test_a_setting_of_several_names_is_one_string_from_a_flag_or_a_yaml_list(tmp_path):
    assert _declared("retriever").several
    args = chain.build_parser().parse_args([*_argv(BASE), "--retrieval-only", "--retriever", "dense,bm25"])
    assert config_from_args(args).retriever == "dense,bm25"
    for value in (["dense", "bm25"], "dense,bm25"):
        study = tmp_path / "study.yaml"
        study.write_text(yaml.safe_dump({**BASE, "retrieval_only": True, "retriever": value}), encoding="utf-8")
        assert StudyConfig.resolve(config_file=str(study)).retriever == "dense,bm25"
    study.write_text(yaml.safe_dump({**BASE, "retrieval_only": True, "retriever": "dense,splade"}), encoding="utf-8")
    with pytest.raises(StudyInputError, match="splade"):
        StudyConfig.resolve(config_file=str(study))
    usage = " ".join(chain.build_parser().format_usage().split())
    assert "--retriever {" + ",".join(retrievers.names()) + "}[,...]" in usage
