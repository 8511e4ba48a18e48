"""Bad input: a one-line error naming file, line (or record) and field, exit code 2, and
nothing half-written in the data root; --skip-bad goes on and counts."""

from __future__ import annotations

import json

from conftest import SAMPLES, leftovers

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"


def musique_with(tmp_path, line_number: int, replacement: str):
    lines = MUSIQUE.read_text().splitlines()[:10]
    lines[line_number - 1] = replacement
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def assert_one_line_error(result, *fragments):
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_invalid_json_line(mh, home, tmp_path):
    path = musique_with(tmp_path, 3, '{"id": "2hop__1", "paragraphs": [')
    result = mh("corpus", "musique", "--input", path)
    assert_one_line_error(result, str(path), "line 3", "not valid JSON")
    assert not (home / "musique").exists()
    assert leftovers(home) == []


def test_missing_field(mh, home, tmp_path):
    record = json.loads(MUSIQUE.read_text().splitlines()[4])
    del record["question"]
    path = musique_with(tmp_path, 5, json.dumps(record))
    assert_one_line_error(
        mh("corpus", "musique", "--input", path), "broken.jsonl line 5", "field 'question' is missing"
    )


def test_nested_field_of_wrong_type(mh, home, tmp_path):
    record = json.loads(MUSIQUE.read_text().splitlines()[1])
    record["paragraphs"][2]["title"] = 17
    path = musique_with(tmp_path, 2, json.dumps(record))
    assert_one_line_error(
        mh("corpus", "musique", "--input", path),
        "line 2",
        "field 'paragraphs[2].title' should be a string, got an integer",
    )


def test_record_of_a_json_array(mh, home, tmp_path):
    records = json.loads((SAMPLES / "2wikimultihopqa" / "dev.sample.json").read_text())[:5]
    records[3]["context"][1] = "not a pair"
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(records))
    assert_one_line_error(mh("corpus", "2wikimultihopqa", "--input", path), "dev.json record 3", "field 'context[1]'")


def test_truncated_json_array(mh, home, tmp_path):
    text = (SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json").read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    result = mh("corpus", "hotpotqa", "--input", path)
    assert_one_line_error(result, "cut.json record", "not valid JSON")
    assert leftovers(home) == [] and not (home / "hotpotqa").exists()


def test_wrong_file_for_the_dataset(mh, home):
    # A JSON array of HotpotQA records is not MuSiQue: the first record says which field is missing.
    result = mh("corpus", "musique", "--input", SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json")
    assert_one_line_error(result, "record 0", "field 'paragraphs' is missing")


def test_missing_input_file(mh, home, tmp_path):
    assert_one_line_error(mh("corpus", "musique", "--input", tmp_path / "nope.jsonl"), "nope.jsonl: no such file")


def test_a_named_pipe_is_refused_before_it_is_opened(mh, home, tmp_path):
    """Opening a FIFO that no process writes blocks for ever: it is refused on its type, before any open."""
    import os

    pipe = tmp_path / "paragraphs.jsonl"
    os.mkfifo(pipe)
    for dataset in ("jsonl", "musique"):  # own corpora peek at their files' format first; releases do not
        result = mh("corpus", dataset, "--input", pipe, "--name", "piped")
        assert result.code == 2 and f"{pipe} is not a regular file (a pipe or a device)" in result.err


def test_unknown_dataset(mh, home):
    assert_one_line_error(mh("corpus", "squad"), "unknown dataset 'squad'", "musique")


def test_skip_bad_continues_and_counts(mh, home, tmp_path):
    lines = MUSIQUE.read_text().splitlines()[:10]
    lines[2] = "{not json"
    bad = json.loads(lines[6])
    del bad["paragraphs"][0]["paragraph_text"]
    lines[6] = json.dumps(bad)
    path = tmp_path / "some_bad.jsonl"
    path.write_text("\n".join(lines) + "\n")

    result = mh("corpus", "musique", "--input", path, "--skip-bad", "--json")
    assert result.code == 0
    manifest = result.json()
    assert manifest["counts"]["skipped_bad_records"] == 2
    assert manifest["counts"]["questions"] == 8
    # A skipped record contributes nothing: none of its paragraphs is in the corpus.
    corpus = (home / "musique" / "corpus.jsonl").read_text()
    only_in_bad = [
        p["paragraph_text"]
        for p in bad["paragraphs"][1:]
        if all(p["paragraph_text"] not in line for i, line in enumerate(lines) if i != 6)
    ]
    assert only_in_bad and not any(text in corpus for text in only_in_bad)
    assert "skipped 2 bad records" in result.err and "line 3" in result.err


def test_failed_rebuild_keeps_the_previous_corpus(mh, home, tmp_path):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    before = (home / "musique" / "corpus.jsonl").read_bytes()
    path = musique_with(tmp_path, 9, "garbage")
    assert mh("corpus", "musique", "--input", path, "--force").code == 2
    assert (home / "musique" / "corpus.jsonl").read_bytes() == before
    assert leftovers(home) == []
