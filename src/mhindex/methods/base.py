"""What every question-answering method takes and returns.

A method gets a retriever (unless it says it needs none), a language model, its own settings
and a small context; it answers one `Query` at a time and returns an `Answer` with its trace:
each step's generated sentence, the query it issued, and what that query retrieved, plus the LM
calls, tokens and time it cost. Methods are stateless between questions, so several questions
can run at once.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from mhindex import ui
from mhindex.backends.base import Retriever
from mhindex.errors import UsageError
from mhindex.lm.base import Completion, LanguageModel, Messages, StopWhen, checked
from mhindex.methods.settings import MethodSettings, ReaderSettings
from mhindex.requirements import Requirement

TITLE_SEPARATOR = " · "  # titles contain commas ("Paris, Texas"), never a middle dot


@dataclass(frozen=True)
class Query:
    id: str
    question: str
    # IIRC: the passage the question is about; IRCoT always puts it in the prompt.
    main_passage: dict[str, Any] | None = None
    # IIRC: titles of the pages the main passage links to.
    links: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, record: Any, fallback_id: str) -> Query:
        """A question record ({"id", "question"}, plus "main_passage" and "links" for IIRC), as read
        from `ask -` or a questions.jsonl; ValueError names the field that is wrong."""
        if not isinstance(record, dict):
            raise ValueError("a question line should be a JSON object")
        question = record.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError("field 'question' is missing or empty")
        main = record.get("main_passage")
        if main is not None and not (
            isinstance(main, dict) and isinstance(main.get("title"), str) and isinstance(main.get("text"), str)
        ):
            raise ValueError('field \'main_passage\' should be {"title", "text"}')
        links = record.get("links") or []
        return cls(
            str(record.get("id", fallback_id)), question, main, tuple(link for link in links if isinstance(link, str))
        )


#: What a question line (`ask -`, `Asker.ask`) is read for; the gold a questions.jsonl record carries is eval's
QUESTION_KEYS = ("id", "question", "main_passage", "links")
_GOLD_KEYS = ("answers", "gold_ids", "dataset")


def unread_keys(record: Any) -> list[str]:
    """The keys of a question record that nothing reads, to be said once: a line's `"method": "nor"` does not choose
    the method (the command's options do, for every line). A questions.jsonl record (with its answers, gold ids and
    dataset) is read for its question, and its other fields are the corpus's own: none is said."""
    if not isinstance(record, dict) or all(key in record for key in _GOLD_KEYS):
        return []
    return [key for key in record if key not in QUESTION_KEYS and key not in _GOLD_KEYS]


def unread_note(keys: Sequence[str], where: str) -> str:
    names = ", ".join(f"'{key}'" for key in keys)
    return (f"{where}: {names} not read: a question is read for {', '.join(QUESTION_KEYS)}; the method, backend and "
            "model are the command's (or the Asker's), for every question")  # fmt: skip


@dataclass
class Step:
    text: str
    query: str
    retrieved_ids: list[str]
    titles: list[str] = field(default_factory=list)
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def record(self) -> dict[str, Any]:
        return {"text": self.text, "query": self.query, "retrieved_ids": self.retrieved_ids}

    def costed(self) -> dict[str, Any]:
        """The record with what the step cost, for the trace of an answer just made."""
        return {
            **self.record(),
            "seconds": self.seconds,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


@dataclass
class Answer:
    id: str
    question: str
    answer: str
    retrieved: list[dict[str, Any]]
    steps: list[Step]
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    reasoning: str = ""
    method: str = ""
    # IIRC: the corpus titles retrieval was restricted to (the pages the model named).
    scope: list[str] | None = None
    # What a method records beyond the common fields (SearChain: its rounds, tree and references).
    details: dict[str, Any] = field(default_factory=dict[str, Any])
    # Where this answer departs from the release's own reading (a fallback of mhindex's, a limit the release lacks),
    # one line each: eval counts them per row, in metrics.json and under the table (never silent).
    departures: list[str] = field(default_factory=list[str])

    def record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "retrieved": self.retrieved,
            "steps": [s.record() for s in self.steps],
            "lm_calls": self.lm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
            "method": self.method,
            "reasoning": self.reasoning,
            **({"scope": self.scope} if self.scope is not None else {}),
            **({"departures": list(self.departures)} if self.departures else {}),
            **self.details,
        }


def agent_summary(searches: int, stopped: str, **more: Any) -> dict[str, Any]:
    """What an agent loop (Search-R1, R1-Searcher, FLARE) did, recorded as the answer's `agent` and shown under
    `ask`: how many searches it made and why it stopped. A small model often answers without searching; the user
    must be able to see that it was the model, not the loop (#78)."""
    return {"searches": searches, "stopped": stopped, **more}


