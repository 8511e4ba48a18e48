"""What a first hour with the tool must never show: a command that deletes what is not its own,
a traceback for a mistyped command, a bad value that runs anyway. Each case goes through the
installed `mhindex` program, so that a dependency upgrade (typer now vendors its own click)
cannot bring tracebacks back unnoticed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HANG_S, SAMPLES, small_wiki_corpus

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
MHINDEX = Path(sys.executable).with_name("mhindex")


def mhindex(*args, home: Path, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "MHINDEX_HOME": str(home)}
    return subprocess.run(
        [str(MHINDEX), *map(str, args)], input=stdin, capture_output=True, text=True, env=env, timeout=timeout
    )


def one_line_error(result: subprocess.CompletedProcess, code: int = 2) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mhindex: error: ")
    return lines[0]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A data root holding a built corpus, an unrelated file, and a victim folder beside it."""
    base = tmp_path_factory.mktemp("safety")
    home = base / "home"
    assert mhindex("--quiet", "build", "musique", "--input", MUSIQUE, home=home).returncode == 0
    (home / "notes.txt").write_text("the user's own file")
    (base / "victim").mkdir()
    (base / "victim" / "thesis.tex").write_text("years of work")
    return home


def everything_is_still_there(home: Path) -> None:
    assert (home / "notes.txt").read_text() == "the user's own file"
    assert (home.parent / "victim" / "thesis.tex").read_text() == "years of work"
    assert (home / "musique" / "corpus.jsonl").is_file() and (
        home / "musique" / "indexes" / "lucene" / "manifest.json"
    ).is_file()


@pytest.mark.parametrize(
    "name",
    [
        ".",
        "..",
        "../victim",
        "ABSOLUTE",  # an absolute path: this test's own folder outside the data root
        "a/b",
        "downloads",
        "models",
        "cache",
        ".hidden",
        "-rf",
        "",
    ],
)
def test_a_corpus_name_never_escapes_the_data_root(root, name, tmp_path):
    absolute = tmp_path / "absolute-victim"
    absolute.mkdir()
    (absolute / "keep.txt").write_text("keep")
    name = str(absolute) if name == "ABSOLUTE" else name
    error = one_line_error(mhindex("corpus", "iirc", "--name", name, "--force", home=root))
    assert "corpus name" in error
    everything_is_still_there(root)
    assert (absolute / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize(
    "command",
    [
        ["search", "../home/musique", "x"],
        ["info", ".."],
        ["index", "../victim"],
        ["eval", "/tmp", "--limit", "1"],
        ["ask", "x", "--corpus", ".."],
    ],
)
def test_every_command_that_takes_a_name_checks_it_the_same_way(root, command):
    error = one_line_error(mhindex(*command, home=root))
    assert "is not allowed" in error
    everything_is_still_there(root)


def test_a_build_replaces_only_a_corpus_mhindex_built(root):
    foreign = root / "mine"
    foreign.mkdir()
    (foreign / "data.csv").write_text("a,b\n1,2\n")
    error = one_line_error(mhindex("corpus", "iirc", "--name", "mine", "--force", home=root))
    assert "is not a corpus that mhindex built" in error and str(foreign) in error
    assert (foreign / "data.csv").read_text() == "a,b\n1,2\n" and sorted(p.name for p in foreign.iterdir()) == [
        "data.csv"
    ]
    # A folder with a manifest.json that mhindex did not write is just as foreign.
    (foreign / "manifest.json").write_text('{"name": "something else"}')
    one_line_error(mhindex("build", "iirc", "--name", "mine", home=root))
    assert (foreign / "data.csv").is_file()
    # mhindex's own corpus is rebuilt in place, keeping its evaluation runs.
    (root / "musique" / "eval" / "run-1").mkdir(parents=True)
    (root / "musique" / "eval" / "run-1" / "nor.jsonl").write_text("{}\n")
    assert mhindex("--quiet", "corpus", "musique", "--input", MUSIQUE, "--force", home=root).returncode == 0
    assert (root / "musique" / "eval" / "run-1" / "nor.jsonl").read_text() == "{}\n"
    everything_is_still_there(root)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["search"], "Missing argument"),
        (["search", "musique", "x", "-k", "abc"], "Invalid value for '--hits' / '-k'"),
        (["search", "musique", "x", "--no-such-flag"], "No such option: --no-such-flag"),
        (["nosuchcommand"], "No such command 'nosuchcommand'"),
        (["list", "methods", "--json", "true"], "unexpected extra argument"),
        (["list", "everything"], "Invalid value for 'what': Value error, 'everything' is not one of"),
        (["search", "musique", "x", "-k", "0"], "Invalid value for '--hits' / '-k'"),
        (["search", "musique", "x", "-k", "-1"], "Invalid value for '--hits' / '-k'"),
        (["ask", "x", "-k", "0"], "Invalid value for '--k' / '-k'"),
        (["eval", "musique", "--limit", "-3"], "Invalid value for '--limit'"),
        (["ask", "x", "--distractors", "7"], "Invalid value for '--distractors'"),
    ],
)
def test_every_usage_error_is_one_line_with_exit_code_2(root, args, fragment):
    error = one_line_error(mhindex(*args, home=root))
    assert fragment in error
    assert "-h'" in error  # and where to read more


