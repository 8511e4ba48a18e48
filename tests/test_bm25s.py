"""The bm25s backend (BM25 without Java) for real on the MuSiQue sample, next to Lucene on the same
corpus: the same family of scores finds mostly the same paragraphs; title scope, any query text,
batches, the CLI, and k1/b fixed at index time."""

from __future__ import annotations

import pytest

from conftest import SAMPLES, read_jsonl
from mhindex.backends import BackendSpec, build_index, open_retriever
from mhindex.corpora import DATASETS
from mhindex.corpora.build import build_corpus

pytest.importorskip("bm25s", reason="the bm25s backend needs bm25s (installed by scripts/setup.sh)")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    built = build_corpus(
        DATASETS["musique"],
        [SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"],
        tmp_path_factory.mktemp("bm25s"),
    ).corpus
    assert build_index(built, BackendSpec.parse("bm25s")).manifest["paragraphs"] == len(read_jsonl(built.corpus))
    build_index(built, BackendSpec.parse("lucene"))
    return built


def test_finds_what_lucene_finds(corpus):
    bm25s, lucene = (
        open_retriever(corpus, BackendSpec.parse("bm25s")),
        open_retriever(corpus, BackendSpec.parse("lucene")),
    )
    questions = [q["question"] for q in read_jsonl(corpus.questions)[:30]]
    overlap = []
    for question in questions:
        ours = bm25s.search(question, 10)
        assert [h.score for h in ours] == sorted((h.score for h in ours), reverse=True) and len(ours) == 10
        overlap.append(len({h.id for h in ours} & {h.id for h in lucene.search(question, 10)}) / 10)
    # Different analyzers (Snowball vs Porter, stop lists) rank a few paragraphs differently.
    assert sum(overlap) / len(overlap) > 0.6
    paragraph = read_jsonl(corpus.corpus)[7]
    assert bm25s.search(f"{paragraph['title']} {paragraph['text'][:150]}", 1)[0].id == paragraph["id"]
    assert [[h.id for h in hits] for hits in bm25s.search_many(questions[:5], 4)] == [
        [h.id for h in bm25s.search(q, 4)] for q in questions[:5]
    ]
    bm25s.close()
    lucene.close()


@pytest.mark.parametrize("query", ["", "the of and", "AND OR NOT", 'title:(x "', "Zélie 東京 💡", "qwxzv"])
def test_any_query_text_is_accepted(corpus, query):
    retriever = open_retriever(corpus, BackendSpec.parse("bm25s"))
    assert len(retriever.search(query, 3)) <= 3
    retriever.close()


def test_title_scope_and_index_time_parameters(corpus, mh, home):
    retriever = open_retriever(corpus, BackendSpec.parse("bm25s"))
    scoped = retriever.search("company founded", 5, titles=["General Electric"])
    assert scoped and {h.title for h in scoped} == {"General Electric"}
    retriever.close()
    from mhindex.errors import UsageError

    with pytest.raises(UsageError, match="was built with --k1 1.2"):
        open_retriever(corpus, BackendSpec.parse("bm25s", {"k1": 0.9}))
    assert mh("corpus", "musique", "--input", SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl").code == 0
    assert mh("index", "musique", "--backend", "bm25s", "--k1", "0.9").code == 0
    # Another k1 is another variant of the index: refused without --force (it once replaced it silently)
    refused = mh("index", "musique", "--backend", "bm25s")
    assert refused.code == 2 and "was built with k1=0.9; building it with k1=1.2 would replace it" in refused.err
    hits = mh("search", "musique", "Ensign Manufacturing Company", "--backend", "bm25s", "--json").json()["hits"]
    assert hits[0]["title"] == "Ensign Manufacturing Company"
