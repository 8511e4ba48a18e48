"""BM25 on Elasticsearch, for corpora and query loads beyond one machine.

The mapping is IRCoT's: `title` and `paragraph_text` analysed with the `english` analyzer
(plus `title.raw`, a keyword, for restricting a search to pages). A rebuild indexes into a new
physical index and then moves the alias `mhindex-<corpus>` to it in one atomic call, so users
never query a half-built index. Bulk indexing streams the corpus in batches (bounded memory)
and retries 429 and 5xx answers with back-off.

Connection: `--es-url`/`MHINDEX_ES_URL`, `--es-api-key`/`MHINDEX_ES_API_KEY`, or
`MHINDEX_ES_USER` + `MHINDEX_ES_PASSWORD`, and `--es-ca-file`/`MHINDEX_ES_CA_FILE`.
Credentials are never written to the index manifest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mhindex.backends.base import BackendContext, Hit
from mhindex.errors import MhindexError
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.ui import reporter


@dataclass(frozen=True)
class ElasticsearchOptions:
    es_url: str | None = option(None, "Elasticsearch URL \\[env MHINDEX_ES_URL, default http://localhost:9200].", stage="connection")
    es_api_key: str | None = option(None, "Elasticsearch API key \\[env MHINDEX_ES_API_KEY; or MHINDEX_ES_USER and MHINDEX_ES_PASSWORD].", stage="connection")
    es_ca_file: str | None = option(None, "CA certificate for Elasticsearch over TLS \\[env MHINDEX_ES_CA_FILE].", stage="connection")
    shards: int = option(1, "Elasticsearch: primary shards.", min=1, stage="index")
    replicas: int = option(0, "Elasticsearch: replicas.", min=0, stage="index")
    # Elasticsearch fixes BM25's parameters in the index's settings when it creates the index.
    k1: float = option(1.2, "BM25 k1.", min=0, stage="index")
    b: float = option(0.75, "BM25 b.", min=0, max=1, stage="index")
    es_batch: int = option(1000, "Elasticsearch: documents per bulk request.", min=1, stage="index")
    timeout: int = 60
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


def client(options: ElasticsearchOptions):
    from mhindex.http import RETRY_STATUS  # here, not at the top: the CLI reads this module's options at start-up

    try:
        from elasticsearch import Elasticsearch
    except ImportError:
        raise ElasticsearchError("the elasticsearch backend needs its client: pip install 'mhindex[elasticsearch]'") from None
    settings = connection_settings(options)
    kwargs: dict[str, Any] = {
        "request_timeout": settings["timeout"],
        "max_retries": 5,
        "retry_on_status": RETRY_STATUS,
        "retry_on_timeout": True,
    }
    if settings["api_key"]:
        kwargs["api_key"] = settings["api_key"]
    elif settings["username"]:
        kwargs["basic_auth"] = (settings["username"], settings["password"] or "")
    if settings["ca_file"]:
        kwargs["ca_certs"] = settings["ca_file"]
    return Elasticsearch(settings["url"], **kwargs)


def index_body(options: ElasticsearchOptions) -> dict[str, Any]:
    """Settings and mappings of a new physical index (IRCoT's analyzers, BM25 with our k1 and b)."""
    return {
        "settings": {
            "number_of_shards": options.shards,
            "number_of_replicas": options.replicas,
            "similarity": {"default": {"type": "BM25", "k1": float(options.k1), "b": float(options.b)}},
        },
        "mappings": {
            "properties": {
                "id": {"type": "keyword"},
                "title": {"type": "text", "analyzer": "english", "fields": {"raw": {"type": "keyword"}}},
                "paragraph_text": {"type": "text", "analyzer": "english"},
            }
        },
    }


def query_body(query: str, k: int, titles: Sequence[str] | None = None) -> dict[str, Any]:
    """`match` queries analyse text and never parse syntax, so any query string is safe."""
    body: dict[str, Any] = {
        "size": k,
        "_source": ["id", "title", "paragraph_text"],
        "query": {
            "bool": {
                "should": [{"match": {"paragraph_text": query}}, {"match": {"title": query}}],
                "minimum_should_match": 1,
            }
        },
    }
    if titles is not None:
        body["query"]["bool"]["filter"] = [{"terms": {"title.raw": list(titles)}}]
    return body


def alias_name(corpus: str) -> str:
    return f"mhindex-{corpus.lower()}"


def _actions(corpus_file: Path, index: str, bar) -> Iterator[dict]:
    with open(corpus_file, "rb") as source:
        for line in source:
            bar.advance(len(line))
            record = orjson.loads(line)
            yield {
                "_op_type": "index",
                "_index": index,
                "_id": record["id"],
                "_source": {"id": record["id"], "title": record["title"], "paragraph_text": record["text"]},
            }


def _unreachable(error: Exception, options: ElasticsearchOptions) -> ElasticsearchError:
    url = connection_settings(options)["url"]
    return ElasticsearchError(f"cannot reach Elasticsearch at {url} ({type(error).__name__}); start it or pass --es-url / set MHINDEX_ES_URL")


class ElasticsearchBackend:
    name = "elasticsearch"
    Options = ElasticsearchOptions

    def build(self, corpus: CorpusDir, target: Path, options: ElasticsearchOptions, context: BackendContext) -> dict[str, Any]:
        from elastic_transport import ConnectionError as TransportConnectionError
        from elasticsearch import ApiError
        from elasticsearch.helpers import streaming_bulk

        es = client(options)
        corpus_file = corpus.corpus
        alias = options.alias or alias_name(corpus.name)
        physical = f"{alias}-{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}"
        count = 0
        try:
            es.indices.create(index=physical, **index_body(options))
            try:
                with reporter().progress(f"indexing into {physical}", total=corpus_file.stat().st_size, unit="bytes") as bar:
                    for _ok, _item in streaming_bulk(
                        es,
                        _actions(corpus_file, physical, bar),
                        chunk_size=options.es_batch,
                        max_retries=5,
                        initial_backoff=2,
                        max_backoff=60,
                        raise_on_error=True,
                    ):
                        count += 1
                es.indices.refresh(index=physical)
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
            raise ElasticsearchError(f"Elasticsearch refused the request: {error.message} ({error.meta.status})") from None
        return {"paragraphs": count, "alias": alias, "physical_index": physical, "url": connection_settings(options)["url"]}

    def open(self, corpus: CorpusDir, index_dir: Path, manifest: dict[str, Any], options: ElasticsearchOptions, context: BackendContext) -> ElasticsearchRetriever:
        return ElasticsearchRetriever(client(options), manifest["alias"], options)


class ElasticsearchRetriever:
    def __init__(self, es, alias: str, options: ElasticsearchOptions) -> None:
        self._es = es
        self._alias = alias
        self._options = options

    @staticmethod
    def _hits(response) -> list[Hit]:
        hits = []
        for hit in response["hits"]["hits"]:
            source = hit["_source"]
            hits.append(Hit(source["id"], source["title"], source["paragraph_text"], float(hit["_score"] or 0.0)))
        return hits

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        from elastic_transport import ConnectionError as TransportConnectionError

        if titles is not None and not titles:
            return []
        try:
            return self._hits(self._es.search(index=self._alias, **query_body(query, k, titles)))
        except TransportConnectionError as error:
            raise _unreachable(error, self._options) from None

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        from elastic_transport import ConnectionError as TransportConnectionError

        if not queries:
            return []
        searches: list[dict] = []
        for query in queries:
            searches += [{"index": self._alias}, query_body(query, k)]
        try:
            responses = self._es.msearch(searches=searches)["responses"]
        except TransportConnectionError as error:
            raise _unreachable(error, self._options) from None
        for response in responses:
            if "error" in response:
                raise ElasticsearchError(f"Elasticsearch search failed: {response['error']}")
        return [self._hits(r) for r in responses]

    def close(self) -> None:
        self._es.close()
