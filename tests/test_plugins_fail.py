"""Plug-in strategy packages ($RAGSTUDY_PLUGIN_PACKAGES) that would overwrite another strategy's files or that
fail: real packages written to a temporary folder and imported the way the registry finds them. Each case is one
line naming the variable and the package, before anything runs; nothing is overwritten."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ragstudy import registry
from ragstudy.errors import StudyInputError
from ragstudy.plugins import PLUGIN_PACKAGES_ENV

HEADER = '''
from ragstudy.registry import register_strategy


def make_chunker(config, context):  # never called: the registration is refused first
    raise NotImplementedError
'''

PACKAGES = {
    "rag_plugin_dataset_clash": HEADER + 'register_strategy("my-lines", make_chunker, display_name="Mine", '
                                         'color="#111111", dataset_name="DatasetCustom")\n',
    "rag_plugin_name_clash": HEADER + 'register_strategy("newline", make_chunker, display_name="Mine", '
                                      'color="#111111")\n',
    "rag_plugin_two_in_one": HEADER + 'register_strategy("lines-a", make_chunker, display_name="A", color="#1")\n'
                                      'register_strategy("lines-b", make_chunker, display_name="B", color="#2")\n',
    "rag_plugin_raises": "raise RuntimeError('the plug-in is broken')\n",
    "rag_plugin_needs_missing": "import no_such_dependency_xyz  # noqa: F401\n",
}


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write every package; `use(name)` points $RAGSTUDY_PLUGIN_PACKAGES at it and makes the registry discover
    again, as a fresh process would. Registrations and imports are undone afterwards."""
    folder = tmp_path / "plugins"
    for name, source in PACKAGES.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    before = set(registry.available())  # the built-in strategies, registered before any plug-in

    def use(name: str) -> None:
        monkeypatch.setenv(PLUGIN_PACKAGES_ENV, name)
        registry.STRATEGIES.forget()

    use.folder = folder
    yield use
    for name in {spec.name for spec in registry.STRATEGIES.registered()} - before:
        registry.unregister(name)
    for name in PACKAGES:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("package, said", [
    ("rag_plugin_dataset_clash", "registers dataset_name 'DatasetCustom', which strategy 'paragraph' (package "
                                 "RAGParagraph) already uses"),
    ("rag_plugin_name_clash", "registers strategy name 'newline', which strategy 'newline' (package RAGNewLine) "
                              "already uses"),
    ("rag_plugin_two_in_one", "registers folder 'rag_plugin_two_in_one', which strategy 'lines-a'"),
    ("rag_plugin_raises", "which failed on import (RuntimeError: the plug-in is broken)"),
    ("rag_plugin_needs_missing", "it needs the module 'no_such_dependency_xyz'"),
    ("no_such_plugin_package", "which cannot be imported (no module named 'no_such_plugin_package')"),
])
def test_a_bad_plugin_is_one_line_naming_the_variable_and_the_package(plugins, package: str, said: str) -> None:
    plugins(package)
    with pytest.raises(StudyInputError) as caught:
        registry.available()
    message = str(caught.value)
    assert message.startswith(f"RAGSTUDY_PLUGIN_PACKAGES names the package {package!r}")
    assert said in message and "\n" not in message
    registered = {spec.name: spec for spec in registry.STRATEGIES.registered()}  # without loading (it fails)
    assert (registered["paragraph"].folder, registered["paragraph"].dataset_name) == (
        "RAGParagraph", "DatasetCustom")  # nothing was replaced
    assert registered["newline"].folder == "RAGNewLine"


def test_cli_a_plugin_taking_the_paragraph_dataset_stops_before_anything_runs(plugins, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "DatasetCustom.csv").write_text("kept\n", encoding="utf-8")
    env = {**os.environ, PLUGIN_PACKAGES_ENV: "rag_plugin_dataset_clash",
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(plugins.folder)])}
    result = subprocess.run([sys.executable, "evaluation_chain.py", "--profile", "lite", "--strategies", "paragraph",
                             "--chunks-only", "--output-dir", str(out)], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines[0].startswith("error: RAGSTUDY_PLUGIN_PACKAGES names the package 'rag_plugin_dataset_clash'")
    assert (out / "DatasetCustom.csv").read_text(encoding="utf-8") == "kept\n"
    assert sorted(p.name for p in out.iterdir()) == ["DatasetCustom.csv"]


def test_every_family_is_one_registry_refusing_a_wrong_record_and_a_name_taken_in_another_case() -> None:
    from Postprocessing import metric_catalogue
    from ragstudy import embedders, llms, plugins, retrievers
    from ragstudy.scoring import budget_metrics

    families = (registry.STRATEGIES, retrievers.RETRIEVERS, embedders.EMBEDDERS, llms.ENGINES,
                budget_metrics.METRICS, metric_catalogue.SCORERS)
    assert all(type(family) is plugins.Registry for family in families)
    with pytest.raises(plugins.RegistrationError, match="a retriever registration must be a RetrieverSpec, got dict"):
        retrievers.RETRIEVERS.register({"name": "x"})
    bm25 = retrievers.get("bm25")
    from dataclasses import replace

    with pytest.raises(plugins.RegistrationError, match="registers retriever name 'BM25', which retriever 'bm25' "
                                                        "already uses"):
        retrievers.RETRIEVERS.register(replace(bm25, name="BM25", make=object))
    assert "BM25" not in retrievers.names()
    for family in families:  # one list parser: `all` everywhere, names validated with the valid ones listed
        assert family.parse("all") == family.parse("ALL") == tuple(family.names())
        with pytest.raises(StudyInputError, match=f"--x: unknown {family.kind} 'nosuch'; choose one of: "):
            family.parse(f"{family.names()[0]},nosuch", "--x")
        with pytest.raises(StudyInputError, match="--x is empty; give one or more of: .* \\(or all\\)"):
            family.parse(" , ", "--x")
    assert registry.parse_strategies(["newline", "paragraph", "newline"]) == ("newline", "paragraph")


def test_the_old_strategy_variable_still_works_with_a_deprecation_warning(plugins, monkeypatch: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    from ragstudy import plugins as plugin_module

    (plugins.folder / "rag_plugin_old_way").mkdir()
    (plugins.folder / "rag_plugin_old_way" / "__init__.py").write_text(
        HEADER + 'register_strategy("old-way", make_chunker, display_name="Old", color="#222222")\n',
        encoding="utf-8")
    monkeypatch.delenv(PLUGIN_PACKAGES_ENV, raising=False)
    monkeypatch.setenv(plugin_module.STRATEGY_PACKAGES_ENV, "rag_plugin_old_way")
    monkeypatch.setattr(plugin_module, "_warned_deprecated", False)
    registry.STRATEGIES.forget()
    try:
        with caplog.at_level("WARNING", logger="ragstudy.plugins"):
            assert "old-way" in registry.available()
        assert "RAGSTUDY_STRATEGY_PACKAGES is deprecated: name the package(s) in RAGSTUDY_PLUGIN_PACKAGES" in caplog.text
    finally:
        sys.modules.pop("rag_plugin_old_way", None)
