"""The milvus backend against a real Milvus server: Milvus's own, from PyPI's `milvus` wheel (2.3.5), started on
127.0.0.1 on free ports with its files under the test's tmp folder, and stopped at the end even on failure
(mhindex.backends.milvus.local_server).
Builds, searches (exactly FAISS's for a flat index, within 0.01 of its recall@15 for HNSW, title scopes as
filter expressions), a hybrid with Lucene, a killed build resumed, and a server that goes away mid-search."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HANG_S, read_jsonl, small_wiki_corpus
from mhindex.backends.milvus import local_server as milvus_server
from mhindex.cli import main

pytest.importorskip("faiss", reason="the vectors are the dense backend's (scripts/setup.sh installs faiss-cpu)")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A Milvus server, and a data root with the small 2WikiMQA corpus indexed by FAISS (flat, the exact search)
    and by Milvus on that server (flat and HNSW), the same encoder's vectors."""
    home = small_wiki_corpus(tmp_path_factory.mktemp("milvus-home"))
    with milvus_server(tmp_path_factory.mktemp("milvus-server")) as uri:
        assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "dense"]) == 0
        assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "milvus", "--milvus-uri", uri]) == 0
        yield home, uri


def searcher(home, backend, **options):
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    return open_retriever(corpus_dir(home, "wiki"), BackendSpec.parse(backend, options))


def questions(home):
    return [q["question"] for q in read_jsonl(home / "wiki" / "questions.jsonl")]


def test_flat_on_a_real_server_ranks_as_faiss_exact_search(served):
    home, uri = served
    manifest = json.loads((home / "wiki" / "indexes" / "milvus" / "manifest.json").read_text())
    assert (
        manifest["server"] == uri
        and manifest["mode"] == "vectors"
        and manifest["indexes"] == {"vector": {"index_type": "FLAT"}}
        and manifest["collection"].startswith("mhindex_wiki_")
    )
    milvus, faiss = searcher(home, "milvus", milvus_uri=uri), searcher(home, "dense")
    try:
        for question in questions(home):
            got, exact = milvus.search(question, 10), faiss.search(question, 10)
            assert [h.id for h in got] == [h.id for h in exact], question
            assert [h.score for h in got] == pytest.approx([h.score for h in exact], abs=1e-4)
        # A title scope is a filter inside Milvus: the same paragraphs FAISS's widened ranking finds.
        titles = [h.title for h in faiss.search(questions(home)[0], 5)[::2]] + ["A page that is not there"]
        for question in questions(home)[:5]:
            scoped = milvus.search(question, 5, titles)
            assert [h.id for h in scoped] == [h.id for h in faiss.search(question, 5, titles)]
            assert {h.title.lower() for h in scoped} <= {t.lower() for t in titles}
        assert milvus.search(questions(home)[0], 5, []) == []
        batched = milvus.search_many(questions(home)[:4], 3)
        assert [[h.id for h in hits] for hits in batched] == [
            [h.id for h in faiss.search(q, 3)] for q in questions(home)[:4]
        ]
    finally:
        milvus.close()
        faiss.close()


def test_hnsw_recall_at_15_is_within_001_of_exact_search(served, tmp_path):
    home, uri = served
    options = ["--milvus-uri", uri, "--milvus-index", "hnsw", "--hnsw-m", "16"]
    assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "milvus", *options, "--force"]) == 0
    manifest = json.loads((home / "wiki" / "indexes" / "milvus" / "manifest.json").read_text())
    assert manifest["indexes"] == {"vector": {"index_type": "HNSW", "M": 16, "efConstruction": 100}}
    gold = {q["question"]: set(q["gold_ids"]) for q in read_jsonl(home / "wiki" / "questions.jsonl")}
    milvus, faiss = searcher(home, "milvus", milvus_uri=uri), searcher(home, "dense")
    try:

        def recall(retriever):
            return sum(len({h.id for h in retriever.search(q, 15)} & ids) / len(ids) for q, ids in gold.items())

        assert abs(recall(milvus) - recall(faiss)) / len(gold) <= 0.01
    finally:
        milvus.close()
        faiss.close()
    # Back to flat, for the other tests of the module (a rebuild replaces the collection only when complete).
    assert (
        main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "milvus", "--milvus-uri", uri, "--force"])
        == 0
    )


