"""IRCoT's own retriever clients against a real `mhindex serve` of the MuSiQue sample (Lucene, on
127.0.0.1): the requests they send and every field they read, from StonyBrookNLP/ircot at
3c1820f (tests/peers/ircot_client.py quotes the code). The answers are checked against the same
search in process, and the server's semantics against IRCoT's Elasticsearch query
(retriever_server/elasticsearch_retriever.py): allowed titles are a filter, compared lower-cased
and stripped, the text match only ranks; document_type "title" answers each page once."""

from __future__ import annotations

import orjson
import pytest
import requests

from conftest import made_up_words, serve_index
from peers import ircot_client
from servers import Uvicorn

KEY = "k3y-for-ircot"


@pytest.fixture(scope="module")
def ircot(musique_lucene):
    corpus, retriever = musique_lucene
    with (
        Uvicorn(serve_index(corpus, retriever)) as open_server,
        Uvicorn(serve_index(corpus, retriever, api_key=KEY)) as locked,
    ):
        yield {
            "host": "http://127.0.0.1",
            "port": open_server.port,
            "locked": locked.port,
            "retriever": retriever,
            "corpus": corpus,
        }


def test_the_step_retriever_gets_the_cleaned_question_s_paragraphs(ircot):
    # The "bm25" participant of base_configs/ircot_codex_musique.jsonnet: 6 paragraphs, title_paragraph_text.
    question = "Who is the spouse of the Green performer?"
    titles, paras, ok = ircot_client.bm25_retrieve(
        ircot["host"], ircot["port"], "musique", question, 6, "title_paragraph_text"
    )
    expected = ircot["retriever"].search(ircot_client.remove_wh_words(question), 6)
    assert ok and titles == [h.title for h in expected] and paras == [h.text for h in expected]


def test_allowed_titles_filter_the_pages_and_leave_the_text_optional(ircot):
    pages = [
        r for r in map(orjson.loads, ircot["corpus"].corpus.read_bytes().splitlines()) if r["title"] == "Korean War"
    ]
    assert len(pages) == 12
    for allowed in (["Korean War"], ["korean war"], [" Korean War "], ["Korean War", "Mach bands"]):
        titles, paras, ok = ircot_client.bm25_retrieve(
            ircot["host"], ircot["port"], "musique", "armistice", 20, "paragraph_text", valid_titles=allowed
        )
        korean = [p for t, p in zip(titles, paras, strict=True) if t == "Korean War"]
        assert ok and sorted(korean) == sorted(p["text"] for p in pages), (
            allowed
        )  # every paragraph of the page, not only the 3 that match
        # ranked by the text match: the paragraphs that mention the armistice first
        mentions = ["armistice" in p.lower() for p in korean]
        assert mentions == sorted(mentions, reverse=True) and mentions[0], allowed
    assert set(
        ircot_client.bm25_retrieve(
            ircot["host"],
            ircot["port"],
            "musique",
            "armistice",
            20,
            "paragraph_text",
            valid_titles=["Korean War", "Mach bands"],
        )[0]
    ) == {"Korean War", "Mach bands"}


def test_the_annotation_retriever_finds_a_paragraph_by_its_opening_words(ircot):
    # attach_data_annotations.py and get_real_pid_for_title_paragraph_text look a gold paragraph up
    # by its title and its first 30 words.
    retriever = ircot_client.AnnotationRetriever(ircot["host"], ircot["port"], "musique")
    target = next(h for h in ircot["retriever"].search("Korean War armistice 1953", 5) if h.title == "Korean War")
    found = retriever.retrieve("Korean War", " ".join(target.text.split(" ")[:30]))
    assert found[0]["paragraph_text"] == target.text and found[0]["id"] == target.id
    assert {f["title"] for f in found} == {"Korean War"} and len(found) == 12
    assert {"id", "title", "paragraph_text", "score", "corpus_name", "url", "is_abstract", "paragraph_index"} <= set(
        found[0]
    )


def test_generated_titles_map_to_pages_once_each(ircot):
    mapped = ircot_client.map_to_titles(ircot["host"], ircot["port"], "musique", '["Korean War", "Mach bands"]', 3)
    assert mapped[:1] == ["Korean War"] and "Mach bands" in mapped and len(mapped) == len(set(mapped))
    reply = requests.post(
        f"http://127.0.0.1:{ircot['port']}/retrieve",
        json={
            "retrieval_method": "retrieve_from_elasticsearch",
            "query_text": "Korean War",
            "max_hits_count": 5,
            "document_type": "title",
            "corpus_name": "musique",
        },
    )
    titles = [r["title"] for r in reply.json()["retrieval"]]
    assert reply.ok and titles[0] == "Korean War" and len(titles) == len(set(titles)) == 5


def test_edges_answer_as_ircot_s_server_would(ircot):
    url = f"http://127.0.0.1:{ircot['port']}/retrieve/"
    base = {"retrieval_method": "retrieve_from_elasticsearch", "query_text": "Korean War", "corpus_name": "musique"}
    none = requests.post(url, json={**base, "max_hits_count": 0})
    assert none.status_code == 200 and none.json()["retrieval"] == []
    assert (
        len(requests.post(url, json={**base, "max_hits_count": 5000}).json()["retrieval"]) == 100
    )  # --max-k, never a refusal
    assert len(requests.post(url, json=base).json()["retrieval"]) == 3  # unified_retriever.py's default
    long = requests.post(
        url, json={**base, "query_text": "Korean War armistice " + made_up_words(1500), "max_hits_count": 3}
    )
    assert (
        long.status_code == 200 and long.json()["retrieval"][0]["title"] == "Korean War"
    )  # cut to its first 1,024 distinct terms
    for bad, reason in [
        ({"allowed_titles": [5]}, "allowed_titles"),
        ({"allowed_titles": "Korean War"}, "allowed_titles"),
        ({"max_hits_count": "3"}, "max_hits_count"),
        ({"retrieval_method": "retrieve_from_faiss"}, "not served"),
    ]:
        refused = requests.post(url, json={**base, **bad})
        assert refused.status_code == 400 and reason in refused.json()["detail"], bad
    # A corpus the server does not hold is an error IRCoT's client sees as a failed retrieval,
    # not another corpus's paragraphs.
    titles, _, ok = ircot_client.bm25_retrieve(
        ircot["host"], ircot["port"], "hotpotqa", "Korean War", 3, "title_paragraph_text"
    )
    other = requests.post(url, json={**base, "corpus_name": "hotpotqa"})
    assert not ok and not titles and other.status_code == 404 and "holds 'musique'" in other.json()["detail"]


def test_a_key_in_ircot_s_host_setting_opens_a_locked_server(ircot):
    # IRCoT builds its URL as host + ":" + port + "/retrieve": the key goes in the host, as user info.
    titles, _, ok = ircot_client.bm25_retrieve(
        f"http://key:{KEY}@127.0.0.1", ircot["locked"], "musique", "Korean War", 3, "paragraph_text"
    )
    assert ok and titles
    _, _, refused = ircot_client.bm25_retrieve(
        ircot["host"], ircot["locked"], "musique", "Korean War", 3, "paragraph_text"
    )
    denied = requests.post(f"http://127.0.0.1:{ircot['locked']}/retrieve", json={"query_text": "x"})
    assert not refused and denied.status_code == 401 and "API key" in denied.json()["detail"]
