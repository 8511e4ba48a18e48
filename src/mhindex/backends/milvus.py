"""Milvus: the dense backend's vectors in a Milvus collection, for corpora whose vectors outgrow one machine
(21M passages x 768 dimensions is 64 GB as float32). With --milvus-uri, a Milvus server or cluster (its token
from $MHINDEX_MILVUS_TOKEN, never on the command line); without, Milvus Lite embedded under the data root.

The vectors are the dense backend's own (the same encoder, shards and `--vectors`), inserted in corpus order
with the paragraph's position as the primary key and its title's key (lower-cased, as IRCoT compares titles) as
a field, so a search within titles is a filter expression inside Milvus, not a widening of the ranking. The
collection is named from the corpus's name, its sha256 and what decides the vectors and the index (encoder,
index type and parameters): two corpora, or two encodings of one, never share one. A build is resumable: the
rows inserted so far are recorded after each flushed shard, and a resumed build deletes any past that mark
before it goes on. Tested against a real Milvus server (the `milvus` wheel's) in tests/test_milvus.py.

`--milvus-mode bm25` holds the texts instead, searched by Milvus's own full-text BM25; `--milvus-mode vectors+bm25`
holds both in one collection, and one request searches both and fuses them inside Milvus (its RRFRanker: the same
1/(k + rank) as the hybrid backend's RRF), so one engine holds both halves of a hybrid.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mhindex.backends.base import Backend, BackendContext, Footprint, Hit, title_key
from mhindex.backends.dense import DenseEncoding
from mhindex.encoders import encoder_digest, make_encoder
from mhindex.errors import MhindexError, UsageError, one_line, redact
from mhindex.files import inside
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.requirements import package
from mhindex.ui import reporter

TOKEN_VARIABLE = "MHINDEX_MILVUS_TOKEN"
WORK_PREFIX = ".milvus-work-"
LITE_FILE = "milvus.db"
#: what --milvus-uri may start with: a server's address (a path would make pymilvus open Milvus Lite there)
SERVER_SCHEMES = ("http://", "https://", "tcp://", "grpc://")
#: Milvus's names for the index types, by the option's values.
INDEX_TYPES = {"flat": "FLAT", "hnsw": "HNSW", "ivfpq": "IVF_PQ"}
LITE_TYPES = ("flat", "hnsw")  # what Milvus Lite 3.2 builds (its IVF_PQ is "reserved for a future phase")
MODES = ("vectors", "bm25", "vectors+bm25")
#: Milvus's analyzer for BM25: its standard tokenizer, lower-cased, English stop words and stemming (Milvus Lite
#: 3.2 applies the lower-casing; recall@15 within 0.02 of Lucene's on the three samples: tests/test_milvus.py).
BM25_ANALYZER = {
    "tokenizer": "standard",
    "filter": ["lowercase", {"type": "stop", "stop_words": ["_english_"]}, {"type": "stemmer", "language": "english"}],
}
METRICS = {"vector": "IP", "sparse": "BM25"}  # by field: the vectors' inner product, the text's BM25
TEXT_BYTES = 65_535  # a VARCHAR's limit: a longer paragraph is indexed by its first 64 KB


@dataclass(frozen=True)
class MilvusOptions(DenseEncoding):
    """The dense backend's encoding (its encoder, shards and --vectors), and where and how Milvus holds them."""

    milvus_uri: str | None = option(
        None,
        f"Milvus: a server's or cluster's address (http://HOST:19530), its token from ${TOKEN_VARIABLE} "
        "\\[default: Milvus Lite, embedded in the index's folder].",
        metavar="URI",
        stage="connection",
    )
    milvus_timeout: int = option(
        30, "Milvus: seconds a request may take, its retries included.", min=1, max=3600, stage="connection"
    )
    milvus_index: str = option(
        "flat",
        "Milvus: flat (exact), hnsw or ivfpq (a server's; Milvus Lite builds flat and hnsw).",
        choices=tuple(INDEX_TYPES),
        stage="index",
    )
    hnsw_m: int = option(32, "Dense HNSW: links per node.", min=2, stage="index")
    ef_construction: int = option(100, "HNSW: candidates kept while linking a new vector.", min=2, stage="index")
    ef_search: int = option(128, "Dense HNSW: search breadth.", min=1, stage="search")
    ivf_lists: int | None = option(None, "Dense IVF-PQ: lists \\[default: 4 sqrt(paragraphs)].", min=1, stage="index")
    pq_m: int = option(16, "Dense IVF-PQ: sub-quantizers, dividing the dimension.", min=1, stage="index")
    nprobe: int = option(16, "Dense IVF-PQ: lists probed.", min=1, stage="search")
    milvus_batch: int = option(1000, "Milvus: rows per insert request.", min=1, max=100_000, stage="index")
    milvus_mode: str = option(
        "vectors",
        "Milvus: vectors (the dense encoder's), bm25 (Milvus's own full-text BM25 over title and text: Milvus Lite, "
        "or a server of 2.5 or later) or vectors+bm25 (both in one collection, fused by Milvus's RRF).",
        choices=MODES,
        stage="index",
    )
    # Milvus fixes BM25's parameters in the index when it builds it, as Elasticsearch does.
    k1: float = option(1.2, "BM25 k1.", min=0, stage="index")
    b: float = option(0.75, "BM25 b.", min=0, max=1, stage="index")
    # --milvus-mode vectors+bm25: Milvus fuses the two rankings itself (its RRFRanker), as the hybrid backend would.
    rrf_k: int = option(
        60, "Milvus vectors+bm25: RRF's k: a paragraph scores 1/(k + rank) in each ranking.", min=1, stage="search"
    )
    fusion_depth: int = option(
        100, "Milvus vectors+bm25: candidates asked of each half (at least k).", min=1, stage="search"
    )


