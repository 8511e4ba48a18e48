"""Direct and Direct-R: the question answered in one LM call, without retrieval or from the top K paragraphs
retrieved with the question as it is: EfficientRAG's rows "Direct" and "Direct-R" as its release runs them
(microsoft/EfficientRAG @6b2489f: `src/baseline/direct/direct_prompt.py --mode direct` and
`src/baseline/retrieve/direct.py`, top 10), SearChain's "Direct Prompting" and "Direct Retrieval" (zero-shot,
its Table 8) and KD-CoT's "LLM Retrieval 4-passages" (its Table 2).

`--prompt json` (the default) is the release's: its few-shot prompt of the corpus's dataset (`DIRECT_PROMPT_*`,
or with paragraphs `DIRECT_RETRIEVE_ANSWER_PROMPT_*`, their texts one a line as `{knowledge}`), one user turn
after the system message "You are a helpful assistant.", the answer the first `{...}`'s "answer"
(`utils/model.py`, `ask_model`). Deviations, each forced: calls are greedy (the release samples, so its three
tries of an invalid reply would give the same reply); where the reply holds no JSON answer, its first line is
the answer (the release drops the question) and the record says `"json": false`.

`--prompt zero-shot` is SearChain's and KD-CoT's setting, whose wording neither paper nor release gives; it is
mhindex's: "Answer the question." (with paragraphs: "Answer the question using the paragraphs.", each
paragraph's title and text), then "Question: ...\\nAnswer:"; the answer is the reply's first line, a leading
"Answer:" dropped. SearChain's K for Direct Retrieval is not given either: its row runs mhindex's choice, 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mhindex.backends.base import Hit, Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step, TraceStep, trace_step
from mhindex.methods.efficientrag import NO_JSON, SYSTEM, BaselineSettings, answer_step, json_answer, released_prompt
from mhindex.options import option

PROMPTS = ("json", "zero-shot")
ZERO_SHOT = "Answer the question.\n\nQuestion: {question}\nAnswer:"
ZERO_SHOT_READING = "Answer the question using the paragraphs.\n\n{knowledge}\n\nQuestion: {question}\nAnswer:"
PROMPT_HELP = (
    "json: the released few-shot prompt of EfficientRAG's baseline (a JSON answer); zero-shot: the question alone "
    "(SearChain's and KD-CoT's setting, mhindex's wording)."
)


@dataclass(frozen=True)
class DirectSettings(BaselineSettings):
    prompt: str = option("json", PROMPT_HELP, choices=PROMPTS)
    answer_tokens: int = option(256, "Most tokens for the reply.", min=1)


@dataclass(frozen=True)
class DirectRetrievalSettings(DirectSettings):
    k: int = option(10, "Paragraphs retrieved with the question (the release's topk).", flag="-k", min=1)
    max_paragraph_words: int = option(350, "Paragraphs are cut to this many words in the prompt.", min=1)


def zero_shot_answer(reply: str) -> str:
    """The first line of a zero-shot reply that says something, a leading "Answer:" dropped."""
    first = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    return first.removeprefix("Answer:").strip()


class Direct(Method):
    name = "direct"
    title = "Direct"
    paper = "Direct prompting, as EfficientRAG's baseline (microsoft/EfficientRAG) and SearChain's (zero-shot)"
    tables = {"EfficientRAG": {"Direct": {}}, "SearChain": {"Direct Prompting": {"prompt": "zero-shot"}}}
    paper_metrics = ("efficientrag_em",)
    Settings = DirectSettings
    needs_retriever = False

    settings: DirectSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return 1

    def __init__(self, retriever: Retriever | None, lm: LanguageModel, settings: Any, context: MethodContext) -> None:
        super().__init__(retriever, lm, settings, context)
        self.prompt_name = settings.prompts_for(context.dataset)
        self.template = self._template()

    def _template(self) -> str:
        return ZERO_SHOT if self.settings.prompt == "zero-shot" else released_prompt(f"direct_{self.prompt_name}")

    def _hits(self, query: Query) -> list[Hit]:
        return []

    def answer(self, query: Query) -> Answer:
        s, clock, meter = self.settings, Clock(), Meter(self.lm)
        hits = self._hits(query)
        steps = [Step("", query.question, [h.id for h in hits], [h.title for h in hits], clock())] if hits else []
        texts = [f"{h.title}\n{h.text}" if s.prompt == "zero-shot" else h.text for h in hits]
        if self.needs_retriever:
            slot, words = "knowledge", getattr(s, "max_paragraph_words", 350)
            reply, read = answer_step(meter, self.template, query.question, texts, answer_tokens=s.answer_tokens,
                                      max_words=words, slot=slot)  # fmt: skip
        else:
            messages = [{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": self.template.format(question=query.question)}]  # fmt: skip
            reply, read = meter.chat(messages, s.answer_tokens, stop=[], label="answering").text.strip(), 0
        if s.prompt == "zero-shot":
            answer, parsed = zero_shot_answer(reply), None
        else:
            answer, parsed = json_answer(reply)
        details = {"prompt": s.prompt, "prompt_from": self.prompt_name, "reply": reply, "read": read}
        if s.prompt == "json":
            details["json"] = parsed is not None and "answer" in parsed
        return Answer(
            query.id,
            query.question,
            answer,
            [{"id": h.id, "title": h.title} for h in hits],
            steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            reply,
            self.name,
            details={"direct": details},
            departures=[NO_JSON] if details.get("json") is False else [],
        )

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """The retrieval (where there was one), then the reply and the answer read from it."""
        details = record.get("direct")
        steps = super().trace_steps({**record, "reader": None})
        if not isinstance(details, dict):
            return steps
        answer = str(record.get("answer", "")) + (" (no JSON: first line)" if details.get("json") is False else "")
        rows = [["reply", str(details.get("reply", ""))], ["answer", answer]]
        if details.get("read"):
            rows.append(["", f"read {details['read']} paragraphs"])
        prompt = "zero-shot" if details.get("prompt") == "zero-shot" else f"{details.get('prompt_from')}'s released"
        return [*steps, trace_step(f"Answer ({prompt} prompt)", rows)]


class DirectRetrieval(Direct):
    name = "direct-r"
    title = "Direct-R"
    paper = (
        "One retrieval with the question, then one LM call: EfficientRAG's Direct-R (microsoft/EfficientRAG), "
        "SearChain's Direct Retrieval, KD-CoT's LLM Retrieval 4-passages"
    )
    tables = {
        "EfficientRAG": {"Direct-R": {}},
        "SearChain": {"Direct Retrieval": {"prompt": "zero-shot", "k": 5}},
        "KD-CoT": {"LLM Retrieval 4-passages": {"prompt": "zero-shot", "k": 4}},
    }
    Settings = DirectRetrievalSettings
    needs_retriever = True

    settings: DirectRetrievalSettings

    def _template(self) -> str:
        if self.settings.prompt == "zero-shot":
            return ZERO_SHOT_READING
        return released_prompt(f"answer_{self.prompt_name}")

    def _hits(self, query: Query) -> list[Hit]:
        return self.retriever.search(query.question, self.settings.k)
