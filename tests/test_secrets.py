"""No key or password given to mhindex is ever written: an evaluation against a served index behind a key
(`--backend http://... --remote-api-key K`) with a remote model whose URL holds a password
(`--lm openai:m@http://user:PASSWORD@host/v1`), its report, `diff` against the server, and the server's own access
log are run for real, and every file they leave (the evaluation's folder, the data root, lock files included) and
everything they print is searched for both. Before, the lock files kept the raw command line, world-readable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import serve_index
from servers import Uvicorn, llama_server

KEY = "KEY-7f3a9c5d"
PASSWORD = "PW-91b2e4aa"


def _written(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` but the model files the test server loads (what mhindex wrote is all the rest)."""
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.suffix != ".gguf"}


@pytest.mark.slow
def test_no_key_or_password_is_written_or_printed(musique_lucene, tmp_path, capfd):
    from mhindex.lm.packaged import packaged_model_path

    corpus, retriever = musique_lucene
    home, out = tmp_path / "home", tmp_path / "eval"
    said: list[str] = []

    def mhindex(*args: str, **env: str) -> None:
        done = subprocess.run([sys.executable, "-m", "mhindex", "--home", str(home), *args], capture_output=True,
                              text=True, env={**os.environ, **env})  # fmt: skip
        said.extend([done.stdout, done.stderr])
        assert done.returncode in (0, 1), done.stderr

    assert subprocess.run([sys.executable, "-m", "mhindex", "--home", str(home), "--quiet", "corpus", "musique"],
                          capture_output=True).returncode == 0  # the index is the served one  # fmt: skip
    app = serve_index(corpus, retriever, api_key=KEY)
    with Uvicorn(app) as index, llama_server(packaged_model_path("smollm2-135m", tmp_path / "models")) as lm:
        with_password = lm.replace("http://", f"http://user:{PASSWORD}@")
        mhindex("eval", "musique", "--method", "oner", "--limit", "1", "-k", "2", "--answer-tokens", "8", "--max-demos",
                "1", "--backend", index.url, "--remote-api-key", KEY, "--lm", f"openai:m@{with_password}", "--out",
                str(out))  # fmt: skip
        mhindex("diff", str(out), index.url, MHINDEX_API_KEY=KEY)
        mhindex("report", str(out), "-o", str(tmp_path / "report.html"))
        mhindex("info", "musique")
    assert (out / "oner.jsonl").is_file() and list((out / ".locks").glob("*.lock"))  # it ran, and left its locks
    printed = capfd.readouterr()
    every = {**_written(tmp_path), "printed": "".join(said).encode(), "server": (printed.out + printed.err).encode()}
    leaked = [where for where, data in every.items() if KEY.encode() in data or PASSWORD.encode() in data]
    assert leaked == [], leaked
