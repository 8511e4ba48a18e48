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

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mhindex.errors import UsageError
from mhindex.files import write_under

MANIFEST = "manifest.json"
OFFSETS = "corpus.offsets"  # int64 byte offsets of each corpus.jsonl line, and the file's end
CHECKS = "corpus.checks"  # each corpus.jsonl line's 8-byte blake2b (`line_check`), in the same order
# Folders of the data root that are not corpora: a corpus may not take their names.
RESERVED = ("downloads", "models", "cache", "default-corpus")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def resolve_home(home: Path | str | None = None) -> Path:
    """The data root; a file where it should be is a one-line error naming what set it."""
    if home:
        root, source = Path(home).expanduser(), "--home"
    elif env := os.environ.get("MHINDEX_HOME"):
        root, source = Path(env).expanduser(), "$MHINDEX_HOME"
    else:
        xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        root, source = Path(xdg) / "mhindex", "$XDG_DATA_HOME/mhindex"
    if root.exists() and not root.is_dir():
        raise UsageError(f"the data root {root} (from {source}) is a file, not a folder: point {source} at a folder")
    write_under(root)
    # matplotlib (eval's chart, report's figures) writes its font list under ~/.cache/matplotlib and makes
    # ~/.config/matplotlib at its first import: in the data root's cache instead (a user's own MPLCONFIGDIR is kept).
    os.environ.setdefault("MPLCONFIGDIR", str(root / "cache" / "matplotlib"))
    return root


class CorpusDamaged(UsageError):
    """A corpus folder whose manifest cannot be read: rebuilding it is the way out."""


_CONTENT_ID = re.compile(r"[0-9a-f]{16}")


def id_key(paragraph_id: str) -> int:
    """Any paragraph id as the 64-bit integer the builder deduplicates on: a content id (16 hex
    digits) is its own number, an id a source gave (DPR's "12", BEIR's "MED-10") is hashed."""
    if len(paragraph_id) == 16 and _CONTENT_ID.fullmatch(paragraph_id):
        return int(paragraph_id, 16)
    return int.from_bytes(hashlib.blake2b(paragraph_id.encode(), digest_size=8).digest(), "big")


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
        """The corpus's manifest; one that is not a corpus manifest is a one-line error saying what to run."""
        try:
            manifest = orjson.loads(self.manifest_path.read_bytes())
        except orjson.JSONDecodeError as error:
            raise CorpusDamaged(
                f"corpus '{self.name}' is damaged: {self.manifest_path} is not valid JSON ({error}); rebuild "
                f"it with `mhindex corpus DATASET --name {self.name} --force`"
            ) from None
        if not _is_manifest(manifest):
            raise CorpusDamaged(
                f"corpus '{self.name}' is damaged: {self.manifest_path} is not a corpus manifest; rebuild it "
                f"with `mhindex corpus DATASET --name {self.name} --force`"
            )
        return manifest

    def paragraphs(self) -> ParagraphReader:
        return ParagraphReader(self)

    def paragraph_keys(self) -> Iterator[int]:
        """Each paragraph's id as its 64-bit key (`id_key`), in corpus order: how an engine matches vectors
        made elsewhere to the paragraphs, without reading the corpus's record format itself."""
        with open(self.corpus, "rb") as handle:
            for line in handle:
                yield id_key(orjson.loads(line)["id"])

    def fingerprint(self) -> dict[str, Any]:
        """What decides this corpus's paragraphs, the retrieval environment's first part (`mhindex diff`): its
        sha256 and paragraph count, and what explains a different sha256 (the dataset, its release files'
        sha256, the paragraphs added from other datasets, the converter's options, the shuffle's seed)."""
        manifest = self.manifest()
        return {
            "name": self.name,
            "sha256": manifest.get("corpus_sha256"),
            "paragraphs": (manifest.get("counts") or {}).get("paragraphs"),
            "dataset": manifest.get("dataset"),
            "inputs": {Path(str(i.get("path"))).name: i.get("sha256") for i in manifest.get("inputs") or []},
            "added": [source.get("dataset") for source in manifest.get("sources") or []][1:],
            "converter_options": manifest.get("options") or {},
            "seed": manifest.get("seed"),
        }

    def summary(self) -> dict:
        """What `mhindex list` and `info` show: counts, indexes, size on disk."""
        from mhindex.files import human_size

        manifest = self.manifest()
        size = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
        indexes = (
            sorted(p.name for p in self.indexes.iterdir() if p.is_dir() and not p.name.startswith("."))
            if self.indexes.is_dir()
            else []
        )
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


