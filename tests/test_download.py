"""`mhindex download` against a file server on 127.0.0.1 (the official hosts cannot be reached
here): the real URLs are replaced through MHINDEX_DOWNLOAD_MIRROR, nothing else is faked."""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest

from conftest import SAMPLES, read_jsonl
from mhindex.corpora import DATASETS
from mhindex.corpora.download import Download, DownloadError, fetch
from servers import FileServer

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    folder = tmp_path / "mirror"
    folder.mkdir()
    with FileServer(folder) as server:
        monkeypatch.setenv("MHINDEX_DOWNLOAD_MIRROR", server.url)
        yield server


def test_official_urls_are_kept():
    urls = [d.url for spec in DATASETS.values() for d in spec.release]
    assert "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json" in urls
    assert any("iirc-dataset.s3" in u and u.endswith("context_articles.tar.gz") for u in urls)
    assert any("1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h" in u for u in urls)


def test_download_unpacks_and_corpus_uses_the_release(mh, home, mirror):
    with zipfile.ZipFile(mirror.folder / "musique_v1.0.zip", "w") as bundle:
        bundle.write(MUSIQUE, "data/musique_ans_v1.0_dev.jsonl")
        bundle.writestr("data/.DS_Store", b"junk")

    result = mh("download", "musique")
    assert result.code == 0, result.err
    folder = home / "downloads" / "musique"
    assert (folder / "musique_ans_v1.0_dev.jsonl").read_bytes() == MUSIQUE.read_bytes()
    assert not (folder / ".DS_Store").exists()
    sums = json.loads((folder / "SHA256SUMS.json").read_text())
    assert sums["musique_v1.0.zip"] == hashlib.sha256((mirror.folder / "musique_v1.0.zip").read_bytes()).hexdigest()

    built = mh("corpus", "musique")
    assert built.code == 0 and "bundled sample" not in built.err
    assert len(read_jsonl(home / "musique" / "questions.jsonl")) == 100


def test_resume_after_a_cut_connection(tmp_path, mirror):
    payload = MUSIQUE.read_bytes()
    (mirror.folder / "big.jsonl").write_bytes(payload)
    mirror.faults = ["cut"]
    item = Download(
        "https://example.invalid/big.jsonl", "big.jsonl", "sha256:" + hashlib.sha256(payload).hexdigest(), len(payload)
    )
    path = fetch(item, tmp_path / "out", retries=2, backoff=0.01)
    assert path.read_bytes() == payload
    assert mirror.requests[0]["range"] is None
    assert mirror.requests[1]["range"] == f"bytes={len(payload) // 2}-"  # resumed, not restarted


def test_retries_after_server_errors(tmp_path, mirror):
    (mirror.folder / "f.json").write_bytes(b"[]")
    mirror.faults = ["500", "500"]
    assert (
        fetch(Download("https://example.invalid/f.json", "f.json"), tmp_path, retries=3, backoff=0.01).read_bytes()
        == b"[]"
    )
    assert len(mirror.requests) == 3


def test_checksum_mismatch_leaves_nothing(mh, home, mirror):
    # The sample is not the published 46 MB dev file, so its SHA-1 cannot match.
    (mirror.folder / "hotpot_dev_distractor_v1.json").write_bytes(
        (SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json").read_bytes()
    )
    spec = DATASETS["hotpotqa"]
    item = next(d for d in spec.release if d.filename == "hotpot_dev_distractor_v1.json")
    with pytest.raises(DownloadError, match="got .* bytes, expected 46320117"):
        fetch(item, home / "dl")
    unsized = Download(item.url, item.filename, item.checksum)
    with pytest.raises(DownloadError, match="sha1 checksum mismatch"):
        fetch(unsized, home / "dl")
    assert list((home / "dl").iterdir()) == []


def test_missing_file_and_server_down(mh, home, mirror, monkeypatch):
    result = mh("download", "2wikimultihopqa")
    assert result.code == 1 and "HTTP 404" in result.err and len(result.err.strip().splitlines()) == 1
    monkeypatch.setenv("MHINDEX_DOWNLOAD_MIRROR", "http://127.0.0.1:9")  # nothing listens on port 9
    with pytest.raises(DownloadError, match="after 2 tries; run again to resume"):
        fetch(Download("https://example.invalid/x", "x"), home / "dl", retries=1, backoff=0.01)
