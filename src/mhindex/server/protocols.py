"""The request and answer shapes of the retrieval servers that existing code already talks to,
translated to and from `Retriever` calls. Each follows the project's own server and is tested
with the requests its own clients send (tests/test_serve_*.py, which cite file and commit):

- IRCoT (StonyBrookNLP/ircot, `retriever_server/serve.py`, `unified_retriever.py` and
  `elasticsearch_retriever.py`): `POST /retrieve/` (its clients post to `/retrieve`) with
  `{"retrieval_method": "retrieve_from_elasticsearch", "query_text", "max_hits_count" (3),
  "max_buffer_count", "document_type", "allowed_titles", "corpus_name", ...}`, answered by
  `{"retrieval": [{"id", "title", "paragraph_text", "url", "is_abstract", "paragraph_index",
  "score", "corpus_name"}], "time_in_seconds"}`. `allowed_titles` is a filter and the text
  optional; titles compare lower-cased and stripped; hits with the same lower-cased text are kept
  once; `document_type: "title"` searches titles and answers each page once.
- ColBERT (stanford-futuredata/ColBERT `server.py`; DSPy's `ColBERTv2` client):
  `GET /api/search?query=&k=` (k at most 100, 10 by default), answered by `{"query", "topk":
  [{"text", "pid", "rank", "score", "prob"}]}`, sorted by score, `prob` the softmax of the
  scores; `pid` is the paragraph's line in corpus.jsonl. mhindex adds the paragraph's `id`, and
  `long_text` (the text again), which DSPy's client reads from a POST answer (`simplify=True`).
- Search-R1 (PeterGriffinJin/Search-R1, `search_r1/search/retrieval_server.py`): `POST /retrieve`
  with `{"queries": [...], "topk", "return_scores"}` (a missing or 0 topk is the server's
  default, 3), answered by `{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`
  (documents alone without `return_scores`), `contents` being `"Title"\\ntext` as its corpus
  format has it (docs/corpora.md).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, unquote

from mhindex.backends.base import Hit
from mhindex.server.errors import Refused

# What each server answers when a request names no k.
DEFAULT_K = {"mhindex": 10, "ircot": 3, "colbert": 10, "search-r1": 3}
IRCOT_METHOD = "retrieve_from_elasticsearch"
IRCOT_DOCUMENT_TYPES = ("title", "paragraph_text", "title_paragraph_text")
_DIGITS = re.compile(r"[0-9]{1,9}")  # not str.isdigit: "²" is a digit to Python, not a number


def field(body: Any, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    if not isinstance(body, dict):
        raise Refused("the request body should be a JSON object")
    if body.get(name) is None:
        if default is ...:
            raise Refused(f"field '{name}' is missing")
        return default
    value = body[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise Refused(f"field '{name}' should be {_kind_name(kind)}")
    return value


def only_fields(body: Any, allowed: Sequence[str], endpoint: str) -> None:
    """mhindex's own endpoints refuse a field they do not read (`{"K": 3}` once answered 10 hits, silently)."""
    if isinstance(body, dict) and (unknown := [name for name in body if name not in allowed]):
        names = ", ".join(f"'{name}'" for name in unknown[:5])
        raise Refused(f"unknown field {names}: {endpoint} takes {', '.join(allowed)}")


#: Any of these makes a `POST /retrieve` body IRCoT's (its client sends them all; `query_text` may be absent)
IRCOT_FIELDS = ("retrieval_method", "query_text", "max_hits_count", "max_buffer_count", "document_type",
                "allowed_titles", "corpus_name")  # fmt: skip
RETRIEVE_SHAPES = (
    'Search-R1\'s {"queries": [...], "topk", "return_scores"}, SkyRL\'s and rllm\'s {"query", "topk" | "top_k" | "k"} '
    'or IRCoT\'s {"query_text", "max_hits_count", "allowed_titles", ...}'
)


def retrieve_dialect(body: Any) -> str:
    """Whose `POST /retrieve` body this is: "search-r1" (Search-R1, verl, slime, ASearcher), "single" (one
    `query`: SkyRL's and rllm's) or "ircot"; one that is none of them is refused, never answered with no documents
    (`{"query": ...}` and `{}` once got HTTP 200 and an empty `retrieval`)."""
    if isinstance(body, dict) and "queries" in body:
        return "search-r1"
    if isinstance(body, dict) and "query" in body and not any(name in body for name in IRCOT_FIELDS):
        return "single"
    if isinstance(body, dict) and any(name in body for name in IRCOT_FIELDS):
        return "ircot"
    fields = ", ".join(f"'{name}'" for name in body) if isinstance(body, dict) and body else "no field"
    raise Refused(f"a /retrieve body is {RETRIEVE_SHAPES}; this one has {fields}"[:400])


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "a whole number", list: "a list", bool: "true or false", dict: "an object"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def strings(body: Any, name: str, required: bool = False) -> list[str] | None:
    """A list of strings (queries, titles), or None when absent and not required."""
    values = field(body, name, object, ... if required else None)
    if values is not None and not (isinstance(values, list) and all(isinstance(v, str) for v in values)):
        raise Refused(f"field '{name}' should be a list of strings")
    return values