def test_a_bare_mhindex_shows_the_help(root):
    result = mhindex(home=root)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "Usage" in result.stdout + result.stderr and "ask" in result.stdout + result.stderr


@pytest.mark.parametrize("question", ["", "   "])
def test_an_empty_question_is_refused_before_any_model_runs(root, question):
    started = time.perf_counter()
    error = one_line_error(mhindex("ask", question, home=root))
    assert "the question is empty" in error
    assert time.perf_counter() - started < 30  # refused up front, not after loading and running a model


def test_score_refuses_a_missing_or_empty_predictions_file(root, tmp_path):
    error = one_line_error(mhindex("score", tmp_path / "nope.jsonl", "--questions", "musique", home=root))
    assert "nope.jsonl: no such file" in error
    (tmp_path / "empty.jsonl").write_text("")
    assert "holds no predictions" in one_line_error(
        mhindex("score", tmp_path / "empty.jsonl", "--questions", "musique", home=root)
    )
    assert "no such file" in one_line_error(
        mhindex("score", tmp_path / "empty.jsonl", "--questions", tmp_path / "q.jsonl", home=root)
    )


@pytest.mark.slow
def test_ctrl_c_acts_at_once_and_a_second_one_quits(root):
    """With the model busy (a long prompt is being read), the first Ctrl-C is answered at once and
    ends the command; before the helper thread, Python could not take it until llama.cpp returned."""
    env = {**os.environ, "MHINDEX_HOME": str(root), "MHINDEX_LM": "local:smollm2-135m"}
    question = "Who is the spouse of the Green performer?"
    for presses in (1, 2):
        process = subprocess.Popen(
            [
                str(MHINDEX),
                "ask",
                question,
                "--corpus",
                "musique",
                "--no-cache",
                "--lm-threads",
                "1",
                "--step-tokens",
                "300",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        time.sleep(8)  # the model is loaded and reading its first ~4,000-token prompt
        assert process.poll() is None
        pressed = time.perf_counter()
        for _ in range(presses):
            process.send_signal(signal.SIGINT)
            time.sleep(0.2)
        out, err = process.communicate(timeout=HANG_S)
        waited = time.perf_counter() - pressed
        assert process.returncode == 130, err
        assert "stopping; finished answers are kept" in err and "Traceback" not in err
        assert out == ""  # no half answer
        assert waited < 20, waited  # reading the prompt takes longer than this on one thread (some 40 s)


def test_a_lock_folder_that_is_a_link_out_of_the_data_root_is_never_followed(mh, home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    home.mkdir(parents=True, exist_ok=True)
    (home / ".locks").symlink_to(outside)
    result = mh("corpus", "musique")
    said = f"{home / '.locks'} is a symbolic link; mhindex writes its locks only there"
    assert result.code == 2 and said in result.err
    assert list(outside.iterdir()) == [] and not (home / "musique").exists()


def test_no_file_mhindex_writes_under_the_data_root_goes_through_a_link_inside_it(mh, home, tmp_path):
    """Each kind of file written under the root, behind a link to a folder outside: refused in one line before
    anything is written, the outside left as it was (a lock file, the call cache, a corpus, an evaluation's
    predictions, a trained model's folder)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("mine")
    assert mh("--quiet", "build", "musique").code == 0
    # A lock file that is itself a link to a file outside: not opened through it.
    (home / ".locks").mkdir(exist_ok=True)
    (home / ".locks" / "musique.lock").unlink(missing_ok=True)
    (home / ".locks" / "musique.lock").symlink_to(outside / "victim.txt")
    refused = mh("index", "musique", "--force")
    assert refused.code == 1 and "musique.lock is a symbolic link" in refused.err and "Traceback" not in refused.err
    (home / ".locks" / "musique.lock").unlink()
    # The call cache's folder as a link out of the root.
    (home / "cache").rename(tmp_path / "cache-was") if (home / "cache").exists() else None
    (home / "cache").symlink_to(outside)
    asked = mh("ask", "Who founded the company that made the Van Hook Township?", "--method", "nor")
    assert asked.code == 1 and f"{home / 'cache'} is a symbolic link inside the data root" in asked.err
    (home / "cache").unlink()
    # An evaluation's predictions file under the root, a link to a file outside.
    folder = home / "musique" / "eval" / "mine"
    folder.mkdir(parents=True)
    (folder / "nor.jsonl").symlink_to(outside / "victim.txt")
    evaluated = mh("eval", "musique", "--method", "nor", "--limit", "1", "--out", folder, "--no-cache")
    assert evaluated.code == 1 and "nor.jsonl is a symbolic link inside the data root" in evaluated.err
    # A corpus folder that is a link out of the root: not rebuilt into the outside.
    (home / "elsewhere").symlink_to(outside)
    built = mh("build", "musique", "--name", "elsewhere")
    assert built.code == 2 and "elsewhere exists and is not a corpus folder" in built.err
    assert (
        sorted(p.name for p in outside.iterdir()) == ["victim.txt"] and (outside / "victim.txt").read_text() == "mine"
    )


def test_escape_sequences_in_a_corpus_are_shown_never_sent_to_the_terminal(mh, tmp_path):
    """A paragraph (or a model's answer) may carry terminal escapes: one that writes the clipboard (OSC 52), one
    that retitles the window. What is printed shows them as text; rich's own styling still works."""
    hostile = "\x1b]52;c;aGVsbG8=\x07Paris\x1b]0;owned\x07 is the capital"
    corpus = tmp_path / "hostile.jsonl"
    corpus.write_text(json.dumps({"id": "p1", "title": "France\x1b[2J", "text": hostile}) + "\n")
    assert mh("--quiet", "build", "jsonl", "-i", corpus, "--name", "hostile").code == 0
    shown = mh("search", "hostile", "capital", "-k", "1")
    assert shown.code == 0 and "\x1b" not in shown.out and "\x07" not in shown.out
    assert "\\x1b]52;c;aGVsbG8=" in shown.out and "France\\x1b[2J" in shown.out  # rich drops the BEL itself


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_the_preflight_reads_the_memory_a_containers_cgroup_leaves(tmp_path, version):
    """A container's limit, not the host's memory: the kernel's OOM killer ends a build past the cgroup's limit with
    no word, so the preflight must count with what the cgroup leaves (its limit less its usage)."""
    from mhindex.files import cgroup_memory_left

    proc, mib = tmp_path / "proc" / "self", 1 << 20
    proc.mkdir(parents=True)
    if version == "v2":
        (proc / "cgroup").write_text("0::/build.slice\n")
        folder, limit, usage = tmp_path / "sys/fs/cgroup/build.slice", "memory.max", "memory.current"
    else:
        (proc / "cgroup").write_text("5:cpu:/\n4:memory:/docker/abc\n0::/\n")
        folder, limit, usage = (
            tmp_path / "sys/fs/cgroup/memory/docker/abc",
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
        )
    folder.mkdir(parents=True)
    (folder / limit).write_text(f"{512 * mib}\n")
    (folder / usage).write_text(f"{400 * mib}\n")
    assert cgroup_memory_left(tmp_path) == 112 * mib
    (folder / limit).write_text("max\n" if version == "v2" else "9223372036854771712\n")  # no limit set
    assert cgroup_memory_left(tmp_path) is None
    assert cgroup_memory_left(tmp_path / "nowhere") is None


def test_a_k_past_the_corpus_is_all_of_it_never_a_damaged_index(root):
    """-k 2147483648 (past Lucene's int) was reported as a damaged index: a k past the corpus asks for all of it."""
    result = mhindex("search", "musique", "Van Hook Township", "-k", "2147483648", "--json", home=root)
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    found = hits["hits"] if isinstance(hits, dict) else hits
    assert 0 < len(found) <= 2000 and "damaged" not in result.stderr  # every paragraph the query matches


def test_a_private_state_folder_left_by_a_killed_process_is_removed_by_the_next(tmp_path):
    # A model made through the API (no data root) keeps its states in $TMPDIR/mhindex-llama-state/.private.tmp-PID-*,
    # removed at exit; one whose process was killed stayed there for good.
    from mhindex.lm.state import _PRIVATE, private_folder

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    shared = tmp_path / "mhindex-llama-state"
    left = shared / f".private.tmp-{gone.stdout.strip()}-abcd1234"
    (left / "x.bin").parent.mkdir(parents=True)
    (left / "x.bin").write_bytes(b"state")
    alive = shared / f".private.tmp-{os.getppid()}-efgh5678"  # a live process's: kept
    alive.mkdir()
    try:
        mine = private_folder(shared)
        assert mine.is_dir() and f".private.tmp-{os.getpid()}-" in mine.name
        assert not left.exists() and alive.is_dir()
    finally:
        _PRIVATE.pop(shared, None)


@pytest.mark.slow
def test_indexing_searching_and_asking_write_nothing_outside_the_data_root(tmp_path):
    # The user's home and temporary folder are empty folders of this test's; every command is given its data root.
    # ONNX Runtime (the dense encoder's) wrote a device id and an event database under ~/.cache/Microsoft from its
    # import on, unless told not to: the CI marker variables that also silence it are taken away here. PISA's
    # PyTerrier made empty dataset folders under ~/.ir_datasets; the chart of `eval` and `report` matplotlib's font
    # list under ~/.cache/matplotlib.
    (tmp_path / "root").mkdir()
    root = small_wiki_corpus(tmp_path / "root")
    user, temporary, here = tmp_path / "user", tmp_path / "tmp", tmp_path / "cwd"
    for folder in (user, temporary, here):
        folder.mkdir()
    left_out = {
        "CI",
        "GITHUB_ACTIONS",
        "TF_BUILD",
        "ORT_DISABLE_TELEMETRY",
        "IR_DATASETS_HOME",
        "MHINDEX_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "HF_HOME",
        "MPLCONFIGDIR",
        "TMPDIR",
    }
    env = {k: v for k, v in os.environ.items() if k not in left_out} | {"HOME": str(user), "TMPDIR": str(temporary)}
    question = "Who is the director of the film?"
    asking = ["ask", question, "--corpus", "wiki", "--method", "oner", "-k", "2"]
    for command in (
        ["index", "wiki", "--backend", "dense"],
        ["search", "wiki", question, "--backend", "dense"],
        ["index", "wiki"],  # Lucene: Anserini's indexer, a JVM of its own
        ["search", "wiki", question],  # the JVM in process
        ["index", "wiki", "--backend", "pisa"],  # PyTerrier's ir_datasets made ~/.ir_datasets on import
        ["search", "wiki", question, "--backend", "pisa"],
        ["index", "wiki", "--backend", "bm25s"],
        ["search", "wiki", question, "--backend", "bm25s"],
        ["eval", "wiki", "--method", "retrieve", "--backend", "bm25s", "--limit", "3", "--out", tmp_path / "eval"],
        ["report", tmp_path / "eval", "--out", tmp_path / "report.html"],  # matplotlib made ~/.cache/matplotlib
        [*asking, "--lm", "local:smollm2-135m", "--answer-tokens", "8", "--max-demos", "1"],
    ):
        run = [str(MHINDEX), "--quiet", "--home", str(root), *map(str, command)]
        done = subprocess.run(run, capture_output=True, text=True, env=env, cwd=here, timeout=HANG_S)
        assert done.returncode == 0, (command, done.stderr)
        for folder in (user, temporary, here):  # the working folder too: ORT's session file (.ses) went there
            assert not [str(p) for p in folder.rglob("*")], command
