"""Retrieve: the question as the query, the top K paragraphs, and no answer: a retriever's own ranking,
as BEIR's `EvaluateRetrieval` and Pyserini's `trec_eval` runs score it. The baseline of a retrieval
evaluation (a corpus with qrels and no answers, such as a BEIR dataset), where the other methods'
answers would be read by no one; it calls no language model. The query is the question as written
(BEIR and Pyserini send the query text as it is); `--clean-queries` sends it as IRCoT's release does."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mhindex.methods.base import Answer, Clock, Method, Query, Step
from mhindex.methods.queries import retrieval_query
from mhindex.methods.settings import CLEAN_QUERIES_HELP
from mhindex.options import option


@dataclass(frozen=True)
class RetrieveSettings:
    k: int = option(15, "Paragraphs per retrieval (K).", flag="-k", min=1)
    clean_queries: bool = option(False, CLEAN_QUERIES_HELP)

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        return asdict(self)


class Retrieve(Method):
    name = "retrieve"
    title = "Retrieve"
    paper = "A retriever's own ranking, no reading (BEIR, Thakur et al., NeurIPS 2021; Pyserini's trec_eval runs)"
    Settings = RetrieveSettings
    needs_lm = False

    settings: RetrieveSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return 0

    def answer(self, query: Query) -> Answer:
        clock = Clock()
        sent = retrieval_query(query.question, [], self.settings.clean_queries)
        hits = self.retriever.search(sent, self.settings.k)
        step = Step("", sent, [h.id for h in hits], [h.title for h in hits], clock())
        retrieved = [{"id": h.id, "title": h.title, "score": h.score} for h in hits]
        answer = Answer(query.id, query.question, "", retrieved, [step], 0, 0, 0, clock(), "", self.name)
        answer.details["answered"] = False  # nothing to score as an answer: eval shows "-", not 0.0 (eval/metrics.py)
        return answer