class MilvusError(MhindexError):
    pass


def _pymilvus() -> Any:
    # gRPC's fork handlers run in every child this process forks with a preexec_fn (Lucene's JVM, processes.py)
    # once Milvus Lite's in-process server has run: one such child died in them ("Epoll1Poller ... epoll_wait
    # error: Bad file descriptor") before Java started. mhindex's children never speak gRPC: the handlers go.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    try:
        import pymilvus
    except ImportError:
        raise MilvusError("the milvus backend needs its client: pip install 'mhindex[milvus]'") from None
    return pymilvus


def collection_name(corpus: CorpusDir, options: MilvusOptions) -> str:
    """The corpus's name (as Milvus allows names: letters, digits, underscores) and a key of its sha256 and of
    what decides the vectors and the index built on them."""
    shape = [
        corpus.manifest()["corpus_sha256"],
        options.encoder,
        options.query_encoder,
        options.encoder_runtime,
        options.max_length,
        options.vectors,
        *(index_params(options, 0).get("vector", {}).items()),
        *((options.milvus_mode, options.k1, options.b) if options.milvus_mode != "vectors" else ()),
    ]
    key = hashlib.sha256(json.dumps(shape, default=str).encode()).hexdigest()[:16]
    return f"mhindex_{re.sub(r'[^0-9A-Za-z_]', '_', corpus.name)[:180]}_{key}"


def index_params(options: MilvusOptions, paragraphs: int) -> dict[str, dict[str, Any]]:
    """By field searched (`vector`, `sparse`: BM25's), Milvus's index type and build parameters, as recorded in the
    manifest and keyed into the collection (with `paragraphs` 0, IVF-PQ's lists as given: its default follows the
    corpus, whose sha256 the key holds)."""
    found = {}
    if options.milvus_mode != "bm25":
        found["vector"] = _vector_index(options, paragraphs)
    if options.milvus_mode != "vectors":
        found["sparse"] = {"index_type": "SPARSE_INVERTED_INDEX", "bm25_k1": options.k1, "bm25_b": options.b}
    return found


def _vector_index(options: MilvusOptions, paragraphs: int) -> dict[str, Any]:
    kind = INDEX_TYPES[options.milvus_index]
    if kind == "HNSW":
        return {"index_type": kind, "M": options.hnsw_m, "efConstruction": options.ef_construction}
    if kind == "IVF_PQ":
        lists = options.ivf_lists or (max(1, round(4 * paragraphs**0.5)) if paragraphs else None)
        return {"index_type": kind, "nlist": lists, "m": options.pq_m, "nbits": 8}
    return {"index_type": kind}


