"""Every command that writes, run once against a full disk and once against a read-only data root: real file
systems (a tmpfs filled to the last byte, then remounted read-only; mounting needs root, and where the machine
does not allow it the tests say so and skip). Each asserts the exit code, the one line that says what happened,
and that what was on disk before is still there, whole, with nothing half-written beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import HANG_S, leftovers

SMALL = ["--max-demos", "1", "--answer-tokens", "4"]
# (the command, the exit code on a full disk and on a read-only root; 0: it runs on without what it cannot write;
# 2: on a full disk the preflight refuses the conversion or the build before it begins, with what it needs and
# what is free)
COMMANDS = {
    "corpus --force": (["corpus", "musique", "--force"], 2),
    "corpus --force --no-preflight": (["corpus", "musique", "--force", "--no-preflight"], 1),
    "corpus, a new one (its lock note is written first)": (["corpus", "musique", "--name", "other"], 1),
    "index --force": (["index", "musique", "--force"], 2),
    "index --force --no-preflight": (["index", "musique", "--force", "--no-preflight"], 1),
    "build --force": (["build", "musique", "--force"], 2),
    "build --force --no-preflight": (["build", "musique", "--force", "--no-preflight"], 1),
    "eval": (["eval", "musique", "-m", "nor", "--limit", "2", "--seed", "5", *SMALL], 1),
    "report": (["report", "-o", "{root}/report.html"], 1),
    "ask (its caches are a speed-up)": (["ask", "Who is Stanley?", "-m", "nor", *SMALL], 0),
    "gc": (["gc"], 0),
}
SAID = {"full": ("No space left on device", "disk is full"), "read-only": ("Read-only file system", "readonly")}


def mhindex(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MHINDEX_LM": "local:smollm2-135m"}
    command = [sys.executable, "-m", "mhindex", "--home", str(root), *(a.format(root=root) for a in args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=HANG_S)


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    """A 32 MB tmpfs holding the MuSiQue sample's corpus, its Lucene index and one evaluation."""
    root = tmp_path_factory.mktemp("disk")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(root)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}): the faults need a file system")
    try:
        assert mhindex(root, "--quiet", "build", "musique").returncode == 0
        done = mhindex(root, "--quiet", "eval", "musique", "-m", "nor", "--limit", "1", *SMALL)
        assert done.returncode == 0, done.stderr
        yield root
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(root)], check=False)
        subprocess.run(["umount", str(root)], check=False)