class Meter:
    """Counts one question's LM calls and tokens, while the model itself is shared."""

    def __init__(self, lm: LanguageModel) -> None:
        self.lm = lm
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        # Beyond the counts (see `answered`): calls the call cache answered, the seconds they took when
        # first made, and the prompt tokens read (not restored from a kept state nor reused from the last call).
        self.cached_calls = 0
        self.cached_seconds = 0.0
        self.prompt_tokens_read = 0
        self.prompt_tokens_restored = 0
        self.entries: list[tuple[float, dict[str, Any]]] = []  # (when it ended, what `call_entry` says of it)
        self._lock = threading.Lock()
        if (meters := _question_meters.get()) is not None:
            meters.append(self)

    def complete(
        self,
        prompt: str,
        max_tokens: int,
        stop: Sequence[str],
        label: str = "generating",
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
    ) -> Completion:
        """One greedy call; `label` says what it is for on the live status line of `ask`, `keep` how
        much of the prompt opens every question alike (LanguageModel.complete). With $MHINDEX_WHOLE_COMPLETIONS=1
        no call is ended early by `stop_when`: it runs to its stop strings or max_tokens, as a release's API call
        does, so that the record keeps what the release would have read (benchmarks/readings/make_readings.py)."""
        self._announce(label)
        if os.environ.get("MHINDEX_WHOLE_COMPLETIONS") == "1":
            stop_when = None
        return self._count(
            label,
            self.lm.complete(
                prompt,
                max_tokens=max_tokens,
                stop=stop,
                temperature=0.0,
                logprobs=logprobs,
                stop_when=stop_when,
                keep=keep,
            ),
            logprobs,
        )

    def sample(
        self,
        prompt: str,
        max_tokens: int,
        stop: Sequence[str],
        temperature: float,
        seed: int,
        label: str = "sampling",
        stop_when: StopWhen | None = None,
    ) -> Completion:
        """One sampled completion (self-consistency's), seeded so that a rerun draws the same sample."""
        self._announce(label)
        try:
            made = self.lm.complete(
                prompt, max_tokens=max_tokens, stop=stop, temperature=temperature, stop_when=stop_when, seed=seed
            )
        except TypeError as error:
            if "seed" not in str(error):
                raise
            raise UsageError(f"the model {self.lm.name} cannot sample with a seed: its complete() takes none") from None
        return self._count(label, made)

    def chat(
        self,
        messages: Messages,
        max_tokens: int,
        stop: Sequence[str],
        label: str = "generating",
        logprobs: bool = False,
        keep: int = 0,
    ) -> Completion:
        """One greedy turn of a conversation; `keep` counts characters of its first message."""
        self._announce(label)
        return self._count(
            label,
            self.lm.chat(messages, max_tokens=max_tokens, stop=stop, temperature=0.0, logprobs=logprobs, keep=keep),
            logprobs,
        )

    def _announce(self, label: str) -> None:
        ui.check_stop()
        ui.note(f"{label} (LM call {self.calls + 1}, {self.prompt_tokens + self.completion_tokens:,} tokens so far)")

    def _count(self, label: str, completion: Completion, logprobs: bool = False) -> Completion:
        completion = checked(completion, self.lm.name, logprobs)  # a plug-in's model, a server's reply: at the door
        with self._lock:
            self.entries.append((time.perf_counter(), call_entry(label, completion)))
            self.calls += 1
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens
            if completion.cached:
                self.cached_calls += 1
                self.cached_seconds += completion.seconds
            else:
                evaluated = completion.prompt_tokens_evaluated
                read = completion.prompt_tokens if evaluated is None else evaluated
                self.prompt_tokens_read += read
                self.prompt_tokens_restored += completion.prompt_tokens - read
        return completion


#: The parts of a call's seconds, as `call_entry` names them (a local model's: lm/llamacpp.py times each)
SECONDS_PARTS = ("restore", "prompt", "generation", "save", "outside")


def call_entry(label: str, completion: Completion) -> dict[str, Any]:
    """One LM call as the trace and `--json` show it: what it was for, its prompt tokens (read, restored from a
    kept state, reused from the call before), the tokens it generated, and where its seconds went, where the
    model can say (a call the call cache answered: its seconds when first made, and `cached`)."""
    parts = (completion.restore_seconds, completion.prompt_seconds, completion.generation_seconds,
             completion.save_seconds, completion.outside_seconds)  # fmt: skip
    return {
        "label": label,
        "seconds": round(completion.seconds, 3),
        "prompt_tokens": completion.prompt_tokens,
        "read": completion.prompt_tokens_evaluated,
        "restored": completion.prompt_tokens_restored,
        "reused": completion.prompt_tokens_reused,
        "generated": completion.completion_tokens,
        **({"cached": True} if completion.cached else {}),
        **({"capped": True} if completion.finish_reason == "capped" else {}),
        **({name: round(part, 3) for name, part in zip(SECONDS_PARTS, parts, strict=True) if part is not None}
           if completion.generation_seconds is not None else {}),
    }  # fmt: skip


