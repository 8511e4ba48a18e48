"""Where mhindex keeps its data.

The data root is `--home`, else `$MHINDEX_HOME`, else `$XDG_DATA_HOME/mhindex`
(`~/.local/share/mhindex`). A corpus named NAME lives in `<home>/NAME/`:

    corpus.jsonl      one paragraph a line: {"id", "title", "text", ...}
    questions.jsonl   one question a line: {"id", "question", "answers", "gold_ids", "dataset", ...}
    manifest.json     dataset, inputs and their hashes, seed, counts, tool version
    indexes/<backend>/

Downloads of official releases go to `<home>/downloads/<dataset>/`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from mhindex.errors import UsageError

MANIFEST = "manifest.json"


def resolve_home(home: Path | str | None = None) -> Path:
    if home:
        return Path(home).expanduser()
    if env := os.environ.get("MHINDEX_HOME"):
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "mhindex"


@dataclass(frozen=True)
class CorpusDir:
    """The files of one built corpus."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def corpus(self) -> Path:
        return self.root / "corpus.jsonl"

    @property
    def questions(self) -> Path:
        return self.root / "questions.jsonl"

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    @property
    def indexes(self) -> Path:
        return self.root / "indexes"

    def index_dir(self, backend: str) -> Path:
        return self.indexes / backend

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def manifest(self) -> dict:
        return orjson.loads(self.manifest_path.read_bytes())


def corpus_dir(home: Path, name: str) -> CorpusDir:
    return CorpusDir(home / name)


def downloads_dir(home: Path, dataset: str) -> Path:
    return home / "downloads" / dataset


def built_corpora(home: Path) -> list[CorpusDir]:
    if not home.is_dir():
        return []
    return sorted(
        (CorpusDir(p) for p in home.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).is_file()),
        key=lambda c: c.name,
    )


def open_corpus(home: Path, name: str) -> CorpusDir:
    """The corpus NAME, or a one-line error that says how to build it."""
    found = corpus_dir(home, name)
    if not found.exists():
        known = ", ".join(c.name for c in built_corpora(home)) or "none"
        raise UsageError(
            f"no corpus named '{name}' in {home} (built: {known}); run `mhindex corpus DATASET --name {name}` or `mhindex build {name}`"
        )
    return found