def test_cli_search_hybrid_with_lucene_and_a_wrong_address_say_one_line(served, capsys):
    home, uri = served
    asked = ["--home", str(home), "search", "wiki", questions(home)[0], "-k", "4", "--json"]
    assert main([*asked, "--backend", "milvus", "--milvus-uri", uri]) == 0
    milvus_hits = [h["id"] for h in json.loads(capsys.readouterr().out)["hits"]]
    assert len(milvus_hits) == 4
    assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "lucene"]) == 0
    capsys.readouterr()
    assert main([*asked, "--backend", "lucene+milvus", "--milvus-uri", uri]) == 0
    fused = [h["id"] for h in json.loads(capsys.readouterr().out)["hits"]]
    assert len(fused) == 4 and set(fused) & set(milvus_hits)
    # Built on a server, searched without its address: one line that says which address.
    assert main([*asked, "--backend", "milvus"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"pass --milvus-uri {uri}" in error[0]
    # What the server refuses mid-build (Milvus 2.3.5 has no BM25 function) is one line, and the index stays.
    bm25 = ["--home", str(home), "index", "wiki", "--backend", "milvus", "--milvus-uri", uri, "--milvus-mode", "bm25"]
    assert main(bm25) == 2  # another variant of the index: never replaced without --force (below)
    assert "built with milvus_mode='vectors'" in capsys.readouterr().err
    assert main([*bm25, "--force"]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"into {uri}" in error[0] and "goes on from the last shard" in error[0]
    assert json.loads((home / "wiki" / "indexes" / "milvus" / "manifest.json").read_text())["indexes"] == {
        "vector": {"index_type": "FLAT"}
    }


def test_serve_answers_search_r1s_retrieve_from_milvus(served):
    """`mhindex serve` over the Milvus index, for real on 127.0.0.1: Search-R1's /retrieve gives Milvus's hits,
    and /info its fingerprint (the index type, the encoder's sha256)."""
    import httpx

    from mhindex.backends import BackendSpec, open_index
    from mhindex.home import corpus_dir
    from mhindex.server.app import Limits, index_info, make_app
    from mhindex.server.protocols import corpus_lines
    from servers import Uvicorn

    home, uri = served
    corpus = corpus_dir(home, "wiki")
    opened = open_index(corpus, BackendSpec.parse("milvus", {"milvus_uri": uri}))
    info = index_info(corpus, "milvus", opened.settings, opened.fingerprint)
    try:
        with Uvicorn(make_app(opened.retriever, info, Limits(), None, corpus_lines(corpus), access_log=False)) as web:
            asked = questions(home)[:3]
            reply = httpx.post(web.url + "/retrieve", json={"queries": asked, "topk": 3, "return_scores": True})
            found = [[hit["document"]["id"] for hit in hits] for hits in reply.json()["result"]]
            assert found == [[h.id for h in opened.retriever.search(q, 3)] for q in asked]
            about = httpx.get(web.url + "/info").json()["fingerprint"]["retrieval"]
            assert (
                about["backend"] == "milvus" and about["milvus_index"] == "flat" and len(about["encoder_sha256"]) == 64
            )
    finally:
        opened.close()


def test_a_killed_build_resumes_where_it_stopped(served, tmp_path):
    """Killed while loading (its rows flushed a shard at a time), the same command goes on from the last shard
    recorded, and the collection holds each paragraph once."""
    from pymilvus import MilvusClient

    home, uri = served
    options = ["--milvus-uri", uri, "--milvus-batch", "10", "--shard-size", "20", "--force"]
    command = [sys.executable, "-m", "mhindex", "--home", str(home), "index", "wiki", "--backend", "milvus", *options]
    victim = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline and victim.poll() is None:
        marks = list((home / "wiki" / "indexes").glob(".milvus-work-*/inserted"))
        if marks and int(marks[0].read_text() or 0) >= 50:
            break
        time.sleep(0.2)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert marks and 50 <= int(marks[0].read_text()) < len(read_jsonl(home / "wiki" / "corpus.jsonl"))
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=HANG_S)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming the Milvus load" in resumed.stderr
    manifest = json.loads((home / "wiki" / "indexes" / "milvus" / "manifest.json").read_text())
    client = MilvusClient(uri=uri)
    try:
        count = client.query(manifest["collection"], filter="", output_fields=["count(*)"])[0]["count(*)"]
        assert count == manifest["paragraphs"] == len(read_jsonl(home / "wiki" / "corpus.jsonl"))
        assert not client.has_collection(manifest["collection"] + "_staging")
    finally:
        client.close()
    assert not marks[0].parent.exists()  # what the build kept to resume: gone


def test_a_server_that_goes_away_mid_search_is_one_line(tmp_path, capsys):
    (tmp_path / "home").mkdir()
    home = small_wiki_corpus(tmp_path / "home")
    with milvus_server(tmp_path / "server") as uri:
        assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "milvus", "--milvus-uri", uri]) == 0
        retriever = searcher(home, "milvus", milvus_uri=uri, milvus_timeout=3)
        assert len(retriever.search("Who directed the film?", 3)) == 3
    from mhindex.errors import MhindexError

    with pytest.raises(MhindexError, match="searching mhindex_wiki_.* at http://127.0.0.1"):
        retriever.search("Who directed the film?", 3)
    capsys.readouterr()
    asked = ["--home", str(home), "search", "wiki", "Who directed the film?", "--backend", "milvus"]
    assert main([*asked, "--milvus-uri", uri, "--milvus-timeout", "3"]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "Milvus" in error[0] and "Traceback" not in error[0]


def test_without_an_address_milvus_lite_is_embedded_in_the_index_folder(served, tmp_path, capsys):
    """No --milvus-uri: Milvus Lite, its database in the index's own folder (replaced with the index, removed with
    it), the same exact ranking as FAISS; an index type it cannot build is one line, before any vector."""
    home, _ = served
    lite = tmp_path / "home"
    lite.mkdir()
    small_wiki_corpus(lite)
    assert main(["--home", str(lite), "index", "wiki", "--backend", "milvus", "--milvus-index", "ivfpq"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "needs a Milvus server (--milvus-uri)" in error[0]
    assert main(["--quiet", "--home", str(lite), "index", "wiki", "--backend", "milvus"]) == 0
    assert (lite / "wiki" / "indexes" / "milvus" / "milvus.db").is_dir()
    assert not list((lite / "wiki" / "indexes").glob(".milvus-work-*"))
    milvus, faiss = searcher(lite, "milvus"), searcher(home, "dense")
    try:
        for question in questions(lite)[:8]:
            assert [h.id for h in milvus.search(question, 5)] == [h.id for h in faiss.search(question, 5)]
    finally:
        milvus.close()
        faiss.close()


def recall_at_15(retriever, asked: list[dict]) -> float:
    found = [{h.id for h in retriever.search(q["question"], 15)} for q in asked]
    return sum(len(f & set(q["gold_ids"])) / len(q["gold_ids"]) for f, q in zip(found, asked, strict=True)) / len(asked)


def test_bm25_in_milvus_lite_keeps_lucenes_recall_on_the_samples(tmp_path):
    """`--milvus-mode bm25`: Milvus's own full-text BM25 (its analyzer, k1 1.2, b 0.75) over title and text, in
    Milvus Lite; recall@15 of the gold paragraphs within 0.02 of Lucene's on each dataset's sample, title scopes
    as filters. (Milvus 2.3.5's server has no BM25; a 2.5 cluster has.)"""
    from conftest import SAMPLES
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    samples = {
        "musique": SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl",
        "hotpotqa": SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json",
        "2wikimultihopqa": SAMPLES / "2wikimultihopqa" / "dev.sample.json",
    }
    home = tmp_path / "home"
    for dataset, release in samples.items():
        assert main(["--quiet", "--home", str(home), "build", dataset, "--input", str(release)]) == 0
        bm25 = ["--backend", "milvus", "--milvus-mode", "bm25"]
        assert main(["--quiet", "--home", str(home), "index", dataset, *bm25]) == 0
        manifest = json.loads((home / dataset / "indexes" / "milvus" / "manifest.json").read_text())
        assert manifest["indexes"] == {
            "sparse": {"index_type": "SPARSE_INVERTED_INDEX", "bm25_k1": 1.2, "bm25_b": 0.75}
        }
        milvus = open_retriever(corpus_dir(home, dataset), BackendSpec.parse("milvus"))
        lucene = open_retriever(corpus_dir(home, dataset), BackendSpec.parse("lucene"))
        try:
            asked = read_jsonl(home / dataset / "questions.jsonl")
            assert abs(recall_at_15(milvus, asked) - recall_at_15(lucene, asked)) <= 0.02, dataset
            title = lucene.search(asked[0]["question"], 1)[0].title
            scoped = milvus.search(asked[0]["question"], 3, [title.upper()])
            assert scoped and {h.title for h in scoped} == {title}
        finally:
            milvus.close()
            lucene.close()


def test_hybrid_mode_holds_both_halves_and_fuses_them_as_the_hybrid_backend_does(served, tmp_path, capsys):
    """`--milvus-mode vectors+bm25`: one collection holds the vectors and the texts; one request searches both and
    Milvus fuses them (its RRFRanker). Its fused ranking is the hybrid backend's RRF over the same two rankings: FAISS's
    exact one (which Milvus's flat search equals, above) and Milvus's own BM25, each from its own index."""
    from mhindex.backends.hybrid import Fused, HybridOptions

    home, _ = served
    both, texts = tmp_path / "both", tmp_path / "texts"
    for root, mode in ((both, "vectors+bm25"), (texts, "bm25")):
        root.mkdir()
        small_wiki_corpus(root)
        built = main(["--quiet", "--home", str(root), "index", "wiki", "--backend", "milvus", "--milvus-mode", mode])
        assert built == 0
    manifest = json.loads((both / "wiki" / "indexes" / "milvus" / "manifest.json").read_text())
    assert manifest["mode"] == "vectors+bm25" and set(manifest["indexes"]) == {"vector", "sparse"}
    # Another mode is another variant: refused in one line, not built over it (it once replaced it silently),
    # and a plain search says which variant answered.
    capsys.readouterr()
    assert main(["--home", str(both), "index", "wiki", "--backend", "milvus"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "built with milvus_mode='vectors+bm25'" in said[0] and "add --force" in said[0]
    assert json.loads((both / "wiki" / "indexes" / "milvus" / "manifest.json").read_text()) == manifest
    assert main(["--home", str(both), "search", "wiki", "Who?", "--backend", "milvus", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["index"]["milvus_mode"] == "vectors+bm25"
    hybrid, bm25, faiss = searcher(both, "milvus"), searcher(texts, "milvus"), searcher(home, "dense")
    fused = Fused([("dense", faiss), ("milvus", bm25)], HybridOptions())
    try:
        asked, moved = questions(both), 0
        batched = hybrid.search_many(asked, 10)
        for question, many in zip(asked, batched, strict=True):
            got, expected = hybrid.search(question, 10), fused.search(question, 10)
            assert [h.id for h in many] == [h.id for h in got]
            assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-6), question
            # Ties (one paragraph at rank r in one ranking, another at r in the other) may fall either way.
            cut = got[-1].score + 1e-6
            assert {h.id for h in got if h.score > cut} == {h.id for h in expected if h.score > cut}, question
            moved += [h.id for h in got] != [h.id for h in faiss.search(question, 10)]
        assert moved >= len(asked) // 2  # the BM25 half counts: most rankings are not the vectors' alone
        title = faiss.search(asked[0], 1)[0].title
        scoped = hybrid.search(asked[0], 3, [title.upper()])
        assert scoped and {h.title for h in scoped} == {title}
    finally:
        for retriever in (hybrid, bm25, faiss):
            retriever.close()


def test_a_path_for_milvus_uri_is_refused_before_anything_is_made(tmp_path, capsys):
    """`--milvus-uri /elsewhere/x.db` (or ./rel.db, or a folder of the user's) would make Milvus Lite create, and
    later delete, files there: only a server's address is taken; nothing is made anywhere."""
    (tmp_path / "home").mkdir()
    home = small_wiki_corpus(tmp_path / "home")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for given in (str(elsewhere / "x.db"), "./rel.db", str(elsewhere)):
        capsys.readouterr()
        code = main(["--home", str(home), "index", "wiki", "--backend", "milvus", "--milvus-uri", given])
        said = capsys.readouterr().err
        assert code == 2 and "--milvus-uri takes a Milvus server's address" in said, said
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "rel.db").exists() and not Path("rel.db").exists()


def test_a_lite_database_held_elsewhere_or_damaged_is_one_line_saying_which_may_be(tmp_path, capsys):
    """Milvus Lite's database opened by a second process while this one holds it (as `mhindex serve` holds it), and
    the same database damaged: one line that names the database and both causes, never "cannot reach Milvus"
    with pymilvus's words alone."""
    home = tmp_path / "home"
    home.mkdir()
    small_wiki_corpus(home)
    assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "milvus"]) == 0
    database = home / "wiki" / "indexes" / "milvus" / "milvus.db"
    asked = [sys.executable, "-m", "mhindex", "--home", str(home), "search", "wiki", "Who directed it?", "-b", "milvus"]
    held = searcher(home, "milvus")
    try:
        assert held.search("Who directed the film?", 3)
        second = subprocess.run(asked, capture_output=True, text=True, timeout=HANG_S)
    finally:
        held.close()
    said = second.stderr.strip().splitlines()
    if second.returncode != 0:  # Milvus Lite refuses a second process (else it shares the database: nothing to say)
        assert len(said) == 1 and f"Milvus Lite could not open this index's database {database}" in said[0], said
    for part in (p for p in database.rglob("*") if p.is_file()):
        part.write_bytes(b"\0" * 64)
    damaged = subprocess.run(asked, capture_output=True, text=True, timeout=HANG_S)
    said = damaged.stderr.strip().splitlines()
    assert damaged.returncode != 0 and len(said) == 1 and "Traceback" not in damaged.stderr, damaged.stderr
    assert f"Milvus Lite could not open this index's database {database}" in said[0] and "damaged" in said[0], said