def connect(options: MilvusOptions, lite: Path | None) -> Any:
    """A MilvusClient: the server at --milvus-uri (its token from the environment), else Milvus Lite in `lite`."""
    if options.milvus_uri is not None and not options.milvus_uri.startswith(SERVER_SCHEMES):
        # a path here is Milvus Lite's database, which pymilvus would create (and later delete) wherever it points
        raise UsageError(
            f"--milvus-uri takes a Milvus server's address (http://HOST:19530), not {redact(options.milvus_uri)!r}: "
            "Milvus Lite keeps its database in the index's own folder (leave --milvus-uri out)"
        )
    pymilvus = _pymilvus()
    uri = options.milvus_uri or (str(lite) if lite else None)
    if uri is None:
        raise UsageError("the milvus backend needs --milvus-uri, or an index built with Milvus Lite")
    token = os.environ.get(TOKEN_VARIABLE, "") if options.milvus_uri else ""
    import logging

    # pymilvus logs each failed call at ERROR, a traceback's worth of lines, before raising: the error is said once,
    # in one line, by the caller. Milvus Lite serves in this process: its gRPC server logs the calls it does not
    # implement (AllocTimestamp, which the client then does without) as tracebacks.
    # Milvus Lite's server manager logs a database it cannot open (another process's lock, damage) with a traceback.
    quiet = ("pymilvus", "milvus_lite")
    for name in ["grpc._server", "milvus_lite", *(n for n in logging.root.manager.loggerDict if n.startswith(quiet))]:
        logging.getLogger(name).setLevel(logging.CRITICAL)  # pymilvus sets its modules' loggers' levels itself
    try:
        return pymilvus.MilvusClient(uri=uri, token=token, timeout=options.milvus_timeout)
    except Exception as error:  # noqa: BLE001 - pymilvus raises its own and grpc's: one line either way
        if not options.milvus_uri:  # Milvus Lite's own file: held by another process (a server of it), or damaged
            raise MilvusError(
                f"Milvus Lite could not open this index's database {uri} ({one_line(error)}): another process may "
                "hold it (an `mhindex serve` of this index: stop it, or ask it), or it is damaged (build the index "
                "again with --force)"
            ) from None
        raise MilvusError(redact(f"cannot reach Milvus at {uri}: {one_line(error)}", [token])) from None


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def local_server(folder: Path) -> Iterator[str]:
    """Milvus's own server, from PyPI's `milvus` wheel (2.3.5: the gRPC protocol of a Milvus cluster), with its
    files under `folder`, on free loopback ports; yields its address (for --milvus-uri) and stops it, its
    processes and all, on the way out, a failure's too. For the tests and benchmarks, and to try a server here.

    Milvus's embedded etcd keeps its peer port at 2380, which its template does not name: two servers on one
    machine would meet there, so an etcd configuration file gives it a free one too (`etcd.config.path`, which
    Milvus reads when etcd is embedded)."""
    try:
        from milvus import MilvusServer
    except ImportError:
        raise MilvusError("a local Milvus server needs the milvus wheel: pip install 'mhindex[milvus]'") from None
    server = MilvusServer()
    server.set_base_dir(str(folder))
    # Every port from the system's free ones: the wheel's own choice (the first free above each default) races
    # when two servers start at once, and both take the same.
    for key in [k for k in server.config.configurable_items if k.endswith("_port")]:
        server.config.set(key, _free_port())
    server.webservice_port = _free_port()  # its health and metrics (9091 and up by default)
    client, peer = int(server.config.get("etcd_port")), _free_port()
    etcd = folder / "etcd.yaml"
    etcd.write_text(
        f"listen-peer-urls: http://127.0.0.1:{peer}\ninitial-advertise-peer-urls: http://127.0.0.1:{peer}\n"
        f"listen-client-urls: http://127.0.0.1:{client}\nadvertise-client-urls: http://127.0.0.1:{client}\n"
        f"initial-cluster: default=http://127.0.0.1:{peer}\n"
    )
    write_config, embedded = server.config.write_config, "  use:\n    embed: true"

    def with_etcd_config() -> None:
        write_config()
        path = folder / "configs" / "milvus.yaml"
        text = path.read_text()
        if embedded not in text:
            raise MilvusError(f"{path}: the milvus wheel's configuration has no embedded etcd to give a port")
        path.write_text(text.replace(embedded, f"  config:\n    path: {etcd}\n{embedded}", 1))

    server.config.write_config = with_etcd_config
    try:
        server.start()
        yield f"http://127.0.0.1:{server.listen_port}"
    finally:
        process = getattr(server, "server_proc", None)
        server.stop()
        # Milvus 2.3's binary keeps a server_id_<pid> file in /tmp/milvus, whatever its run folder is set to:
        # this server's own is removed with it (nothing else there is touched).
        if process is not None:
            Path("/tmp/milvus", f"server_id_{process.pid}").unlink(missing_ok=True)


