#!/usr/bin/env bash
# Set everything up and run the main job on the bundled MuSiQue sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MHINDEX_HOME=${MHINDEX_HOME:-$PWD/.mhindex}
.venv/bin/mhindex corpus musique
.venv/bin/mhindex list
