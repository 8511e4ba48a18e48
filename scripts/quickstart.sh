#!/usr/bin/env bash
# Set everything up, build the bundled MuSiQue sample (corpus + Lucene index) and answer a
# question with IRCoT on the packaged SmolLM2 model. No server to start.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex}
.venv/bin/mhindex build musique
.venv/bin/mhindex ask "Who is the spouse of the Green performer?" --corpus musique --method ircot
