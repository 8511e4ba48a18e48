"""Faults a hostile user or a bad day brings, on real components: interrupted, killed and
concurrent builds (real worker processes, Anserini's real JVM, a real FAISS index), links out of
the data root, damaged indexes and manifests, bad predictions and questions, long queries, remote
LMs that trickle, stall or answer in the wrong shape (small HTTP servers on 127.0.0.1 that
misbehave on purpose, since no real server can be made to), and secrets in error lines. Each case
asserts the one-line error and its exit code, that the previous corpus or index is intact, and
that no process and no temporary folder is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from conftest import HANG_S, SAMPLES, leftovers, made_up_words, read_jsonl
from servers import MisbehavingLM

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"


def mhindex(home: Path, *args, wait: bool = True, input: str | None = None, **kwargs):
    """`mhindex` as a user runs it: its own process, its exit code, its one-line errors."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mhindex", "--home", str(home), *map(str, args)],
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )
    if not wait:
        return process
    out, err = process.communicate(input, timeout=HANG_S)
    return process.returncode, out, err


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("mhindex: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def processes(needle: str, under: Path | None = None) -> list[int]:
    """Running processes whose command line holds `needle` (and, with `under`, names that folder: this test's own
    data root, so that another test's or another user's process is never taken for ours)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            mine = under is None or str(under) in command
            if needle in command and mine and state != "Z" and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == pid:
                found.append(int(entry.name))
    return found


def gone(pids: list[int], seconds: float = 10) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        alive = [
            p
            for p in pids
            if Path(f"/proc/{p}").exists() and (Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z")
        ]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def wait_for(test, seconds: float = 120, step: float = 0.05):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if found := test():
            return found
        time.sleep(step)
    raise AssertionError("waited in vain")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A data root with the MuSiQue sample's corpus and its Lucene index."""
    home = tmp_path_factory.mktemp("faults") / "home"
    code, _, err = mhindex(home, "--quiet", "build", "musique", "--input", MUSIQUE)
    assert code == 0, err
    return home


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def resumed_dense(tmp_path_factory):
    """A dense build stopped by SIGTERM after two shards of 100, then run again with shards of 1,000; on 30 of the
    sample's questions (560 paragraphs: the whole sample's encoding was a minute and a half of the suite)."""
    home = tmp_path_factory.mktemp("dense") / "home"
    part = home.parent / "musique_30.jsonl"
    part.write_text("".join(MUSIQUE.read_text().splitlines(keepends=True)[:30]))
    assert mhindex(home, "--quiet", "corpus", "musique", "--input", part)[0] == 0
    indexes = home / "musique" / "indexes"
    first = mhindex(home, "--quiet", "index", "musique", "--backend", "dense", "--shard-size", "100", wait=False)
    wait_for(lambda: len(list(indexes.glob(".dense-work-*/shard-*[0-9].npy"))) >= 2, 300)
    first.send_signal(signal.SIGTERM)  # as a scheduler stops a job
    _, stopped = first.communicate(timeout=HANG_S)
    state = {
        "code": first.returncode,
        "err": stopped,
        "leftovers": leftovers(home),
        "work": list(indexes.glob(".dense-work-*")),
    }
    code, out, err = mhindex(home, "index", "musique", "--backend", "dense", "--shard-size", "1000", "--json")
    assert code == 0, err
    return home, state, json.loads(out)


@pytest.mark.slow
def test_a_dense_build_resumed_with_another_shard_size_indexes_every_paragraph(resumed_dense):
    import faiss

    home, stopped, rebuilt = resumed_dense
    assert stopped["code"] == 143 and one_line_error(stopped["err"]) == "mhindex: terminated"
    assert not stopped["leftovers"] and stopped["work"]  # no temporary index; the encoding kept to resume
    indexes = home / "musique" / "indexes"
    paragraphs = len(read_jsonl(home / "musique" / "corpus.jsonl"))
    assert rebuilt["paragraphs"] == paragraphs == faiss.read_index(str(indexes / "dense" / "faiss.index")).ntotal
    assert not list(indexes.glob(".dense-work-*")) and not leftovers(home)  # every work folder done with


def test_nothing_outside_the_data_root_is_replaced_through_a_link(built, tmp_path):
    outside = tmp_path / "user-files"
    (outside / "lucene").mkdir(parents=True)
    (outside / "lucene" / "thesis.tex").write_text("years of work")
    home = tmp_path / "home"
    assert mhindex(home, "--quiet", "corpus", "musique", "--input", MUSIQUE)[0] == 0
    (home / "musique" / "indexes").symlink_to(outside)
    code, _, err = mhindex(home, "index", "musique", "--force")
    said = one_line_error(err)  # the link is refused before anything is written through it
    assert code == 1 and f"{home / 'musique' / 'indexes'} is a symbolic link inside the data root" in said
    assert "nothing was written" in said
    assert (outside / "lucene" / "thesis.tex").read_text() == "years of work" and [
        p.name for p in outside.iterdir()
    ] == ["lucene"]
    (outside / ".lucene.tmp-999999-x").mkdir()  # what looks like a dead build's leftover, beyond the link
    assert mhindex(home, "gc")[0] == 0 and (outside / ".lucene.tmp-999999-x").is_dir()


@pytest.fixture(scope="module")
def big_release(tmp_path_factory):
    """A MuSiQue-format release of about 300 MB (the sample's questions 250 times over, each
    paragraph made new), large enough to be converted by worker processes for a few seconds."""
    records = read_jsonl(MUSIQUE)
    path = tmp_path_factory.mktemp("release") / "musique_big.jsonl"
    with open(path, "wb") as out:
        for copy in range(250):
            for r in records:
                out.write(
                    orjson.dumps(
                        {
                            **r,
                            "id": f"{r['id']}-{copy}",
                            "paragraphs": [
                                {**p, "paragraph_text": f"{p['paragraph_text']} ({copy})"} for p in r["paragraphs"]
                            ],
                        }
                    )
                    + b"\n"
                )
    return path


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_killed_conversion_takes_its_workers_with_it(tmp_path, big_release, how):
    home = tmp_path / "home"
    build = mhindex(
        home, "--quiet", "corpus", "musique", "--input", big_release, "--name", "big", "--workers", "2", wait=False
    )
    # Killed once a worker has written something (a part file just opened is empty: `gc` would free 0 bytes).
    wait_for(lambda: any(p.stat().st_size for p in home.glob(".big.tmp-*/part-1.paragraphs")), 120, 0.01)
    workers = children(build.pid)
    assert len(workers) == 2
    build.send_signal(how)
    _, err = build.communicate(timeout=HANG_S)
    assert gone(workers), "conversion workers outlived their parent"
    if how == signal.SIGTERM:
        assert build.returncode == 143 and one_line_error(err) == "mhindex: terminated"
        assert not leftovers(home) and not (home / "big").exists()
        return
    # Killed outright, the parent could not clean up: `list` says so, `gc` (or the next build) removes it.
    stale = list(home.glob(".big.tmp-*"))
    assert stale and build.returncode == -signal.SIGKILL
    code, _, err = mhindex(home, "list")
    assert code == 0 and "temporary folders of builds that were killed; `mhindex gc` removes them" in err
    code, out, _ = mhindex(home, "gc", "--json")
    assert code == 0 and json.loads(out)["removed"] == [str(p) for p in stale] and json.loads(out)["bytes"] > 0
    assert not leftovers(home)


def test_a_killed_lucene_build_takes_its_jvm_with_it_and_the_next_build_cleans_up(built, tmp_path):
    home = tmp_path / "home"
    assert mhindex(home, "--quiet", "build", "musique", "--input", MUSIQUE)[0] == 0
    before = snapshot(home / "musique" / "indexes" / "lucene")
    build = mhindex(home, "--quiet", "index", "musique", "--force", wait=False)
    jvm = wait_for(lambda: processes("IndexCollection", home), 120, 0.01)
    build.send_signal(signal.SIGKILL)
    build.wait()
    assert gone(jvm), "Anserini's JVM outlived mhindex"
    assert snapshot(home / "musique" / "indexes" / "lucene") == before  # the old index, untouched
    assert list((home / "musique" / "indexes").glob(".lucene.tmp-*"))
    code, _, err = mhindex(home, "index", "musique", "--force")
    assert code == 0, err
    assert not leftovers(home)  # the dead build's temporary folder went with the next build


def test_concurrent_builds_of_one_corpus_take_turns(tmp_path):
    home = tmp_path / "home"
    assert mhindex(home, "--quiet", "build", "musique", "--input", MUSIQUE)[0] == 0
    index = snapshot(home / "musique" / "indexes" / "lucene")
    for _ in range(2):
        builds = [mhindex(home, "corpus", "musique", "--input", MUSIQUE, "--force", wait=False) for _ in range(4)]
        results = [(b.wait(timeout=HANG_S), b.stderr.read()) for b in builds]
        assert all(code == 0 for code, _ in results), results
        assert "Traceback" not in "".join(err for _, err in results)
    assert not leftovers(home) and sorted(p.name for p in home.iterdir()) == [".locks", "default-corpus", "musique"]
    assert snapshot(home / "musique" / "indexes" / "lucene") == index  # the corpus kept its index through every rebuild
    code, out, _ = mhindex(home, "search", "musique", "Korean War", "--json")
    assert code == 0 and json.loads(out)["hits"]  # still current: the same inputs make the same corpus


def test_a_second_build_waits_for_the_first_and_says_who_holds_it(tmp_path):
    from mhindex.locks import changing

    home = tmp_path / "home"
    with changing(home, "musique", "building the corpus"):
        second = mhindex(home, "corpus", "musique", "--input", MUSIQUE, wait=False)
        time.sleep(3)
        assert second.poll() is None  # still waiting
    _, err = second.communicate(timeout=HANG_S)
    assert second.returncode == 0
    assert (
        f"'musique' is being changed by process {os.getpid()} (building the corpus" in err
        and "waiting for it to finish" in err
    )


@pytest.mark.parametrize("mode", ["trickle", "silent"])
def test_a_remote_lm_gets_one_deadline_per_call(tmp_path, mode):
    with MisbehavingLM(mode) as server:
        started = time.time()
        code, _, err = mhindex(
            tmp_path / "home",
            "lm",
            "Q: capital of France?\\nA:",
            "--lm",
            f"openai:m@{server.url}",
            "--lm-timeout",
            "3",
            "--no-cache",
        )
        took = time.time() - started
    assert code == 1 and "did not finish within 3 s (--lm-timeout)" in one_line_error(err)
    assert took < 3 + 60  # the deadline, and the process's own start on a loaded machine (the default waits 300 s)


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("usage", "usage that is not an object"),
        ("tokens", "usage.prompt_tokens = 'abc', not a number"),
        ("chunks", "streamed a chunk of another shape"),
    ],
)
def test_answers_of_the_wrong_shape_are_one_error_record_naming_the_server(tmp_path, mode, says):
    home = tmp_path / "home"
    assert mhindex(home, "--quiet", "build", "musique", "--input", MUSIQUE)[0] == 0
    with MisbehavingLM(mode) as server:
        method = (
            ["--method", "ircot", "--max-steps", "1"] if mode == "chunks" else ["--method", "nor"]
        )  # IRCoT's steps stream
        code, out, err = mhindex(
            home,
            "ask",
            "-",
            *method,
            "--max-demos",
            "1",
            "--lm",
            f"openai:m@{server.url}",
            "--no-cache",
            input='{"id": "a", "question": "Who?"}\n',
        )
    (record,) = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and record["id"] == "a" and says in record["error"] and server.url in record["error"], record
    assert "Traceback" not in err


