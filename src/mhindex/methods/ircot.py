"""IRCoT: interleaving retrieval with chain-of-thought reasoning (Trivedi et al., ACL 2023).

1. Retrieve K paragraphs with the question.
2. Generate the next reasoning sentence from the question, every paragraph collected so far
   and the reasoning so far; keep only its first sentence.
3. If it says "answer is", stop; otherwise retrieve K more paragraphs (new ones only, at most 15
   in all) with the query IRCoT's release builds: the last sentence that is not reasoning ("So ...",
   arithmetic), else the question, less its wh-words (methods/queries.py; --no-clean-queries sends
   the sentence as generated). Repeat from 2, for at most 8 steps.
4. A separate reader answers from the collected paragraphs (direct or CoT prompting).

Prompts keep the demonstrations first and the paragraphs in retrieval order with new ones
appended, so consecutive prompts share the longest possible prefix and a local model
evaluates only what is new. For IIRC the main passage is always in the prompt, and the model
first names the Wikipedia pages it needs; these are mapped to corpus titles with BM25 and
retrieval is restricted to them (the paper's Appendix B).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from mhindex.backends.base import Hit, Retriever, search_titles
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step
from mhindex.methods.prompts import (
    PromptPacker,
    concludes,
    demonstrations,
    extract_answer,
    first_sentence,
    mentions_answer,
    paragraph_block,
    question_block,
    sentence_complete,
)
from mhindex.methods.queries import retrieval_query
from mhindex.methods.reader import Reader, resolve_style
from mhindex.methods.settings import CLEAN_QUERIES_HELP, ReaderSettings, demo_choice, demo_set
from mhindex.options import option


@dataclass(frozen=True)
class IRCoTSettings(ReaderSettings):
    """The paper's values as defaults; it tunes K in {2,4,6,8} per dataset on development data."""

    k: int = option(4, "Paragraphs per retrieval (K).", flag="-k", min=1)
    max_steps: int = option(8, 'Most reasoning steps before giving up on "answer is".', min=1)
    max_paragraphs: int = option(15, "Most paragraphs collected (the paper's budget).", min=1)
    step_tokens: int = option(100, "Most tokens generated for one reasoning step (its first sentence is kept).", min=1)
    iirc_pages: int = option(2, "IIRC: pages the model names before retrieval.", min=1)
    early_stop: bool = option(
        True,
        "Stop each reasoning step as soon as its first sentence is complete (--no-early-stop generates up to "
        "--step-tokens, then cuts).",
    )
    clean_queries: bool = option(True, CLEAN_QUERIES_HELP, before=False)

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        """Without early_stop: it never changes an answer (tests/test_ircot_loop.py), only the time."""
        recorded = super().recorded(dataset)
        recorded.pop("early_stop")
        return recorded


class _Walk:
    """One question's walk: the paragraphs collected (within the budget), the steps taken, the clock and
    the meter; `pages` the titles retrieval is restricted to (IIRC)."""

    def __init__(
        self, retriever: Retriever, k: int, budget: int, meter: Meter, pages: list[str] | None, clock: Clock
    ) -> None:
        self.retriever, self.k, self.budget, self.meter, self.pages = retriever, k, budget, meter, pages
        self.clock = clock
        self.collected: list[Hit] = []
        self.steps: list[Step] = []

    def tokens(self) -> tuple[int, int]:
        return self.meter.prompt_tokens, self.meter.completion_tokens

    def step(self, sentence: str, query_text: str, started: float, tokens_before: tuple[int, int]) -> None:
        """Record one step; with a query, retrieve K and keep the new paragraphs within the budget."""
        new: list[Hit] = []
        if query_text:
            have = {h.id for h in self.collected}
            hits = self.retriever.search(query_text, self.k, titles=self.pages)
            new = [h for h in hits if h.id not in have][: max(0, self.budget - len(self.collected))]
            self.collected.extend(new)
        self.steps.append(
            Step(
                sentence,
                query_text,
                [h.id for h in new],
                [h.title for h in new],
                self.clock() - started,
                self.meter.prompt_tokens - tokens_before[0],
                self.meter.completion_tokens - tokens_before[1],
            )
        )