def files(root: Path) -> dict[str, tuple[int, int]]:
    """What is on the disk (the caches and lock notes aside, which may change: they are not results)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and not {"cache", ".locks", "filler"} & set(p.relative_to(root).parts)
    }


def fill(root: Path) -> None:
    """Fill the disk to its last byte (unbuffered: a buffered file fails again when it is closed)."""
    descriptor = os.open(root / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while os.write(descriptor, b"\0" * size):
                    pass
            except OSError:
                continue
    finally:
        os.close(descriptor)


@pytest.mark.parametrize("condition", ["full", "read-only"])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_full_disk_or_a_read_only_root_is_one_line_and_leaves_everything_as_it_was(disk, condition, name):
    args, code = COMMANDS[name]
    if code == 2 and condition == "read-only":  # there is room: the build begins, and cannot write
        code = 1
    before = files(disk)
    if condition == "full":
        fill(disk)
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    try:
        result = mhindex(disk, *args)
    finally:
        if condition == "full":
            (disk / "filler").unlink()
        else:
            subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, result.stderr
    errors = [line for line in lines if line.startswith("mhindex: ")]
    if code:
        said = ("error: not enough room to ",) if code == 2 else SAID[condition]
        assert len(errors) == 1 and any(word in errors[0] for word in said), lines
        assert len(errors[0]) < 300 and all(line.startswith("{") for line in lines if line not in errors)
    else:
        assert not errors
    assert files(disk) == before  # nothing replaced, truncated or added
    assert not leftovers(disk)  # no temporary file or folder beside them


def leave_free(root: Path, free: int) -> None:
    """Fill the disk until `free` bytes are left (a real file of zeros: a sparse one takes no room on a tmpfs)."""
    taking = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize - free
    with open(root / "filler", "wb") as filler:
        while taking > 0:
            taking -= filler.write(b"\0" * min(taking, 1 << 20))


@pytest.mark.parametrize("step", ["corpus", "index"])
def test_work_that_cannot_fit_is_refused_before_it_begins_and_work_that_fits_is_done(disk, step):
    """The preflight on a real file system: with half the disk a conversion or a Lucene build is expected to need,
    `corpus` or `index` refuses in one line and touches nothing; with the estimate and a fifth more, the same work
    is done whole (the estimate covers what it really takes at its peak, temporary files included)."""
    from mhindex.backends import BackendSpec
    from mhindex.backends.indexes import footprint_of
    from mhindex.corpora import DATASETS, default_inputs
    from mhindex.corpora.build import conversion_footprint, expected_corpus_bytes
    from mhindex.home import open_corpus

    if step == "corpus":
        sample, origin = default_inputs(DATASETS["musique"], disk / "downloads" / "musique")
        assert origin == "sample"
        _, need = conversion_footprint(expected_corpus_bytes(sample))
        built, refusal = disk / "musique" / "manifest.json", "convert musique into 'musique'"
    else:
        spec = BackendSpec.parse("lucene", {})
        footprint = footprint_of(open_corpus(disk, "musique"), spec.backend(), spec.index_options())
        assert footprint is not None
        need, built = footprint.disk, disk / "musique" / "indexes" / "lucene" / "manifest.json"
        refusal = "index 'musique' with lucene"
    for free, code in ((need // 2, 2), (int(need * 1.2), 0)):
        before, made = files(disk), built.stat().st_mtime_ns
        leave_free(disk, free)
        try:
            result = mhindex(disk, step, "musique", "--force")
        finally:
            (disk / "filler").unlink()
        assert result.returncode == code, result.stderr
        if code:
            said = result.stderr.strip().splitlines()[-1]  # after the note that the bundled sample is converted
            assert said.startswith(f"mhindex: error: not enough room to {refusal}: about "), result.stderr
            assert "of disk at its peak" in result.stderr and "--no-preflight" in result.stderr
            assert files(disk) == before and not leftovers(disk)
        else:
            assert built.stat().st_mtime_ns > made and not leftovers(disk)


@contextmanager
def tmpfs(root: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of `size` mounted at `root` for the test (mounting needs root: where it cannot, the test skips,
    saying so), unmounted after."""
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(root)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}): the faults need a file system")
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=False)


def test_a_compressed_input_that_expands_past_the_room_is_stopped_keeping_nothing(tmp_path):
    """81 KB of gzip that makes 40 MB of corpus: the preflight counts a compressed input's bytes four times, and
    such an input passes it; the conversion stops it when the staged corpus passes the room there is, in one line,
    nothing kept (before, it ran on until the disk was full)."""
    import gzip
    import json

    with tmpfs(tmp_path / "disk", "32m") as root:
        bomb = tmp_path / "paragraphs.jsonl.gz"
        with gzip.open(bomb, "wt", compresslevel=9) as out:
            for number in range(80_000):  # each line distinct (duplicates are dropped), each 500 bytes
                out.write(json.dumps({"id": f"p{number}", "title": "t", "text": "x" * 480}) + "\n")
        assert bomb.stat().st_size < 2 << 20
        done = mhindex(root, "corpus", "jsonl", "--input", str(bomb), "--name", "bomb")
        assert done.returncode == 2 and "the inputs expand to more than" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and not (root / "bomb").exists() and not leftovers(root)


def test_a_build_that_fits_is_not_refused(tmp_path):
    """The MuSiQue sample's corpus and Lucene index take under 3 MB at their peaks (measured on a tmpfs: the
    conversion 1.9 MB, the index 1.9 MB beside the corpus): `build` in a 3.2 MB root is done, not refused (the
    Lucene estimate once added a small index's files to the ratio that already counts them, and asked 3.7 MB)."""
    with tmpfs(tmp_path / "disk", "3200k") as root:
        done = mhindex(root, "--quiet", "build", "musique")
        assert done.returncode == 0, done.stderr
        assert (root / "musique" / "indexes" / "lucene" / "manifest.json").is_file() and not leftovers(root)
