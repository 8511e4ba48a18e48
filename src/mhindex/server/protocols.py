"""The request and answer shapes of the retrieval servers that existing code already talks to,
translated to and from one `Retriever` call. Each was checked against the project's own code:

- IRCoT (StonyBrookNLP/ircot, `retriever_server/serve.py` and `elasticsearch_retriever.py`):
  `POST /retrieve/` with `{"retrieval_method": "retrieve_from_elasticsearch", "query_text",
  "max_hits_count", "max_buffer_count", "document_type", "allowed_titles", "corpus_name", ...}`,
  answered by `{"retrieval": [{"id", "title", "paragraph_text", "score", "corpus_name", ...}],
  "time_in_seconds"}`. Every `document_type` is served by the backend's one ranking (title and
  text); `allowed_titles` restricts it to those pages.
- ColBERT (stanford-futuredata/ColBERT `server.py`, also SearChain's): `GET /api/search?query=&k=`,
  answered by `{"query", "topk": [{"pid", "text", "rank", "score", "prob"}]}`, `prob` being the
  softmax of the scores over the k returned; `pid` is the paragraph's line in corpus.jsonl.
- Search-R1 (PeterGriffinJin/Search-R1, `search_r1/search/retrieval_server.py`): `POST /retrieve`
  with `{"queries": [...], "topk", "return_scores"}`, answered by `{"result": [[{"document":
  {"id", "contents"}, "score"}, ...], ...]}` (documents alone without `return_scores`), `contents`
  being "title\\ntext" as its clients split it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from mhindex.backends.base import Hit


class BadRequest(ValueError):
    """A request the server refuses, with the one line that says why (HTTP 400)."""


def field(body: dict, name: str, kind: type | tuple[type, ...], default: Any = ..., where: str = "") -> Any:
    if not isinstance(body, dict):
        raise BadRequest("the request body should be a JSON object")
    if name not in body or body[name] is None:
        if default is ...:
            raise BadRequest(f"field '{name}' is missing{where}")
        return default
    value = body[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise BadRequest(f"field '{name}' should be {getattr(kind, '__name__', kind)}{where}")
    return value


def ircot_answer(body: dict, search: Callable[..., list[Hit]], corpus_name: str) -> list[dict]:
    method = field(body, "retrieval_method", str, "retrieve_from_elasticsearch")
    if method != "retrieve_from_elasticsearch":
        raise BadRequest(f"retrieval_method '{method}' is not served; IRCoT's server has only retrieve_from_elasticsearch")
    query = field(body, "query_text", str)
    k = field(body, "max_hits_count", int, 3)
    document_type = field(body, "document_type", str, "paragraph_text")
    if document_type not in ("title", "paragraph_text", "title_paragraph_text"):
        raise BadRequest("document_type should be title, paragraph_text or title_paragraph_text")
    titles = field(body, "allowed_titles", list, None)
    hits = search(query, k, titles=titles)
    return [
        {"id": h.id, "title": h.title, "paragraph_text": h.text, "url": "", "is_abstract": False, "paragraph_index": 0, "score": h.score, "corpus_name": body.get("corpus_name") or corpus_name}
        for h in hits
    ]


def corpus_lines(corpus) -> Callable[[str], int]:
    """ColBERT's pid for a paragraph id: its line in corpus.jsonl, the table read on first use
    (only ColBERT's clients ask for it)."""
    import threading

    table: dict[str, int] = {}
    lock = threading.Lock()

    def line_of(paragraph_id: str) -> int:
        with lock:
            if not table:
                reader = corpus.paragraphs()
                table.update((record["id"], line) for line, record in enumerate(reader))
                reader.close()
        return table.get(paragraph_id, -1)

    return line_of


def colbert_answer(query: str, hits: Sequence[Hit], position: Callable[[str], int]) -> dict:
    top = max((h.score for h in hits), default=0.0)
    weights = [math.exp(h.score - top) for h in hits]  # shifted: the same softmax, no overflow
    total = sum(weights) or 1.0
    return {
        "query": query,
        "topk": [
            {"pid": position(h.id), "text": f"{h.title} | {h.text}", "rank": rank, "score": h.score, "prob": w / total}
            for rank, (h, w) in enumerate(zip(hits, weights), start=1)
        ],
    }


def search_r1_answer(results: Sequence[Sequence[Hit]], with_scores: bool) -> dict:
    def document(hit: Hit) -> dict:
        return {"id": hit.id, "contents": f"{hit.title}\n{hit.text}"}

    return {"result": [[{"document": document(h), "score": h.score} if with_scores else document(h) for h in hits] for hits in results]}
