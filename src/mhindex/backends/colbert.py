"""ColBERTv2 late interaction through `colbert-ai` (PLAID), on CPU.

`--checkpoint` names a ColBERT checkpoint folder (normally colbert-ir/colbertv2.0, downloaded by
the user). With none, a checkpoint is built once from the packaged all-MiniLM-L6-v2 weights with
an identity projection (`<home>/models/colbert-minilm/`), so the backend works offline out of
the box; it is a real index, but that encoder was never trained for late interaction, and a
warning says so. colbert-ai compiles its C++ extensions on first use into
`<home>/cache/torch_extensions/`. Its chatter goes to `colbert.log` in the index folder.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mhindex.backends.base import Backend, BackendContext, Hit, search_within_titles
from mhindex.errors import MhindexError, UsageError
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.requirements import package
from mhindex.ui import engine_output_to, reporter

DEFAULT_CHECKPOINT = "colbert-minilm"


@dataclass(frozen=True)
class ColbertOptions:
    checkpoint: str = option(
        DEFAULT_CHECKPOINT,
        "ColBERT: checkpoint folder, e.g. colbertv2.0 (colbert-minilm: MiniLM with an identity projection, untrained).",
        stage="index",
    )
    nbits: int = option(2, "ColBERT: bits per residual dimension.", min=1, max=8, stage="index")
    doc_maxlen: int = option(180, "ColBERT: tokens kept per paragraph.", min=8, stage="index")
    threads: int = option(1, "Threads for encoding and search.", min=1, stage="both")
    query_maxlen: int = 32
    kmeans_niters: int = 4
    ncells: int | None = None
    centroid_score_threshold: float | None = None
    ndocs: int | None = None

    def __post_init__(self) -> None:
        # One checkpoint, one spelling: the recorded option is compared when the index is opened.
        if self.checkpoint != DEFAULT_CHECKPOINT:
            object.__setattr__(self, "checkpoint", str(Path(self.checkpoint).expanduser().resolve()))


class ColbertUnavailable(MhindexError):
    pass


def _prepare(home: Path, threads: int) -> Any:
    """Environment colbert-ai needs before its import: offline hub, our extension cache, CPU threads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(home / "cache" / "torch_extensions"))
    extensions = Path(os.environ["TORCH_EXTENSIONS_DIR"])
    _drop_stale_locks(extensions)
    if len({so.parent.name for so in extensions.glob("*/*.so")}) < len(EXTENSIONS):
        reporter().info(
            f"colbert-ai compiles its {len(EXTENSIONS)} C++ extensions on first use, once: a few minutes on "
            f"two cores (into {extensions})"
        )
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*CUDA is not available.*")
    try:
        import colbert  # noqa: F401
        import torch
    except ImportError:
        raise ColbertUnavailable("the colbert backend needs colbert-ai: pip install 'mhindex[colbert]'") from None
    torch.set_num_threads(max(1, threads))
    _without_git_metadata()


# The colbert-ai modules that took `get_metadata_only` by name (0.2.22: `from utility.utils.save_metadata import ...`)
_METADATA_USERS = ("colbert.infra.config.base_config", "colbert.infra.config.core_config", "colbert.data.examples",
                   "colbert.data.ranking")  # fmt: skip


def _without_git_metadata() -> None:
    """colbert-ai writes into each index's metadata the git branch of the folder the command runs in, and fails
    (TypeError) where that folder is a checkout whose HEAD is detached, as CI checkouts and `git worktree`s often are:
    an index built or searched there failed. What it keeps instead: when, and that mhindex made it, not the command
    line (which may hold anything the user typed) nor the git state of an unrelated folder."""
    import importlib

    def metadata() -> Any:
        from colbert.utils.utils import dotdict

        return dotdict(current_datetime=time.strftime("%b %d, %Y ; %l:%M%p %Z (%z)"), cmd="mhindex")

    for name in _METADATA_USERS:
        module = importlib.import_module(name)
        if hasattr(module, "get_metadata_only"):
            setattr(module, "get_metadata_only", metadata)  # noqa: B010 - a module's global, which mypy cannot see


STALE_LOCK_SECONDS = 15 * 60  # one extension compiles in about a minute on two cores
EXTENSIONS = ("decompress_residuals_cpp", "filter_pids_cpp", "segmented_lookup_cpp", "segmented_maxsim_cpp")


def _drop_stale_locks(extensions: Path) -> None:
    """A compile interrupted by Ctrl-C leaves torch's lock file behind, and every later load then
    waits on it forever; a lock far older than a compile takes is such a leftover."""
    now = time.time()
    for lock in extensions.glob("*/lock"):
        try:
            if now - lock.stat().st_mtime > STALE_LOCK_SECONDS:
                lock.unlink()
                reporter().warning(f"removed a stale compile lock left by an interrupted run: {lock}")
        except FileNotFoundError:
            pass


