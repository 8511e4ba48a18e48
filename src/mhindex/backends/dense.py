"""Dense retrieval (DPR-style) with FAISS, over any encoder of mhindex/encoders.py (the packaged
all-MiniLM-L6-v2 by default).

The corpus is encoded in batches into shards of `shard_size` paragraphs, kept in a work folder
beside the index until the index is complete, so an interrupted encoding of a large corpus
resumes at the first missing shard. FAISS: exact inner product by default (`flat`); `hnsw` and
`ivfpq` for large corpora (trained on a sample, built shard by shard, memory-mapped with
`--mmap`). Hits are read back from the corpus file by byte offset.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mhindex.backends.base import BackendContext, Hit, search_within_titles
from mhindex.encoders import PACKAGED_ENCODER, RUNTIME_HELP, RUNTIMES, Encoder, OnnxEncoder, make_encoder
from mhindex.errors import MhindexError, UsageError
from mhindex.files import inside
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.ui import reporter


@dataclass(frozen=True)
class DenseOptions:
    encoder: str = option(
        PACKAGED_ENCODER,
        "Dense: encoder folder or cached hub name (the packaged all-MiniLM-L6-v2 by default).",
        stage="index",
    )
    query_encoder: str | None = option(
        None, "Dense: question encoder of a DPR pair \\[default: --encoder].", stage="index"
    )
    faiss_index: str = option(
        "flat", "Dense: flat (exact), hnsw or ivfpq.", choices=("flat", "hnsw", "ivfpq"), stage="index"
    )
    hnsw_m: int = option(32, "Dense HNSW: links per node.", min=2, stage="index")
    ef_search: int = option(128, "Dense HNSW: search breadth.", min=1, stage="search")
    ivf_lists: int | None = option(None, "Dense IVF-PQ: lists \\[default: 4 sqrt(paragraphs)].", min=1, stage="index")
    pq_m: int = option(16, "Dense IVF-PQ: sub-quantizers, dividing the dimension.", min=1, stage="index")
    nprobe: int = option(16, "Dense IVF-PQ: lists probed.", min=1, stage="search")
    ivf_train: int | None = option(
        None, "Dense IVF-PQ: vectors sampled to train on \\[default: 64 per list].", min=1, stage="index"
    )
    # Off by default: measured on 500k vectors, a memory-mapped search took about 8x as long (p50 1.56 vs 0.18 ms),
    # and IVF-PQ codes are small (133 MB for 5.2M paragraphs at --pq-m 16); it is for indexes beyond memory.
    mmap: bool = option(
        False, "Dense IVF-PQ: search the index memory-mapped from disk, for indexes larger than memory.", stage="search"
    )
    encoder_runtime: str = option("onnx-int8", RUNTIME_HELP, choices=RUNTIMES, stage="index")
    batch_size: int = option(32, "Dense: paragraphs encoded per batch.", min=1, stage="both")
    shard_size: int = option(10_000, "Dense: paragraphs per resumable shard.", min=1, stage="both")
    threads: int = option(1, "Threads for encoding and search.", min=1, stage="both")
    max_length: int = 256


def recorded_runtime(options, manifest: dict[str, Any]):
    """Indexes built before the runtime was an option were encoded by torch: keep encoding queries so."""
    if "encoder_runtime" in (manifest.get("options") or {}):
        return options
    return dataclasses.replace(options, encoder_runtime="torch")


WORK_PREFIX = ".dense-work-"


def _work_dir(corpus: CorpusDir, options: DenseOptions) -> Path:
    """Where shards wait for an interrupted encoding to resume, keyed by everything that decides
    which vectors a shard holds: the corpus, the encoder and its length and runtime, the shard
    size (which paragraphs a shard covers) and the batch size (int8 activations are quantised
    per batch)."""
    shape = [
        corpus.manifest()["corpus_sha256"],
        options.encoder,
        options.max_length,
        options.encoder_runtime,
        options.shard_size,
        options.batch_size,
    ]
    key = hashlib.sha256(":".join(map(str, shape)).encode()).hexdigest()[:12]
    return corpus.indexes / f"{WORK_PREFIX}{key}"


def _faiss():
    try:
        import faiss
    except ImportError:
        raise MhindexError("the dense backend needs FAISS: pip install faiss-cpu") from None
    return faiss


def _training_sample(shards: Sequence[Path], lengths: Sequence[int], size: int, seed: int = 0):
    """`size` vectors drawn uniformly (seeded) from the shards, read through memory maps."""
    import numpy as np

    count = sum(lengths)
    chosen = np.sort(np.random.default_rng(seed).choice(count, size=min(size, count), replace=False))
    parts, start = [], 0
    for shard, length in zip(shards, lengths, strict=True):
        inside = chosen[(chosen >= start) & (chosen < start + length)] - start
        if len(inside):
            parts.append(np.asarray(np.load(shard, mmap_mode="r")[inside]))
        start += length
    return np.concatenate(parts)


def build_faiss_index(faiss, shards: Sequence[Path], dim: int, options: DenseOptions):
    """The FAISS index of the encoded shards, added one shard at a time: flat and HNSW hold every
    vector in memory by nature, but IVF-PQ never needs more than its codes, its training sample
    and one shard, so it builds corpora whose vectors do not fit in memory."""
    import numpy as np

    lengths = [len(np.load(s, mmap_mode="r")) for s in shards]  # headers only
    count = sum(lengths)
    kind = options.faiss_index
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, options.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    elif kind == "ivfpq":
        lists = options.ivf_lists or max(1, round(4 * count**0.5))
        if dim % options.pq_m:
            raise UsageError(f"--pq-m {options.pq_m} must divide the encoder's dimension {dim}")
        if count < lists:
            raise UsageError(
                f"ivfpq with {lists} lists needs at least {lists} paragraphs to train on, the corpus has "
                f"{count}; use flat or hnsw"
            )
        # 8-bit codes need 256 training points per sub-quantizer; a small corpus gets fewer bits.
        bits = max(1, min(8, int(math.log2(max(2, count)))))
        index = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, lists, options.pq_m, bits, faiss.METRIC_INNER_PRODUCT)
        # FAISS asks for at least 39 points a list (and subsamples above 256): 64 keeps k-means on
        # 5.2M paragraphs (9,121 lists, 584k points) within about 1 GB at 384 dimensions.
        index.train(_training_sample(shards, lengths, options.ivf_train or max(64 * lists, 2**bits * 40)))
    else:
        raise UsageError(f"--faiss-index must be flat, hnsw or ivfpq, not {kind!r}")
    for shard in shards:
        index.add(np.ascontiguousarray(np.load(shard, mmap_mode="r")))
    return index


def read_faiss_index(faiss, path: Path, memory_map: bool):
    """IVF-PQ (`memory_map`) stays on disk: its inverted lists are memory-mapped and a query reads
    only the lists it probes (the page cache keeps the hot ones). Flat and HNSW load into memory."""
    flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if memory_map else 0
    return faiss.read_index(str(path), flags)


class DenseBackend:
    name = "dense"
    Options = DenseOptions

    def build(self, corpus: CorpusDir, target: Path, options: DenseOptions, context: BackendContext) -> dict[str, Any]:
        faiss = _faiss()
        name = options.encoder
        encoder = make_encoder(name, options.encoder_runtime, options.max_length, options.threads, context.models)
        work = inside(context.home, _work_dir(corpus, options))
        work.mkdir(parents=True, exist_ok=True)
        paragraphs = corpus.paragraphs()
        try:
            shards, resumed = self._encode(paragraphs, encoder, work, options)
            count = len(paragraphs)
        finally:
            paragraphs.close()
        index = build_faiss_index(faiss, shards, encoder.dim, options)
        if index.ntotal != count:  # never an index that holds less than it claims
            raise MhindexError(
                f"the dense index holds {index.ntotal:,} vectors for {count:,} paragraphs; nothing was "
                "replaced: run again with --force"
            )
        faiss.write_index(index, str(target / "faiss.index"))
        for done in corpus.indexes.glob(f"{WORK_PREFIX}*"):  # this one, and any of other settings, now of no use
            shutil.rmtree(inside(context.home, done), ignore_errors=True)
        return {
            "paragraphs": index.ntotal,
            "dim": encoder.dim,
            "encoder": name,
            "pooling": encoder.pooling,
            "normalized": encoder.normalize,
            "resumed_shards": resumed,
        }

    @staticmethod
    def _encode(
        paragraphs, encoder: Encoder | OnnxEncoder, work: Path, options: DenseOptions
    ) -> tuple[list[Path], int]:
        """Encode the corpus into .npy shards of `shard_size` vectors; a shard already on disk (an
        interrupted run's) is kept. Only one shard's paragraphs are in memory at a time."""
        import numpy as np

        size = options.shard_size
        total = len(paragraphs)
        shards = [work / f"shard-{i:05d}.npy" for i in range((total + size - 1) // size)]
        resumed = sum(1 for s in shards if s.is_file())
        log = reporter()
        if resumed:
            log.info(f"resuming the encoding: {resumed} of {len(shards)} shards already done in {work}")
        with log.progress(f"encoding {total:,} paragraphs", total=total) as bar:
            for number, shard in enumerate(shards):
                positions = range(number * size, min(total, (number + 1) * size))
                if shard.is_file():
                    bar.advance(len(positions))
                    continue
                chunk = [(record["title"], record["text"]) for record in map(paragraphs.__getitem__, positions)]
                # Batches of similar length pad little: encode in length order, store in corpus order.
                order = sorted(range(len(chunk)), key=lambda i: len(chunk[i][0]) + len(chunk[i][1]))
                vectors = np.empty((len(chunk), encoder.dim), dtype=np.float32)
                batches = [
                    order[start : start + options.batch_size] for start in range(0, len(chunk), options.batch_size)
                ]

                def encoded(batch: list[int], chunk=chunk):
                    return encoder.encode([chunk[i][0] for i in batch], [chunk[i][1] for i in batch])

                with ThreadPoolExecutor(encoder.parallel) as pool:
                    for batch, batch_vectors in zip(batches, pool.map(encoded, batches), strict=True):
                        vectors[batch] = batch_vectors
                        bar.advance(len(batch))
                partial = shard.with_suffix(".partial.npy")
                np.save(partial, vectors)
                os.replace(partial, shard)
        return shards, resumed

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: DenseOptions,
        context: BackendContext,
    ) -> DenseRetriever:
        return DenseRetriever(corpus, index_dir, recorded_runtime(options, manifest), context)


class DenseRetriever:
    def __init__(self, corpus: CorpusDir, index_dir: Path, options: DenseOptions, context: BackendContext) -> None:
        faiss = _faiss()
        faiss.omp_set_num_threads(options.threads)
        self._index = read_faiss_index(
            faiss, index_dir / "faiss.index", options.mmap and options.faiss_index == "ivfpq"
        )
        if hasattr(self._index, "hnsw"):
            self._index.hnsw.efSearch = options.ef_search
        if hasattr(self._index, "nprobe"):
            self._index.nprobe = options.nprobe
        self._paragraphs = corpus.paragraphs()
        self._encoder = make_encoder(
            options.query_encoder or options.encoder,
            options.encoder_runtime,
            options.max_length,
            options.threads,
            context.models,
        )

    def _hits(self, scores, positions) -> list[Hit]:
        hits = []
        for score, position in zip(scores, positions, strict=True):
            if position < 0:
                continue
            record = self._paragraphs[int(position)]
            hits.append(Hit(record["id"], record["title"], record["text"], float(score)))
        return hits

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        vector = self._encoder.encode_queries([query])

        def ranked(depth: int) -> list[Hit]:
            scores, positions = self._index.search(vector, depth)
            return self._hits(scores[0], positions[0])

        if titles is None:
            return ranked(k)
        return search_within_titles(ranked, k, titles, self._index.ntotal)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        if not queries:
            return []
        scores, positions = self._index.search(self._encoder.encode_queries(list(queries)), k)
        return [self._hits(s, p) for s, p in zip(scores, positions, strict=True)]

    def close(self) -> None:
        self._paragraphs.close()
