#!/usr/bin/env bash
# Tools for benchmarks/quality/asr/make_lists.py (real recogniser n-best lists) and benchmarks/quality/blimp.py.
#
# Usage: bash scripts/install_asr_tools.sh      (after `make install`; uses sudo apt-get when not root)
#
# Debian: flite (TTS voices rms, slt), sox (resampling), r-cran-janeaustenr (held-out text, via Rscript).
# PyPI: pocketsphinx 5.1.1 (its wheel ships the en-us acoustic model, LM and dictionary);
# torch stays pinned through constraints.txt. (The 5-gram baseline is benchmarks/common/ngram.py: nothing to install.)
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends flite sox r-cran-janeaustenr
.venv/bin/pip install -q -c constraints.txt pocketsphinx==5.1.1
echo "ok: flite $(flite --version 2>&1 | head -1 | awk '{print $2}'), sox, Rscript, pocketsphinx"