class IRCoT(Method):
    name = "ircot"
    title = "IRCoT"
    paper = "Interleaving Retrieval with Chain-of-Thought (Trivedi et al., ACL 2023; StonyBrookNLP/ircot)"
    uses_titles = "its reader reads each paragraph under its title, and IIRC's pages are found by title search"
    tables = {"IRCoT": {"IRCoT QA, Direct": {"reader": "direct"}, "IRCoT QA, CoT": {"reader": "cot"}}}
    Settings = IRCoTSettings

    settings: IRCoTSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return int(settings.max_steps + 1)  # its reasoning steps, then the reader

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: IRCoTSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.k = settings.k
        demos_from = demo_set(settings, context.dataset)
        self.style = resolve_style(settings, lm)
        self.packer = PromptPacker(lm.count_tokens, lm.context_length)
        budget = settings.demo_budget or lm.context_length // 2
        pool = demonstrations(demos_from, f"gold_with_{settings.distractors}_distractors_context_cot_qa", self.style)
        self.demos = self.packer.choose(pool, budget, settings.max_demos)
        self.step_demos = demo_choice(settings, context.dataset, len(self.demos), len(pool), demos_from)
        self.reader = Reader(lm, settings, demos_from, True, context.dataset)
        self._page_demos: list[str] | None = None

    # -- the loop -------------------------------------------------------------------------

    def answer(self, query: Query) -> Answer:
        s = self.settings
        clock, meter = Clock(), Meter(self.lm)
        pinned = [(query.main_passage["title"], query.main_passage["text"])] if query.main_passage else []
        pages = self._choose_pages(query, meter) if query.main_passage else None
        walk = _Walk(self.retriever, self.k, s.max_paragraphs, meter, pages, clock)
        walk.step("", retrieval_query(query.question, [], s.clean_queries), walk.clock(), walk.tokens())
        reasoning: list[str] = []
        for _ in range(s.max_steps):
            started, before = walk.clock(), walk.tokens()
            sentence = self._next_sentence(walk, query, pinned, reasoning)
            if not sentence or sentence in reasoning:  # nothing new: a loop, not reasoning
                break
            reasoning.append(sentence)
            done = mentions_answer(sentence)
            # The answer sentence is not a query; past the paragraph budget, reasoning goes on without retrieval.
            retrieves = not done and len(walk.collected) < s.max_paragraphs
            walk.step(
                sentence,
                retrieval_query(query.question, reasoning, s.clean_queries) if retrieves else "",
                started,
                before,
            )
            if done:
                break
        return self._conclude(walk, query, pinned, reasoning)

    def _next_sentence(self, walk: _Walk, query: Query, pinned: list[tuple[str, str]], reasoning: list[str]) -> str:
        """The next sentence of the chain, from the paragraphs collected so far and the chain itself."""
        s = self.settings
        blocks = [
            paragraph_block(t, x, s.max_paragraph_words)
            for t, x in pinned + [(h.title, h.text) for h in walk.collected]
        ]
        instance = "\n\n".join(
            [*blocks, question_block(query.question, self.style, cot=True, answer_so_far=" ".join(reasoning))]
        )
        prompt = self.packer.render(self.demos, instance, s.step_tokens)
        return first_sentence(
            walk.meter.complete(
                prompt,
                s.step_tokens,
                stop=["\n"],
                label=f"reasoning step {len(reasoning) + 1}",
                stop_when=sentence_complete if s.early_stop else None,
                keep=len(prompt) - len(instance),
            ).text
        )

    def _conclude(self, walk: _Walk, query: Query, pinned: list[tuple[str, str]], reasoning: list[str]) -> Answer:
        """The reader answers from everything collected; its call and the chain's own conclusion are recorded."""
        meter = walk.meter
        read = self.reader.read(meter, query.question, pinned + [(h.title, h.text) for h in walk.collected])
        answer = read.answer
        details: dict[str, Any] = {"reader": read.record(), "step_demos": self.step_demos}
        concluded = bool(reasoning) and mentions_answer(reasoning[-1])
        if concluded:
            details["chain_answer"] = extract_answer(reasoning[-1])
        if self.reader.kind == "cot" and not concludes(read.output) and concluded:
            # A CoT reader that never reaches "answer is" answers with its whole ramble; the chain
            # itself concluded, so its answer is the short one (measured in benchmarks/README.md).
            answer = details["chain_answer"]
        # Where the chain concluded one answer and the reader says another, the reader's stands, as
        # in the paper: with the Direct reader (small models' default) that measured better in every
        # stored run (benchmarks/README.md, "The reader or the chain").
        retrieved = [{"id": h.id, "title": h.title} for h in walk.collected]
        trace = " ".join(reasoning)
        if read.output and read.output != answer:
            trace = f"{trace}\n[reader] {read.output}" if trace else f"[reader] {read.output}"
        return Answer(
            query.id,
            query.question,
            answer,
            retrieved,
            walk.steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            walk.clock(),
            trace,
            self.name,
            walk.pages,
            details,
        )

    # -- IIRC: which pages to read ------------------------------------------------------------

    def _choose_pages(self, query: Query, meter: Meter) -> list[str] | None:
        """Ask the model for the pages it needs, map each to the corpus page whose title matches it best."""
        s, main = self.settings, query.main_passage
        assert main is not None  # only IIRC's questions, which carry their main passage, choose pages
        if self._page_demos is None:
            pool = demonstrations("iirc", "no_context_open_llm_retrieval", self.style)
            self._page_demos = self.packer.choose(pool, s.demo_budget or self.lm.context_length // 2, s.max_demos)
        ask = (
            f"The question is: '{query.question}'. Generate titles of {s.iirc_pages} Wikipedia pages that "
            "have relevant information to answer this question."
        )
        if self.style == "flan_t5":
            ask = f"Answer the following question.\n{ask}"
        instance = paragraph_block(main["title"], main["text"], s.max_paragraph_words) + f"\n\nQ: {ask}\nA:"
        prompt = self.packer.render(self._page_demos, instance, 60)
        generation = meter.complete(
            prompt, 60, stop=["\n"], label="choosing pages to read", keep=len(prompt) - len(instance)
        ).text.strip()
        named = _titles(generation)
        pages: list[str] = []
        for title in named:  # the released code maps each with a title search (document_type "title")
            hits = search_titles(self.retriever, title, 1)
            if hits and hits[0].title not in pages:
                pages.append(hits[0].title)
        return pages or None


def _titles(generation: str) -> list[str]:
    """["A", "B"] as the codex demonstrations answer, or a bare title as the flan_t5 ones do."""
    if generation.startswith("["):
        try:
            value = orjson.loads(generation)
            return [t for t in value if isinstance(t, str) and t.strip()]
        except orjson.JSONDecodeError:
            return re.findall(r'"([^"]+)"', generation)
    return [generation] if generation else []
