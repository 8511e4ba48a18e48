"""Help as a new user reads it, in a real process at 80 columns: the options of the method and backend
asked about (not every engine's), a pointer to the rest, and shell completion."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import HANG_S


def mhindex(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mhindex", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
        timeout=HANG_S,
    )


def test_help_shows_the_chosen_method_and_backend():
    ask = mhindex("ask", "--help").stdout
    assert len(ask.splitlines()) < 300  # 464 lines when every method's and engine's options were shown
    assert "--max-steps" in ask and "--tracing" not in ask and "--shards" not in ask and "--es-url" not in ask
    said = " ".join(ask.split())
    assert said.count("Options shown:") == 1  # the method's and the backend's groups in one line (two before)
    assert (
        "Options shown: those of backend lucene (`--backend NAME --help`: another's; `mhindex index --help`: those "
        "fixed when an index is built) and method ircot (`--method NAME --help`: another's)." in said
    )
    # Shown for ircot alone: its own default, not every method's (`[default: oner 15, ircot 4, kdcot 5, ...]`)
    k = said[said.index("--k -k") : said.index("--clean-queries")]
    assert "[default: 4]" in k and "oner" not in k
    assert "wh ich" not in said and "wh/ich" not in said  # a word folded at the column's edge
    assert not any(line.rstrip().endswith(" and writes") for line in ask.splitlines())  # the docstring rewrapped
    assert len(ask.splitlines()) < 170  # 191 with every method's defaults and two "Options shown" paragraphs
    searchain = mhindex("ask", "--method", "searchain", "--backend", "elasticsearch", "--help").stdout
    assert "--tracing" in searchain and "--max-steps" not in searchain and "--es-url" in searchain
    assert "--shards" not in searchain  # fixed when the index is built: shown by `index`
    assert "--shards" in mhindex("index", "--backend", "elasticsearch", "--help").stdout
    fused = mhindex("search", "--backend", "lucene+dense", "--help").stdout
    assert "--fusion" in fused and "--rrf-k" in fused and "--k1" in fused
    # Hidden from the help, still accepted.
    assert "no such option" not in mhindex("ask", "x", "--tracing", "--method", "ircot", "--help").stderr.lower()


def test_shell_completion():
    # The shell named, not detected from the parent process (not a shell when the suite runs in the background).
    shown = mhindex("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert shown.returncode == 0 and "_mhindex_completion" in shown.stdout
    completed = mhindex(env={"_MHINDEX_COMPLETE": "complete_bash", "COMP_WORDS": "mhindex ev", "COMP_CWORD": "1"})
    assert completed.stdout.split() == ["eval"]


def test_option_names_are_whole_at_80_columns_and_flags_show_no_type():
    for command in (["ask"], ["eval"], ["search"], ["index"], ["build"], ["corpus", "musique"], ["serve"], []):
        shown = mhindex(*command, "--help").stdout
        assert "…" not in shown, command  # "--max-paragraph-…" and "(--no-clean-…" before
        assert "<bool>" not in shown, command  # "--help -h <bool>" on every command before
    ask = mhindex("ask", "--help").stdout
    assert "--max-paragraph-words" in ask and "--no-clean-queries" in ask
    assert len(ask.splitlines()) < 200  # 223 lines with a column for the negative names


def test_tables_in_a_pipe_keep_to_columns_when_it_is_set(mh, monkeypatch):
    """In a pipe a table is drawn at its natural width (never cropped), unless $COLUMNS says how wide to be."""
    wide = mh("list", "methods").out.splitlines()
    assert max(map(len, wide)) > 120
    monkeypatch.setenv("COLUMNS", "80")
    narrow = mh("list", "methods").out.splitlines()
    assert max(map(len, narrow)) <= 80 and any("decompose" in line for line in narrow)