#: The meters of the question being answered (`answered`), each made by the method as it likes.
_question_meters: contextvars.ContextVar[list[Meter] | None] = contextvars.ContextVar("question_meters", default=None)


def answered(method: Method, query: Query) -> Answer:
    """`method.answer(query)`, its record told what the calls cost beyond their count ("lm"): the model and its
    threads, how many calls the call cache answered and the seconds those took when first made (an answer
    served from the cache is not a fast answer), and the prompt tokens read rather than restored from a kept
    state or reused from the call before."""
    meters: list[Meter] = []
    token = _question_meters.set(meters)
    try:
        answer = method.answer(query)
    finally:
        _question_meters.reset(token)
    if answer.lm_calls:
        answer.details["lm"] = {
            "model": method.lm.name,
            "threads": getattr(method.lm, "threads", None),
            "calls_from_cache": sum(m.cached_calls for m in meters),
            "cached_calls_seconds": round(sum(m.cached_seconds for m in meters), 3),
            "prompt_tokens_read": sum(m.prompt_tokens_read for m in meters),
            "prompt_tokens_restored": sum(m.prompt_tokens_restored for m in meters),
        }
        calls = [entry for _, entry in sorted((e for m in meters for e in m.entries), key=lambda e: e[0])]
        timed = [c for c in calls if "generation" in c and not c.get("cached")]
        if timed:  # where the model's seconds went, summed over the calls it made now (cached ones aside)
            answer.details["lm"]["seconds"] = {part: round(sum(c.get(part, 0.0) for c in timed), 3)
                                               for part in SECONDS_PARTS}  # fmt: skip
        answer.details["lm"]["calls"] = calls
    return answer


@dataclass(frozen=True)
class MethodContext:
    """What a method may need beyond its retriever and LM: the corpus's dataset (its demonstrations
    default to that dataset's), and a loader for further models (a verifier, a reader) that shares
    the main model's data root, threads and call cache."""

    dataset: str | None = None
    load_lm: Any = None  # Callable[[str], LanguageModel]
    # The data root and the corpus's name: where a method finds models trained for it (EfficientRAG).
    home: Path | None = None
    corpus: str | None = None


def text_of(value: Any) -> str:
    """A record's value as a trace row shows it: text as it is, anything else as JSON."""
    import orjson

    return value if isinstance(value, str) else orjson.dumps(value).decode()


#: One step of a trace as both the terminal and the report draw it: a title, labelled rows of text
#: (a row with an empty label is shown as its text alone) and the ids of the paragraphs it brought.
TraceStep = dict[str, Any]


def trace_step(title: str, rows: list[list[str]], ids: Sequence[str] = ()) -> TraceStep:
    return {"title": title, "rows": rows, "ids": list(ids)}


def reader_step(record: dict[str, Any]) -> list[TraceStep]:
    """The reader's call, whole (why the answer is what it is), where the record has one."""
    reader = record.get("reader")
    if not isinstance(reader, dict):
        return []
    rows = [
        ["reader", text_of(reader.get("output") or "(nothing)")],
        [
            "",
            f"read {reader.get('paragraphs', 0):,} paragraph{'' if reader.get('paragraphs') == 1 else 's'}: "
            f"{reader.get('prompt_tokens', 0):,} prompt tokens, {float(reader.get('seconds') or 0):.1f}s",
        ],
    ]
    for label, demos in (("demonstrations", reader.get("demos")), ("steps' demonstrations", record.get("step_demos"))):
        if isinstance(demos, dict):
            rows.append(["", f"{label}: {demos.get('used')} of {demos.get('available')} of {demos.get('set')}'s "
                             f"({demos.get('why')})"])  # fmt: skip
    chained = record.get("chain_answer")
    if chained and str(chained).lower() != str(record.get("answer", "")).lower():
        rows.append(["chain concluded", f"{text_of(chained)}; the reader's answer stands"])
    return [trace_step("Reader", rows)]


def step_cost(step: dict[str, Any]) -> str:
    return (
        f"{float(step.get('seconds') or 0):.1f}s, {step.get('prompt_tokens', 0):,} prompt + "
        f"{step.get('completion_tokens', 0):,} completion tokens"
    )