def hits_wanted(value: int | None, name: str, default: int, cap: int, zero_is_default: bool = False) -> int:
    """How many hits to answer: the default when unset, at most `cap` (as ColBERT's server caps:
    never a refusal a peer's client cannot read), 0 for none."""
    if value is None or (zero_is_default and value == 0):
        return min(default, cap)
    if value < 0:
        raise Refused(f"{name} should be 0 or more")
    return min(value, cap)


def query_k(text: str | None, default: int, cap: int) -> int:
    """ColBERT's `k` query parameter."""
    if text is None or text == "":
        return min(default, cap)
    if not _DIGITS.fullmatch(text):
        raise Refused("query parameter 'k' should be a whole number")
    return min(int(text), cap)


# -- IRCoT ------------------------------------------------------------------------------------


def ircot_request(body: Any, served: Sequence[str], cap: int) -> dict[str, Any]:
    """IRCoT's arguments, checked; a corpus this server does not hold is refused (404)."""
    method = field(body, "retrieval_method", str, IRCOT_METHOD)
    if method != IRCOT_METHOD:
        raise Refused(f"retrieval_method '{method}' is not served; IRCoT's server has only {IRCOT_METHOD}")
    document_type = field(body, "document_type", str, "paragraph_text")
    if document_type not in IRCOT_DOCUMENT_TYPES:
        raise Refused(f"document_type should be one of {', '.join(IRCOT_DOCUMENT_TYPES)}")
    corpus = field(body, "corpus_name", str, None)
    if corpus is not None and corpus not in served:
        raise Refused(
            f"corpus_name '{corpus}' is not served here; this server holds {' or '.join(repr(s) for s in served)}", 404
        )
    return {
        "query": field(body, "query_text", str, ""),
        "k": hits_wanted(field(body, "max_hits_count", int, None), "max_hits_count", DEFAULT_K["ircot"], cap),
        "titles": strings(body, "allowed_titles"),
        "document_type": document_type,
        "corpus_name": corpus or served[0],
    }


def ircot_retrieve(
    request: dict[str, Any], search: Callable[..., list[Hit]], search_titles: Callable[[str, int], list[Hit]]
) -> list[dict]:
    """The `retrieval` list: hits with the same lower-cased text kept once, the better ranked, from
    a ranking twice as deep as asked so that k remain (IRCoT's server dedupes 100 deep)."""
    k = request["k"]
    if k == 0:
        return []
    if request["document_type"] == "title":
        hits = search_titles(request["query"], k)
    else:
        seen: set[str] = set()
        hits = []
        for hit in search(request["query"], 2 * k, titles=request["titles"]):
            if (text := hit.text.strip().lower()) not in seen:
                seen.add(text)
                hits.append(hit)
        hits = hits[:k]
    return [
        {
            "id": h.id,
            "title": h.title,
            "paragraph_text": h.text,
            "url": "",
            "is_abstract": False,
            "paragraph_index": 0,
            "score": h.score,
            "corpus_name": request["corpus_name"],
        }
        for h in hits
    ]


# -- ColBERT ----------------------------------------------------------------------------------


def corpus_lines(corpus) -> Callable[[str], int]:
    """ColBERT's pid for a paragraph id: its line in corpus.jsonl, the table read on first use
    (only ColBERT's clients ask for it)."""
    table: dict[str, int] = {}
    lock = threading.Lock()

    def line_of(paragraph_id: str) -> int:
        with lock:
            if not table:
                reader = corpus.paragraphs()
                try:
                    table.update((record["id"], line) for line, record in enumerate(reader))
                finally:
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
            {
                "text": text,
                "pid": position(h.id),
                "rank": rank,
                "score": h.score,
                "prob": w / total,
                "long_text": text,
                "id": h.id,
            }
            for rank, (h, w) in enumerate(zip(hits, weights, strict=True), start=1)
            for text in (f"{h.title} | {h.text}",)
        ],
    }


# -- Search-R1 --------------------------------------------------------------------------------


