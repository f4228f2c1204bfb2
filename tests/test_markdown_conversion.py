"""The markdown strategy's PDF conversion: started ahead in the background by a run, waited for (never repeated) by
the chunker's `prepare`, and stopped at once, leaving no half-written cache, when the run stops on an error."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragstudy import registry
from ragstudy.pipeline import chunking_ahead
from ragstudy.text.textlayer import read_pdf

from conftest import REPO_ROOT, assert_stopped_by_ctrl_c, ctrl_c_when, sigint_default

SAMPLE = sorted((REPO_ROOT / "Documents").glob("*.pdf"))


def markdown_only():
    """The two settings chunking_ahead reads from a study config."""
    return SimpleNamespace(strategies=("markdown",), strategy_params={"markdown": registry.get("markdown").defaults})


@pytest.mark.slow
def test_a_conversion_started_ahead_is_waited_for_and_not_started_again(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from RAGMarkdown import strategy as markdown

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    documents = [read_pdf(path) for path in SAMPLE[:2]]
    with chunking_ahead(markdown_only(), documents):
        under_way = markdown.start_conversions(documents, workers=1)  # what the run started ahead
        assert sorted(doc.path for doc in under_way.values()) == sorted(doc.path for doc in documents)
        assert markdown.start_conversions(documents, workers=1) == under_way  # the same futures: nothing resubmitted
        markdown.convert_all(documents, workers=1)  # the chunker's prepare: waits for them
        assert all(future.done() for future in under_way)
        assert markdown._CONVERSIONS.pool is None and not markdown._CONVERSIONS.running  # workers gone
    cached = sorted((tmp_path / "cache" / "markdown").glob("*.json"))
    assert len(cached) == 2
    # the worker's cache is the converter's Markdown, as converted in this process
    assert markdown.pdf_markdown_pages(documents[0]) == markdown.convert_pdf(documents[0].path)
    assert markdown.start_conversions(documents) == {}  # cached: nothing to do


def long_pdf(path: Path, copies: int = 4) -> Path:
    """The sample PDFs joined `copies` times (176 pages: tens of seconds to convert)."""
    import pymupdf

    with pymupdf.open() as joined:
        for _ in range(copies):
            for source in SAMPLE:
                with pymupdf.open(source) as pdf:
                    joined.insert_pdf(pdf)
        joined.save(path)
    return path


@pytest.mark.slow
def test_an_error_in_the_run_stops_the_conversions_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from RAGMarkdown import strategy as markdown

    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    documents = [read_pdf(long_pdf(tmp_path / "lungo.pdf")), read_pdf(SAMPLE[0])]
    processes = []
    with pytest.raises(RuntimeError, match="stopped by the test"):
        with chunking_ahead(markdown_only(), documents):
            pool = markdown._CONVERSIONS.pool
            assert pool is not None
            time.sleep(4)  # the workers have started and are converting the long PDF
            processes = list(pool._processes.values())
            assert processes and all(process.is_alive() for process in processes)
            raise RuntimeError("stopped by the test")
    for process in processes:
        process.join(timeout=3)  # terminated, not left to finish the long PDF
    assert not any(process.is_alive() for process in processes)
    assert markdown._CONVERSIONS.pool is None and not markdown._CONVERSIONS.running
    # the long PDF was stopped halfway: nothing of it is cached, and nothing half-written is left
    folder = tmp_path / "cache" / "markdown"
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    assert markdown._cache_path(documents[0]).name not in names
    assert all(name.endswith(".json") for name in names)
    for cached in folder.glob("*.json") if folder.is_dir() else []:
        assert json.loads(cached.read_text(encoding="utf-8"))["path"] == documents[1].path


@pytest.mark.slow
def test_cli_ctrl_c_during_the_background_conversion_stops_its_workers(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the main process only, so the workers must be stopped by it) while the markdown strategy
    waits for its conversion: exit 130 within seconds, one line, no traceback, no worker left behind."""
    import os
    import subprocess
    import sys

    documents = tmp_path / "docs"
    documents.mkdir()
    long_pdf(documents / "lungo.pdf")
    env = {**os.environ, "RAGSTUDY_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "evaluation_chain.py", "--profile", "lite", "--retrieval-only", "--strategies", "markdown",
         "--documents", str(documents), "--questions", str(REPO_ROOT / "Questions.csv"), "--limit", "2",
         "--output-dir", str(tmp_path / "out"), "--db-dir", str(tmp_path / "db")],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=sigint_default)

    def group() -> list[str]:
        found = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True, text=True).stdout.split()
        return [pid for pid in found if pid != str(process.pid)]

    # once the resource tracker and a conversion worker run: the conversion is under way
    stderr, stopped = ctrl_c_when(process, lambda: len(group()) >= 2, settle=3, deadline=120, timeout=60)
    for _ in range(50):  # the resource tracker exits on its own once the main process is gone
        if not group():
            break
        time.sleep(0.1)
    left = group()
    assert_stopped_by_ctrl_c(process, stderr)
    assert "leaked" not in stderr
    assert stopped < 10, f"the run went on for {stopped:.1f} s after Ctrl-C"
    assert left == [], f"processes left behind: {left}"
    folder = tmp_path / "cache" / "markdown"
    assert not folder.is_dir() or not list(folder.iterdir())  # the PDF stopped halfway left nothing
