"""Search-R1's retrieval client against a real `mhindex serve` of the MuSiQue sample (Lucene, on
127.0.0.1), with the server's default limits, as a training run meets it: the function PPO and
GRPO call every search step and the example request, from PeterGriffinJin/Search-R1 at a14dc3a
(tests/peers/search_r1_client.py quotes the code), with the batch sizes training sends (512 for
PPO, 2,560 for GRPO) and the text format its models were trained on ('"Title"\\ntext')."""

from __future__ import annotations

import orjson
import pytest
import requests

from conftest import made_up_words, serve_index
from mhindex.server.protocols import page_url
from peers import search_r1_client
from servers import Uvicorn

KEY = "k3y-for-search-r1"


@pytest.fixture(scope="module")
def search_r1(musique_lucene):
    corpus, retriever = musique_lucene
    questions = [orjson.loads(line)["question"] for line in corpus.questions.read_bytes().splitlines() if line.strip()]
    with (
        Uvicorn(serve_index(corpus, retriever)) as open_server,
        Uvicorn(serve_index(corpus, retriever, api_key=KEY)) as locked,
    ):
        yield {"url": open_server.url, "locked": locked.url, "retriever": retriever, "questions": questions}


def test_training_batches_of_512_and_2560_queries_get_their_documents(search_r1):
    retriever = search_r1["retriever"]
    for size in (512, 2560):
        queries = [search_r1["questions"][i % len(search_r1["questions"])] for i in range(size)]
        reply = search_r1_client._batch_search(search_r1["url"] + "/retrieve", 3, queries)
        assert len(reply["result"]) == size
        first = retriever.search(queries[0], 3)
        assert [d["document"]["id"] for d in reply["result"][0]] == [h.id for h in first]
        assert [d["score"] for d in reply["result"][0]] == pytest.approx([h.score for h in first])
    # What the model reads: Search-R1's corpus format puts the title in double quotes.
    text = search_r1_client.batch_search(search_r1["url"] + "/retrieve", 3, queries[:1])[0]
    assert text.startswith(f'Doc 1(Title: "{first[0].title}") {first[0].text}\nDoc 2(Title: "{first[1].title}")')


def test_the_example_request_of_400_queries(search_r1):
    reply = requests.post(search_r1["url"] + "/retrieve", json=search_r1_client.retrieval_request_payload())
    reply.raise_for_status()
    result = reply.json()["result"]
    assert len(result) == 400 and all(len(hits) == 5 for hits in result)
    # Search-R1's document ({"id", "contents"}), and the page's title and url, which ASearcher's client (the same
    # body) reads and Search-R1's passes over
    assert set(result[0][0]) == {"document", "score"}
    assert set(result[0][0]["document"]) == {"id", "contents", "title", "url"}


def test_topk_edges_and_documents_without_scores(search_r1):
    url = search_r1["url"] + "/retrieve"
    query = search_r1["questions"][0]
    for topk in (None, 0):  # retrieval_server.py: `if not request.topk: request.topk = config.retrieval_topk` (3)
        body = {"queries": [query]} if topk is None else {"queries": [query], "topk": topk}
        assert len(requests.post(url, json=body).json()["result"][0]) == 3
    assert len(requests.post(url, json={"queries": [query], "topk": 1000}).json()["result"][0]) == 100  # --max-k
    bare = requests.post(url, json={"queries": [query], "topk": 2}).json()["result"][0]
    hit = search_r1["retriever"].search(query, 2)[0]
    assert bare[0] == {"id": hit.id, "contents": f'"{hit.title}"\n{hit.text}', "title": hit.title,
                       "url": page_url("musique", hit.title)}  # fmt: skip
    refused = requests.post(url, json={"queries": "not a list", "topk": 2})
    assert refused.status_code == 400 and "queries" in refused.json()["detail"]


def test_one_very_long_query_does_not_fail_its_batch(search_r1):
    words = made_up_words(1500)
    queries = ["Korean War armistice", f"Korean War armistice {words}", "Mach bands"]
    reply = search_r1_client._batch_search(search_r1["url"] + "/retrieve", 3, queries)
    assert [len(hits) for hits in reply["result"]] == [3, 3, 3]
    assert reply["result"][1][0]["document"]["contents"].startswith('"Korean War"')


def test_a_key_in_the_search_url_opens_a_locked_server(search_r1):
    # Search-R1's client sends no headers: its only setting is `retriever.url`.
    for url in (
        search_r1["locked"] + f"/k/{KEY}/retrieve",
        search_r1["locked"] + f"/retrieve?api_key={KEY}",
        search_r1["locked"].replace("://", f"://key:{KEY}@") + "/retrieve",
    ):
        assert len(search_r1_client.batch_search(url, 2, ["Korean War"])) == 1, url
    with pytest.raises(KeyError, match="result"):  # what the released client makes of a refusal
        search_r1_client.batch_search(search_r1["locked"] + "/retrieve", 2, ["Korean War"])
    assert "API key" in requests.post(search_r1["locked"] + "/retrieve", json={"queries": ["x"]}).json()["detail"]
