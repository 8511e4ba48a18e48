"""llama.cpp's own OpenAI-compatible HTTP server, from the xllamacpp wheel mhindex already installs: a model
served once for several processes, or for `--workers` (one llama.cpp slot each).

    .venv/bin/python scripts/lm_server.py                            # the packaged default, 127.0.0.1:8080
    .venv/bin/python scripts/lm_server.py --model local:smollm2-135m --port 8081 --slots 4
    .venv/bin/python scripts/lm_server.py --model /path/model.gguf
    mhindex ask - --lm openai:qwen@http://127.0.0.1:8080/v1 --workers 4 < questions.jsonl

It runs llama.cpp's batch-invariant kernels, as mhindex does in process (mhindex/lm/llamacpp.py): with one slot,
a call answers as in process. With several, llama.cpp decodes the slots' tokens in one batch, and a token read
alone or beside another question's can change: a run through it is marked load-dependent (`mhindex doctor
--determinism` checks the server it is given).

Prints the address when it is ready and serves until Ctrl-C (or, with --until-stdin-closes, until its
standard input closes: how tests/test_lm.py runs it). vLLM, Ollama and any other OpenAI-compatible server
take the same `--lm openai:MODEL@URL` (docs/models.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path


def model_file(model: str, home: Path) -> Path:
    """A GGUF path, or a packaged model (`local:NAME`) joined and checked as `mhindex` does it."""
    if model.startswith("local:"):
        from mhindex.lm.packaged import packaged_model_path

        return packaged_model_path(model.removeprefix("local:"), home / "models")
    return Path(model.removeprefix("gguf:")).expanduser()


def main() -> None:
    from mhindex.home import resolve_home
    from mhindex.lm import resolve_spec

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="local:NAME or a GGUF path [default: $MHINDEX_LM, else local's]")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--slots", type=int, default=1, help="questions served at once (--workers of mhindex)")
    parser.add_argument("--context", type=int, default=8192, help="tokens a slot holds")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--until-stdin-closes", action="store_true", help=argparse.SUPPRESS)
    given = parser.parse_args()

    import xllamacpp

    from mhindex.lm.llamacpp import invariant_params

    params = invariant_params(xllamacpp.CommonParams(), given.threads)
    params.model.path = str(model_file(resolve_spec(given.model), resolve_home(None)))
    params.hostnames = [given.host]
    params.port = given.port
    params.n_ctx = given.context * given.slots  # llama.cpp gives each slot n_ctx / n_parallel
    params.n_parallel = given.slots
    server = xllamacpp.Server(params)
    print(server.listening_address, flush=True)
    if given.until_stdin_closes:
        sys.stdin.read()
    else:
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    # xllamacpp's destructor joins its HTTP threads, which wait on clients' kept-alive connections: leave
    # without it, as mhindex itself never destroys a server (mhindex/lm/llamacpp.py).
    os._exit(0)


if __name__ == "__main__":
    main()
