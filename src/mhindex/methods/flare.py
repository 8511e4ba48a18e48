"""FLARE, active retrieval (Jiang et al., EMNLP 2023), as FlashRAG runs it for its table (RUC-NLPIR/FlashRAG
@1ee5249, `flashrag/pipeline/active_pipeline.py` `FLAREPipeline`, with its default prompt, `flashrag/prompt/
base_prompt.py` `PromptTemplate`, and settings, `flashrag/config/basic_config.yaml`); jzbjyb/FLARE is the paper's.

Each round looks ahead: the model continues the answer written so far for at most `--look-ahead` tokens (64),
greedily, stopped at the first of FlashRAG's stop characters (any of "!@#$%^&*()" or a newline), and its first
sentence (split where a space follows a sentence's end, FlashRAG's `(?<=[^A-Z].[.?]) +`) is judged: if every one
of its tokens has a probability above `--threshold` (0.2), it is kept; else the tokens above the threshold make
the query (the uncertain ones masked, the paper's masked query), the retriever's top `-k` (5) paragraphs go into
the prompt, and the sentence is written again from them. The answer is the sentences kept, joined as FlashRAG
joins them (without a space), after at most `--max-rounds` rounds (5) or `--max-length` tokens (256: the
looked-ahead sentences' tokens, as FlashRAG counts them).

The prompt is FlashRAG's default (methods/sequential.py): the system turn with the paragraphs as "Doc 1(Title: T)
text" (none before a retrieval), the user turn "Question: ...", through the model's chat template (FlashRAG's for
an instruct model), and the answer so far appended after the assistant's turn opens.

It needs each generated token's log-probability: a model that gives none is refused in one line. Deviations:
the masked query joins the generated tokens kept (FlashRAG re-encodes the sentence and pairs those ids with the
generated tokens' scores: the same tokens wherever re-encoding gives the generation back); the prompt is not cut
to FlashRAG's 2,048 input tokens (`generator_max_input_len` of the table's my_config.yaml, which cuts the middle
out of a longer one).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from mhindex.backends.base import Hit, Retriever
from mhindex.errors import UsageError
from mhindex.lm.base import Completion, LanguageModel
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
from mhindex.methods.sequential import SYSTEM, continued, flashrag_prompt, reference
from mhindex.options import option

#: `FLAREPipeline.stop_sym`: a list of single characters, each a stop string
STOPS = tuple(dict.fromkeys("!@#$%^&*()\n\n)(*&^%$#@!"))
_SENTENCE_END = re.compile(r"(?<=[^A-Z].[.?]) +")


@dataclass(frozen=True)
class FlareSettings:
    k: int = option(5, "Paragraphs a retrieval brings (FlashRAG's retrieval_topk).", flag="-k", min=1)
    threshold: float = option(0.2, "A token below this probability makes the sentence uncertain.", min=0.0, max=1.0)
    look_ahead: int = option(64, "Tokens a round looks ahead (FlashRAG's look_ahead_steps).", min=1)
    max_length: int = option(256, "Stop once the sentences kept count this many tokens.", min=1)
    max_rounds: int = option(5, "At most this many rounds (FlashRAG's max_iter_num).", min=1)

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        return asdict(self)


def first_sentence(output: str) -> str:
    """`get_next_sentence`'s text: the output up to its first sentence end followed by spaces."""
    return _SENTENCE_END.split(output)[0]


def masked_query(tokens: list[tuple[str, float]], threshold: float) -> str:
    """`judge_sent_confidence`'s query: the sentence's tokens whose probability is above the threshold."""
    return "".join(token for token, logprob in tokens if math.exp(logprob) > threshold)


def judged(tokens: list[tuple[str, float]], threshold: float) -> tuple[bool, str | None]:
    """`judge_sent_confidence`: whether the sentence (its tokens) is kept, and else the query that retrieves for
    it; a sentence whose every token is uncertain (an empty query) is kept."""
    if all(math.exp(logprob) > threshold for _, logprob in tokens):
        return True, None
    query = masked_query(tokens, threshold)
    return (False, query) if query else (True, None)


