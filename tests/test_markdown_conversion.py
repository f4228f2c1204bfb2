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
from ragstudy.textlayer import read_pdf

from conftest import REPO_ROOT

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
