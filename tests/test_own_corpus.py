"""A user's own corpus in the field's common layouts (FlashRAG's wiki-18 JSON lines, Pyserini's
JsonCollection, DPR's TSV and .qa.csv, BEIR's corpus, queries and qrels), compressed or not,
written here from the real MuSiQue sample and read back through `mhindex corpus`, a real Lucene
index and `search`."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import orjson
import pytest
import zstandard

from conftest import SAMPLES, leftovers, read_jsonl

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"


def _sample(count: int = 30) -> tuple[dict[tuple[str, str], str], list[dict]]:
    """MuSiQue's first questions as a corpus of numbered paragraphs ("1", "2", ... as DPR numbers
    them) and questions with their answers and gold paragraph ids."""
    paragraphs: dict[tuple[str, str], str] = {}
    questions = []
    for line in MUSIQUE.read_text().splitlines()[:count]:
        record = json.loads(line)
        gold = []
        for p in record["paragraphs"]:
            pid = paragraphs.setdefault((p["title"], p["paragraph_text"]), str(len(paragraphs) + 1))
            if p["is_supporting"]:
                gold.append(pid)
        answers = [record["answer"], *record["answer_aliases"]]
        questions.append({"id": record["id"], "question": record["question"], "answers": answers, "gold_ids": gold})
    return paragraphs, questions


def _write(path: Path, lines: list[bytes]) -> Path:
    data = b"".join(lines)
    if path.suffix == ".zst":
        data = zstandard.ZstdCompressor().compress(data)
    elif path.suffix == ".gz":
        data = gzip.compress(data)
    elif path.suffix == ".bz2":
        data = bz2.compress(data)
    path.write_bytes(data)
    return path


def test_flashrag_wiki_jsonl_zstd_keeps_ids_titles_and_gold(mh, home, tmp_path):
    paragraphs, questions = _sample()
    # FlashRAG's and Search-R1's wiki-18 layout: contents are '"Title"\ntext'.
    wiki = _write(
        tmp_path / "wiki18_100w.jsonl.zst",
        [orjson.dumps({"id": pid, "contents": f'"{t}"\n{x}'}) + b"\n" for (t, x), pid in paragraphs.items()],
    )
    # FlashRAG's question layout: golden_answers; given first on the command line on purpose.
    test = _write(
        tmp_path / "test.jsonl",
        [
            orjson.dumps({**{k: v for k, v in q.items() if k != "answers"}, "golden_answers": q["answers"]}) + b"\n"
            for q in questions
        ],
    )
    result = mh("corpus", "jsonl", "-i", test, "-i", wiki, "--name", "wiki", "--json")
    assert result.code == 0, result.err
    corpus, built = read_jsonl(home / "wiki" / "corpus.jsonl"), read_jsonl(home / "wiki" / "questions.jsonl")
    assert {(p["title"], p["text"]): p["id"] for p in corpus} == paragraphs
    assert [(q["id"], q["answers"], q["gold_ids"]) for q in built] == [
        (q["id"], q["answers"], q["gold_ids"]) for q in questions
    ]
    assert result.json()["counts"]["questions_with_unmapped_gold"] == 0

    # Searchable as any corpus: a real Lucene index finds a question's gold paragraph by its own id.
    assert mh("index", "wiki", "--backend", "lucene", "-q").code == 0
    found = mh("search", "wiki", questions[0]["question"], "-k", "5", "--json")
    assert found.code == 0, found.err
    assert set(questions[0]["gold_ids"]) & {hit["id"] for hit in found.json()["hits"]}
    assert leftovers(home) == []


def test_pyserini_and_beir_layouts_in_one_jsonl_corpus(mh, home, tmp_path):
    lines = [
        b'{"id": 7, "contents": "Plain contents with no title line"}\n',
        b'{"id": "doc-2", "title": "Lost Gravity", "text": "Lost Gravity is a roller coaster."}\n',
        b'{"_id": "MED-10", "title": "", "text": "A BEIR corpus line."}\n',
        b'{"id": "multi", "contents": "First line, not a quoted title\\nsecond line"}\n',
    ]
    result = mh("corpus", "jsonl", "-i", _write(tmp_path / "docs.jsonl.bz2", lines), "--name", "mixed")
    assert result.code == 0, result.err
    corpus = {p["id"]: (p["title"], p["text"]) for p in read_jsonl(home / "mixed" / "corpus.jsonl")}
    assert corpus == {
        "7": ("", "Plain contents with no title line"),
        "doc-2": ("Lost Gravity", "Lost Gravity is a roller coaster."),
        "MED-10": ("", "A BEIR corpus line."),
        "multi": ("", "First line, not a quoted title\nsecond line"),
    }


def test_dpr_tsv_and_qa_csv(mh, home, tmp_path):
    paragraphs, questions = _sample(10)
    # DPR's psgs_w100.tsv: a header, text quoted as csv quotes it (inner quotes doubled).
    rows = [b"id\ttext\ttitle\n"] + [
        f'{pid}\t"{x.replace(chr(34), chr(34) * 2)}"\t{t}\n'.encode() for (t, x), pid in paragraphs.items()
    ]
    rows.insert(3, b'99999\t"He said ""hello"" twice."\tQuoted\n')
    tsv = _write(tmp_path / "psgs_w100.tsv.gz", rows)
    qa = _write(
        tmp_path / "nq-test.qa.csv", [f"{q['question']}\t{json.dumps(q['answers'])}\n".encode() for q in questions]
    )
    result = mh("corpus", "dpr", "-i", tsv, "-i", qa)
    assert result.code == 0, result.err
    corpus = {p["id"]: (p["title"], p["text"]) for p in read_jsonl(home / "dpr" / "corpus.jsonl")}
    assert corpus["99999"] == ("Quoted", 'He said "hello" twice.')
    assert {k: v for k, v in corpus.items() if k != "99999"} == {pid: key for key, pid in paragraphs.items()}
    built = read_jsonl(home / "dpr" / "questions.jsonl")
    assert [(q["id"], q["question"], q["answers"]) for q in built] == [
        (f"nq-test-{n}", q["question"], q["answers"]) for n, q in enumerate(questions)
    ]


def test_beir_queries_judged_by_qrels(mh, home, tmp_path):
    paragraphs, questions = _sample(12)
    folder = tmp_path / "scifact"
    (folder / "qrels").mkdir(parents=True)
    corpus = _write(
        folder / "corpus.jsonl",
        [
            orjson.dumps({"_id": f"d{pid}", "title": t, "text": x, "metadata": {}}) + b"\n"
            for (t, x), pid in paragraphs.items()
        ],
    )
    queries = _write(
        folder / "queries.jsonl",
        [orjson.dumps({"_id": q["id"], "text": q["question"], "metadata": {}}) + b"\n" for q in questions],
    )
    judged = questions[:10]  # the last two queries are judged nowhere: they are no questions
    qrels = ["query-id\tcorpus-id\tscore\n"]
    qrels += [f"{q['id']}\td{g}\t1\n" for q in judged for g in q["gold_ids"]]
    qrels += [f"{judged[0]['id']}\td1\t0\n", f"{judged[1]['id']}\tmissing-doc\t2\n"]
    test = _write(folder / "qrels" / "test.tsv", [line.encode() for line in qrels])
    result = mh("corpus", "beir", "-i", test, "-i", queries, "-i", corpus, "--name", "scifact", "--json")
    assert result.code == 0, result.err
    built = read_jsonl(home / "scifact" / "questions.jsonl")
    assert [q["id"] for q in built] == [q["id"] for q in judged]
    assert all(q["split"] == "test" and q["answers"] == [] for q in built)
    # Relevance 0 is not gold; a judged id the corpus lacks is reported, the rest kept.
    assert [q["gold_ids"] for q in built] == [[f"d{g}" for g in q["gold_ids"]] for q in judged]
    assert result.json()["counts"]["questions_with_unmapped_gold"] == 1
    assert "missing-doc" in result.err


def test_a_relevance_grade_past_what_json_and_trec_eval_hold_is_refused(mh, home, tmp_path):
    """A qrels grade of 99999999999999999999 is one line naming the file, line and field (it was an orjson
    traceback: no 64-bit whole number holds it), and nothing is built."""
    folder = tmp_path / "big"
    (folder / "qrels").mkdir(parents=True)
    corpus = _write(folder / "corpus.jsonl", [b'{"_id": "d1", "title": "T", "text": "a paragraph"}\n'])
    queries = _write(folder / "queries.jsonl", [b'{"_id": "q1", "text": "which paragraph?"}\n'])
    qrels = _write(folder / "qrels" / "test.tsv", [b"query-id\tcorpus-id\tscore\n", b"q1\td1\t99999999999999999999\n"])
    result = mh("corpus", "beir", "-i", qrels, "-i", queries, "-i", corpus, "--name", "big")
    assert result.code == 2, result.err
    assert f"{qrels} line 2: field 'score' should be a relevance grade of at most 2,147,483,647" in result.err
    assert "Traceback" not in result.err and not (home / "big").exists() and leftovers(home) == []


def test_a_repeated_id_keeps_its_first_paragraph_and_says_so(mh, home, tmp_path):
    lines = [
        b'{"id": "a", "title": "T", "text": "first"}\n',
        b'{"id": "b", "title": "T", "text": "first"}\n',  # same text, another id: a paragraph of its own
        b'{"id": "a", "title": "T", "text": "second"}\n',
    ]
    result = mh("corpus", "jsonl", "-i", _write(tmp_path / "c.jsonl", lines))
    assert result.code == 0, result.err
    assert [
        (p["id"], p["text"]) for p in sorted(read_jsonl(home / "jsonl" / "corpus.jsonl"), key=lambda p: p["id"])
    ] == [
        ("a", "first"),
        ("b", "first"),
    ]
    assert "1 paragraphs repeated an id seen before; the first paragraph of each id was kept" in result.err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"title": "T", "text": "no id"}', "field 'id' is missing"),
        (b'{"id": "", "text": "x"}', "field 'id' should be a non-empty string or number"),
        (b'{"id": "x", "title": "T"}', "field 'text' is missing"),
        (b'{"id": "q", "question": "Who?", "answers": [1, null]}', "field 'answers' should be"),
    ],
)
def test_a_bad_line_names_file_line_and_field(mh, home, tmp_path, line, message):
    path = _write(tmp_path / "c.jsonl", [b'{"id": "ok", "title": "T", "text": "fine"}\n', line + b"\n"])
    result = mh("corpus", "jsonl", "-i", path)
    assert result.code != 0
    assert f"{path} line 2: {message}" in result.err
    assert "Traceback" not in result.err
    assert not (home / "jsonl").exists() and leftovers(home) == []
    skipped = mh("corpus", "jsonl", "-i", path, "--skip-bad")
    assert skipped.code == 0 and "skipped 1 bad records" in skipped.err


def test_a_bad_dpr_row_names_its_line(mh, home, tmp_path):
    tsv = _write(tmp_path / "psgs.tsv", [b"id\ttext\ttitle\n", b"1\tgood text\tGood\n", b"2\tno title here\n"])
    result = mh("corpus", "dpr", "-i", tsv)
    assert result.code != 0
    assert f"{tsv} line 3: expected 3 tab-separated fields (id, text, title), got 2" in result.err


def test_workers_build_the_same_own_corpus_as_one_process(mh, home, tmp_path):
    paragraphs, questions = _sample(60)
    lines = [orjson.dumps({"id": pid, "contents": f'"{t}"\n{x}'}) + b"\n" for (t, x), pid in paragraphs.items()]
    lines += lines[:40]  # repeated ids, across the workers' parts
    wiki = _write(tmp_path / "wiki.jsonl", lines)
    test = _write(tmp_path / "test.jsonl", [orjson.dumps(q) + b"\n" for q in questions])
    assert mh("corpus", "jsonl", "-i", wiki, "-i", test, "--workers", "1", "--name", "one").code == 0
    result = mh("corpus", "jsonl", "-i", wiki, "-i", test, "--workers", "3", "--name", "many")
    assert result.code == 0, result.err
    for name in ("corpus.jsonl", "questions.jsonl"):
        assert (home / "many" / name).read_bytes() == (home / "one" / name).read_bytes(), name
    assert len(read_jsonl(home / "one" / "corpus.jsonl")) == len(paragraphs)


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.bz2", ".jsonl.zst"])
def test_a_truncated_archive_is_named_and_never_becomes_a_short_corpus(mh, home, tmp_path, suffix):
    lines = [orjson.dumps({"id": f"d{i}", "contents": f"Title {i}\nparagraph {i} " + "word " * (i % 40)}) + b"\n"
             for i in range(2000)]  # fmt: skip
    whole = _write(tmp_path / f"whole{suffix}", lines)
    if suffix.endswith(".zst"):  # two frames, as a file written in pieces has: both read
        half = len(lines) // 2
        whole.write_bytes(
            b"".join(zstandard.ZstdCompressor().compress(b"".join(p)) for p in (lines[:half], lines[half:]))
        )
    assert mh("--quiet", "corpus", "jsonl", "-i", whole, "--name", "whole").code == 0
    assert len(read_jsonl(home / "whole" / "corpus.jsonl")) == 2000
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    for skip in ([], ["--skip-bad"]):  # records of a torn line may be skipped; a torn file never
        result = mh("corpus", "jsonl", "-i", cut, "--name", "cut", *skip)
        assert result.code == 2 and result.err.strip().splitlines() == [
            f"mhindex: error: {cut}: the {dict(gz='gzip', bz2='bzip2', zst='zstd')[suffix.rsplit('.', 1)[1]]} stream "
            "ends before its end marker: the file is truncated (fetch it again)"
        ]
        assert not (home / "cut").exists()
    plain = tmp_path / f"plain{suffix}"
    plain.write_bytes(b"".join(lines))
    result = mh("corpus", "jsonl", "-i", plain, "--name", "plain")
    assert result.code == 2 and f"{plain}: not a readable" in result.err and len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize("workers", ["1", "2"])  # in the build's own process, and in forked workers
def test_untitled_paragraphs_are_counted_and_titled_as_asked(mh, home, tmp_path, workers):
    """Pyserini contents whose first line is an unquoted title: said with the count, never silently
    untitled; --title-from first-line or id gives each a title, --title-from none says there are none."""
    paragraphs, _ = _sample(6)
    contents = _write(
        tmp_path / "collection.jsonl",
        [orjson.dumps({"id": pid, "contents": f"{t}\n{x}"}) + b"\n" for (t, x), pid in paragraphs.items()],
    )
    built = mh("corpus", "jsonl", "-i", contents, "--workers", workers, "--json")
    assert built.code == 0, built.err
    assert built.json()["counts"]["untitled_paragraphs"] == len(paragraphs)
    assert f"{len(paragraphs):,} of {len(paragraphs):,} paragraphs have no title" in built.err
    assert "--title-from first-line or id" in built.err
    for title_from, title in (("first-line", lambda t, pid: t), ("id", lambda t, pid: pid)):
        again = mh("corpus", "jsonl", "-i", contents, "--workers", workers, "--title-from", title_from, "--json")
        assert again.code == 0 and "no title" not in again.err, again.err
        assert again.json()["counts"]["untitled_paragraphs"] == 0
        kept = {p["id"]: p for p in read_jsonl(home / "jsonl" / "corpus.jsonl")}
        assert {pid: kept[pid]["title"] for pid in kept} == {pid: title(t, pid) for (t, _), pid in paragraphs.items()}
    quiet = mh("corpus", "jsonl", "-i", contents, "--workers", workers, "--title-from", "none", "--json")
    assert quiet.code == 0 and "no title" not in quiet.err
    assert quiet.json()["counts"]["untitled_paragraphs"] == len(paragraphs)


def test_a_method_that_searches_by_title_says_so_over_an_untitled_corpus(mh, home, tmp_path):
    """IRCoT reads paragraphs under their titles and finds IIRC's pages by title: over a corpus imported without
    titles it still answers, and says once, before it does, why its answers may be worse and how to fix it."""
    paragraphs, _ = _sample(6)
    contents = _write(
        tmp_path / "collection.jsonl",
        [orjson.dumps({"id": pid, "contents": f"{t}\n{x}"}) + b"\n" for (t, x), pid in paragraphs.items()],
    )
    assert mh("corpus", "jsonl", "-i", contents, "--title-from", "none", "--name", "untitled").code == 0
    assert mh("index", "untitled").code == 0
    small = ["--max-steps", "1", "--step-tokens", "8", "--max-demos", "1", "--answer-tokens", "4"]
    asked = mh("ask", "Who directed it?", "--corpus", "untitled", "--method", "ircot", *small, "--json")
    assert asked.code == 0, asked.err
    said = [line for line in asked.err.splitlines() if "relies on paragraph titles" in line]
    assert len(said) == 1, asked.err
    assert f"{len(paragraphs):,} of {len(paragraphs):,} paragraphs of 'untitled' have none" in said[0]
    assert "--title-from first-line or id" in said[0]
    assert asked.json()["method"] == "ircot"
