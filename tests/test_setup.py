"""The README's set-up: its commands are what CI runs, pyproject.toml packages every strategy folder, and (slow,
needs PyPI) the quick start works in a fresh clone with Debian's own, externally managed, python3."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEBIAN_PYTHON = Path("/usr/bin/python3")
CI_FRESH_CLONE = "RAGSTUDY_CI_FRESH_CLONE"  # set by .ci/run when its set-up used DEBIAN_PYTHON in its fresh clone
CHECK_BARE_SETUP = "RAGSTUDY_CHECK_BARE_SETUP"  # =1: clone this checkout and set it up from nothing, here


def quick_start_commands() -> list[str]:
    """The lines of the ```bash blocks in the README's "Quick start" section, in order."""
    section = re.search(r"^## Quick start.*?(?=^## )", (REPO / "README.md").read_text(encoding="utf-8"),
                        flags=re.S | re.M)
    assert section, "README.md has no '## Quick start' section"
    blocks = re.findall(r"^```bash\n(.*?)^```", section.group(0), flags=re.S | re.M)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_setup_and_test_commands():
    run_command, test_command = quick_start_commands()
    setup_command = run_command.split("&&")[0].strip()
    assert setup_command == "bash tools/setup.sh"
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert run_command in ci_lines  # the set-up and the study, verbatim
    assert test_command in ci_lines
    assert ci_lines.index(run_command) < ci_lines.index(test_command)


def _find_packages(root: Path) -> set[str]:
    """What `pip install .` would package from root, by pyproject.toml's own discovery settings."""
    setuptools = pytest.importorskip("setuptools")
    find = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]
    assert find.get("namespaces") is False
    return set(setuptools.find_packages(where=str(root), include=find["include"]))


def test_pyproject_packages_every_strategy_folder_and_nothing_else():
    found = _find_packages(REPO)
    expected = {"ragstudy", "RAGParagraph", "RAGFixedSize", "RAGNewLine", "Postprocessing",
                "Postprocessing.chunkeval", "benchmarks"}
    expected |= {p.name for p in REPO.glob("RAG*") if (p / "__init__.py").is_file()}
    assert expected <= found
    assert not {name for name in found if name.split(".")[0] in {"tests", "tools", "sample"}}


def test_pyproject_picks_up_a_new_strategy_folder(tmp_path: Path):
    for package in ("RAGToken", "RAGToken/sub", "ragstudy", "tests", "tools/sample_corpus"):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "RAGToken" / "db").mkdir()  # a Chroma folder: data, not a package
    assert _find_packages(tmp_path) == {"RAGToken", "RAGToken.sub", "ragstudy"}


def _externally_managed(python: Path) -> bool:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                         capture_output=True, text=True, timeout=30)
    return out.returncode == 0 and (Path(out.stdout.strip()) / "EXTERNALLY-MANAGED").is_file()


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


def bare_setup_mode() -> str | None:
    """How the bare-machine check runs here: "in place" where this checkout is CI's fresh clone (.ci/run set it up
    with Debian's python3 and ran the study), "clone" where asked to (RAGSTUDY_CHECK_BARE_SETUP=1), else None.
    Cloning sets the repository up a second time from nothing (4 min of pip and a study on one core, a third of the
    suite's wall time) only to repeat what CI's own fresh clone is."""
    if os.environ.get(CI_FRESH_CLONE) == "1":
        return "in place"
    if os.environ.get(CHECK_BARE_SETUP) == "1":
        return "clone"
    return None


NOT_ASKED = (f"the bare-machine set-up check runs in CI, in its fresh clone (.ci/run sets {CI_FRESH_CLONE}=1); "
             f"here it would clone and install everything again (~4 min): {CHECK_BARE_SETUP}=1 runs it "
             "(or: bash tools/check_bare_setup.sh)")


@pytest.mark.slow
@pytest.mark.longest  # about 4 minutes of pip where it clones: started first (conftest)
def test_quick_start_in_a_fresh_clone_with_debians_python(tmp_path: Path):
    mode = bare_setup_mode()
    if mode is None:
        pytest.skip(NOT_ASKED)
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"{DEBIAN_PYTHON} does not exist: no distribution Python to check the set-up with")
    if not _externally_managed(DEBIAN_PYTHON):
        pytest.skip(f"{DEBIAN_PYTHON} is not externally managed (PEP 668): the case this test is for is absent")
    if not (REPO / ".git").exists():
        pytest.skip(f"{REPO} is not a git checkout: nothing to clone")
    if not _pypi_reachable():
        pytest.skip("pypi.org:443 is unreachable: the set-up installs from PyPI")
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    # In CI (.ci/run) this checkout is the fresh clone, set up with Debian's python3 and its study run: the check
    # looks at it in place instead of cloning and installing everything a second time (and fails if it was not so).
    in_place = mode == "in place"
    env.update(PYTHON=str(DEBIAN_PYTHON), SKIP_APT="1", TMPDIR=str(tmp_path), IN_PLACE="1" if in_place else "0")
    result = subprocess.run(["bash", str(REPO / "tools" / "check_bare_setup.sh")], capture_output=True, text=True,
                            env=env, timeout=1800)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "== check_bare_setup: OK" in output
    # Nothing went into the system's Python.
    system = subprocess.run([str(DEBIAN_PYTHON), "-c", "import importlib.util as u; print(u.find_spec('ragstudy'))"],
                            cwd="/", capture_output=True, text=True, timeout=30, env=env)  # no PYTHONPATH
    assert system.stdout.strip() == "None", system.stdout + system.stderr


@pytest.mark.parametrize(("environment", "mode"), [
    ({}, None), ({CI_FRESH_CLONE: "1"}, "in place"), ({CHECK_BARE_SETUP: "1"}, "clone"),
    ({CI_FRESH_CLONE: "1", CHECK_BARE_SETUP: "1"}, "in place"), ({CHECK_BARE_SETUP: "0"}, None)])
def test_the_bare_setup_check_runs_in_ci_or_when_asked(monkeypatch: pytest.MonkeyPatch, environment, mode) -> None:
    for name in (CI_FRESH_CLONE, CHECK_BARE_SETUP):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert bare_setup_mode() == mode


def test_ci_checks_the_bare_setup_in_its_fresh_clone() -> None:
    """.ci/run sets RAGSTUDY_CI_FRESH_CLONE where its set-up used an externally managed python3, so the check that is
    skipped elsewhere unless asked for runs there, once."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert f"{CI_FRESH_CLONE}=1" in ci and "EXTERNALLY-MANAGED" in ci
