"""Shared fixtures: a fresh data root per test and an in-process runner for the CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from mhindex.cli import main

#: How long a test waits on a process or a request before calling it hung: a bound for a hang, never for speed.
#: Fixed bounds of 60-600 s ran out on a machine at load 7-16 where the test passes at load 1 (#78).
HANG_S = 3600

# The suite runs on the fast packaged SmolLM2-135M (seconds a call on two cores); users get the
# better Qwen2.5-0.5B by default. Tests that need a particular model name it.
os.environ.setdefault("MHINDEX_LM", "local:smollm2-135m")
# Output widths are the tests' to set: pytest-xdist's workers start with COLUMNS=80 and LINES=24, which
# a plain run has not (a table in a pipe is then drawn at its natural width).
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "src" / "mhindex" / "corpora" / "samples"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return orjson.loads(self.out)


def pytest_collection_modifyitems(config, items):
    """Modules holding a slow test run first, each module's tests kept together and in order (its fixtures are made
    once). scripts/test.sh runs two workers, pytest-xdist's worksteal: each takes half the list, and one that is done
    takes from the end of the other's. With the long tests at the start, the end of the run is short tests on both
    workers, not one long test running alone while the other worker waits."""
    slow = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module.__name__ not in slow)  # stable: the order within each group is kept


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "home"
    monkeypatch.setenv("MHINDEX_HOME", str(root))
    return root


@pytest.fixture
def mh(capsys, home):
    """Run `mhindex ARGS...` in-process against the test's data root."""

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def read_jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def leftovers(root: Path) -> list[str]:
    """Anything temporary left in a data root after a run: must be empty."""
    if not root.exists():
        return []
    return [str(p) for p in root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name or p.name.endswith(".staging")]


def small_wiki_corpus(home: Path) -> Path:
    """A corpus named "wiki" of the first 25 2WikiMultihopQA sample questions (about 200 short paragraphs)."""
    import json

    small = home / "dev.small.json"
    small.write_text(json.dumps(json.loads((SAMPLES / "2wikimultihopqa" / "dev.sample.json").read_text())[:25]))
    assert (
        main(["--quiet", "--home", str(home), "corpus", "2wikimultihopqa", "--input", str(small), "--name", "wiki"])
        == 0
    )
    return home


@pytest.fixture(scope="session")
def musique_lucene(tmp_path_factory):
    """The MuSiQue sample's corpus and an open Lucene retriever over it, built once a session."""
    from mhindex.backends import BackendSpec, build_index, open_retriever
    from mhindex.corpora import DATASETS
    from mhindex.corpora.build import build_corpus

    home = tmp_path_factory.mktemp("musique-home")
    corpus = build_corpus(DATASETS["musique"], [SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"], home).corpus
    build_index(corpus, BackendSpec.parse("lucene"))
    retriever = open_retriever(corpus, BackendSpec.parse("lucene"))
    yield corpus, retriever
    retriever.close()


def serve_index(corpus, retriever, api_key=None, batches=False, **limits):
    """`mhindex serve`'s application over a corpus's open retriever, as the serve command makes it."""
    from mhindex.backends import BackendSpec, open_index
    from mhindex.server.app import Limits, index_info, make_app
    from mhindex.server.protocols import corpus_lines

    opened = open_index(corpus, BackendSpec.parse("lucene"))  # for what /info says of the index, as `serve` says it
    opened.close()
    info = index_info(corpus, "lucene", opened.settings, opened.fingerprint)
    return make_app(retriever, info, Limits(**limits), api_key, corpus_lines(corpus), access_log=False, batches=batches)


def made_up_words(count: int = 1500, length: int = 7) -> str:
    """`count` distinct made-up words: a query past Lucene's limit of 1,024 distinct terms."""
    import random
    import string

    rng, words = random.Random(0), {}
    while len(words) < count:
        words["".join(rng.choice(string.ascii_lowercase) for _ in range(length))] = None
    return " ".join(words)
