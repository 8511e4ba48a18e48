"""Self-Ask with retrieval (Press et al., Findings of EMNLP 2023), in two rows, each read as its source reads it.

**EfficientRAG's row** (microsoft/EfficientRAG @6b2489f, `src/baseline/retrieve/selfask.py`): the LM continues the
released prompt of the corpus's dataset (Press et al.'s format with the dataset's own demonstrations) as a
completion, after "Are follow up questions needed here:". Each completion is read as the release reads it
(`call_model`): up to 100 tokens, valid only if it reaches one of its stop strings ("\\nIntermediate answer:",
"So the final answer is:"), cut before the first. While the last line of what it wrote asks a "Follow up:" (at
most 5), that question (the text after the completion's last colon) goes to the retriever, whose top K
paragraphs answer it through EfficientRAG's QA prompt as one JSON chat turn ("unknown" where the reply holds no
JSON answer), and "\\nIntermediate answer: ANSWER." continues the prompt. Then "So the final answer is:" is
appended and the LM completes up to its first newline; the answer is what follows the last colon, a final period
dropped (`extract_answer`). The release's quirks are kept, since its table was made with them: each completion is
stripped before it is appended (so "here:Yes." and "ANSWER.Follow up:" run together), and the text cut before "So
the final answer is:" is never appended. A completion is valid when its raw text holds a stop string, and is cut
where the first one stands in its stripped text (`call_model`), so the final completion " Ogro\\n" is "Ogro". An
invalid final completion (one ended at end-of-text without a newline) gives the release's answer: nothing.

**SearChain's row** (`--demos press`, its Table 8, four-shot): Press et al.'s own loop and reading
(ofirpress/self-ask's notebook, `promptf` and `extract_answer`; that repository cannot be fetched here, and the
reading stands on a copy of the notebook's functions, Bloominglightray/self-ask @dbc2574
`self-ask/self-ask_plus_search-engine_demo.ipynb`, whose `promptf`, `extract_answer`, `extract_question` and
`get_last_line` are Press's, run by tests/test_readings.py on real completions): Press's four demonstrations
(prompts/selfask/press.txt); each completion stops at "\\nIntermediate answer:" (up to 256 tokens, as its
`call_gpt`) or at end-of-text, and is appended as written; while its last line asks a "Follow up:", the question
is answered as above (neither SearChain's paper nor its release says how; Press's notebook asks Google) and "\\n
Intermediate answer: ANSWER." continues the prompt; unless a completion already holds "\\nSo the final answer
is:", that is appended and the LM completes to its first newline or end-of-text; the answer is what follows the
last colon of the whole text's last line, a leading space and a final period dropped. Where nothing follows it,
Press's `extract_answer` fails on an IndexError: the answer is empty, and the record says so.

Both: calls are greedy (the releases sample, so the three tries of an invalid completion in EfficientRAG's would
give the same one here); at most `--max-follow-ups` follow-ups (Press's loop has no limit: at the limit, the
final answer is asked for, and the record says so). Wherever mhindex departs from a release's reading for an
answer, the record names it (`departures`), and `eval` counts each kind per row in metrics.json and under the
table. The raw completions are kept in the record (`"completions"`), to be read again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
PRESS_FINAL = "\nSo the final answer is:"  # Press's `finalans`


@dataclass(frozen=True)
class SelfAskSettings(BaselineSettings):
    demos: str = option(
        "dataset",
        "dataset: EfficientRAG's released demonstrations of the dataset, read as its loop reads them; press: Press et "
        "al.'s four, read as their own loop reads them (SearChain's row).",
        choices=DEMOS,
    )
    k: int = option(10, "Paragraphs retrieved for each follow-up question (the release's topk).", flag="-k", min=1)
    max_follow_ups: int = option(5, "At most this many follow-up questions (the release's max_iter).", min=0)
    step_tokens: int = option(
        100, "Most tokens a completion writes (the release's max_tokens: EfficientRAG's 100, Press's 256).", min=1
    )
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


def press_answer(generated: str) -> str | None:
    """Press et al.'s `extract_answer`: the text after the last colon of `generated` where its last line has one
    (else that line), a leading space and a final period dropped; None where it fails (an IndexError on an
    empty text, before or after the space is dropped)."""
    last = generated.split("\n")[-1]
    after = generated.split(":")[-1] if ":" in last else last
    if not after:
        return None
    after = after[1:] if after[0] == " " else after
    if not after:
        return None
    return after[:-1] if after[-1] == "." else after


@dataclass
class _Run:
    """One question's loop so far: the prompt, the follow-ups, the paragraphs found, the raw completions, and
    where mhindex departed from the release's reading."""

    prompt: str
    meter: Meter
    clock: Clock
    steps: list[Step] = field(default_factory=list)
    found: dict[str, Hit] = field(default_factory=dict)
    completions: list[str] = field(default_factory=list)
    departures: list[str] = field(default_factory=list)


