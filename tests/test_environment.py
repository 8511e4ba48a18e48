"""The retrieval environment's fingerprint (the corpus, every setting that changes a ranking, the model's file and
chat template) as an evaluation records it, and `mhindex diff`, which says how two environments differ."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import SAMPLES
from mhindex.backends.lucene import LuceneBackend

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
QUICK = ("--max-demos", "1", "--max-paragraph-words", "60")
LEGACY = Path(__file__).parents[1] / "benchmarks" / "results" / "qwen2.5-1.5b-paper-tables" / "searchain" / "hotpotqa"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def evaluated(mh, home, tmp_path):
    """One OneR answer with SmolLM2 on the MuSiQue sample: a folder whose run.json holds a whole fingerprint."""
    assert mh("--quiet", "build", "musique", "--input", MUSIQUE).code == 0
    folder = tmp_path / "first"
    assert (
        mh("--quiet", "eval", "musique", "--method", "oner", "--limit", "1", "-k", "2", *QUICK, "--out", folder).code
        == 0
    )
    return folder


def test_an_evaluation_records_its_environment_and_diff_names_each_difference(evaluated, mh, home, tmp_path):
    from mhindex.lm.packaged import packaged_model_path

    run = json.loads((evaluated / "run.json").read_text())
    found, manifest = run["fingerprint"], json.loads((home / "musique" / "manifest.json").read_text())
    assert found["corpus"] == {
        "name": "musique",
        "sha256": manifest["corpus_sha256"],
        "paragraphs": manifest["counts"]["paragraphs"],
        "dataset": "musique",
        "inputs": {MUSIQUE.name: sha256(MUSIQUE)},
        "added": [],
        "converter_options": {},
        "seed": 13370,
    }
    assert found["retrieval"] == {"backend": "lucene", "k1": 1.2, "b": 0.75, "queries": LuceneBackend.queries}
    # The model: its GGUF file's sha256 (computed once, remembered in the data root's cache) and its chat template's.
    model = packaged_model_path("smollm2-135m", home / "models")
    answering = found["answering"]
    assert answering["lm"] == "local:smollm2-135m" and answering["sha256"] == sha256(model)
    assert answering["file"] == model.name and len(answering["chat_template_sha256"]) == 64
    assert str(model.resolve()) in (home / "cache" / "digests.json").read_text()

    second = shutil.copytree(evaluated, tmp_path / "second")
    same = mh("diff", evaluated, second)
    assert same.code == 0 and "the same environment: corpus, retrieval, model" in same.out
    changed = json.loads(json.dumps(run))
    changed["fingerprint"]["corpus"].update(sha256="0" * 64, converter_options={"musique_split": "train"}, name="other")
    changed["fingerprint"]["retrieval"].update(k1=0.9, queries="whitespace")
    changed["fingerprint"]["answering"].update(sha256="1" * 64, chat_template_sha256="2" * 64)
    changed["fingerprint"]["answering"].pop("file")
    changed["settings"]["oner"]["answer_tokens"] = 7
    (second / "run.json").write_text(json.dumps(changed))
    said = mh("diff", evaluated, second, "--json")
    assert said.code == 1
    assert said.json()["differences"] == [
        "corpus.converter_options.musique_split: nothing in the first, 'train' in the second",
        f"corpus.sha256: {manifest['corpus_sha256']!r} in the first, {'0' * 64!r} in the second",  # not the name
        "retrieval.k1: 1.2 in the first, 0.9 in the second",
        f"retrieval.queries: {LuceneBackend.queries!r} in the first, 'whitespace' in the second",
        f"answering.chat_template_sha256: {answering['chat_template_sha256']!r} in the first, {'2' * 64!r} in the "
        "second",
        f"answering.sha256: {answering['sha256']!r} in the first, {'1' * 64!r} in the second",
        f"oner.answer_tokens: {run['settings']['oner']['answer_tokens']!r} in the first, 7 in the second",
    ]
    assert said.json()["unrecorded"] == ["answering.file"]  # what one records and the other does not: said apart
    shown = mh("diff", evaluated, second)
    assert shown.out.splitlines()[-1] == "recorded by one only, not compared: answering.file"


def test_two_evaluations_environments_are_compared_line_by_line(tmp_path):
    """`mhindex.diff` on folders of an mhindex that recorded no fingerprint (their run.json's corpus sha256, backend,
    index, model): nothing between a folder and its copy; a ranking setting, the model and a method's setting each
    one line; threads, which change no ranking, nothing."""
    import mhindex

    first = shutil.copytree(LEGACY, tmp_path / "first", ignore=shutil.ignore_patterns("*.jsonl", "*.png"))
    second = shutil.copytree(first, tmp_path / "second")
    assert mhindex.diff(first, second) == []
    run = json.loads((second / "run.json").read_text())
    was = json.loads((first / "run.json").read_text())
    run["index"] = {**run["index"], "k1": 0.9, "threads": 8}
    run["lm"] = "local:qwen2.5-0.5b"
    run["settings"]["searchain"]["rounds"] = 99
    del run["settings"]["direct@prompt=zero-shot"]
    (second / "run.json").write_text(json.dumps(run))
    assert mhindex.diff(first, second) == [
        f"retrieval.k1: {was['index']['k1']!r} in the first, 0.9 in the second",
        f"answering.lm: {was['lm']!r} in the first, 'local:qwen2.5-0.5b' in the second",
        "method direct@prompt=zero-shot: only in the first",
        f"searchain.rounds: {was['settings']['searchain']['rounds']!r} in the first, 99 in the second",
    ]
    with pytest.raises(mhindex.UsageError, match="no such folder"):
        mhindex.diff(first, tmp_path / "none")


def test_a_folder_with_a_fingerprint_against_one_without_compares_what_both_record(evaluated, tmp_path):
    """A folder from before the fingerprint: its corpus sha256, backend, index and model stand in; what only the
    newer records (the model file's sha256, how queries are read) is said apart, not a difference."""
    from mhindex.eval.environment import compare

    older = shutil.copytree(evaluated, tmp_path / "older")
    run = json.loads((older / "run.json").read_text())
    (older / "run.json").write_text(json.dumps({key: value for key, value in run.items() if key != "fingerprint"}))
    compared = compare(evaluated, older)
    assert compared["differences"] == []
    assert "answering.sha256" in compared["unrecorded"] and "retrieval.queries" in compared["unrecorded"]
    assert "corpus.paragraphs" in compared["unrecorded"] and "retrieval.k1" not in compared["unrecorded"]


def test_a_content_digest_is_the_files_sha256_remembered_in_the_given_cache(tmp_path):
    """A model of gigabytes is hashed once: the digest is remembered by path, size and modification time in the
    data root's cache; a folder's (an encoder's) changes when any of its files does."""
    from mhindex import files

    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights" * 1000)
    cache = tmp_path / "home" / "cache"
    assert files.content_digest(model, cache) == sha256(model)
    (key, remembered), *others = json.loads((cache / "digests.json").read_text()).items()
    assert key.startswith(str(model.resolve())) and remembered == sha256(model) and not others
    # A new process reads it back rather than hashing again (a planted digest comes back), until the file changes.
    files._DIGESTS.clear()
    (cache / "digests.json").write_text(json.dumps({key: "planted"}))
    assert files.content_digest(model, cache) == "planted"
    model.write_bytes(b"other weights")
    assert files.content_digest(model, cache) == sha256(model)
    folder = tmp_path / "encoder"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"a")
    before = files.content_digest(folder)
    (folder / "model.safetensors").write_bytes(b"b")
    assert files.content_digest(folder) != before
