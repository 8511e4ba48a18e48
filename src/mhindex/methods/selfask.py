"""Self-Ask with retrieval (Press et al., Findings of EMNLP 2023; ofirpress/self-ask), as EfficientRAG's
table runs it (microsoft/EfficientRAG @6b2489f, `src/baseline/retrieve/selfask.py`), and as SearChain's runs it,
four-shot (its Table 8) with Press et al.'s own demonstrations (`--demos press`, prompts/selfask/SOURCE.md),
its follow-ups answered the same way (neither SearChain's paper nor its release says how; mhindex's choice).

The LM continues the released prompt of the corpus's dataset (Press et al.'s format with the dataset's own
demonstrations) as a completion, after "Are follow up questions needed here:". Each completion is read as
the release reads it (`call_model`): up to 100 tokens, valid only if it reaches one of its stop strings
("\\nIntermediate answer:", "So the final answer is:"), cut before the first. While the last line of what it
wrote asks a "Follow up:" (at most 5), that question (the text after the completion's last colon) goes to
the retriever, whose top K paragraphs answer it through EfficientRAG's QA prompt as one JSON chat turn
("unknown" where the reply holds no JSON answer), and "\\nIntermediate answer: ANSWER." continues the
prompt. Then "So the final answer is:" is appended and the LM completes up to its first newline; the
answer is what follows the last colon, a final period dropped (`extract_answer`).

The release's quirks are kept, since its table was made with them: each completion is stripped before it
is appended (so "here:Yes." and "ANSWER.Follow up:" run together), and the text cut before "So the final
answer is:" is never appended. A completion is valid when its raw text holds a stop string, and is cut where
the first one stands in its stripped text (`call_model`), so the final completion " Ogro\n" is "Ogro"; the
raw completions are kept in the record (`"completions"`), to be read again. Deviations, each forced or said:
calls are greedy (the release samples, so its three tries of an invalid completion would give the same one
here); and where the final completion gives no answer, the last intermediate answer is the answer and the
record says so (`"fallback"`), where the release answers with nothing (or, for "So the final answer is: "
with nothing after it, fails the question on an IndexError in `extract_answer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from mhindex.backends.base import Hit, Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step, TraceStep, trace_step
from mhindex.methods.efficientrag import BaselineSettings, answer_step, parse_json_object, released_prompt
from mhindex.options import option

DEMOS = ("dataset", "press")
INTERMEDIATE = "\nIntermediate answer:"
FOLLOW_UP = "Follow up:"
FINAL = "So the final answer is:"


@dataclass(frozen=True)
class SelfAskSettings(BaselineSettings):
    demos: str = option(
        "dataset",
        "dataset: EfficientRAG's released demonstrations of the dataset; press: Press et al.'s four (SearChain's row).",
        choices=DEMOS,
    )
    k: int = option(10, "Paragraphs retrieved for each follow-up question (the release's topk).", flag="-k", min=1)
    max_follow_ups: int = option(5, "At most this many follow-up questions (the release's max_iter).", min=0)
    step_tokens: int = option(100, "Most tokens a completion writes (the release's max_tokens).", min=1)
    answer_tokens: int = option(256, "Most tokens for an intermediate answer's JSON reply.", min=1)
    max_paragraph_words: int = option(350, "Paragraphs are cut to this many words in prompts.", min=1)


def released_reading(raw: str, stops: str | tuple[str, ...]) -> str | None:
    """A completion as the release's `call_model` keeps it: valid only if its raw text holds a stop string
    (None otherwise: the release answers such a call with ""), then stripped and cut before the first stop
    string found in the stripped text (with a tuple of stops, that part is stripped again).

    The completion may have ended early, once a stop string was written after its leading white space
    (`SelfAsk._complete`); what the release strips off the end of its longer completion lies past that stop,
    so the end is stripped here only where nothing is cut."""
    if not (stops in raw if isinstance(stops, str) else any(stop in raw for stop in stops)):
        return None
    text = raw.lstrip()
    if isinstance(stops, str):
        return text.split(stops)[0] if stops in text else text.rstrip()
    found = [(text.find(stop), order) for order, stop in enumerate(stops) if stop in text]
    if not found:  # every find gave -1: the release splits at its first stop string, keeping it all
        return text.strip()
    return text.split(stops[min(found)[1]])[0].strip()


def _after_colon(generated: str) -> str:
    """The release's `extract_question`: what follows the text's last colon where its last line has one (else
    that last line), a leading space dropped."""
    after = generated.split(":")[-1] if ":" in generated.split("\n")[-1] else generated.split("\n")[-1]
    return after[1:] if after.startswith(" ") else after


def final_answer(generated: str) -> str:
    """The release's `extract_answer` of the whole prompt and final completion: `_after_colon` with a final period
    dropped ("" where nothing follows the colon, where the release fails: see the module's docstring)."""
    after = _after_colon(generated)
    return after[:-1] if after.endswith(".") else after


class SelfAsk(Method):
    name = "selfask"
    title = "Self-Ask"
    paper = (
        "Self-Ask (Press et al., Findings of EMNLP 2023), as EfficientRAG's baseline runs it (microsoft/EfficientRAG)"
    )
    tables = {"EfficientRAG": {"SelfAsk": {}}, "SearChain": {"Self-Ask": {"demos": "press"}}}
    paper_metrics = ("efficientrag_em",)
    Settings = SelfAskSettings

    settings: SelfAskSettings

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: SelfAskSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.prompt_name = settings.prompts_for(context.dataset)
        if settings.demos == "press":
            press = resources.files("mhindex").joinpath("prompts", "selfask", "press.txt")
            self.prompt = press.read_text("utf-8").strip()
        else:
            self.prompt = released_prompt(f"selfask_{self.prompt_name}")
        self.answer_prompt = released_prompt(f"answer_{self.prompt_name}")

    def _complete(self, meter: Meter, prompt: str, stops: str | tuple[str, ...], label: str) -> str:
        """Up to `step_tokens`, ended early once a stop string is written after the leading white space (what
        follows it is cut anyway): the raw text, which `released_reading` reads."""
        found = (stops,) if isinstance(stops, str) else stops
        return meter.complete(
            prompt,
            self.settings.step_tokens,
            stop=[],
            label=label,
            stop_when=lambda t: any(s in t.lstrip() for s in found),
        ).text

    def answer(self, query: Query) -> Answer:
        s, clock, meter = self.settings, Clock(), Meter(self.lm)
        base = self.prompt.format(question=query.question)
        prompt, steps, found, completions = base, list[Step](), dict[str, Hit](), list[str]()

        def complete(stops: str | tuple[str, ...], label: str) -> str:
            completions.append(self._complete(meter, prompt, stops, label))
            return released_reading(completions[-1], stops) or ""

        written = complete((INTERMEDIATE, FINAL), "are follow-up questions needed?")
        while FOLLOW_UP in written.split("\n")[-1] and len(steps) < s.max_follow_ups:
            started, before = clock(), (meter.prompt_tokens, meter.completion_tokens)
            prompt += written
            asked = _after_colon(written)
            hits = self.retriever.search(asked, s.k)
            intermediate = self._intermediate(meter, asked, hits)
            prompt += f"{INTERMEDIATE} {intermediate}."
            steps.append(
                Step(
                    f"{FOLLOW_UP} {asked} / Intermediate answer: {intermediate}",
                    asked,
                    [h.id for h in hits],
                    [h.title for h in hits],
                    clock() - started,
                    meter.prompt_tokens - before[0],
                    meter.completion_tokens - before[1],
                )
            )
            found.update({h.id: h for h in hits if h.id not in found})
            written = complete((INTERMEDIATE, FINAL), f"follow-up {len(steps) + 1}")
        prompt += FINAL
        final = complete("\n", "the final answer")
        answer = final_answer(prompt + final)
        fallback = None
        if not answer.strip():  # the format was not followed to its end: the best answer there is, said
            answer = steps[-1].text.rpartition("Intermediate answer: ")[2] if steps else ""
            fallback = "the final completion gave no answer: " + (
                "the last intermediate answer stands" if steps else "there is none"
            )
        details = {
            "selfask": {
                "prompt": "press" if s.demos == "press" else self.prompt_name,
                "history": prompt[len(base) :] + final,
                "follow_ups": len(steps),
                "fallback": fallback,
                "completions": completions,
            }
        }
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
            prompt[len(base) :],
            self.name,
            details=details,
        )

    def _intermediate(self, meter: Meter, question: str, hits: list[Hit]) -> str:
        """The release's `get_answer`: the follow-up answered from its paragraphs by the QA prompt, "unknown"
        where the reply's JSON has no "answer" (whose value is written as Python writes it, as there)."""
        reply, _ = answer_step(
            meter,
            self.answer_prompt,
            question,
            [h.text for h in hits],
            answer_tokens=self.settings.answer_tokens,
            max_words=self.settings.max_paragraph_words,
        )
        parsed = parse_json_object(reply)
        return str(parsed["answer"]) if parsed is not None and "answer" in parsed else "unknown"

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each follow-up with the paragraphs it brought and its intermediate answer, then how it concluded."""
        steps = super().trace_steps({**record, "reader": None})
        details = record.get("selfask")
        if isinstance(details, dict):
            rows = [["wrote", str(details.get("history", ""))]]
            if details.get("fallback"):
                rows.append(["note", str(details["fallback"])])
            steps.append(trace_step(f"Conclusion ({details.get('prompt')}'s prompt)", rows))
        return steps
