"""R1-Searcher (Song et al., 2025): its search loop as its release evaluates a trained checkpoint (RUCAIBox/
R1-Searcher @631167c, `evaluation/eval_search_loacl.py` `main`, run by `evaluation/gen_search.sh`).

The question goes into the released prompt (`--r1-prompt`, v0 as gen_search.sh runs it: prompts/r1searcher/), which
ends "User:{question}\\nAssistant: <think>", sent as it is, without a chat template. Each round the model writes
at most 512 tokens (`--step-tokens`), greedily (the release's temperature 0), up to the first of its stop strings
"<|im_end|>", "<|endoftext|>", "<|end_of_query|>", "</answer>" (vLLM's, which leave the stop string out). What it
wrote is read as `main` reads it:

- it holds "<answer>" and stopped at "</answer>": the answer is what follows the last "<answer>" (as written,
  spaces kept);
- it holds "<|begin_of_query|>" and stopped at "<|end_of_query|>": the query is what follows the last
  "<|begin_of_query|>", with quotes, apostrophes and "..." removed and tabs made spaces; the top `-k` (5)
  paragraphs come back as "(1)Title: T Text: text\\n..." ("None" for none) and the prompt grows by what was
  written, stripped, then "<|end_of_query|>\\n\\n<|begin_of_documents|>\\n" + those + "<|end_of_documents|>\\n\\n";
  an empty query ends with "I don't know." (query_inst_error);
- anything else ends with "I don't know." (shot_down).

The release makes a tenth round's call and discards it, answering "I don't know." (many_retrieve): here at most
`--max-rounds` (9) calls are made, and the tenth ends the same way without its call. The record keeps the
release's `stop_reason_final` for each question.

Deviations: the release's retriever is bge-large-en-v1.5 over Wikipedia's abstracts (its `wiki_corpus_load.py`);
here it is whatever `--backend` searches, over the corpus; a query of white space alone brings no paragraphs
(the release's FAISS server always answers k). Its scoring script (`metric_calc_rule.py`) normalises answers
otherwise than SQuAD (punctuation becomes a space, "_" a space, True/False yes/no) and its tables report cover-EM
and an LLM judge: mhindex scores the answer with its own metrics.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from mhindex.backends.base import Hit, Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import (
    Answer,
    Clock,
    Meter,
    Method,
    MethodContext,
    Query,
    Step,
    TraceStep,
    agent_summary,
    trace_step,
)
from mhindex.options import option

PROMPTS = ("v0", "v1", "v2", "v3")
STOPS = ("<|im_end|>", "<|endoftext|>", "<|end_of_query|>", "</answer>")
BEGIN_QUERY, END_QUERY = "<|begin_of_query|>", "<|end_of_query|>"
UNKNOWN = "I don't know."


@dataclass(frozen=True)
class R1SearcherSettings:
    k: int = option(5, "Paragraphs a query brings (the release's topk).", flag="-k", min=1)
    max_rounds: int = option(9, "Rounds of writing (the release discards a tenth, answering I don't know.).", min=1)
    step_tokens: int = option(512, "Most tokens a round writes (the release's max_tokens).", min=1)
    r1_prompt: str = option("v0", "The released prompt (v0, as gen_search.sh runs it; v3 for yes/no).", choices=PROMPTS)

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        return asdict(self)


def released_prompt(version: str) -> str:
    return resources.files("mhindex").joinpath("prompts", "r1searcher", f"{version}.txt").read_text("utf-8")


def stopped(raw: str) -> tuple[str, str | None]:
    """What vLLM returns of a generation with the release's stop strings: the text before the first one written,
    and which it was (None: the model ended, or ran out of tokens)."""
    found = [(raw.find(stop), stop) for stop in STOPS if stop in raw]
    if not found:
        return raw, None
    at, stop = min(found)
    return raw[:at], stop


def read_round(text: str, stop: str | None) -> tuple[str, str]:
    """`main`'s reading of one round: ("finished", the answer), ("query", the query), or the reason it ends
    without one ("query_inst_error", "shot_down") with the release's answer "I don't know."."""
    if "<answer>" in text and stop == "</answer>":
        return "finished", text.split("<answer>")[-1].split("</answer>")[0]
    if BEGIN_QUERY in text and stop == END_QUERY:
        query = text.split(BEGIN_QUERY)[-1].split(END_QUERY)[0]
        query = query.replace('"', "").replace("'", "").replace("\t", " ").replace("...", "")
        return ("query", query) if query else ("query_inst_error", UNKNOWN)
    return "shot_down", UNKNOWN