def disconnect(client: Any, lite: Path | None) -> None:
    """Close the client, and stop Milvus Lite's in-process server of `lite`: until then it holds the database's
    lock, and the index could not be opened again in this process (a build, then a search, from Python)."""
    client.close()
    if lite is not None:
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(str(lite))


def _schema(pymilvus: Any, dim: int | None, text: bool) -> Any:
    """The collection's fields: the paragraph's position (its key) and title key; its vector (`dim`); its text
    with Milvus's BM25 function making the sparse vector Milvus searches (`text`); or both (a hybrid)."""
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("position", pymilvus.DataType.INT64, is_primary=True)
    schema.add_field("title_key", pymilvus.DataType.VARCHAR, max_length=65_535)
    if dim is not None:
        schema.add_field("vector", pymilvus.DataType.FLOAT_VECTOR, dim=dim)
    if not text:
        return schema
    schema.add_field("text", pymilvus.DataType.VARCHAR, max_length=TEXT_BYTES, enable_analyzer=True,
                     analyzer_params=BM25_ANALYZER)  # fmt: skip
    schema.add_field("sparse", pymilvus.DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(pymilvus.Function(name="bm25", function_type=pymilvus.FunctionType.BM25,
                                          input_field_names=["text"], output_field_names=["sparse"]))  # fmt: skip
    return schema


@dataclass
class _Rows:
    """What a build loads, a chunk (a shard's worth) at a time: the chunks' lengths, a chunk's rows from `start`
    to `stop`, the collection's vector dimension (None: no vectors) and whether the rows hold BM25's text."""

    lengths: list[int]
    rows: Any  # (chunk number, start, stop) -> list of row dicts
    dim: int | None
    text: bool = False


def _bm25_text(record: dict[str, Any]) -> str:
    return f"{record['title']} {record['text']}".encode()[:TEXT_BYTES].decode(errors="ignore")


def _vector_rows(vectors: Any, paragraphs: Any, text: bool = False) -> _Rows:
    """The vectors' rows, each with its paragraph's text for BM25 too where `text` (a hybrid)."""
    import numpy as np

    firsts = [0, *itertools.accumulate(vectors.lengths)]
    held: dict[int, Any] = {}

    def rows(number: int, start: int, stop: int) -> list[dict[str, Any]]:
        chunk = held[number] if number in held else held.setdefault(number, vectors.chunk(number))
        held.pop(number - 1, None)
        at = firsts[number]
        if not np.isfinite(chunk[start:stop]).all():
            raise MilvusError(f"a vector of paragraphs {at + start:,} to {at + stop - 1:,} is NaN or infinite")
        return [{"position": at + i, "title_key": title_key(paragraphs[at + i]["title"]), "vector": chunk[i].tolist(),
                 **({"text": _bm25_text(paragraphs[at + i])} if text else {})} for i in range(start, stop)]  # fmt: skip

    return _Rows(vectors.lengths, rows, vectors.dim, text)


def _text_rows(paragraphs: Any, shard: int) -> _Rows:
    total = len(paragraphs)
    lengths = [min(shard, total - first) for first in range(0, total, shard)]

    def rows(number: int, start: int, stop: int) -> list[dict[str, Any]]:
        found = []
        for position in range(number * shard + start, number * shard + stop):
            record = paragraphs[position]
            found.append({"position": position, "title_key": title_key(record["title"]), "text": _bm25_text(record)})
        return found

    return _Rows(lengths, rows, None, True)


def _progress(work: Path) -> int:
    """The rows a build inserted and flushed so far (0 for a new build)."""
    try:
        return int((work / "inserted").read_text())
    except (OSError, ValueError):
        return 0


class MilvusBackend(Backend):
    name = "milvus"
    title = "dense (Milvus)"
    queries = (
        "vectors: the query encoder's tokenizer, no instruction prefix, truncated at max_length; bm25: Milvus's "
        "standard tokenizer, lower-cased (its analyzer's stop words and stemmer as the server applies them); "
        "vectors+bm25: both"
    )
    Settings = MilvusOptions
    batches = True
    builds_index = True
    requirements = (
        package("milvus backend", "pymilvus", "pymilvus", "pip install 'mhindex[milvus]'"),
        package("Milvus server (tests, a local server)", "milvus", "milvus", "pip install 'mhindex[milvus]'"),
    )

    def footprint(self, paragraphs: int, corpus_bytes: int, options: MilvusOptions) -> Footprint | None:
        # Counted: this process holds the encoder's runtime and one shard of vectors at a time (the index lives
        # in Milvus); on disk, the encoded shards until the load is done, and with Milvus Lite its database.
        from mhindex.backends.dense import ASSUMED_DIMENSION, ENCODER_RUNTIME, ONNX_EXPORT_DISK, encoder_dimension

        if options.milvus_mode == "bm25":  # a shard of texts at a time here; Milvus Lite's inverted index on disk
            lite = 0 if options.milvus_uri else 2 * corpus_bytes
            return Footprint(int(200 * 2**20 + corpus_bytes / max(paragraphs, 1) * options.shard_size * 4), lite,
                             "the paragraphs' texts sent a shard at a time; with Milvus Lite, its index on disk "
                             "(about twice the corpus)")  # fmt: skip
        dim = options.vectors_dim or encoder_dimension(options.encoder) or ASSUMED_DIMENSION
        vectors = paragraphs * dim * 4
        shards = 0 if options.vectors else vectors
        lite = 0 if options.milvus_uri else vectors + paragraphs * (options.hnsw_m * 8 + 64)
        text = 0 if options.milvus_mode == "vectors" or options.milvus_uri else 2 * corpus_bytes
        export = ONNX_EXPORT_DISK if options.encoder_runtime == "onnx-int8" and not options.vectors else 0
        where = "the server's" if options.milvus_uri else "Milvus Lite's database in the index folder"
        return Footprint(
            int(ENCODER_RUNTIME + min(paragraphs, options.shard_size) * dim * 4), int(shards + lite + text + export),
            f"{dim}-dimensional float32 vectors encoded to disk a shard at a time, then loaded into {where}"
            f"{' with the texts for BM25' if text else ''}; the encoder's runtime about "
            f"{ENCODER_RUNTIME / 2**30:.1f} GB (the server's own memory is not counted)",
        )  # fmt: skip

    def build(self, corpus: CorpusDir, target: Path, options: MilvusOptions, context: BackendContext) -> dict[str, Any]:
        if not options.milvus_uri and options.milvus_index not in LITE_TYPES:
            raise UsageError(
                f"--milvus-index {options.milvus_index} needs a Milvus server (--milvus-uri): Milvus Lite builds "
                f"{' and '.join(LITE_TYPES)}"
            )
        name = collection_name(corpus, options)
        work = inside(context.home, corpus.indexes / f"{WORK_PREFIX}{name.rsplit('_', 1)[-1]}")
        work.mkdir(parents=True, exist_ok=True)
        dense = options.milvus_mode != "bm25"
        vectors, encoder = _vectors(corpus, options, context, work) if dense else (None, None)
        lite = None if options.milvus_uri else work / LITE_FILE
        client, paragraphs = connect(options, lite), corpus.paragraphs()
        try:
            hybrid = options.milvus_mode == "vectors+bm25"
            rows = _vector_rows(vectors, paragraphs, hybrid) if dense else _text_rows(paragraphs, options.shard_size)
            params = index_params(options, sum(rows.lengths))
            _load(client, name, rows, options, work, params)
        except MhindexError:
            raise
        except Exception as error:  # noqa: BLE001 - a server gone or refusing mid-load: one line, and it resumes
            where = redact(options.milvus_uri, []) if options.milvus_uri else "Milvus Lite"
            raise MilvusError(
                f"loading {name} into {where}: {one_line(error)}; the same command goes on from the last shard in"
            ) from None
        finally:
            paragraphs.close()
            disconnect(client, lite)
        if not options.milvus_uri:  # the embedded database moves into the index's folder with its manifest
            shutil.move(str(work / LITE_FILE), str(target / LITE_FILE))
        shutil.rmtree(work, ignore_errors=True)
        made: dict[str, Any] = {"analyzer": BM25_ANALYZER} if rows.text else {}
        if encoder is not None:
            digest = encoder_digest(options.encoder, context.cache)
            made |= {"dim": encoder.dim, "encoder": options.encoder, "encoder_sha256": digest,
                     "pooling": encoder.pooling, "normalized": encoder.normalize}  # fmt: skip
        server = redact(options.milvus_uri, []) if options.milvus_uri else None
        return {"paragraphs": sum(rows.lengths), "collection": name, "server": server, "mode": options.milvus_mode,
                "indexes": params, **made}  # fmt: skip

    def open(
        self, corpus: CorpusDir, index_dir: Path, manifest: dict[str, Any], options: MilvusOptions,
        context: BackendContext,
    ) -> MilvusRetriever:  # fmt: skip
        if bool(manifest.get("server")) != bool(options.milvus_uri):
            where = f"on the Milvus server {manifest['server']}" if manifest.get("server") else "in Milvus Lite"
            raise UsageError(
                f"the milvus index of '{corpus.name}' was built {where}: "
                + (f"pass --milvus-uri {manifest['server']}" if manifest.get("server") else "leave out --milvus-uri")
            )
        lite = None if options.milvus_uri else index_dir / LITE_FILE
        client = connect(options, lite)
        try:
            return MilvusRetriever(corpus, client, manifest, options, context, lite)
        except BaseException:
            disconnect(client, lite)
            raise


def _vectors(corpus: CorpusDir, options: MilvusOptions, context: BackendContext, work: Path) -> tuple[Any, Any]:
    """The corpus's vectors in corpus order (encoded into resumable shards, or `--vectors`), and the encoder."""
    from mhindex.backends.dense import DenseBackend, Vectors, given_vectors

    encoder = make_encoder(options.encoder, options.encoder_runtime, options.max_length, options.threads,
                           context.models)  # fmt: skip
    if options.vectors:
        return given_vectors(corpus, options, encoder.dim), encoder
    paragraphs = corpus.paragraphs()
    try:
        shards, _ = DenseBackend._encode(paragraphs, encoder, work, options)
    finally:
        paragraphs.close()
    return Vectors.of_shards(shards, encoder.dim), encoder


def _load(
    client: Any, name: str, rows: _Rows, options: MilvusOptions, work: Path, params: dict[str, dict[str, Any]]
) -> None:
    """Insert the vectors into a staging collection from where the last build stopped (its rows past the last mark
    deleted), index it, then put it in the place of the collection of that name, if any: searches of the index
    being replaced never see a half-loaded collection."""
    pymilvus, staging = _pymilvus(), f"{name}_staging"
    done = _progress(work) if client.has_collection(staging) else 0
    if not done:
        if client.has_collection(staging):
            client.drop_collection(staging)
        client.create_collection(staging, schema=_schema(pymilvus, rows.dim, rows.text), consistency_level="Strong")
    else:  # rows inserted after the last mark are at most one shard's; by key, as an unloaded collection allows
        client.delete(staging, ids=list(range(done, done + max(rows.lengths))))
        reporter().info(f"resuming the Milvus load of {name}: {done:,} rows already in")
    _insert(client, staging, rows, options, work, done)
    index = client.prepare_index_params()
    for field, built in params.items():
        index.add_index(field_name=field, index_type=built["index_type"], metric_type=METRICS[field],
                        params={k: v for k, v in built.items() if k != "index_type"})  # fmt: skip
    client.create_index(staging, index)
    if client.has_collection(name):
        client.drop_collection(name)
    client.rename_collection(staging, name)
    client.load_collection(name)


def _insert(client: Any, staging: str, rows: _Rows, options: MilvusOptions, work: Path, done: int) -> None:
    """The rows from row `done` on, `milvus_batch` a request, flushed and the rows in recorded after each shard."""
    from mhindex.files import atomic_file

    total, first = sum(rows.lengths), 0
    what = "vectors" if rows.dim else "paragraphs"
    with reporter().progress(f"loading {total:,} {what} into Milvus", total=total) as bar:
        bar.advance(min(done, total))
        for number, length in enumerate(rows.lengths):
            for start in range(max(0, done - first), length, options.milvus_batch):
                stop = min(length, start + options.milvus_batch)
                client.insert(staging, rows.rows(number, start, stop))
                bar.advance(stop - start)
            first += length
            # A flush seals a segment: one a shard (--shard-size rows), not one a request, keeps them few.
            client.flush(staging)
            with atomic_file(work / "inserted", "w") as handle:
                handle.write(str(first))


def built_indexes(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The manifest's indexes by field; an index built before hybrids recorded one index's parameters flat."""
    if "indexes" in manifest:
        return dict(manifest["indexes"])
    kind = manifest.get("index_type", "FLAT")
    return {"sparse" if kind == "SPARSE_INVERTED_INDEX" else "vector": {"index_type": kind}}


class MilvusRetriever:
    """Searches the collection's vectors, its BM25, or both at once with Milvus fusing the two rankings (RRF, rank
    counted from 1 as the hybrid backend's fusion counts it) in one request."""

    def __init__(
        self, corpus: CorpusDir, client: Any, manifest: dict[str, Any], options: MilvusOptions, context: BackendContext,
        lite: Path | None = None,
    ) -> None:  # fmt: skip
        self._client, self._name, self._timeout = client, manifest["collection"], options.milvus_timeout
        self._lite, self._options = lite, options
        self._where = manifest.get("server") or "Milvus Lite"
        self._fields = built_indexes(manifest)
        kind = self._fields.get("vector", {}).get("index_type", "FLAT")
        self._params = {"HNSW": {"ef": options.ef_search}, "IVF_PQ": {"nprobe": options.nprobe}}.get(kind, {})
        try:
            client.load_collection(self._name, timeout=self._timeout)
        except Exception as error:  # noqa: BLE001 - a collection gone from the server: one line
            if lite is not None:  # Milvus Lite opened its file but cannot read the collection in it
                raise MilvusError(
                    f"Milvus Lite could not open this index's database {lite} (its collection {self._name}: "
                    f"{one_line(error)}): it is damaged; build the index again with --force"
                ) from None
            raise MilvusError(f"the Milvus collection {self._name} at {self._where}: {one_line(error)}") from None
        self._paragraphs = corpus.paragraphs()
        self._encoder = None if "vector" not in self._fields else make_encoder(
            options.query_encoder or options.encoder, options.encoder_runtime, options.max_length, options.threads,
            context.models)  # fmt: skip

    def _data(self, field: str, queries: list[str]) -> list[Any]:
        """What Milvus searches a field with: the texts themselves for BM25 (Milvus analyses them), else vectors."""
        if field == "sparse" or self._encoder is None:
            return list(queries)
        return [v.tolist() for v in self._encoder.encode_queries(queries)]

    def _search(self, queries: list[str], k: int, titles: Sequence[str] | None = None) -> list[list[Hit]]:
        # Milvus's string literals escape as JSON's do (a quote, a backslash); other characters go as they are.
        keys = json.dumps(sorted({title_key(t) for t in titles or ()}), ensure_ascii=False)
        where = f"title_key in {keys}" if titles is not None else ""
        asked = {field: (self._data(field, queries), {"metric_type": METRICS[field],
                 "params": self._params if field == "vector" else {}}) for field in self._fields}  # fmt: skip
        # The collection no longer changes once built: "Strong" would wait out Milvus's 200 ms time tick.
        common = {"output_fields": ["title_key"], "timeout": self._timeout, "consistency_level": "Eventually"}
        try:
            if len(asked) == 1:
                [(field, (data, params))] = asked.items()
                found = self._client.search(self._name, data=data, limit=k, filter=where, anns_field=field,
                                            search_params=params, **common)  # fmt: skip
            else:
                ranker = _pymilvus().RRFRanker(self._options.rrf_k)
                found = self._client.hybrid_search(self._name, self._requests(asked, k, where), limit=k,
                                                   ranker=ranker, **common)  # fmt: skip
        except Exception as error:  # noqa: BLE001 - a server gone, a timeout: one line, not a traceback
            raise MilvusError(f"searching {self._name} at {self._where}: {one_line(error)}") from None
        return [[self._hit(hit) for hit in hits] for hits in found]

    def _requests(self, asked: dict[str, tuple[list[Any], dict[str, Any]]], k: int, where: str) -> list[Any]:
        depth = max(k, self._options.fusion_depth)
        return [_pymilvus().AnnSearchRequest(data, field, params, limit=depth, expr=where or None)
                for field, (data, params) in asked.items()]  # fmt: skip

    def _hit(self, hit: dict[str, Any]) -> Hit:
        record = self._paragraphs[int(hit.get("id", hit.get("position", -1)))]  # Milvus Lite names it by its field
        return Hit(record["id"], record["title"], record["text"], float(hit["distance"]))

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        if titles is not None and not titles:
            return []
        return self._search([query], k, titles)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return self._search(list(queries), k) if queries else []

    def close(self) -> None:
        self._paragraphs.close()
        disconnect(self._client, self._lite)