class SelfAsk(Method):
    name = "selfask"
    title = "Self-Ask"
    paper = (
        "Self-Ask (Press et al., Findings of EMNLP 2023), as EfficientRAG's baseline runs it (microsoft/EfficientRAG)"
    )
    tables = {
        "EfficientRAG": {"SelfAsk": {}},
        "SearChain": {"Self-Ask": {"demos": "press", "step_tokens": 256}},
    }
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
        """EfficientRAG's call: up to `step_tokens`, ended early once a stop string is written after the leading white
        space (what follows it is cut anyway, and the greedy tokens before it are the same): the raw text, which
        `released_reading` reads."""
        found = (stops,) if isinstance(stops, str) else stops
        return meter.complete(
            prompt,
            self.settings.step_tokens,
            stop=[],
            label=label,
            stop_when=lambda t: any(s in t.lstrip() for s in found),
        ).text

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        base = self.prompt.format(question=query.question)
        run = _Run(base, meter, clock)
        if self.settings.demos == "press":
            answer, final = self._press(query, run)
        else:
            answer, final = self._efficientrag(query, run)
        details = {
            "selfask": {
                "prompt": "press" if self.settings.demos == "press" else self.prompt_name,
                "reading": "press" if self.settings.demos == "press" else "EfficientRAG",
                "history": run.prompt[len(base) :] + final,
                "follow_ups": len(run.steps),
                "completions": run.completions,
            }
        }
        return Answer(
            query.id,
            query.question,
            answer,
            [{"id": h.id, "title": h.title} for h in run.found.values()],
            run.steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            run.prompt[len(base) :],
            self.name,
            details=details,
            departures=run.departures,
        )

    def _efficientrag(self, query: Query, run: _Run) -> tuple[str, str]:
        """EfficientRAG's `SelfAsk` loop and reading (the module's docstring); the answer and the final completion
        as read."""

        def complete(stops: str | tuple[str, ...], label: str) -> str:
            run.completions.append(self._complete(run.meter, run.prompt, stops, label))
            return released_reading(run.completions[-1], stops) or ""

        written = complete((INTERMEDIATE, FINAL), "are follow-up questions needed?")
        while FOLLOW_UP in written.split("\n")[-1] and len(run.steps) < self.settings.max_follow_ups:
            run.prompt += written
            self._follow_up(run, _after_colon(written))
            written = complete((INTERMEDIATE, FINAL), f"follow-up {len(run.steps) + 1}")
        run.prompt += FINAL
        final = complete("\n", "the final answer")  # invalid ("" here): the release answers nothing, as here
        return final_answer(run.prompt + final), final

    def _press(self, query: Query, run: _Run) -> tuple[str, str]:
        """Press et al.'s `promptf` and `extract_answer` (the module's docstring); the answer and the last completion
        as appended."""

        def complete(stop: str, label: str) -> str:
            run.completions.append(
                run.meter.complete(run.prompt, self.settings.step_tokens, stop=[stop], label=label).text
            )
            return run.completions[-1]

        written = complete(INTERMEDIATE, "are follow-up questions needed?")
        stopped = False
        while FOLLOW_UP in written.split("\n")[-1]:
            if len(run.steps) >= self.settings.max_follow_ups:
                limit = self.settings.max_follow_ups
                run.departures.append(f"stopped at {limit} follow-ups (Press's loop has no limit)")
                stopped = True  # the completion asking one more is left out, and the final answer asked for
                break
            run.prompt += written
            self._follow_up(run, _after_colon(written))
            written = complete(INTERMEDIATE, f"follow-up {len(run.steps) + 1}")
        # At the limit a completion may hold a "So the final answer is:" line of a question the model went on to
        # make up, before its next "Follow up:": read as it stands, the answer would be that follow-up question.
        if stopped or PRESS_FINAL not in written:
            run.prompt += PRESS_FINAL
            written = complete("\n", "the final answer")
        answer = press_answer(run.prompt + written)
        if answer is None:
            run.departures.append("nothing follows the final colon: Press's extract_answer fails (IndexError); empty")
        return answer or "", written

    def _follow_up(self, run: _Run, asked: str) -> None:
        """A follow-up question searched and answered; its intermediate answer continues the prompt."""
        started, before = run.clock(), (run.meter.prompt_tokens, run.meter.completion_tokens)
        hits = self.retriever.search(asked, self.settings.k)
        intermediate = self._intermediate(run.meter, asked, hits)
        run.prompt += f"{INTERMEDIATE} {intermediate}."
        run.steps.append(
            Step(
                f"{FOLLOW_UP} {asked} / Intermediate answer: {intermediate}",
                asked,
                [h.id for h in hits],
                [h.title for h in hits],
                run.clock() - started,
                run.meter.prompt_tokens - before[0],
                run.meter.completion_tokens - before[1],
            )
        )
        run.found.update({h.id: h for h in hits if h.id not in run.found})

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
            rows += [["departed", str(note)] for note in record.get("departures") or [] if isinstance(note, str)]
            steps.append(trace_step(f"Conclusion ({details.get('prompt')}'s prompt)", rows))
        return steps
