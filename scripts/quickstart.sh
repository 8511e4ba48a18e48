#!/usr/bin/env bash
# Set everything up, build the bundled 2WikiMultihopQA sample (corpus + Lucene index) and answer one
# of its questions with IRCoT on the default packaged model (Qwen2.5-0.5B, llama.cpp). No server to
# start. Data goes where every mhindex command looks by default (~/.local/share/mhindex, or
# $MHINDEX_HOME), so the README's next commands work right after this one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "quickstart: building the 2WikiMultihopQA sample's corpus and Lucene index, then asking one question" >&2
.venv/bin/mhindex build 2wikimultihopqa
.venv/bin/mhindex ask "Who is younger, Mart Van Duren or Madeleine Simms?" --corpus 2wikimultihopqa --method ircot