def minilm_checkpoint(models: Path) -> Path:
    """Build (once) a ColBERT checkpoint from all-MiniLM-L6-v2 with an identity projection."""
    target = models / DEFAULT_CHECKPOINT
    if (target / "artifact.metadata").is_file():
        return target
    import torch
    from safetensors.torch import load_file, save_file

    from mhindex.encoders import packaged_encoder

    source = packaged_encoder()
    staging = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    hidden = json.loads((source / "config.json").read_text())["hidden_size"]
    weights = {f"bert.{k}": v for k, v in load_file(source / "model.safetensors").items()}
    weights["linear.weight"] = torch.eye(hidden)
    save_file(weights, staging / "model.safetensors")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, staging / name)
    from colbert.infra import ColBERTConfig

    with engine_output_to(staging / "build.log"):
        ColBERTConfig(dim=hidden, model_name=str(target), checkpoint=str(target)).save_for_checkpoint(str(staging))
    os.replace(staging, target)
    return target


def _resolve_checkpoint(asked: str, home: Path) -> tuple[Path, bool]:
    if not asked or asked == DEFAULT_CHECKPOINT:
        return minilm_checkpoint(home / "models"), True
    path = Path(asked).expanduser()
    if not (path / "artifact.metadata").is_file() and not path.suffix == ".dnn":
        raise UsageError(
            f"{asked} is not a ColBERT checkpoint folder (no artifact.metadata); download "
            "colbert-ir/colbertv2.0 and pass its folder"
        )
    return path.resolve(), False


class ColbertBackend(Backend):
    name = "colbert"
    title = "ColBERTv2"
    queries = "ColBERT's query tokenizer ([Q] marker, padded with [MASK] to query_maxlen)"
    Settings = ColbertOptions
    builds_index = True
    requirements = (package("ColBERT backend", "colbert", "colbert-ai", "pip install 'mhindex[colbert]'"),)

    def build(
        self, corpus: CorpusDir, target: Path, options: ColbertOptions, context: BackendContext
    ) -> dict[str, Any]:
        _prepare(context.home, options.threads)
        checkpoint, untrained = _resolve_checkpoint(options.checkpoint, context.home)
        if untrained:
            reporter().warning(
                "no --checkpoint: using all-MiniLM-L6-v2 with an identity projection, which is not trained for "
                "late interaction"
            )
        paragraphs = corpus.paragraphs()
        try:
            texts = [f"{record['title']} | {' '.join(record['text'].split())}" for record in paragraphs]
        finally:
            paragraphs.close()
        from colbert import Indexer
        from colbert.infra import ColBERTConfig, Run, RunConfig

        log = target / "colbert.log"
        what = (
            f"indexing {len(texts):,} paragraphs with ColBERT (PLAID): encoding, k-means, encoding again "
            f"(minutes on CPU; log: {log})"
        )
        with reporter().progress(what, total=None), engine_output_to(log):
            with Run().context(
                RunConfig(nranks=1, root=str(target), experiment="colbert", avoid_fork_if_possible=True)
            ):
                config = ColBERTConfig(
                    nbits=options.nbits,
                    doc_maxlen=options.doc_maxlen,
                    query_maxlen=options.query_maxlen,
                    kmeans_niters=options.kmeans_niters,
                    root=str(target),
                )
                indexer = Indexer(checkpoint=str(checkpoint), config=config)
                indexer.index(name="plaid", collection=texts, overwrite=True)
                index_path = Path(indexer.get_index())
        return {
            "paragraphs": len(texts),
            "checkpoint": DEFAULT_CHECKPOINT if untrained else str(checkpoint),
            "untrained_checkpoint": untrained,
            "index_path": str(index_path.relative_to(target)),
        }

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: ColbertOptions,
        context: BackendContext,
    ) -> ColbertRetriever:
        return ColbertRetriever(corpus, index_dir, manifest, options, context)


class ColbertRetriever:
    def __init__(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: ColbertOptions,
        context: BackendContext,
    ) -> None:
        _prepare(context.home, options.threads)
        from colbert import Searcher
        from colbert.infra import ColBERTConfig, Run, RunConfig

        self._log = index_dir / "colbert.log"
        overrides = {
            k: getattr(options, k)
            for k in ("ncells", "centroid_score_threshold", "ndocs")
            if getattr(options, k) is not None
        }
        with engine_output_to(self._log), Run().context(RunConfig(nranks=1, avoid_fork_if_possible=True)):
            self._searcher = Searcher(
                index=str(index_dir / manifest["index_path"]),
                collection=[],
                config=ColBERTConfig(**overrides),
                verbose=0,
            )
        self._paragraphs = corpus.paragraphs()

    def _hits(self, pids: Sequence[int], scores: Sequence[float]) -> list[Hit]:
        hits = []
        for pid, score in zip(pids, scores, strict=True):
            record = self._paragraphs[int(pid)]
            hits.append(Hit(record["id"], record["title"], record["text"], float(score)))
        return hits

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        def ranked(depth: int) -> list[Hit]:
            with engine_output_to(self._log):
                pids, _, scores = self._searcher.search(query if query.strip() else ".", k=depth)
            return self._hits(pids, scores)

        if titles is None:
            return ranked(min(k, len(self._paragraphs)))
        return search_within_titles(ranked, k, titles, len(self._paragraphs))

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def close(self) -> None:
        self._paragraphs.close()
