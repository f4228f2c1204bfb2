#!/usr/bin/env bash
# Check the README's quick start the way a new user meets it: clone the committed repository into a temporary
# folder, then run the README's two commands there, verbatim as the README writes them, with Debian's own
# (externally managed, PEP 668) interpreter: the set-up + run command with `--limit 1 --strategies paragraph,fixed-size`
# appended (every stage of the study, one question),
# then the test command with `--collect-only -q` appended. Then a second set-up, which must install nothing, and a
# look at what went into .venv/ (torch build, size). Prints the wall time of each step.
#
#   bash tools/check_bare_setup.sh                       # PYTHON=/usr/bin/python3, SKIP_APT=1
#   PYTHON=python3 bash tools/check_bare_setup.sh        # any other interpreter (e.g. pyenv, as in CI)
#   SKIP_APT=0 bash tools/check_bare_setup.sh            # include the apt step (root or sudo)
#   KEEP=1 bash tools/check_bare_setup.sh                # keep the clone (and its .venv/) to look at
#   IN_PLACE=1 bash tools/check_bare_setup.sh            # this checkout is the fresh clone (CI: .ci/run made its
#                                                        # .venv/ with PYTHON and ran the study): check it, clone nothing
#
# Only committed files are in the clone. Needs git and PyPI (pip's cache makes it a few minutes). tests/test_setup.py
# runs it in CI (in place) and, elsewhere, where RAGSTUDY_CHECK_BARE_SETUP=1.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
export PYTHON=${PYTHON:-/usr/bin/python3}
export SKIP_APT=${SKIP_APT:-1}

# The README's commands: the lines of the ```bash blocks in its "Quick start" section, in order.
mapfile -t COMMANDS < <(awk '
  /^## / { in_section = ($0 ~ /^## Quick start/) }
  in_section && /^```bash/ { in_block = 1; next }
  in_section && /^```/ { in_block = 0; next }
  in_section && in_block && NF { print }
' "$REPO/README.md")
if [ "${#COMMANDS[@]}" -ne 2 ]; then
  echo "check_bare_setup: expected 2 commands in README.md's Quick start section, found ${#COMMANDS[@]}:" >&2
  printf '  %s\n' "${COMMANDS[@]}" >&2
  exit 1
fi
RUN_CMD=${COMMANDS[0]}
TEST_CMD=${COMMANDS[1]}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/check-bare-setup.XXXXXX")
CLONE=$WORK/repo
[ "${IN_PLACE:-0}" = "1" ] && CLONE=$REPO
if [ "${KEEP:-0}" = "1" ]; then
  trap 'echo "check_bare_setup: kept $CLONE"' EXIT
else
  trap 'rm -rf "$WORK"' EXIT
fi

step() {  # step NAME COMMAND: run COMMAND in the clone, print its wall time, stop on failure
  local name=$1 cmd=$2 start rc
  echo "== $name: $cmd"
  start=$EPOCHREALTIME
  set +e
  (cd "$CLONE" && bash -c "set -euo pipefail; $cmd")
  rc=$?
  set -e
  awk -v n="$name" -v rc="$rc" -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "== %s: exit %d, %.1f s\n", n, rc, b - a }'
  if [ "$rc" -ne 0 ]; then
    echo "check_bare_setup: FAILED at '$name' (clone left in $CLONE)" >&2
    trap - EXIT
    exit 1
  fi
}

echo "== interpreter: $PYTHON ($("$PYTHON" --version 2>&1)); externally managed:" \
  "$("$PYTHON" -c 'import pathlib, sysconfig; print((pathlib.Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").exists())')"
if [ "${IN_PLACE:-0}" = "1" ]; then
  # CI's own quick start was this check's first two steps: a fresh clone whose .venv/ PYTHON made and whose study
  # ran. What is left to check: that it was so (no tracked file changed, .venv/ from PYTHON), then the rest below.
  if [ -n "$(git -C "$CLONE" status --porcelain --untracked-files=no)" ]; then
    echo "check_bare_setup: IN_PLACE=1 but $CLONE has changed tracked files: not a fresh clone" >&2
    exit 1
  fi
  venv_home=$(sed -n 's/^executable *= *//p' "$CLONE/.venv/pyvenv.cfg" 2>/dev/null | head -n 1 || true)
  if [ "$(realpath "$venv_home" 2>/dev/null)" != "$(realpath "$PYTHON")" ]; then
    echo "check_bare_setup: IN_PLACE=1 but $CLONE/.venv/ was made from '${venv_home:-?}', not $PYTHON" >&2
    exit 1
  fi
  echo "== in place: $(git -C "$CLONE" rev-parse --short HEAD) in $CLONE, .venv/ from $venv_home (its set-up and study ran before)"
else
  git clone -q "$REPO" "$CLONE"
  echo "== cloned $(git -C "$CLONE" rev-parse --short HEAD) into $CLONE"
fi

# The README's study, cut to one question and two strategies (.ci/run runs the whole study verbatim, and
# tests/test_cli.py checks what it left): it runs every stage through the `ragstudy` command the set-up installed.
if [ "${IN_PLACE:-0}" != "1" ]; then  # in place, CI ran both, the study whole and the tests now
  step "set-up + run (README)" "$RUN_CMD --limit 1 --strategies paragraph,fixed-size"
  step "tests (README)" "$TEST_CMD --collect-only -q | tail -n 3"
fi
step "imports from outside the repository" \
  "cd / && $CLONE/.venv/bin/python -c 'import ragstudy, RAGParagraph, RAGFixedSize, RAGNewLine, Postprocessing.chunkeval, benchmarks; print(\"ok:\", ragstudy.__file__)'"
step "second set-up (must install nothing)" \
  ".venv/bin/python -m pip freeze --all > \"$WORK/before.txt\" && bash tools/setup.sh && .venv/bin/python -m pip freeze --all > \"$WORK/after.txt\" && diff \"$WORK/before.txt\" \"$WORK/after.txt\""

# What pip resolved: a CUDA build of torch (nvidia-* packages, several GB) on a machine without an NVIDIA GPU is
# a set-up bug.
torch_info=$("$CLONE/.venv/bin/python" -c 'import torch; print(torch.__version__, "cuda:", torch.version.cuda)')
nvidia=$("$CLONE/.venv/bin/python" -m pip list 2>/dev/null | awk 'tolower($1) ~ /^nvidia-/ {print $1}' | tr '\n' ' ')
echo "== .venv/: $(du -sh "$CLONE/.venv" | cut -f1); torch $torch_info; nvidia packages: ${nvidia:-none}"
if [ -n "$nvidia" ] && ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "check_bare_setup: pip installed a CUDA torch ($nvidia) on a machine without an NVIDIA GPU" >&2
  exit 1
fi
echo "== check_bare_setup: OK"
