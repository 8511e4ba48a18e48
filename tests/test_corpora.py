"""Corpora built from the real samples: counts computed independently, gold ids, determinism,
shuffling, several inputs into one corpus, the abstracts archive, and the no-op re-run."""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import tarfile
from pathlib import Path

import orjson
import pytest

from conftest import SAMPLES, leftovers, read_jsonl

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
HOTPOT = SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json"
TWOWIKI = SAMPLES / "2wikimultihopqa" / "dev.sample.json"
IIRC_DEV = SAMPLES / "iirc" / "dev.handmade.json"
IIRC_ARTICLES = SAMPLES / "iirc" / "context_articles.handmade.json"


def joined(sentences):
    return " ".join(s.strip() for s in sentences if s.strip())


def corpus_of(home: Path, name: str):
    corpus = read_jsonl(home / name / "corpus.jsonl")
    questions = read_jsonl(home / name / "questions.jsonl")
    return corpus, questions


def test_musique_counts_and_gold(mh, home):
    records = [json.loads(line) for line in MUSIQUE.read_text().splitlines()]
    expected = {(p["title"], p["paragraph_text"]) for r in records for p in r["paragraphs"]}

    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    corpus, questions = corpus_of(home, "musique")

    assert len(corpus) == len(expected)
    assert {(p["title"], p["text"]) for p in corpus} == expected
    assert len({p["id"] for p in corpus}) == len(corpus)
    by_id = {p["id"]: p for p in corpus}
    assert [q["id"] for q in questions] == [r["id"] for r in records]
    for record, question in zip(records, questions, strict=False):
        gold = {(p["title"], p["paragraph_text"]) for p in record["paragraphs"] if p["is_supporting"]}
        assert {(by_id[g]["title"], by_id[g]["text"]) for g in question["gold_ids"]} == gold
        assert question["answers"][0] == record["answer"]
        assert set(record["answer_aliases"]) <= set(question["answers"])
        assert question["hops"] == int(record["id"][0])
        # Each hop keeps its fields and gains the id of the paragraph that supports it.
        assert [{k: v for k, v in hop.items() if k != "paragraph_id"} for hop in question["decomposition"]] == record[
            "question_decomposition"
        ]
        for hop in question["decomposition"]:
            supporting = record["paragraphs"][hop["paragraph_support_idx"]]
            assert (by_id[hop["paragraph_id"]]["title"], by_id[hop["paragraph_id"]]["text"]) == (
                supporting["title"],
                supporting["paragraph_text"],
            )
        assert question["dataset"] == "musique"


@pytest.mark.parametrize("dataset,path", [("hotpotqa", HOTPOT), ("2wikimultihopqa", TWOWIKI)])
def test_context_datasets_counts_and_gold(mh, home, dataset, path):
    records = json.loads(path.read_text())
    expected = {(title, joined(sentences)) for r in records for title, sentences in r["context"]}

    assert mh("corpus", dataset, "--input", path).code == 0
    corpus, questions = corpus_of(home, dataset)

    assert {(p["title"], p["text"]) for p in corpus} == expected
    assert len(corpus) == len(expected)
    by_id = {p["id"]: p for p in corpus}
    assert len(questions) == len(records)
    for record, question in zip(records, questions, strict=False):
        titles = {t for t, _ in record["supporting_facts"]}
        context = {t: joined(s) for t, s in record["context"]}
        assert {by_id[g]["title"] for g in question["gold_ids"]} == titles & set(context)
        for g in question["gold_ids"]:
            assert by_id[g]["text"] == context[by_id[g]["title"]]
        assert question["answers"] == [record["answer"]]
        assert question["type"] == record["type"]