def line_check(line: bytes) -> int:
    """A corpus line's own check, kept at build time in `corpus.checks`: the first 8 bytes of its blake2b."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")


class ParagraphReader:
    """Paragraph N of a corpus by its line's byte offset, for the engines that return positions
    (FAISS, PLAID). pread, not seek: safe to share between threads. Each line read is checked against the check kept
    when the corpus was built (`corpus.checks`; a corpus built before them is read unchecked): a line rewritten in
    place, even as valid JSON of the same length, is the corpus's damage, said so, never served as the paragraph."""

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
        self._checks = array("Q")
        if (corpus.root / CHECKS).is_file():
            with open(corpus.root / CHECKS, "rb") as handle:
                self._checks.frombytes(handle.read())
            if len(self._checks) != len(self._offsets) - 1:
                self._checks = array("Q")  # not this corpus's (a partial copy): read unchecked, as an old corpus
        self._fd = os.open(corpus.corpus, os.O_RDONLY)
        self._corpus = corpus
        if os.fstat(self._fd).st_size < self._offsets[-1]:  # cut short since it was built: no engine is to blame
            self.close()
            raise self._damaged("is shorter than when it was built (truncated?)")

    def _damaged(self, what: str) -> CorpusDamaged:
        name = self._corpus.name
        return CorpusDamaged(
            f"corpus '{name}' is damaged: {self._corpus.corpus} {what}; rebuild it with `mhindex corpus DATASET "
            f"--name {name} --force`"
        )

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, position: int) -> dict:
        start, end = self._offsets[position], self._offsets[position + 1]
        line = os.pread(self._fd, end - start, start)
        if self._checks and line_check(line) != self._checks[position]:
            raise self._damaged(f"line {position + 1} is not the record it was when built")
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            raise self._damaged(f"line {position + 1} is not the record it was when built") from None

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
        raise UsageError(
            f"corpus name {name!r} is reserved for mhindex's own folder <home>/{name.lower()}; choose another name"
        )
    return name


def corpus_dir(home: Path, name: str) -> CorpusDir:
    return CorpusDir(home / check_name(name))


def _is_manifest(manifest: object) -> bool:
    return (
        isinstance(manifest, dict)
        and {"dataset", "format", "corpus_sha256"} <= manifest.keys()
        and isinstance(manifest.get("counts"), dict)
        and isinstance(manifest["counts"].get("paragraphs"), int)
    )


