"""ColBERTv2 (colbert-ai, PLAID) for real, on CPU: a checkpoint built from the packaged MiniLM
weights (real ColBERT weights cannot be downloaded here), a real index of the IIRC sample, late-
interaction search, `ask --method oner` on it, and clear errors for checkpoint problems."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import read_jsonl
from mhindex.cli import main

pytestmark = pytest.mark.slow  # ColBERT indexing each test: `-m "not slow"` leaves them out

pytest.importorskip("colbert", reason="the colbert backend needs colbert-ai (installed by scripts/setup.sh)")


@pytest.fixture(scope="module", autouse=True)
def in_a_detached_checkout(tmp_path_factory):
    """Every command here runs inside a git checkout whose HEAD is detached, as CI checkouts and worktrees are:
    colbert-ai recorded the working folder's git branch in each index, and failed there (TypeError). Nothing is
    written into that folder."""
    folder = tmp_path_factory.mktemp("checkout")
    git = ["git", "-C", str(folder), "-c", "user.name=mhindex", "-c", "user.email=tests@mhindex"]
    for command in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "one"], ["checkout", "-q", "--detach"]):
        subprocess.run([*git, *command], check=True)
    before = os.getcwd()
    os.chdir(folder)
    yield folder
    os.chdir(before)
    assert [p.name for p in folder.iterdir()] == [".git"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    home = tmp_path_factory.mktemp("colbert-home")
    assert main(["--quiet", "--home", str(home), "corpus", "iirc"]) == 0
    assert main(["--quiet", "--home", str(home), "index", "iirc", "--backend", "colbert"]) == 0
    return home


def test_index_and_late_interaction_search(root, capsys):
    manifest = json.loads((root / "iirc" / "indexes" / "colbert" / "manifest.json").read_text())
    assert manifest["untrained_checkpoint"] and manifest["checkpoint"] == "colbert-minilm"
    assert manifest["paragraphs"] == len(read_jsonl(root / "iirc" / "corpus.jsonl"))
    assert (root / "models" / "colbert-minilm" / "artifact.metadata").is_file()
    for query, title in [
        ("Which college did Charles Babbage enter?", "Charles Babbage"),
        ("museum collection of eight million works in Bloomsbury", "British Museum"),
        ("decipherment of Egyptian hieroglyphs", "Jean-François Champollion"),
    ]:
        assert main(["--home", str(root), "search", "iirc", query, "--backend", "colbert", "-k", "3", "--json"]) == 0
        hits = json.loads(capsys.readouterr().out)["hits"]
        assert hits[0]["title"] == title and len(hits) == 3
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_title_scope_and_ask_oner(root, capsys):
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    retriever = open_retriever(corpus_dir(root, "iirc"), BackendSpec.parse("colbert"))
    assert {h.title for h in retriever.search("when was he born", 5, titles=["Lord Byron"])} == {"Lord Byron"}
    retriever.close()
    question = read_jsonl(root / "iirc" / "questions.jsonl")[0]["question"]
    code = main(
        [
            "--home",
            str(root),
            "ask",
            question,
            "--corpus",
            "iirc",
            "--backend",
            "colbert",
            "--method",
            "oner",
            "-k",
            "2",
            "--max-demos",
            "1",
            "--max-paragraph-words",
            "60",
            "--json",
        ]
    )
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    assert len(record["retrieved"]) == 2 and record["lm_calls"] == 1


def test_checkpoint_errors(root, capsys, tmp_path):
    assert (
        main(["--home", str(root), "search", "iirc", "x", "--backend", "colbert", "--checkpoint", str(tmp_path)]) == 2
    )
    assert "was built with --checkpoint colbert-minilm" in capsys.readouterr().err
    assert (
        main(["--home", str(root), "index", "iirc", "--backend", "colbert", "--checkpoint", str(tmp_path), "--force"])
        == 2
    )
    err = capsys.readouterr().err
    assert "is not a ColBERT checkpoint folder" in err and len(err.strip().splitlines()) == 1


def test_colbert_chatter_stays_off_stdout(tmp_path, capfd):
    """FAISS's k-means prints from C straight to descriptor 1; `mhindex index ... | jq` must not see it."""
    import ctypes
    import os

    from mhindex.ui import engine_output_to

    log = tmp_path / "colbert.log"
    with engine_output_to(log):
        print("from python")
        ctypes.CDLL(None).printf(b"from C, buffered\n")
        os.write(1, b"from the descriptor\n")
        os.write(2, b"WARNING clustering 40 points to 256 centroids\n")  # FAISS, from C, on descriptor 2
    print("ours")
    captured = capfd.readouterr()
    assert captured.out == "ours\n" and "clustering" not in captured.err
    # Each writer has its own buffer, so only the lines, not their order, are certain.
    assert sorted(log.read_text().splitlines()) == [
        "WARNING clustering 40 points to 256 centroids",
        "from C, buffered",
        "from python",
        "from the descriptor",
    ]


def test_a_lock_left_by_an_interrupted_compile_is_removed(tmp_path):
    """torch waits forever on an extension's lock file; one far older than a compile is a leftover."""
    import os
    import time

    from mhindex.backends.colbert import STALE_LOCK_SECONDS, _drop_stale_locks

    stale, fresh = tmp_path / "segmented_maxsim_cpp" / "lock", tmp_path / "filter_pids_cpp" / "lock"
    for lock in (stale, fresh):
        lock.parent.mkdir()
        lock.touch()
    old = time.time() - STALE_LOCK_SECONDS - 60
    os.utime(stale, (old, old))
    _drop_stale_locks(tmp_path)
    assert not stale.exists() and fresh.exists()  # a compile in progress elsewhere keeps its lock