class Method(ABC):
    """A method keeps what it was made with (`retriever`, `lm`, `settings`, `context`); a subclass's
    `__init__` calls this one first, then prepares what its questions share (demonstrations,
    readers, models).

    What the layers above ask of a method is declared here, so none of them names one: its `title` in
    tables and the report, its `paper`, the `paper_metrics` its paper reports (shown where it is in a
    table), and `trace_steps`, the one rendering of its trace that the terminal and the report draw."""

    name: ClassVar[str]
    #: as the papers write it, in tables and the report ("IRCoT")
    title: ClassVar[str]
    #: where it comes from: the paper and the released code it follows
    paper: ClassVar[str] = ""
    #: metrics.py keys its paper reports beyond EM/F1/recall, shown as columns where the method is in a table
    paper_metrics: ClassVar[tuple[str, ...]] = ()
    #: the rows of the papers' tables it runs (mhindex/papers/): {table: {the row as the paper labels it: the
    #: row's settings}}, e.g. {"KD-CoT": {"KD-CoT w/o Verifier": {"qa": "reader"}}}; `eval --table KD-CoT` runs
    #: every row some method claims. A setting may differ by dataset ({"hotpotqa": 6, "*": 4}); a label the
    #: paper's table lacks is a row mhindex adds, shown apart.
    tables: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: what it needs installed beyond mhindex's own dependencies, checked by `mhindex doctor`
    requirements: ClassVar[tuple[Requirement, ...]] = ()
    #: the method's settings; every field declared with `option(...)` is an option of ask and eval
    Settings: ClassVar[type[MethodSettings]] = ReaderSettings
    #: False for methods that answer without retrieval (no corpus or index is opened for them)
    needs_retriever: ClassVar[bool] = True
    #: False for methods that call no language model (a retriever's own ranking): none is loaded for them
    needs_lm: ClassVar[bool] = True
    #: what it does with paragraph titles, for a method that searches by them; said when asked to answer over a
    #: corpus whose paragraphs mostly have none (an own corpus imported without them)
    uses_titles: ClassVar[str] = ""

    def __init__(self, retriever: Retriever | None, lm: LanguageModel, settings: Any, context: MethodContext) -> None:
        self._retriever = retriever
        self.lm = lm
        self.settings = settings
        self.context = context

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            raise UsageError(f"the {self.name} method retrieves, and no index was opened for it")
        return self._retriever

    @abstractmethod
    def answer(self, query: Query) -> Answer: ...

    #: the keys `recorded_models` adds to run.json's settings of the method (a record holding them is known)
    recorded_keys: tuple[str, ...] = ()

    def recorded_models(self) -> dict[str, Any]:
        """What run.json records of the models the method loaded beyond its settings (trained
        models found by default), so that other models make another configuration."""
        return {}

    def trained_on(self) -> set[str]:
        """Ids of the questions the method's trained models learnt from: `eval` will not score it on them."""
        return set()

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        """The most LM calls one question can take with these settings (its loop's limits), for `eval`'s estimate
        of a run before its first answer; None where the loop sets no simple bound (the pace then comes from the
        row's own first questions)."""
        return None

    @classmethod
    def reseeded(cls, settings: Any, draw: int) -> dict[str, Any] | None:
        """The settings under which the method's `draw`-th run (`eval --seeds`) samples afresh, as overrides of
        `settings` (draw 0: the seed as given), each draw's samples disjoint from every other's, so that the spread
        over draws is the sampling's and not a shared chain's; None where these settings sample nothing (a greedy
        method answers the same on every draw, and is run once)."""
        return None

    @classmethod
    def resumable(cls, home: Path) -> list[Path]:
        """Work kept under the data root so that an interrupted run resumes (a partial training), which
        `mhindex gc` reports and leaves."""
        return []

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """The answer record's trace as steps of labelled rows (`ask`'s tree and the report's page draw
        these): here each step's query, the paragraphs it brought and the sentence written, then the
        reader. A method that records more (rounds, verifications) draws its own."""
        titles = {r.get("id"): r.get("title", "") for r in record.get("retrieved", []) if isinstance(r, dict)}
        steps = []
        for number, step in enumerate(record.get("steps", [])):
            text, ids = step.get("text") or "", list(step.get("retrieved_ids", []))
            rows = [["query", text_of(step["query"])]] if step.get("query") else []
            if step.get("query"):
                brought = TITLE_SEPARATOR.join(dict.fromkeys(titles.get(i, i) for i in ids))
                rows.append(["retrieved", brought or "nothing new"])
            if text:
                rows.append(["wrote", text_of(text)])
            if "seconds" in step:  # `ask`'s own answer knows each step's cost; a stored record does not
                rows.append(["", step_cost(step)])
            steps.append(trace_step(f"step {number}" + ("" if text else " (the question)"), rows, ids))
        return steps + reader_step(record)


class Clock:
    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.started
