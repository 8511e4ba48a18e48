"""FlashRAG's two sequential baselines, as its table runs them (RUC-NLPIR/FlashRAG @1ee5249,
`examples/methods/run_exp.py` with `examples/methods/my_config.yaml`): Naive Generation (`zero_shot`:
`SequentialPipeline.naive_run` with its own-knowledge prompt) and Standard RAG (`naive`: `SequentialPipeline.run`,
the question retrieving its top `-k` (5) documents, with FlashRAG's default prompt). Each is one greedy call of at
most `--answer-tokens` (32, `generation_params`), its text the answer as FlashRAG scores it.

The prompt is `PromptTemplate.get_string` (`flashrag/prompt/base_prompt.py`): the system turn and the user turn
"Question: ...", through the model's chat template (FlashRAG's for an instruct model; a model without one reads
the two joined by a blank line), the documents as "Doc 1(Title: T) text". FLARE (methods/flare.py) writes its
prompts the same way. Deviation: a prompt is not cut to FlashRAG's 2,048 input tokens (`generator_max_input_len`,
which cuts the middle out of a longer one).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mhindex.backends.base import Hit
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, Query, Step, TraceStep, trace_step
from mhindex.options import option

#: `PromptTemplate.base_system_prompt` (its first two sentences meet without a space) and `base_user_prompt`
SYSTEM = (
    "Answer the question based on the given document.Only give me the answer and do not output any other words."
    "\nThe following are given documents.\n\n{reference}"
)
USER = "Question: {question}"
#: `run_exp.py zero_shot`'s system prompt (Naive Generation's row)
OWN_KNOWLEDGE = (
    "Answer the question based on your own knowledge. Only give me the answer and do not output any other words."
)


def reference(hits: list[Hit]) -> str:
    """`PromptTemplate.format_reference` (the title as its corpus's first line holds it)."""
    return "".join(f"Doc {number}(Title: {hit.title}) {hit.text}\n" for number, hit in enumerate(hits, 1))


def flashrag_prompt(lm: LanguageModel, system: str, question: str) -> str:
    """`PromptTemplate.get_string`: the system and user turns through the chat template, else joined by a blank
    line."""
    user = USER.format(question=question)
    turns = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return lm.chat_prompt(turns) or f"{system}\n\n{user}"


def continued(prompt: str, written: str) -> str:
    """`get_string`'s `previous_gen` (FLARE's answer so far) after the prompt, unless it is empty or one space."""
    return prompt + (written if written not in ("", " ") else "")


@dataclass(frozen=True)
class NaiveSettings:
    answer_tokens: int = option(32, "Most tokens of the answer (FlashRAG's max_tokens).", min=1)

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StandardRAGSettings(NaiveSettings):
    k: int = option(5, "Documents retrieved with the question (FlashRAG's retrieval_topk).", flag="-k", min=1)


class NaiveGeneration(Method):
    name = "naive-gen"
    title = "Naive Generation"
    paper = "FlashRAG's Naive Generation (run_exp.py zero_shot: the question alone, its own-knowledge prompt)"
    tables = {"FlashRAG": {"Naive Generation": {}}}
    Settings = NaiveSettings
    needs_retriever = False

    settings: NaiveSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return 1

    def _answer(self, query: Query, hits: list[Hit] | None) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        system = OWN_KNOWLEDGE if hits is None else SYSTEM.format(reference=reference(hits))
        prompt = flashrag_prompt(self.lm, system, query.question)
        text = meter.complete(prompt, self.settings.answer_tokens, stop=[], label="answering").text
        steps = [] if hits is None else [Step("retrieved with the question", query.question, [h.id for h in hits],
                                              [h.title for h in hits])]  # fmt: skip
        return Answer(
            query.id, query.question, text.strip(), [{"id": h.id, "title": h.title} for h in hits or []], steps,
            meter.calls, meter.prompt_tokens, meter.completion_tokens, clock(), text, self.name,
            details={"flashrag": {"generated": text}},
        )  # fmt: skip

    def answer(self, query: Query) -> Answer:
        return self._answer(query, None)

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """The documents retrieved (Standard RAG's), then what the model wrote from FlashRAG's prompt."""
        steps = super().trace_steps({**record, "reader": None})
        details = record.get("flashrag")
        if isinstance(details, dict):
            steps.append(trace_step("Generation (FlashRAG's prompt)", [["wrote", str(details.get("generated", ""))]]))
        return steps


class StandardRAG(NaiveGeneration):
    name = "standard-rag"
    title = "Standard RAG"
    paper = "FlashRAG's Standard RAG (run_exp.py naive: the question's top 5 documents in its default prompt)"
    tables = {"FlashRAG": {"Standard RAG": {}}}
    Settings = StandardRAGSettings
    needs_retriever = True

    settings: StandardRAGSettings

    def answer(self, query: Query) -> Answer:
        return self._answer(query, self.retriever.search(query.question, self.settings.k))
