"""The retrieval clients of RL frameworks against a real `mhindex serve` of the MuSiQue sample (Lucene, on
127.0.0.1), as their training loops call them, with the code of their releases (tests/peers quotes it with file
and commit): SkyRL's search tool (NovaSky-AI/SkyRL@a956457, `POST /retrieve {"query", "topk", "return_scores"}`,
reading Search-R1's `result`) and rllm's local retrieval tool (rllm-org/rllm@c838218, `POST /retrieve {"query",
"top_k"}`, reading `results`), which once got HTTP 200 with no documents (their body was taken for IRCoT's);
ReCall's FlashRAG clients (`/search`, `/batch_search`), R1-Searcher's `/queries` and ASearcher's `/retrieve` and
`/access`."""

from __future__ import annotations

import json

import httpx
import orjson
import pytest
import requests

from conftest import serve_index
from mhindex.server.protocols import search_r1_contents
from peers import asearcher_client, r1_searcher_client, recall_client, rllm_client, skyrl_client
from servers import Uvicorn


@pytest.fixture(scope="module")
def served(musique_lucene):
    corpus, retriever = musique_lucene
    questions = [orjson.loads(line)["question"] for line in corpus.questions.read_bytes().splitlines() if line.strip()]
    with Uvicorn(serve_index(corpus, retriever)) as server:
        yield server.url, retriever, questions[:5]


def test_skyrl_s_search_tool_gets_each_query_s_documents(served):
    url, retriever, questions = served
    with requests.Session() as session:
        for question in questions:
            said = json.loads(skyrl_client.search(f"{url}/retrieve", 3, 30, False, session, question))
            expected = retriever.search(question.strip(), 3)
            # _passages2string: "Doc i: " and the document's contents ('"Title"\ntext'), a line each
            assert said["result"] == "".join(
                f"Doc {number}: {search_r1_contents(hit).strip()}\n" for number, hit in enumerate(expected, 1)
            )
        answer, error = skyrl_client.call_search_api(f"{url}/retrieve", questions[0], topk=2, session=session)
    assert error is None and [d["document"]["id"] for d in answer["result"][0]] == [
        h.id for h in retriever.search(questions[0], 2)
    ]
    assert all(isinstance(d["score"], float) for d in answer["result"][0])  # its client asks return_scores=True


def test_rllm_s_retrieval_tool_gets_each_query_s_documents_with_ids_and_scores(served):
    url, retriever, questions = served
    tool = rllm_client.LocalRetrievalTool(server_url=url, max_results=4)
    for question in questions:
        out = tool.forward(question)
        assert out.error is None, out.error
        expected = retriever.search(question, 4)
        assert out.metadata["num_results"] == len(expected) == 4
        for number, hit in enumerate(expected, 1):
            assert f"[Document {number}] (ID: {hit.id}, Score: {hit.score:.3f})" in out.output
    # its server's other keys, and k as rllm's server also reads it
    raw = httpx.post(f"{url}/retrieve", json={"query": questions[0], "k": 2}).json()
    assert raw["query"] == questions[0] and raw["num_results"] == 2 and raw["method"] == "lucene"
    assert [d["document"]["id"] for d in raw["results"]] == [h.id for h in retriever.search(questions[0], 2)]


def test_a_single_query_body_with_a_field_no_client_sends_is_a_400(served):
    url, _, questions = served
    reply = httpx.post(f"{url}/retrieve", json={"query": questions[0], "topk": 3, "n_docs": 5})
    assert reply.status_code == 400 and "unknown field 'n_docs'" in reply.json()["detail"]
    reply = httpx.post(f"{url}/retrieve", json={"query": 3})
    assert reply.status_code == 400 and "field 'query' should be a string" in reply.json()["detail"]


def test_recall_s_tool_and_flashrag_s_remote_retriever_get_the_documents(served):
    """ReCall's `wikipedia_search` (the tool code its training data carries) and FlashRAG's `RemoteRetriever` (ReCall's
    copy), with and without scores, one query and a batch: FlashRAG's answers, `contents` '"Title"\\ntext'."""
    url, retriever, questions = served
    namespace: dict = {}
    exec(recall_client.wikipedia_search_env.replace("<search-url-placeholder>", url), namespace)
    expected = retriever.search(questions[0], 5)
    assert namespace["wikipedia_search"](questions[0]) == "\n\n".join(search_r1_contents(h) for h in expected)
    documents = recall_client._search(url, 3, questions[0])
    assert [d["id"] for d in documents] == [h.id for h in expected[:3]]
    documents, scores = recall_client._search(url, 3, questions[0], return_score=True)
    assert scores == pytest.approx([h.score for h in expected[:3]])
    many = recall_client._batch_search(url, 2, questions[:3])
    assert [[d["id"] for d in found] for found in many] == [
        [h.id for h in retriever.search(q, 2)] for q in questions[:3]
    ]
    many, scores = recall_client._batch_search(url, 2, questions[:3], return_score=True)
    assert len(many) == len(scores) == 3 and all(len(s) == 2 for s in scores)
    # its server refuses an empty query with a 400; so does this one
    assert httpx.post(f"{url}/search", json={"query": " ", "top_n": 3}).status_code == 400


def test_r1_searchers_evaluation_reads_each_query_s_documents_block(served):
    url, retriever, questions = served
    blocks = r1_searcher_client.documents_blocks(f"{url}/queries", questions[:2], 3)
    assert blocks == [
        "".join(f"({n})Title: {h.title} Text: {h.text}\n" for n, h in enumerate(retriever.search(q, 3), 1))
        for q in questions[:2]
    ]


def test_asearcher_searches_and_accesses_the_pages_it_found(served):
    """`<search>` brings documents and their urls; `<access>` of one brings its page: every paragraph of that title
    in corpus order; a url of no page here is ASearcher's None, read as an empty page."""
    import asyncio

    url, retriever, questions = served
    client = asearcher_client.AsyncSearchBrowserClient(url.removeprefix("http://"))
    (found,) = asyncio.run(client.query_async({"queries": [questions[0]], "topk": 3, "return_scores": False}))
    expected = retriever.search(questions[0], 3)
    assert found["documents"] == [search_r1_contents(h) for h in expected] and len(found["urls"]) == 3
    (page, missing) = asyncio.run(client.access_async([found["urls"][0], "mhindex://musique/No%20such%20page"]))
    paragraphs = retriever.search("", 100, titles=[expected[0].title])
    assert page["page"].startswith(f'"{expected[0].title}"\n') and missing["page"] == ""
    assert all(h.text in page["page"] for h in paragraphs) and len(paragraphs) >= 1