def is_mhindex_corpus(folder: Path) -> bool:
    """Whether `folder` is a corpus that mhindex built (its manifest says so)."""
    try:
        manifest = orjson.loads((folder / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return _is_manifest(manifest)


def damaged_corpora(home: Path) -> list[Path]:
    """Corpus folders whose manifest.json is there but cannot be read as one (`list` shows them)."""
    if not home.is_dir():
        return []
    return sorted(
        p
        for p in home.iterdir()
        if _NAME.fullmatch(p.name) and p.name not in RESERVED and (p / MANIFEST).is_file() and not is_mhindex_corpus(p)
    )


def claim_corpus_dir(target: CorpusDir) -> None:
    """Refuse to build over a folder that mhindex did not create as a corpus: a build replaces
    its target whole, so anything else in the way would be deleted."""
    root = target.root
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise UsageError(f"{root} exists and is not a corpus folder; choose another --name or move it away")
    # A corpus whose manifest was damaged still has mhindex's files: it may be rebuilt in place.
    ours = is_mhindex_corpus(root) or ((root / MANIFEST).is_file() and (root / "corpus.jsonl").is_file())
    if root.is_dir() and any(root.iterdir()) and not ours:
        raise UsageError(
            f"{root} exists and is not a corpus that mhindex built; nothing was changed: choose another --name "
            "or move it away"
        )


def downloads_dir(home: Path, dataset: str) -> Path:
    return home / "downloads" / dataset


def built_corpora(home: Path) -> list[CorpusDir]:
    if not home.is_dir():
        return []
    return sorted(
        (
            CorpusDir(p)
            for p in home.iterdir()
            if _NAME.fullmatch(p.name) and p.name not in RESERVED and p.is_dir() and is_mhindex_corpus(p)
        ),
        key=lambda c: c.name,
    )


def open_corpus(home: Path, name: str) -> CorpusDir:
    """The corpus NAME, or a one-line error that says how to build it (or which built one was meant)."""
    import difflib

    found = corpus_dir(home, name)
    if found.exists():
        found.manifest()  # a damaged one says so here, with what to run
    if not found.exists():
        built = [c.name for c in built_corpora(home)]
        close = difflib.get_close_matches(name, built, n=1)
        if close:
            raise UsageError(
                f"no corpus named '{name}' in {home}; did you mean '{close[0]}'? (built: {', '.join(built)})"
            )
        raise UsageError(
            f"no corpus named '{name}' in {home} (built: {', '.join(built) or 'none'}); run `mhindex corpus DATASET "
            f"--name {name}` or `mhindex build {name}`"
        )
    return found


DEFAULT_CORPUS = "default-corpus"  # a file in the data root naming the corpus used when none is given


def remember_default(home: Path, name: str) -> None:
    """The first corpus built stays the default (the quick start's keeps working once others are built),
    until it is removed; then the next one built takes its place."""
    path = home / DEFAULT_CORPUS
    try:
        current = path.read_text().strip()
    except OSError:
        current = ""
    if current and is_mhindex_corpus(home / current):
        return
    from mhindex.files import atomic_file

    with atomic_file(path) as handle:
        handle.write(name.encode() + b"\n")


def default_corpus(home: Path, corpora: list[CorpusDir]) -> CorpusDir | None:
    try:
        name = (home / DEFAULT_CORPUS).read_text().strip()
    except OSError:
        return None
    return next((c for c in corpora if c.name == name), None)


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
    if (chosen := default_corpus(home, corpora)) is not None:
        from mhindex.ui import reporter

        others = ", ".join(c.name for c in corpora if c is not chosen)
        reporter().info(f"corpus '{chosen.name}' (the default, the first built; --corpus picks another: {others})")
        return chosen
    raise UsageError(f"several corpora are built ({', '.join(c.name for c in corpora)}); pick one with --corpus")


def leftovers(home: Path, kept_by_methods: Iterable[Path] = ()) -> tuple[list[Path], list[Path]]:
    """What interrupted builds left in the data root: (temporary files and folders of processes
    that are gone, which nothing will use; work kept so that an interrupted dense encoding or
    training resumes, which the next run of the same command uses)."""
    from mhindex.files import stale_temporaries

    if not home.is_dir():
        return [], []
    folders = [
        home,
        home / ".tmp",  # processes' temporary folders (files.temporary_under)
        home / "models",
        home / "cache" / "llama-state",
        *(p for p in (home / "models").glob("*") if p.is_dir()),
        *(c.indexes for c in built_corpora(home)),
    ]
    stale = [path for folder in folders for path in stale_temporaries(folder)]
    resumable = [
        *(p for c in built_corpora(home) if c.indexes.is_dir() for p in c.indexes.glob(".dense-work-*")),
        *kept_by_methods,  # a method's interrupted work (methods.resumable_work)
    ]
    return sorted(stale), sorted(resumable)


def say_what_needs_care(home: Path, kept_by_methods: Iterable[Path]) -> None:
    """Warn of damaged corpora and of what killed builds left (with the command that fixes each), as `list` does."""
    from mhindex import ui
    from mhindex.files import human_size, size_on_disk

    log = ui.reporter()
    for folder in damaged_corpora(home):
        log.warning(
            f"{folder}: damaged (its manifest.json cannot be read); rebuild it: mhindex corpus DATASET --name "
            f"{folder.name} --force"
        )
    stale, resumable = leftovers(home, kept_by_methods)
    if stale:
        size = human_size(sum(map(size_on_disk, stale)))
        log.warning(f"{size} in {len(stale)} temporary folders of builds that were killed; `mhindex gc` removes them")
    if resumable:
        size = human_size(sum(map(size_on_disk, resumable)))
        log.info(f"{size} kept to resume interrupted encodings or training; `mhindex gc --resumable` removes them")


def collect_leftovers(home: Path, kept_by_methods: Iterable[Path], resumable: bool) -> tuple[list[Path], int, int]:
    """`mhindex gc`: remove what killed builds left (and, if `resumable`, the work kept to resume); returns what
    was removed, the bytes freed and how many kept folders were left; says why any other was left alone."""
    from mhindex import ui

    stale, kept = leftovers(home, kept_by_methods)
    removed, freed, left = remove_leftovers(home, [*stale, *(kept if resumable else [])])
    for line in left:
        ui.reporter().warning(line)
    return removed, freed, 0 if resumable else len(kept)


def remove_leftovers(home: Path, paths: Iterable[Path]) -> tuple[list[Path], int, list[str]]:
    """`mhindex gc`: remove each path (a link itself, never what it points to), except one reached through a
    link out of the data root; returns what was removed, the bytes freed, and why any was left alone."""
    from mhindex.files import OutsideRoot, inside, remove, size_on_disk

    removed, freed, left = [], 0, []
    for path in paths:
        try:
            inside(home, path.parent)
        except OutsideRoot as error:
            left.append(f"left alone: {error}")
            continue
        size = size_on_disk(path)
        try:
            remove(path)
        except OSError as error:
            left.append(f"could not remove {path}: {error.strerror or error}")
            continue
        if not path.exists() and not path.is_symlink():  # a read-only root keeps it: not counted as removed
            removed.append(path)
            freed += size
        else:
            left.append(f"could not remove {path}")
    return removed, freed, left