#: the release's `stop_reason_final`, said in words (the answer's `agent.stopped`)
STOPPED = {
    "finished": "it answered (<answer>)",
    "many_retrieve": "the round limit (--max-rounds {rounds}) while still searching",
    "query_inst_error": "an empty query (the release's query_inst_error)",
    "shot_down": "a round with neither an answer nor a query (the release's shot_down)",
}


def documents(hits: list[Hit]) -> str:
    """The paragraphs as the release writes them into the prompt (its corpus lines read "Title: T Text: text")."""
    if not hits:
        return "None"
    return "".join(f"({number})Title: {hit.title} Text: {hit.text}\n" for number, hit in enumerate(hits, 1))


class R1Searcher(Method):
    name = "r1searcher"
    title = "R1-Searcher"
    paper = "R1-Searcher (Song et al., 2025), its search loop as its release evaluates it (RUCAIBox/R1-Searcher)"
    tables = {"FlashRAG": {"R1-Searcher": {}}}
    Settings = R1SearcherSettings

    settings: R1SearcherSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return int(settings.max_rounds)

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: R1SearcherSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.prompt = released_prompt(settings.r1_prompt)

    def answer(self, query: Query) -> Answer:
        s, clock, meter = self.settings, Clock(), Meter(self.lm)
        base = self.prompt.format(question=query.question)
        prompt, steps, found, written = base, list[Step](), dict[str, Hit](), list[str]()
        reason, answer = "many_retrieve", UNKNOWN
        for number in range(s.max_rounds):
            started, before = clock(), (meter.prompt_tokens, meter.completion_tokens)
            raw = meter.complete(prompt, s.step_tokens, stop=[], label=f"round {number + 1}",
                                 stop_when=lambda text: any(stop in text for stop in STOPS)).text  # fmt: skip
            text, stop = stopped(raw)
            written.append(text)
            what, content = read_round(text, stop)
            if what != "query":
                reason, answer = what, content
                break
            hits = self.retriever.search(content, s.k) if content.strip() else []
            prompt += f"{text.strip()}{END_QUERY}\n\n<|begin_of_documents|>\n{documents(hits)}<|end_of_documents|>\n\n"
            found.update({h.id: h for h in hits if h.id not in found})
            steps.append(Step(text.strip(), content, [h.id for h in hits], [h.title for h in hits], clock() - started,
                              meter.prompt_tokens - before[0], meter.completion_tokens - before[1]))  # fmt: skip
        details = {"r1searcher": {"prompt": s.r1_prompt, "stop_reason_final": reason, "pred_ans": answer,
                                  "history": prompt[len(base):] + (f"{written[-1]}</answer>" if reason == "finished"
                                                                   else ""),
                                  "written": written},
                   "agent": agent_summary(len(steps), STOPPED[reason].format(rounds=s.max_rounds))}  # fmt: skip
        return Answer(
            query.id, query.question, answer.strip(), [{"id": h.id, "title": h.title} for h in found.values()],
            steps, meter.calls, meter.prompt_tokens, meter.completion_tokens, clock(), prompt[len(base) :], self.name,
            details=details,
        )  # fmt: skip

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each query with the paragraphs it brought; then how the search ended (the release's reason)."""
        steps = super().trace_steps({**record, "reader": None})
        details = record.get("r1searcher")
        if isinstance(details, dict):
            rows = [["wrote", str(details.get("history", ""))], ["ended", str(details.get("stop_reason_final"))]]
            steps.append(trace_step(f"Conclusion ({details.get('prompt')} prompt)", rows))
        return steps