def test_iirc_handmade(mh, home):
    passages = json.loads(IIRC_DEV.read_text())
    assert mh("corpus", "iirc", "--input", IIRC_DEV, "--input", IIRC_ARTICLES).code == 0
    corpus, questions = corpus_of(home, "iirc")

    # Paragraphs of 10 words or fewer ("Education", "See also") are dropped, as in IRCoT.
    assert all(len(p["text"].split()) > 10 for p in corpus)
    assert len(corpus) == 11
    answerable = [q for p in passages for q in p["questions"] if q["answer"]["type"] != "none"]
    assert [q["id"] for q in questions] == [q["qid"] for q in answerable]
    by_id = {p["id"]: p for p in corpus}
    for question in questions:
        assert question["gold_ids"], question["id"]
        assert all(g in by_id for g in question["gold_ids"])
        assert question["main_passage"]["title"] in {"Ada Lovelace", "Rosetta Stone"}
    first = questions[0]
    assert [by_id[g]["title"] for g in first["gold_ids"]] == ["Charles Babbage"]
    assert "Trinity College" in by_id[first["gold_ids"][0]]["text"]
    # The snippet with an HTML entity still finds its paragraph (word-overlap fallback).
    last = questions[-1]
    assert by_id[last["gold_ids"][0]]["title"] == "Jean-François Champollion"
    assert questions[1]["answers"] == ["27"]
    manifest = json.loads((home / "iirc" / "manifest.json").read_text())
    assert manifest["counts"]["dropped unanswerable questions (IRCoT drops them)"] == 1


def test_same_inputs_and_seed_give_identical_bytes_and_other_seeds_reorder(mh, home, tmp_path):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    assert mh("corpus", "musique", "--input", MUSIQUE, "--name", "again", "--force").code == 0
    assert mh("corpus", "musique", "--input", MUSIQUE, "--name", "other", "--seed", "7").code == 0
    first = (home / "musique" / "corpus.jsonl").read_bytes()
    assert (home / "again" / "corpus.jsonl").read_bytes() == first
    other = (home / "other" / "corpus.jsonl").read_bytes()
    assert other != first
    assert sorted(other.splitlines()) == sorted(first.splitlines())


def test_corpus_is_shuffled(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    corpus, _ = corpus_of(home, "musique")
    first_seen = []
    for line in MUSIQUE.read_text().splitlines():
        for p in json.loads(line)["paragraphs"]:
            key = (p["title"], p["paragraph_text"])
            if key not in first_seen:
                first_seen.append(key)
    order = [(p["title"], p["text"]) for p in corpus]
    assert order != first_seen
    # Not merely rotated or reversed: few neighbours of the input order stay neighbours.
    index = {key: i for i, key in enumerate(order)}
    kept = sum(1 for a, b in zip(first_seen, first_seen[1:], strict=False) if index[b] == index[a] + 1)
    assert kept < len(first_seen) * 0.05


def test_several_files_go_into_one_corpus(mh, home, tmp_path):
    lines = MUSIQUE.read_text().splitlines()
    dev = tmp_path / "musique_ans_v1.0_dev.jsonl"
    dev.write_text("\n".join(lines[:60]) + "\n")
    full = tmp_path / "musique_full_v1.0_dev.jsonl"
    # The full variant repeats answerable questions; these must be kept once.
    full.write_text("\n".join(lines[40:]) + "\n")

    result = mh("corpus", "musique", "--input", dev, "--input", full, "--json")
    assert result.code == 0
    manifest = result.json()
    corpus, questions = corpus_of(home, "musique")
    expected = {(p["title"], p["paragraph_text"]) for line in lines for p in json.loads(line)["paragraphs"]}
    assert len(corpus) == len(expected)
    assert [q["id"] for q in questions] == [json.loads(line)["id"] for line in lines]
    assert manifest["counts"]["duplicate_questions"] == 20
    assert [Path(i["path"]).name for i in manifest["inputs"]] == [dev.name, full.name]


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("musique_ans_v1.0_train.jsonl", "train"),
        ("musique_full_v1.0_test.jsonl", "test"),
        ("musique_ans_v1.0_dev.jsonl", "dev"),
        ("musique-validation.jsonl", "dev"),
        ("questions.jsonl", None),
    ],
)
def test_each_question_keeps_the_split_of_its_release_file(mh, home, tmp_path, name, split):
    path = tmp_path / name
    path.write_text("\n".join(MUSIQUE.read_text().splitlines()[:5]) + "\n")
    assert mh("corpus", "musique", "--input", path).code == 0
    assert [q.get("split") for q in corpus_of(home, "musique")[1]] == [split] * 5


