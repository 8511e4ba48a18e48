"""Decompose: the question split into single-hop sub-questions by the LM, each sent to the retriever, and the
answer read from all they brought, as EfficientRAG's table runs it (Zhuang et al., EMNLP 2024;
microsoft/EfficientRAG @6b2489f, `src/baseline/retrieve/decompose.py`).

One chat turn (after the system message "You are a helpful assistant.") asks for a JSON object whose
`"decomposed_questions"` lists the sub-questions (`llm_decompose`); each is searched for its top K paragraphs
(the release's `--topk`, 10), the paragraphs are deduplicated by id in the order found, and their texts, one a
line, go into the released QA prompt of the corpus's dataset (`DIRECT_RETRIEVE_ANSWER_PROMPT_*` of `direct.py`,
as `process_sample` does); the answer is the reply's JSON "answer".

The decomposition prompt is the paper's (its Appendix B, "Question Decomposition Prompt", the same for every
dataset; prompts/efficientrag/SOURCE.md), since the release imports its `QUERY_DECOMPOSE_PROMPT` from a module
it does not ship. Deviations, each forced or said: calls are greedy (the release samples, so its three tries
of an invalid reply would give the same one here); where the decomposition holds no JSON list the release
fails the question, while here the question itself is searched and the record says so (`"fallback"`, and a
departure that `eval` counts per row); and at most `--max-sub-questions` are searched (a small model can list the
same question forever).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mhindex.backends.base import Hit, Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step, TraceStep, trace_step
from mhindex.methods.efficientrag import (
    SYSTEM,
    BaselineSettings,
    answer_step,
    json_answer,
    parse_json_object,
    released_prompt,
)
from mhindex.options import option


@dataclass(frozen=True)
class DecomposeSettings(BaselineSettings):
    k: int = option(10, "Paragraphs retrieved for each sub-question (the release's topk).", flag="-k", min=1)
    max_sub_questions: int = option(6, "Most sub-questions searched (the first ones the LM lists).", min=1)
    decompose_tokens: int = option(256, "Most tokens for the JSON list of sub-questions.", min=1)
    answer_tokens: int = option(256, "Most tokens for the JSON answer.", min=1)
    max_paragraph_words: int = option(350, "Paragraphs are cut to this many words in the prompt.", min=1)


class Decompose(Method):
    name = "decompose"
    title = "Decompose"
    paper = "Question decomposition then retrieval, as EfficientRAG's baseline (Zhuang et al., EMNLP 2024)"
    tables = {"EfficientRAG": {"Decompose": {}}}
    paper_metrics = ("efficientrag_em",)
    Settings = DecomposeSettings

    settings: DecomposeSettings

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: DecomposeSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.prompt_name = settings.prompts_for(context.dataset)
        self.answer_prompt = released_prompt(f"answer_{self.prompt_name}")
        self.decompose_prompt = released_prompt("decompose")

    def sub_questions(self, meter: Meter, question: str) -> tuple[list[str], str | None, str]:
        """The LM's sub-questions (the question itself where its reply lists none), why it fell back, the reply."""
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": self.decompose_prompt.format(question=question)},
        ]
        reply = meter.chat(messages, self.settings.decompose_tokens, stop=[], label="decomposing").text.strip()
        unique = listed_sub_questions(reply, self.settings.max_sub_questions)
        if not unique:
            return [question], "the reply listed no sub-questions: the question itself was searched", reply
        return unique, None, reply

    def answer(self, query: Query) -> Answer:
        s, clock, meter = self.settings, Clock(), Meter(self.lm)
        subs, fallback, reply = self.sub_questions(meter, query.question)
        steps: list[Step] = []
        found: dict[str, Hit] = {}
        for sub in subs:
            started = clock()
            hits = self.retriever.search(sub, s.k)
            found.update({h.id: h for h in hits if h.id not in found})
            steps.append(Step("", sub, [h.id for h in hits], [h.title for h in hits], clock() - started))
        answered, read = answer_step(
            meter,
            self.answer_prompt,
            query.question,
            [h.text for h in found.values()],
            answer_tokens=s.answer_tokens,
            max_words=s.max_paragraph_words,
        )
        answer, parsed = json_answer(answered)
        return Answer(
            query.id,
            query.question,
            answer,
            [{"id": h.id, "title": h.title} for h in found.values()],
            steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            answered,
            self.name,
            departures=[f"decompose: {fallback} (the release fails the question)"] if fallback else [],
            details={
                "decompose": {
                    "prompt": self.prompt_name,
                    "sub_questions": subs,
                    "fallback": fallback,
                    "reply": reply,
                    "read": read,
                    "json": parsed is not None and "answer" in parsed,
                }
            },
        )

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """The sub-questions as the LM listed them, each one's retrieval, and the answer from all they brought."""
        details = record.get("decompose")
        steps = super().trace_steps(record)
        if not isinstance(details, dict):
            return steps
        for number, step in enumerate(steps, 1):
            step["title"] = f"sub-question {number}"
        listed = [["", str(q)] for q in details.get("sub_questions", [])]
        if details.get("fallback"):
            listed.append(["note", str(details["fallback"])])
        read = f"read {details.get('read', 0)} paragraphs ({details.get('prompt')}'s released prompt)"
        answer = str(record.get("answer", "")) + ("" if details.get("json") else " (no JSON: first line)")
        return [
            trace_step("Decomposition", listed),
            *steps,
            trace_step("Answer", [["answer", answer], ["", read]]),
        ]


def listed_sub_questions(reply: str, limit: int) -> list[str]:
    """The sub-questions of a decomposition reply, read as the release reads it (`utils/model.py`: the first
    `{...}`, so a nested object is no list), each searched as written, a repeated one again (its paragraphs are
    the same, kept once); the first `limit`, and none where there is no list (blank or non-text items, which the
    release's retriever cannot take, left out)."""
    parsed = parse_json_object(reply)
    listed = parsed.get("decomposed_questions") if parsed else None
    return [q for q in listed if isinstance(q, str) and q.strip()][:limit] if isinstance(listed, list) else []
