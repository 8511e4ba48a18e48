"""An index served elsewhere: `mhindex serve` on another machine, or a retrieval server that
other projects run (IRCoT's, ColBERT's, Search-R1's), searched over HTTP.

`--backend http://HOST:PORT` is this backend at that address (`--remote-protocol` says what the
server speaks; mhindex's own by default). Nothing is built or recorded here: the index is
wherever it is served. Calls go through mhindex's one HTTP layer (retries, one-line errors).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mhindex.backends.base import Backend, BackendContext, Hit, search_within_titles
from mhindex.errors import MhindexError, UsageError
from mhindex.home import CorpusDir, ParagraphReader
from mhindex.options import option

PROTOCOLS = ("mhindex", "ircot", "colbert", "search-r1")
BATCH = 64  # queries per batch request: well under a server's limit (mhindex serve allows 4,096)


class RemoteIndexError(MhindexError):
    """The served index could not answer: not running, refused, or an answer of the wrong shape."""


@dataclass(frozen=True)
class RemoteOptions:
    remote_url: str | None = option(
        None, "remote: the server, http://HOST:PORT (--backend http://HOST:PORT says the same).", stage="connection"
    )
    remote_protocol: str = option(
        "mhindex",
        "remote: what the server speaks: mhindex, ircot, colbert or search-r1.",
        choices=PROTOCOLS,
        stage="connection",
    )
    remote_api_key: str | None = option(
        None, "remote: the server's API key \\[default: $MHINDEX_REMOTE_API_KEY].", stage="connection"
    )
    remote_corpus: str | None = option(
        None,
        "remote: the corpus name the server knows (IRCoT's corpus_name) \\[default: the corpus named here].",
        stage="connection",
    )


class RemoteBackend(Backend):
    name = "remote"
    title = "a served index"
    queries = "as the server reads them (its /info fingerprint)"
    Settings = RemoteOptions
    builds_index = False
    #: `--backend http://HOST:PORT` is this backend, the address given as this option
    addresses = ("http://", "https://")
    address_option = "remote_url"

    def build(self, corpus: CorpusDir, target: Path, options: RemoteOptions, context: BackendContext) -> dict[str, Any]:
        raise UsageError(
            "a remote index is built where it is served (there: mhindex index NAME, then mhindex serve NAME)"
        )

    def connect(self, corpus: CorpusDir | None, options: RemoteOptions, context: BackendContext) -> RemoteRetriever:
        if not options.remote_url or not options.remote_url.startswith(("http://", "https://")):
            raise UsageError("the remote backend needs the server's address: --backend http://HOST:PORT")
        key = options.remote_api_key or os.environ.get("MHINDEX_REMOTE_API_KEY")
        local = corpus if corpus is not None and corpus.exists() else None
        return RemoteRetriever(
            options.remote_url,
            options.remote_protocol,
            key,
            options.remote_corpus or getattr(corpus, "name", None) or "",
            local,
        )


T = TypeVar("T")


class RemoteRetriever:
    def __init__(
        self, url: str, protocol: str, api_key: str | None, corpus_name: str = "", corpus: CorpusDir | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.protocol = protocol
        self.corpus_name = corpus_name
        # ColBERT names a passage by its line (`pid`): the local copy of the corpus, if there is
        # one, gives the paragraph id of a line whose text is the served one.
        self._corpus = corpus
        self._lines: ParagraphReader | None = None
        self._opening = threading.Lock()
        from mhindex import http  # here, not at the top: the CLI reads this module's options at start-up

        self._http = http
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = http.client(self.url, timeout=60, retries=3, headers=headers)

    def _call(self, method: str, path: str, **request: Any) -> Any:
        http = self._http
        with http.one_line_errors("the index server", self.url + path, RemoteIndexError, 4):
            response = self._client.request(method, path, **request)
            response.raise_for_status()
        try:
            return response.json()
        except ValueError:
            raise RemoteIndexError(
                f"the index server at {self.url + path} answered with something that is not JSON: "
                f"{http.brief(response.text)}"
            ) from None

    def _shape(self, path: str, reply: Any, read: Callable[[Any], T]) -> T:
        """`read(reply)`, or one line saying the answer has another protocol's shape."""
        try:
            return read(reply)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise RemoteIndexError(
                f"the index server at {self.url + path} answered in another shape than {self.protocol}'s "
                f"({type(error).__name__}: {error})"
            ) from None

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        if self.protocol == "mhindex":
            reply = self._call(
                "POST",
                "/search",
                json={"query": query, "k": k, **({"titles": list(titles)} if titles is not None else {})},
            )
            return self._shape(
                "/search",
                reply,
                lambda reply: [Hit(h["id"], h["title"], h["text"], float(h["score"])) for h in reply["hits"]],
            )
        if self.protocol == "ircot":
            body = {
                "retrieval_method": "retrieve_from_elasticsearch",
                "query_text": query,
                "max_hits_count": k,
                "document_type": "title_paragraph_text",
                "corpus_name": self.corpus_name,
            }
            if titles is not None:
                body["allowed_titles"] = list(titles)
            reply = self._call("POST", "/retrieve/", json=body)
            return self._shape(
                "/retrieve/",
                reply,
                lambda reply: [
                    Hit(str(h["id"]), h["title"], h["paragraph_text"], float(h["score"])) for h in reply["retrieval"]
                ],
            )
        if titles is not None:  # ColBERT's and Search-R1's servers have no title filter
            return search_within_titles(lambda n: self.search(query, n), k, titles, 10_000)
        if self.protocol == "colbert":
            reply = self._call("GET", "/api/search", params={"query": query, "k": k})
            return self._shape("/api/search", reply, lambda reply: [self._colbert_hit(h) for h in reply["topk"]])
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        if self.protocol not in ("mhindex", "search-r1"):
            return [self.search(q, k) for q in queries]
        results: list[list[Hit]] = []
        for start in range(0, len(queries), BATCH):
            chunk = list(queries[start : start + BATCH])
            if self.protocol == "mhindex":
                reply = self._call("POST", "/search/batch", json={"queries": chunk, "k": k})
                results += self._shape(
                    "/search/batch",
                    reply,
                    lambda reply: [
                        [Hit(h["id"], h["title"], h["text"], float(h["score"])) for h in r["hits"]]
                        for r in reply["results"]
                    ],
                )
            else:
                reply = self._call("POST", "/retrieve", json={"queries": chunk, "topk": k, "return_scores": True})
                results += self._shape(
                    "/retrieve",
                    reply,
                    lambda reply: [[_search_r1_hit(item) for item in hits] for hits in reply["result"]],
                )
        return results

    def _colbert_hit(self, item: dict[str, Any]) -> Hit:
        """ColBERT's passages are one text, "title | text" in its collections; the paragraph id is
        mhindex's `id` where the server adds it, else the local corpus's paragraph on line `pid`
        when its text is the served one, else the pid itself."""
        title, sep, text = item["text"].partition(" | ")
        title, text = (title, text) if sep else ("", item["text"])
        paragraph_id = item.get("id")
        if not isinstance(paragraph_id, str):
            paragraph_id = str(item["pid"])
            if self._corpus is not None and isinstance(item["pid"], int):
                with self._opening:
                    if self._lines is None:
                        self._lines = self._corpus.paragraphs()
                lines = self._lines
                if (
                    0 <= item["pid"] < len(lines)
                    and (record := lines[item["pid"]])["text"] == text
                    and record["title"] == title
                ):
                    paragraph_id = record["id"]
        return Hit(paragraph_id, title, text, float(item["score"]))

    def close(self) -> None:
        self._client.close()
        if self._lines is not None:
            self._lines.close()


def _search_r1_hit(item: dict[str, Any]) -> Hit:
    """Search-R1's documents are {"id", "contents": '"title"\\ntext'}; without scores, the document alone."""
    document = item.get("document", item)
    title, _, text = document["contents"].partition("\n")
    return Hit(str(document.get("id", "")), title.strip('"'), text, float(item.get("score", 0.0)))
