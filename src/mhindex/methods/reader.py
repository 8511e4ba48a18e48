"""The reader: answers a question from the paragraphs a method collected (or from none, for
NoR), with direct or chain-of-thought prompting, using IRCoT's demonstrations."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Meter
from mhindex.methods.prompts import (
    PromptPacker,
    cut_repetition,
    demonstrations,
    extract_answer,
    paragraph_block,
    question_block,
    short_span,
)
from mhindex.methods.settings import ReaderSettings, demo_choice

# Below this size a model answers better with the Direct reader than with CoT: Qwen2.5-0.5B's F1
# on 50 HotpotQA questions, OneR, is 35.2 with Direct and 13.2 with CoT (benchmarks/README.md),
# as the IRCoT paper found for Flan-T5. GPT-class models keep the paper's CoT reader.
SMALL_MODEL_PARAMETERS = 3_000_000_000


def resolve_style(settings: ReaderSettings, lm: LanguageModel) -> str:
    if settings.prompt_style != "auto":
        return settings.prompt_style
    return "flan_t5" if lm.seq2seq else "codex"


def resolve_reader(settings: ReaderSettings, style: str, lm: LanguageModel) -> str:
    """auto: Direct for Flan-T5-style prompting (the paper) and for small models (measured), else CoT."""
    if settings.reader != "auto":
        return settings.reader
    if style == "flan_t5":
        return "direct"
    parameters = lm.parameters
    return "direct" if parameters is not None and parameters < SMALL_MODEL_PARAMETERS else "cot"


@dataclass(frozen=True)
class ReaderCall:
    """The reader's call, kept whole in the trace and the JSON record: when its answer differs
    from what a chain concluded, this is where a user sees why."""

    answer: str
    output: str  # what the model wrote, cut at its first repetition
    paragraphs: int
    prompt_tokens: int
    seconds: float
    demos: dict[str, Any] | None = None  # settings.demo_choice: the set, why, how many of it fit

    def record(self) -> dict[str, Any]:
        return {
            "paragraphs": self.paragraphs,
            "prompt_tokens": self.prompt_tokens,
            "seconds": round(self.seconds, 3),
            "output": self.output,
            **({"demos": self.demos} if self.demos else {}),
        }


class Reader:
    def __init__(
        self,
        lm: LanguageModel,
        settings: ReaderSettings,
        demo_set: str,
        with_context: bool,
        dataset: str | None = None,
    ) -> None:
        self.settings = settings
        self.style = resolve_style(settings, lm)
        self.kind = resolve_reader(settings, self.style, lm)
        self.packer = PromptPacker(lm.count_tokens, lm.context_length)
        context = f"gold_with_{settings.distractors}_distractors_context" if with_context else "no_context"
        pool = demonstrations(demo_set, f"{context}_{self.kind}_qa", self.style)
        budget = settings.demo_budget or lm.context_length // 2
        self.demos = self.packer.choose(pool, budget, settings.max_demos)
        # The set the prompt was made from, whatever `dataset` says (or omits): the record never names another.
        self.demo_choice = demo_choice(settings, dataset, len(self.demos), len(pool), demo_set)

    def read(self, meter: Meter, question: str, paragraphs: Sequence[tuple[str, str]]) -> ReaderCall:
        blocks = [paragraph_block(t, x, self.settings.max_paragraph_words) for t, x in paragraphs]
        instance = "\n\n".join([*blocks, question_block(question, self.style, cot=self.kind == "cot")])
        prompt = self.packer.render(self.demos, instance, self.settings.answer_tokens)
        started = time.perf_counter()
        completion = meter.complete(
            prompt,
            self.settings.answer_tokens,
            stop=["\n"],
            label=f"answering from {len(paragraphs)} paragraphs",
            keep=len(prompt) - len(instance),
        )
        output = cut_repetition(completion.text.strip())
        answer = extract_answer(output)
        if self.settings.short_answer:
            answer = short_span(answer)
        seconds = time.perf_counter() - started
        return ReaderCall(answer, output, len(paragraphs), completion.prompt_tokens, seconds, self.demo_choice)