def test_odd_timings_are_ignored_and_keys_never_reach_an_error_line(tmp_path):
    with MisbehavingLM("timings") as server:
        code, out, err = mhindex(tmp_path / "home", "lm", "Q:", "--lm", f"openai:m@{server.url}", "--no-cache")
    assert code == 0 and out.strip() == "Paris", err
    key = "sk-very-secret-123"
    with MisbehavingLM("echo-key") as server:
        code, _, err = mhindex(
            tmp_path / "home",
            "lm",
            "Q:",
            "--lm",
            f"openai:m@{server.url}",
            "--no-cache",
            env={**os.environ, "MHINDEX_LM_API_KEY": key},
        )
    assert code == 1 and "answered HTTP 401" in one_line_error(err) and key not in err and "Bearer ***" in err
    code, _, err = mhindex(tmp_path / "home", "lm", "Q:", "--lm", "openai:m@ftp://user:hunter2@example.org/v1")
    assert code == 2 and "hunter2" not in err and "***@example.org" in one_line_error(err)


@pytest.fixture
def damaged(built, tmp_path):
    """A copy of the built data root, to damage."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(built, home, symlinks=True)
    return home


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("segments", "cannot be opened (JavaException: org.apache.lucene.index.IndexNotFoundException"),
        ("truncated", "lucene index of 'musique'"),
        ("manifest []", "is not an index manifest"),
        ('manifest "x"', "is not an index manifest"),
        ("manifest options", "is not an index manifest"),
    ],
)
def test_a_damaged_lucene_index_is_one_line_saying_to_rebuild_it(damaged, damage, says):
    index = damaged / "musique" / "indexes" / "lucene"
    if damage == "segments":
        for segments in index.glob("lucene/segments_*"):
            segments.unlink()
    elif damage == "truncated":
        largest = max((p for p in (index / "lucene").iterdir() if p.is_file()), key=lambda p: p.stat().st_size)
        largest.write_bytes(largest.read_bytes()[:100])
    else:
        manifest = orjson.loads((index / "manifest.json").read_bytes())
        broken = {"manifest []": [], 'manifest "x"': "x", "manifest options": {**manifest, "options": "bad"}}[damage]
        (index / "manifest.json").write_bytes(orjson.dumps(broken))
    code, _, err = mhindex(damaged, "search", "musique", "Korean War")
    line = one_line_error(err)
    assert code == 2 and says in line and "rebuild it: mhindex index musique --backend lucene --force" in line
    assert (
        mhindex(damaged, "index", "musique", "--force")[0] == 0
        and mhindex(damaged, "search", "musique", "Korean War")[0] == 0
    )


@pytest.mark.slow  # its fixture builds a dense index twice (about 55 s)
def test_a_damaged_faiss_index_and_corpus_manifest(resumed_dense, tmp_path):
    import shutil

    damaged = tmp_path / "home"
    shutil.copytree(resumed_dense[0], damaged)
    assert mhindex(damaged, "--quiet", "index", "musique")[0] == 0
    # A corpus.jsonl cut short is the corpus's damage, not the dense index's (it was blamed on the index).
    paragraphs = damaged / "musique" / "corpus.jsonl"
    whole = paragraphs.read_bytes()
    paragraphs.write_bytes(whole[: len(whole) * 2 // 3])
    code, _, err = mhindex(damaged, "search", "musique", "Korean War", "--backend", "dense")
    assert code == 2 and one_line_error(err).startswith(
        f"mhindex: error: corpus 'musique' is damaged: {paragraphs} is shorter than when it was built (truncated?)"
    )
    paragraphs.write_bytes(whole)
    faiss_file = damaged / "musique" / "indexes" / "dense" / "faiss.index"
    faiss_file.write_bytes(faiss_file.read_bytes()[: faiss_file.stat().st_size // 2])
    code, _, err = mhindex(damaged, "search", "musique", "Korean War", "--backend", "dense")
    assert (
        code == 2
        and "dense index of 'musique'" in one_line_error(err)
        and "cannot be opened" in err
        and "--backend dense --force" in err
    )
    (damaged / "musique" / "manifest.json").write_text("{not json")
    code, _, err = mhindex(damaged, "search", "musique", "Korean War")
    assert code == 2 and "corpus 'musique' is damaged" in one_line_error(err) and "--name musique --force" in err
    code, _, err = mhindex(damaged, "list")
    assert code == 0 and "damaged (its manifest.json cannot be read)" in err
    part = resumed_dense[0].parent / "musique_30.jsonl"  # the corpus's own input: its indexes stay current
    assert mhindex(damaged, "corpus", "musique", "--input", part)[0] == 0  # rebuilt in place
    assert mhindex(damaged, "search", "musique", "Korean War")[0] == 0


def test_bad_data_roots(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "mhindex", "list"],
        capture_output=True,
        text=True,
        env={**os.environ, "MHINDEX_HOME": str(a_file)},
    )
    assert result.returncode == 2 and "(from $MHINDEX_HOME) is a file, not a folder" in one_line_error(result.stderr)
    # A data root that cannot be written (here under /proc, which refuses even root; a read-only disk says the same).
    code, _, err = mhindex(Path("/proc/1/mhindex-home"), "corpus", "musique", "--input", MUSIQUE)
    assert code == 1 and one_line_error(err).startswith("mhindex: error: /proc/1/mhindex-home")


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ("5", "a prediction line should be a JSON object"),
        ("null", "a prediction line should be a JSON object"),
        ('{"id": "x", "answer": 5}', "field 'answer'"),
        ('{"id": "x", "retrieved": "abc"}', "field 'retrieved'"),
        ('{"id": [1]}', "field 'id'"),
        ('{"id": "x", "seconds": "fast"}', "field 'seconds'"),
    ],
)
def test_score_names_the_bad_line_and_field(built, tmp_path, record, field):
    predictions = tmp_path / "answers.jsonl"
    first = read_jsonl(built / "musique" / "questions.jsonl")[0]["id"]
    predictions.write_text(json.dumps({"id": first, "answer": "x"}) + "\n" + record + "\n")
    code, _, err = mhindex(built, "score", predictions, "--questions", "musique")
    assert code == 2 and one_line_error(err).startswith(f"mhindex: error: {predictions} line 2: {field}")


def test_bad_question_files_are_one_line(built, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        '{"id": "q1", "question": "x", "answers": ["a"]}\n{"id": "q2", "question": "y", "answers": 5}\n'
    )
    predictions = tmp_path / "answers.jsonl"
    predictions.write_text('{"id": "q1", "answer": "a"}\n')
    code, _, err = mhindex(built, "score", predictions, "--questions", questions)
    assert code == 2 and f"{questions} line 2: field 'answers' should be a list of strings" in one_line_error(err)


def test_eval_keeps_every_good_prediction_around_a_bad_line(built, tmp_path):
    out = tmp_path / "run"
    args = ["eval", "musique", "--method", "nor", "--limit", "4", "--max-demos", "1", "--out", out]
    assert mhindex(built, "--quiet", *args)[0] == 0
    path = out / "nor.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    torn = lines[:2] + [b'{"id": "torn in the mid\n'] + lines[2:] + [b'{"id": "cut short by a cra']
    path.write_bytes(b"".join(torn))
    code, _, err = mhindex(built, *args)
    assert code == 0 and f"{path} line 3: not valid JSON" in err and "set aside in" in err
    kept = read_jsonl(path)
    assert len(kept) == 4 and [r["id"] for r in kept[:4]] == [
        json.loads(line)["id"] for line in lines
    ]  # nothing lost, nothing asked again
    assert [r["line"] for r in read_jsonl(out / "nor.rejected.jsonl")] == [3]


@pytest.mark.slow
def test_very_long_queries_are_answered_everywhere(built):
    words = made_up_words(1500)
    code, out, err = mhindex(built, "search", "musique", f"Korean War {words}", "-k", "2", "--json")
    assert code == 0 and json.loads(out)["hits"][0]["title"].endswith("Korean War"), err
    stream = "".join(
        json.dumps({"id": str(i), "query": q}) + "\n"
        for i, q in enumerate(["Korean War", f"Korean War {words}", "Mach"])
    )
    code, out, err = mhindex(built, "search", "musique", "-", "-k", "1", "--threads", "2", input=stream)
    assert code == 0 and [len(json.loads(line)["hits"]) for line in out.splitlines()] == [1, 1, 1], err
    short = made_up_words(1200, length=3)  # still past the limit, in fewer tokens for the reader
    code, out, err = mhindex(
        built,
        "ask",
        f"Who fought in the Korean War? {short}",
        "--method",
        "oner",
        "-k",
        "2",
        "--max-demos",
        "1",
        "--answer-tokens",
        "4",
        "--json",
    )
    assert code == 0 and len(json.loads(out)["retrieved"]) == 2, err


def test_smaller_things_a_user_meets(built, tmp_path):
    for given, says in ((tmp_path, "is a folder"), (Path("/dev/null"), "is not a regular file")):
        code, _, err = mhindex(tmp_path / "home", "corpus", "musique", "--input", given)
        assert code == 2 and says in one_line_error(err)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert "is not a regular file" in one_line_error(
        mhindex(tmp_path / "home", "corpus", "musique", "--input", fifo)[2]
    )
    # Rebuilding a corpus from the same inputs leaves its indexes current: no warning that they are stale.
    code, _, err = mhindex(built, "corpus", "musique", "--input", MUSIQUE, "--force")
    assert code == 0 and "stale" not in err and "previous corpus" not in err
    # Ctrl-C while Lucene indexes: one line, exit 130, the old index intact, nothing left.
    before = snapshot(built / "musique" / "indexes" / "lucene")
    build = mhindex(built, "index", "musique", "--force", wait=False)
    wait_for(lambda: processes("IndexCollection", built) or None, 120, 0.01)
    build.send_signal(signal.SIGINT)
    _, err = build.communicate(timeout=HANG_S)
    assert build.returncode == 130 and one_line_error(err) == "mhindex: interrupted"
    assert snapshot(built / "musique" / "indexes" / "lucene") == before and not leftovers(built)
    assert not processes("IndexCollection", built)


def test_eval_exits_1_when_questions_failed(built, tmp_path):
    with MisbehavingLM("usage") as server:
        code, out, err = mhindex(
            built,
            "eval",
            "musique",
            "--method",
            "nor",
            "--limit",
            "2",
            "--max-demos",
            "1",
            "--lm",
            f"openai:m@{server.url}",
            "--out",
            tmp_path / "e",
            "--json",
        )
    assert code == 1 and json.loads(out)["methods"]["nor"]["failed"] == 2
    assert "2 answers failed and score 0 in the table; the same command asks them again" in err


def test_temporary_files_stay_under_the_data_root(tmp_path):
    """The `mhindex` program's temporary files, and those of the engines it starts (Anserini's JVM indexing), go
    under the data root (`<home>/.tmp/.process.tmp-PID`), removed at exit: the TMPDIR the user had sees nothing,
    and a full TMPDIR cannot be blamed on the data root or leave files outside it."""
    home, elsewhere = tmp_path / "home", tmp_path / "tmpdir"
    elsewhere.mkdir()
    env = {**os.environ, "TMPDIR": str(elsewhere)}
    done = subprocess.run([sys.executable, "-m", "mhindex", "--home", str(home), "--quiet", "build", "musique",
                           "--input", str(MUSIQUE)], capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(elsewhere.iterdir()) == []
    assert not (home / ".tmp").exists()  # its own folder there, gone with it, and the then empty .tmp too
    assert (home / "musique" / "indexes" / "lucene" / "manifest.json").is_file()


def test_a_corpus_line_changed_in_place_is_the_corpus_s_damage_never_served(tmp_path):
    """A corpus.jsonl line rewritten as valid JSON of the same length was served as if it were the paragraph:
    each line is checked against the digest kept when the corpus was built (`corpus.checks`)."""
    import mhindex

    corpus = mhindex.build("musique", home=tmp_path / "home", backend="bm25s")
    first = next(corpus.paragraphs())
    path = corpus.path / "corpus.jsonl"
    data = path.read_bytes()
    line = data.split(b"\n", 1)[0]
    record = orjson.loads(line)
    changed = orjson.dumps({**record, "text": record["text"][:-1] + ("X" if record["text"][-1] != "X" else "Y")})
    assert len(changed) == len(line)
    path.write_bytes(changed + data[len(line) :])
    with pytest.raises(mhindex.MhindexError, match="corpus 'musique' is damaged: .* line 1 is not the record it was"):
        corpus.paragraph(first.id)
    # A search that reaches the line says the same, never "the index is damaged" (bm25s reads texts from the corpus).
    with pytest.raises(mhindex.MhindexError) as said, corpus.searcher("bm25s") as searcher:
        searcher.search(first.title + " " + first.text, 3)
    assert "corpus 'musique' is damaged" in str(said.value) and "index" not in str(said.value).split(";")[0]
    path.write_bytes(data[: len(data) // 2])  # other damage: cut short
    with pytest.raises(mhindex.MhindexError) as said, corpus.searcher("bm25s") as searcher:  # said when opened
        searcher.search(first.title + " " + first.text, 1674)
    assert "corpus 'musique' is damaged" in str(said.value) and "shorter than when it was built" in str(said.value)