def search_r1_contents(hit: Hit) -> str:
    """Search-R1's corpus format: the title in double quotes, a line break, the text."""
    return f'"{hit.title}"\n{hit.text}'


#: the single-query dialect's fields, and what says how many hits (SkyRL's `topk`; rllm's `top_k` or `k`)
SINGLE_FIELDS = ("query", "topk", "top_k", "k", "return_scores")


def single_query_answer(query: str, hits: Sequence[Hit], with_scores: bool, method: str, corpus: str = "") -> dict:
    """One answer that both single-query clients read, each as its own server writes it:
    - SkyRL (NovaSky-AI/SkyRL@a956457, examples/train/search/retriever/retrieval_server.py `retrieve_endpoint`;
      its client skyrl-gym/skyrl_gym/tools/search.py reads `result`): Search-R1's shape with the one query's list;
    - rllm (rllm-org/rllm@c838218, examples/search/retrieval/server.py; its client
      examples/search/local_retrieval_tool.py reads `results`): `{"query", "method", "results": [{"document",
      "score"}], "num_results"}`, scores always."""
    ranked = search_r1_answer([hits], True, corpus)["result"][0]  # each document once, its score beside it
    documents = [ranked if with_scores else [entry["document"] for entry in ranked]]
    return {"result": documents, "query": query, "method": method, "results": ranked, "num_results": len(ranked)}


def page_url(corpus: str, title: str) -> str:
    """A page's address as `/retrieve`'s documents carry it and ASearcher's `/access` reads it back: the corpus and
    the page's title (`mhindex://musique/Van%20Hook%20Township`). ASearcher's agents `<access>` a url they saw."""
    return f"mhindex://{quote(corpus, safe='')}/{quote(title, safe='')}"


def accessed_title(url: str, corpus: str) -> str | None:
    """The title a url names: a `page_url` of this corpus, or the title itself; None for another corpus's url."""
    if url.startswith("mhindex://"):
        named, _, title = url[len("mhindex://") :].partition("/")
        return unquote(title) if unquote(named) == corpus and title else None
    return url.strip() or None


def search_r1_answer(results: Sequence[Sequence[Hit]], with_scores: bool, corpus: str = "") -> dict:
    """Search-R1's answer; each document also carries its page's `url` and `title`, which ASearcher's client reads
    (AReaL/ASearcher/utils/search_utils.py `query_async`: `r["contents"]`, `r["url"]`) and Search-R1's ignores."""

    def document(hit: Hit) -> dict:
        url = page_url(corpus, hit.title)
        return {"id": hit.id, "contents": search_r1_contents(hit), "title": hit.title, "url": url}

    return {
        "result": [
            [{"document": document(h), "score": h.score} if with_scores else document(h) for h in hits]
            for hits in results
        ]
    }


# -- FlashRAG's retrieval server (ReCall, ReSearch) and R1-Searcher's ---------------------------


#: FlashRAG-style `/search` and `/batch_search` bodies carry these (mhindex's own `/search` takes `k`)
FLASHRAG_FIELDS = ("query", "top_n", "return_score")


def flashrag_answer(results: Sequence[Sequence[Hit]], with_scores: bool, batch: bool) -> Any:
    """Agent-RL/ReCall@aaf16b3 scripts/serving/retriever_serving.py: `/search` answers its documents
    `[{"id", "contents"}]` (with `return_score`, `[documents, scores]`), `/batch_search` a list of those lists
    (with scores, `[lists, score lists]`); `contents` as FlashRAG's corpora hold it ('"Title"\ntext')."""
    documents = [[{"id": h.id, "contents": search_r1_contents(h)} for h in hits] for hits in results]
    scores = [[h.score for h in hits] for hits in results]
    if batch:
        return [documents, scores] if with_scores else documents
    return [documents[0], scores[0]] if with_scores else documents[0]


def r1_searcher_answer(queries: Sequence[str], results: Sequence[Sequence[Hit]], line: Callable[[str], int]) -> dict:
    """RUCAIBox/R1-Searcher@631167c train/wiki_corpus_load.py `/queries`: `{"queries", "answers": [[corpus line,
    ...]]}`. Its evaluation (evaluation/eval_search_loacl.py) strips each line's leading number and white space
    and shows the rest; here that rest is "Title: T Text: text", as its HotpotQA corpus's lines read in its stored
    outputs (data/eval_results/hotpotqa_qwen.jsonl), after the paragraph's line in corpus.jsonl."""
    return {
        "queries": list(queries),
        "answers": [[f"{line(h.id)}\tTitle: {h.title} Text: {h.text}" for h in hits] for hits in results],
    }
