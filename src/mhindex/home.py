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
import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from mhindex.errors import UsageError

MANIFEST = "manifest.json"
OFFSETS = "corpus.offsets"  # int64 byte offsets of each corpus.jsonl line, and the file's end
# Folders of the data root that are not corpora: a corpus may not take their names.
RESERVED = ("downloads", "models", "cache")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


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

    def paragraphs(self) -> ParagraphReader:
        return ParagraphReader(self)

    def summary(self) -> dict:
        """What `mhindex list` and `info` show: counts, indexes, size on disk."""
        from mhindex.files import human_size

        manifest = self.manifest()
        size = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        indexes = sorted(p.name for p in self.indexes.iterdir() if p.is_dir() and not p.name.startswith(".")) if self.indexes.is_dir() else []
        return {
            "name": self.name,
            "dataset": manifest.get("dataset"),
            "paragraphs": manifest["counts"]["paragraphs"],
            "questions": manifest["counts"]["questions"],
            "indexes": indexes,
            "bytes": size,
            "size": human_size(size),
            "path": str(self.root),
        }


class ParagraphReader:
    """Paragraph N of a corpus by its line's byte offset, for the engines that return positions
    (FAISS, PLAID). pread, not seek: safe to share between threads."""

    def __init__(self, corpus: CorpusDir) -> None:
        from array import array

        self._offsets = array("q")
        path = corpus.root / OFFSETS
        if path.is_file():
            with open(path, "rb") as handle:
                self._offsets.frombytes(handle.read())
        else:  # a corpus built before the offsets were written
            self._offsets.append(0)
            with open(corpus.corpus, "rb") as handle:
                for line in handle:
                    self._offsets.append(self._offsets[-1] + len(line))
        self._fd = os.open(corpus.corpus, os.O_RDONLY)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, position: int) -> dict:
        start, end = self._offsets[position], self._offsets[position + 1]
        return orjson.loads(os.pread(self._fd, end - start, start))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def check_name(name: str) -> str:
    """A corpus name is one folder inside the data root, never a path out of it: every command
    that takes a name comes through here, so `--name .`, `../x` or `/abs` can never reach a
    folder that is not a corpus."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith("."):
        raise UsageError(
            f"corpus name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (it names one folder inside the data root)"
        )
    if name.lower() in RESERVED:
        raise UsageError(f"corpus name {name!r} is reserved for mhindex's own folder <home>/{name.lower()}; choose another name")
    return name


def corpus_dir(home: Path, name: str) -> CorpusDir:
    return CorpusDir(home / check_name(name))


def is_mhindex_corpus(folder: Path) -> bool:
    """Whether `folder` is a corpus that mhindex built (its manifest says so)."""
    try:
        manifest = orjson.loads((folder / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(manifest, dict) and {"dataset", "format", "corpus_sha256"} <= manifest.keys()


def claim_corpus_dir(target: CorpusDir) -> None:
    """Refuse to build over a folder that mhindex did not create as a corpus: a build replaces
    its target whole, so anything else in the way would be deleted."""
    root = target.root
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise UsageError(f"{root} exists and is not a corpus folder; choose another --name or move it away")
    if root.is_dir() and any(root.iterdir()) and not is_mhindex_corpus(root):
        raise UsageError(f"{root} exists and is not a corpus that mhindex built; nothing was changed: choose another --name or move it away")


def downloads_dir(home: Path, dataset: str) -> Path:
    return home / "downloads" / dataset


def built_corpora(home: Path) -> list[CorpusDir]:
    if not home.is_dir():
        return []
    return sorted(
        (CorpusDir(p) for p in home.iterdir() if _NAME.fullmatch(p.name) and p.name not in RESERVED and p.is_dir() and is_mhindex_corpus(p)),
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


def pick_corpus(home: Path, name: str | None, required: bool = True) -> CorpusDir | None:
    """The corpus named, else the only one built; a one-line error when the choice is not clear."""
    if name:
        return open_corpus(home, name)
    corpora = built_corpora(home)
    if len(corpora) == 1:
        return corpora[0]
    if not required:
        return None
    if not corpora:
        raise UsageError(f"no corpus is built in {home}; run `mhindex build musique` first")
    raise UsageError(f"several corpora are built ({', '.join(c.name for c in corpora)}); pick one with --corpus")
