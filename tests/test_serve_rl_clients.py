"""The single-query clients of two RL frameworks against a real `mhindex serve` of the MuSiQue sample (Lucene, on
127.0.0.1), as their training loops call them, with the code of their releases (tests/peers quotes it with file
and commit): SkyRL's search tool (NovaSky-AI/SkyRL@a956457, `POST /retrieve {"query", "topk", "return_scores"}`,
reading Search-R1's `result`) and rllm's local retrieval tool (rllm-org/rllm@c838218, `POST /retrieve {"query",
"top_k"}`, reading `results`). Both once got HTTP 200 with no documents: their body was taken for IRCoT's."""

from __future__ import annotations

import json

import httpx
import orjson
import pytest
import requests

from conftest import serve_index
from mhindex.server.protocols import search_r1_contents
from peers import rllm_client, skyrl_client
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