class Flare(Method):
    name = "flare"
    title = "FLARE"
    paper = "FLARE (Jiang et al., EMNLP 2023), as FlashRAG runs it (RUC-NLPIR/FlashRAG FLAREPipeline)"
    tables = {"FlashRAG": {"FLARE": {}}}
    Settings = FlareSettings

    settings: FlareSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return int(2 * settings.max_rounds)  # a look-ahead, and the sentence again where it searched

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: FlareSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)

    def prompt(self, question: str, hits: list[Hit]) -> str:
        """FlashRAG's default prompt (methods/sequential.py), the paragraphs in it after a retrieval."""
        return flashrag_prompt(self.lm, SYSTEM.format(reference=reference(hits)), question)

    def _look_ahead(self, meter: Meter, prompt: str, label: str) -> Completion:
        made = meter.complete(prompt, self.settings.look_ahead, stop=list(STOPS), label=label, logprobs=True)
        if made.token_logprobs is None:
            raise UsageError(f"flare judges each token's probability, and the model {self.lm.name} gives none")
        return made

    def answer(self, query: Query) -> Answer:
        s, clock, meter = self.settings, Clock(), Meter(self.lm)
        written, length, rounds, steps, found = "", 0, list[dict[str, Any]](), list[Step](), dict[str, Hit]()
        looking = self.prompt(query.question, [])  # the same every round: the template rendered once a question
        while length < s.max_length and len(rounds) < s.max_rounds:
            started, before = clock(), (meter.prompt_tokens, meter.completion_tokens)
            ahead = self._look_ahead(meter, continued(looking, written), f"round {len(rounds) + 1}")
            sentence, generated = first_sentence(ahead.text), ahead.token_logprobs or []
            tokens = generated[: self.lm.count_tokens(sentence) if sentence else 0]
            confident, asked = judged(tokens, s.threshold)
            taken = {"output": ahead.text, "tokens": [[token, logprob] for token, logprob in generated],
                     "looked_ahead": sentence, "sentence_tokens": len(tokens), "confident": confident,
                     "query": asked}  # fmt: skip
            if asked is not None:
                hits = self.retriever.search(asked, s.k)
                informed = continued(self.prompt(query.question, hits), written)
                again = meter.complete(informed, s.look_ahead, stop=list(STOPS),
                                       label=f"round {len(rounds) + 1}, from {len(hits)} paragraphs")  # fmt: skip
                sentence = first_sentence(again.text)
                found.update({h.id: h for h in hits if h.id not in found})
                steps.append(Step(sentence, asked, [h.id for h in hits], [h.title for h in hits], clock() - started,
                                  meter.prompt_tokens - before[0], meter.completion_tokens - before[1]))  # fmt: skip
            rounds.append({**taken, "kept": sentence})
            written += sentence
            length += len(tokens)
        return Answer(
            query.id, query.question, written, [{"id": h.id, "title": h.title} for h in found.values()], steps,
            meter.calls, meter.prompt_tokens, meter.completion_tokens, clock(), written, self.name,
            details={"flare": {"rounds": rounds}, "agent": agent_summary(
                len(steps), f"--max-length {s.max_length} tokens written" if length >= s.max_length else
                f"--max-rounds {s.max_rounds} rounds done", empty_look_aheads=sum(
                    1 for taken in rounds if not taken["looked_ahead"].strip()))},
        )  # fmt: skip

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each round: the sentence looked ahead, whether it was kept or written again from what its query found."""
        details = record.get("flare")
        if not isinstance(details, dict):
            return super().trace_steps(record)
        steps = []
        for number, taken in enumerate(details.get("rounds", []), 1):
            rows = [["looked ahead", str(taken.get("looked_ahead", ""))]]
            if not taken.get("confident"):
                rows += [["query", str(taken.get("query"))], ["written again", str(taken.get("kept", ""))]]
            steps.append(trace_step(f"round {number}" + (" (confident)" if taken.get("confident") else ""), rows))
        return steps
