"""The released code of the papers mhindex reproduces, loaded as it is released, outside mhindex: a release's
tree at its commit is copied out of a git mirror (the `fetch` tool's, or any clone), put on sys.path, and the
third-party modules it imports but whose reading functions do not use (an OpenAI client, spaCy, a retriever)
are stand-ins that fail if called. Nothing of mhindex is imported here."""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Release:
    repo: str  # owner/name on GitHub
    commit: str  # the full hash read
    root: Path  # the tree at that commit, here

    def cite(self, path: str, function: str) -> dict[str, str]:
        return {"repo": self.repo, "commit": self.commit, "file": path, "function": function}


def materialize(mirror: Path, repo: str, commit: str = "HEAD") -> Release:
    """The release's tree at `commit`, extracted from the git directory `mirror` into a temporary folder."""
    full = subprocess.run(["git", "--git-dir", str(mirror), "rev-parse", commit], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix=repo.replace("/", "+") + "-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # the tree is read while the process runs
    archive = subprocess.run(["git", "--git-dir", str(mirror), "archive", full], capture_output=True)
    if archive.returncode == 0:
        with tempfile.TemporaryFile() as handle:
            handle.write(archive.stdout)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as tar:
                tar.extractall(root, filter="data")
    else:  # a mirror may lack the largest files (datasets): the others, one by one
        listing = subprocess.run(["git", "--git-dir", str(mirror), "ls-tree", "-r", "-z", full], capture_output=True,
                                 check=True).stdout.decode().split("\0")  # fmt: skip
        for entry in filter(None, listing):
            meta, path = entry.split("\t", 1)
            blob = subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "blob", meta.split()[2]],
                                  capture_output=True)  # fmt: skip
            if blob.returncode == 0:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_bytes(blob.stdout)
    return Release(repo, full, root)


class _Absent(types.ModuleType):
    """A module the release imports and its reading functions never use: any use of it fails loudly."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)

        def unused(*args: object, **kwargs: object) -> object:
            raise RuntimeError(f"{self.__name__}.{name} is a stand-in: the reading under test should not call it")

        if name[:1].isupper():  # a class (to subclass, as gym.Env): making one fails
            return type(name, (), {"__init__": unused, "__call__": unused})
        return _Absent(f"{self.__name__}.{name}")  # a submodule or a function: using it fails


def stand_in(*names: str) -> None:
    """Stand-ins for modules that the release imports and cannot or need not load here (their parent packages,
    where the release has them, are its own)."""
    for name in names:
        sys.modules.setdefault(name, _Absent(name))


def load(release: Release, source_dir: str, module: str) -> types.ModuleType:
    """`module` of the release, imported with `source_dir` (relative to the tree) first on sys.path."""
    path = str(release.root / source_dir)
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module(module)


def load_file(release: Release, path: str, name: str) -> types.ModuleType:
    """The module at `path` of the release's tree, loaded alone under `name` (its package's own imports not run)."""
    spec = importlib.util.spec_from_file_location(name, release.root / path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{release.repo}: {path} cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