def test_hotpotqa_abstracts_archive(mh, home, tmp_path):
    """The full-wiki release: a tar of folders of bz2 JSON-lines files, one page a line.

    Built here from the sample's context paragraphs, in the release's layout."""
    records = json.loads(HOTPOT.read_text())
    pages = {}
    for record in records:
        for title, sentences in record["context"]:
            pages.setdefault(title, sentences)
    titles = sorted(pages)
    archive = tmp_path / "enwiki-abstracts.tar.bz2"
    with tarfile.open(archive, "w:bz2") as tar:
        for part, chunk in enumerate((titles[: len(titles) // 2], titles[len(titles) // 2 :])):
            lines = b"".join(
                orjson.dumps(
                    {"id": str(i), "url": f"https://en.wikipedia.org/wiki?curid={i}", "title": t, "text": pages[t]}
                )
                + b"\n"
                for i, t in enumerate(chunk)
            )
            lines += orjson.dumps({"id": "x", "url": "", "title": "Empty page", "text": []}) + b"\n"
            data = bz2.compress(lines)
            info = tarfile.TarInfo(f"enwiki-abstracts/A{part}/wiki_00.bz2")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

    assert mh("corpus", "hotpotqa", "--input", archive, "--name", "wiki").code == 0
    corpus, questions = corpus_of(home, "wiki")
    assert {(p["title"], p["text"]) for p in corpus} == {(t, joined(s)) for t, s in pages.items()}
    assert questions == []
    assert all(p["url"].startswith("https://en.wikipedia.org/") for p in corpus)

    # Questions from the dev file map their gold paragraphs onto the same abstract paragraphs.
    assert mh("corpus", "hotpotqa", "--input", archive, "--input", HOTPOT, "--name", "both").code == 0
    corpus2, questions2 = corpus_of(home, "both")
    assert len(corpus2) == len(corpus)
    ids = {p["id"] for p in corpus2}
    assert all(g in ids for q in questions2 for g in q["gold_ids"])


def test_an_input_changed_in_place_to_the_same_size_is_rebuilt(mh, home, tmp_path):
    """The rebuild check compares sizes first, then the sha256 computed beside the conversion."""
    source = tmp_path / "musique.jsonl"
    original = Path(MUSIQUE).read_bytes()
    source.write_bytes(original)
    assert mh("corpus", "musique", "--input", str(source)).code == 0
    before = orjson.loads((home / "musique" / "manifest.json").read_bytes())
    assert before["inputs"][0]["sha256"] == hashlib.sha256(original).hexdigest()
    changed = original.replace(b" the ", b" thE ", 1)
    assert changed != original and len(changed) == len(original)
    source.write_bytes(changed)
    again = mh("corpus", "musique", "--input", str(source))
    assert again.code == 0 and "built corpus" in again.out
    after = orjson.loads((home / "musique" / "manifest.json").read_bytes())
    assert after["inputs"][0]["sha256"] == hashlib.sha256(changed).hexdigest()
    assert any("thE" in p["text"] for p in corpus_of(home, "musique")[0])


def test_rerun_is_a_noop_and_force_rebuilds(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    before = (home / "musique" / "manifest.json").read_bytes()
    again = mh("corpus", "musique", "--input", MUSIQUE)
    assert again.code == 0 and "up to date" in again.out
    assert (home / "musique" / "manifest.json").read_bytes() == before
    marker = home / "musique" / "marker"
    marker.write_text("from the old build")
    forced = mh("corpus", "musique", "--input", MUSIQUE, "--force")
    assert forced.code == 0 and "built corpus" in forced.out
    assert not marker.exists()  # a new folder replaced the old one whole
    assert leftovers(home) == []


def test_default_inputs_are_the_bundled_sample(mh, home):
    result = mh("corpus", "2wikimultihopqa")
    assert result.code == 0
    assert "bundled sample" in result.err
    manifest = json.loads((home / "2wikimultihopqa" / "manifest.json").read_text())
    assert Path(manifest["inputs"][0]["path"]).name == "dev.sample.json"


def test_list_and_info(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE, "--name", "mq").code == 0
    listed = mh("list", "--json")
    assert listed.code == 0
    [row] = listed.json()
    assert row["name"] == "mq" and row["dataset"] == "musique" and row["questions"] == 100
    assert row["bytes"] == sum(p.stat().st_size for p in (home / "mq").rglob("*") if p.is_file())
    info = mh("info", "mq", "--json").json()
    assert info["manifest"]["seed"] == 13370
    assert info["manifest"]["inputs"][0]["sha256"]
    assert "mq" in mh("list").out
    missing = mh("info", "nope")
    assert missing.code == 2 and "no corpus named 'nope'" in missing.err


def test_2wikimultihopqa_aliases_join_the_gold_answers(mh, home, tmp_path):
    """The release's id_aliases.json, as the official script reads it: aliases and demonyms of answer_id."""
    records = json.loads(TWOWIKI.read_text())[:5]
    first = records[0]
    aliases = tmp_path / "id_aliases.json"
    aliases.write_text(
        json.dumps({"Q_id": first["answer_id"], "aliases": ["An Alias", first["answer"]], "demonyms": ["Demonym"]})
        + "\n"
        + json.dumps({"Q_id": "Q0", "aliases": ["unused"], "demonyms": []})
        + "\n"
    )
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps(records))
    assert mh("corpus", "2wikimultihopqa", "--input", dev, "--input", aliases).code == 0
    _, questions = corpus_of(home, "2wikimultihopqa")
    assert questions[0]["answers"] == [first["answer"], "An Alias", "Demonym"]
    assert questions[0]["answer_id"] == first["answer_id"]
    assert all(q["answers"] == [r["answer"]] for q, r in zip(questions[1:], records[1:], strict=True))


# The corpus bytes of each bundled sample at the default seed, as every release since the corpus
# format was fixed has built them: a faster converter must build the very same corpora (the
# evaluation runs stored in benchmarks/ record these hashes).
SAMPLE_CORPUS_SHA256 = {
    "hotpotqa": "86fd85d5b0e6f3d12e2bc6c2d037b3ea3499ca8ba8a79bc764012f980ab113c2",
    "2wikimultihopqa": "1a1e121f8978e8a71a0a34f04e0f42240df5d6113c8d528ef14c2c782e161203",
    "musique": "a9ba4e3a2617600d1ab91703c9f9dff7e38ba04bfddce2a9a8cafc2f6e4b09a9",
    "iirc": "3aabb5dd6f452a2b818baa1205934610ef80f7ee29d83c734e346b0353d80adb",
}


def test_the_samples_build_the_same_corpus_bytes_as_ever(tmp_path):
    import hashlib

    from mhindex.corpora import DATASETS
    from mhindex.corpora.build import build_corpus

    for name, expected in SAMPLE_CORPUS_SHA256.items():
        spec = DATASETS[name]
        built = build_corpus(spec, [SAMPLES / name / f for f in spec.samples], tmp_path)
        assert built.manifest["corpus_sha256"] == expected, name
        assert hashlib.sha256(built.corpus.corpus.read_bytes()).hexdigest() == expected, name


def _musique_parts_input(tmp_path: Path, bad_line: str | None = None) -> list[Path]:
    """Two MuSiQue files whose parts overlap: the second repeats questions (the full variant does),
    paragraphs repeat across parts, and blank lines sit between records."""
    lines = MUSIQUE.read_text().splitlines()
    dev = tmp_path / "musique_ans_v1.0_dev.jsonl"
    body = [*lines[:50], "", *lines[50:], lines[3]]
    if bad_line is not None:
        body.insert(70, bad_line)
    dev.write_text("\n".join(body) + "\n")
    full = tmp_path / "musique_full_v1.0_dev.jsonl"
    full.write_text("\n".join(lines[80:] + lines[:10]) + "\n")
    return [dev, full]


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_workers_build_the_same_corpus_as_one_process(mh, home, tmp_path, workers):
    inputs = [a for path in _musique_parts_input(tmp_path) for a in ("--input", path)]
    assert mh("corpus", "musique", *inputs, "--workers", "1", "--name", "one").code == 0
    result = mh("corpus", "musique", *inputs, "--workers", workers, "--name", "many", "--json")
    assert result.code == 0, result.err
    for name in ("corpus.jsonl", "corpus.offsets", "questions.jsonl"):
        assert (home / "many" / name).read_bytes() == (home / "one" / name).read_bytes(), name
    one = json.loads((home / "one" / "manifest.json").read_text())
    assert result.json()["counts"] == one["counts"]
    assert one["counts"]["duplicate_questions"] == 31  # the full file repeats 30, and line 4 comes twice
    assert one["counts"]["duplicate_paragraphs"] > 0
    assert leftovers(home) == []


def test_workers_split_at_line_ends_into_parts_of_about_equal_size(tmp_path):
    from mhindex.corpora.parallel import split

    inputs = _musique_parts_input(tmp_path)
    parts = split(inputs, 3)
    assert len(parts) == 3
    covered = {str(p): [] for p in inputs}
    for part in parts:
        for segment in part:
            data = Path(segment.path).read_bytes()
            assert segment.start == 0 or data[segment.start - 1 : segment.start] == b"\n"
            covered[segment.path].append((segment.start, segment.end))
    for path in inputs:  # every byte of every file, in order, once
        spans = covered[str(path)]
        assert spans[0][0] == 0 and spans[-1][1] == path.stat().st_size
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    sizes = [sum(s.end - s.start for s in part) for part in parts]
    assert max(sizes) - min(sizes) < max(len(line) for p in inputs for line in p.read_bytes().splitlines()) + 1


def test_workers_report_a_bad_record_as_one_process_does(mh, home, tmp_path):
    inputs = [
        a
        for path in _musique_parts_input(tmp_path, bad_line='{"id": "2hop__x", "paragraphs": 3}')
        for a in ("--input", path)
    ]
    one = mh("corpus", "musique", *inputs, "--workers", "1", "--name", "one")
    many = mh("corpus", "musique", *inputs, "--workers", "3", "--name", "many")
    assert one.code == many.code == 2
    assert "line 71: field 'paragraphs' should be a list, got an integer" in one.err
    assert many.err == one.err
    assert not (home / "many").exists() and leftovers(home) == []

    skipped = mh("corpus", "musique", *inputs, "--workers", "3", "--name", "many", "--skip-bad", "--json")
    assert skipped.code == 0
    assert mh("corpus", "musique", *inputs, "--workers", "1", "--name", "one", "--skip-bad").code == 0
    assert skipped.json()["counts"]["skipped_bad_records"] == 1
    assert (home / "many" / "corpus.jsonl").read_bytes() == (home / "one" / "corpus.jsonl").read_bytes()


def test_a_worker_that_dies_is_an_error_not_a_hang(home, tmp_path):
    import dataclasses
    import os

    from mhindex.corpora import DATASETS
    from mhindex.corpora.build import build_corpus
    from mhindex.errors import MhindexError

    def killed(record):  # what the out-of-memory killer does to a worker
        os._exit(9)

    dying = dataclasses.replace(DATASETS["musique"], convert_line=killed)
    with pytest.raises(MhindexError, match="exit code 9"):
        build_corpus(dying, _musique_parts_input(tmp_path), home, workers=2)
    assert not (home / "musique").exists() and leftovers(home) == []


def test_one_wikipedia_corpus_of_every_sample(mh, home):
    """The README's harder corpus: MuSiQue's questions over every Wikipedia sample's paragraphs."""
    result = mh("corpus", "musique", "--add", "hotpotqa", "--add", "2wikimultihopqa", "--name", "wikipedia", "--json")
    assert result.code == 0, result.err
    corpus, questions = corpus_of(home, "wikipedia")
    expected = {
        (p["title"], p["paragraph_text"])
        for line in MUSIQUE.read_text().splitlines()
        for p in json.loads(line)["paragraphs"]
    }
    for path in (HOTPOT, TWOWIKI):
        expected |= {
            (title, joined(sentences)) for r in json.loads(path.read_text()) for title, sentences in r["context"]
        }
    assert {(p["title"], p["text"]) for p in corpus} == expected and len(corpus) == 3483  # as benchmarks/README says
    assert {p["source"] for p in corpus} == {"musique", "hotpotqa", "2wikimultihopqa"}
    assert [q["dataset"] for q in questions] == ["musique"] * len(questions) and len(questions) == 100
    ids = {p["id"] for p in corpus}
    assert all(set(q["gold_ids"]) <= ids for q in questions)


def test_long_work_in_a_pipe_says_how_far_it_is_now_and_then(mh, home, monkeypatch):
    """No bar in a pipe or a log, but a JSON line a minute (here: at every step), so that a log reader sees
    a long build going on; none with --quiet."""
    from mhindex import ui

    monkeypatch.setattr(ui._PipeTask, "EVERY", 0.0)
    built = mh("corpus", "musique", "--force")
    assert built.code == 0, built.err
    lines = [json.loads(line) for line in built.err.splitlines() if '"done"' in line]
    assert lines and all(line["message"].startswith("converting musique: ") for line in lines)
    assert lines[-1]["done"] == lines[-1]["total"] > 0 and lines[-1]["message"].endswith(" bytes")
    # With a total, each line says the time left at the pace so far (none once the work is done).
    assert lines[-1]["seconds_left"] == 0 and all(line["seconds_left"] >= 0 for line in lines)
    assert all(" left" in line["message"] for line in lines if line["done"] < line["total"])
    quiet = mh("--quiet", "corpus", "musique", "--force")
    assert quiet.code == 0 and quiet.err == ""
