"""Answering from Python: `ask` one question, `ask_many` a stream of them, or keep an `Asker` open (the model
loaded once) for both. The same session, methods and records as `mhindex ask` and `ask -`."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mhindex._api.corpora import Corpus, Question
from mhindex._api.terms import python_terms, python_terms_class
from mhindex.backends.base import Retriever
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.errors import UsageError, expect
from mhindex.home import resolve_home
from mhindex.lm import ModelOptions
from mhindex.lm.base import LanguageModel, lacking
from mhindex.methods import DEFAULT_METHOD, Method


@dataclass(frozen=True)
class Answer:
    """One question's answer with how it was reached. A question the method could not answer (the model's
    server down, an engine's error) is an Answer too: `error` says why and `answer` is empty."""

    id: str
    question: str
    answer: str
    method: str
    #: the paragraphs retrieved, in order: {"id", "title"}
    retrieved: list[dict[str, Any]]
    #: each step's generated text, the query it sent and the ids it brought
    steps: list[dict[str, Any]]
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    error: str | None = None
    _record: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_record(cls, record: dict[str, Any], question: str = "") -> Answer:
        """From an answer record (`ask --json`, a line of an evaluation's predictions) or an error record."""
        return cls(
            id=str(record.get("id", "")),
            question=str(record.get("question", question)),
            answer=str(record.get("answer", "")),
            method=str(record.get("method", "")),
            retrieved=list(record.get("retrieved") or []),
            steps=list(record.get("steps") or []),
            lm_calls=int(record.get("lm_calls") or 0),
            prompt_tokens=int(record.get("prompt_tokens") or 0),
            completion_tokens=int(record.get("completion_tokens") or 0),
            seconds=float(record.get("seconds") or 0.0),
            error=str(record["error"]) if "error" in record else None,
            _record=record,
        )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def paragraph_ids(self) -> list[str]:
        return [str(paragraph["id"]) for paragraph in self.retrieved]

    def trace(self) -> list[dict[str, Any]]:
        """The trace as `ask` and the report draw it: steps of {"title", "rows": [[label, text]], "ids"}."""
        from mhindex.methods import trace_of

        return trace_of(self._record, self.method) if self.ok else []

    def hops(self, question: Question | dict[str, Any], budget: int = 15) -> list[dict[str, Any]] | None:
        """Which of `question`'s gold hops this answer found (eval/hops.py): for each, whether its paragraph is among
        the first `budget` kept, and the step, query and rank that first retrieved it; None for a question without
        hops (an own corpus's)."""
        from mhindex.eval.hops import diagnose

        return diagnose(self._record, question.record if isinstance(question, Question) else question, budget)

    def to_dict(self) -> dict[str, Any]:
        """The record `mhindex ask --json` prints for the same question (an error record for a failure)."""
        return dict(self._record)


QuestionLike = str | Question | dict[str, Any]


@python_terms_class
class Asker:
    """A method with its corpus's index and its model, opened once for many questions (the model loads
    once; a local model keeps its demonstrations' evaluation). Use it in a `with` block, or close it.

    `corpus`: a Corpus or its name (default: the only one built); `backend`: any backend, fusion or served
    index; `lm`: a `--lm` spec or a model object of your own (`mhindex.LanguageModel`); `retriever`: a
    retriever object of your own instead of an index (anything with `search`, `search_many` and `close`);
    `settings`: the method's settings as keywords (`k=4`, `answer_tokens=64`), checked as `ask` checks them.
    """

    def __init__(
        self,
        method: str = DEFAULT_METHOD,
        corpus: Corpus | str | None = None,
        *,
        backend: str = DEFAULT_BACKEND,
        backend_options: dict[str, Any] | None = None,
        lm: str | LanguageModel | None = None,
        lm_threads: int | None = None,
        lm_context: int | None = None,
        cache: bool = True,
        lm_timeout: float | None = None,
        retriever: Retriever | None = None,
        workers: int = 1,
        home: Path | str | None = None,
        **settings: Any,
    ) -> None:
        from mhindex.backends import BackendSpec
        from mhindex.home import pick_corpus
        from mhindex.methods import method_class, settings_for
        from mhindex.methods.session import Session

        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise UsageError(f"workers must be a whole number, at least 1, not {workers!r}")
        expect(method, str, "method", "a method's name")
        expect(corpus, (Corpus, str, type(None)), "corpus", "a Corpus or a corpus's name")
        root = resolve_home(home if home is not None or not isinstance(corpus, Corpus) else corpus.path.parent)
        self.method_name, self.workers = method, workers
        chosen = settings_for([method], settings)[method]
        spec = BackendSpec.parse(backend, backend_options)
        needs_index = method_class(method).needs_retriever and spec.builds_index and retriever is None
        folder = pick_corpus(root, corpus if isinstance(corpus, str) or corpus is None else corpus.name, needs_index)
        model = _model_options(lm if isinstance(lm, str) else None, lm_threads, lm_context, cache, lm_timeout)
        own_lm = lacking(lm, "the lm given") if isinstance(lm, LanguageModel) else None
        self._session = Session(
            folder,
            methods=[method],
            backend=spec,
            model=model,
            home=root,
            workers=workers,
            lm=own_lm,
            retriever=retriever,
        )
        try:
            self._method = self._session.method(method, chosen)
        except BaseException:
            self._session.close()
            raise

    @property
    def method(self) -> Method:
        """The method object (`mhindex.methods.base.Method`, the plug-in interface): `method.answer(query)`
        raises what goes wrong instead of returning it."""
        return self._method

    @property
    def lm(self) -> LanguageModel | None:
        """The model the method calls (loaded from the spec, or the one given); None for a method that calls
        none (`retrieve`), for which no model is loaded."""
        return self._session.lm

    def ask(self, question: QuestionLike, id: str = "api") -> Answer:
        """The answer to one question: text, a Question, or a record {"id", "question"} (IIRC's
        "main_passage" too)."""
        from mhindex.methods.run import answer_records

        self._open()
        number, query = _query(question, id, 1)
        return next(_answers(answer_records(self._method, [(number, query)]), {number: query}))

    def ask_many(self, questions: Iterable[QuestionLike], workers: int | None = None) -> Iterator[Answer]:
        """Each question's Answer in the order given, as soon as it and those before it are done; `workers`
        questions at once (at most the Asker's: a local model has that many slots)."""
        from mhindex.methods.run import answer_records

        self._open()
        workers = self.workers if workers is None else workers
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= self.workers:
            raise UsageError(f"workers must be between 1 and the Asker's {self.workers}, not {workers!r}")
        asked: dict[int, Any] = {}

        def items() -> Iterator[tuple[int, Any]]:
            for number, question in enumerate(questions, start=1):
                asked[number] = _query(question, str(number), number)[1]
                yield number, asked[number]

        return _answers(answer_records(self._method, items(), workers), asked)

    def _open(self) -> None:
        if getattr(self, "_closed", False):
            raise UsageError(f"this {self.method_name} Asker is closed: open another (mhindex.Asker(...))")

    def close(self) -> None:
        if not getattr(self, "_closed", False):
            self._closed = True
            self._session.close()

    def __enter__(self) -> Asker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _answers(records: Iterator[dict[str, Any]], asked: dict[int, Any]) -> Iterator[Answer]:
    for record in records:
        query = asked.get(int(record.get("line", 0)))
        yield Answer.from_record(record, getattr(query, "question", ""))


def _query(question: QuestionLike, fallback_id: str, number: int) -> tuple[int, Any]:
    """A Query, or the one line that says why `question` is not one (refused before any work); a key nothing reads
    is a warning (`methods.base.unread_keys`)."""
    from mhindex.methods import Query
    from mhindex.methods.base import unread_keys, unread_note

    if isinstance(question, Question):
        question = question.record
    if isinstance(question, str):
        question = {"id": fallback_id, "question": question}
    if unread := unread_keys(question):
        warnings.warn(unread_note(unread, f"question {number}"), UserWarning, stacklevel=4)
    try:
        return number, Query.from_record(question, fallback_id)
    except ValueError as error:
        raise UsageError(f"question {number}: {error}") from None


def _model_options(
    spec: str | None, threads: int | None, context: int | None, cache: bool, timeout: float | None
) -> ModelOptions:
    from mhindex.options import settings_from

    given = {"lm": spec, "lm_threads": threads, "lm_context": context, "cache": cache, "lm_timeout": timeout}
    options: ModelOptions = settings_from(ModelOptions, {k: v for k, v in given.items() if v is not None}, "the model")
    return options


@python_terms
def ask(
    question: QuestionLike, method: str = DEFAULT_METHOD, corpus: Corpus | str | None = None, **options: Any
) -> Answer:
    """Answer one question (opens an Asker and closes it: keep one open for many questions).
    `options`: the Asker's (backend, lm, home...) and the method's settings."""
    with Asker(method, corpus, **options) as asker:
        return asker.ask(question)


@python_terms
def ask_many(
    questions: Iterable[QuestionLike], method: str = DEFAULT_METHOD, corpus: Corpus | str | None = None, **options: Any
) -> Iterator[Answer]:
    """Answer many questions in order (`workers=N` at once), the model loaded once for all."""
    with Asker(method, corpus, **options) as asker:
        yield from asker.ask_many(questions)


def document_settings() -> None:
    """Each built-in method's settings added to the docstrings of ask, ask_many and Asker (`help(mhindex.ask)`):
    read from the methods, so done once when `mhindex.ask` is first used, not when the CLI imports this module."""
    text = settings_text()
    for documented in (ask, ask_many, Asker):
        documented.__doc__ = (documented.__doc__ or "") + "\n" + text


def settings_text() -> str:
    """Each built-in method's settings with their defaults, bounds and help, as keywords (`mhindex ask --method M
    --help` shows the same as flags). Plug-ins are not imported for a docstring (a slow or broken one would hold
    up the first `mhindex.ask`): the line says where theirs are."""
    import dataclasses

    from mhindex.methods import METHODS, method_class
    from mhindex.options import declared

    lines = [
        "Each method's settings, keywords of ask, ask_many and Asker (a plug-in method's: `mhindex ask --method NAME "
        "--help`; `mhindex list methods` lists them all):"
    ]
    for method in sorted(name for name in METHODS if METHODS.builtin(name)):
        settings_type = method_class(method).Settings
        lines.append(f"    {method}:")
        for name, (setting, opt, kind) in declared(settings_type).items():
            default = "" if setting.default is dataclasses.MISSING else f" = {setting.default!r}"
            bounds = [f"{opt.min:g} to {opt.max:g}" if opt.min is not None and opt.max is not None else ""]
            bounds += [f"one of {', '.join(opt.choices)}" if opt.choices else ""]
            said = "; ".join(bound for bound in bounds if bound)
            shown = opt.help.replace("\\[", "[")  # the help as rich prints it: its brackets escaped
            lines.append(f"        {name}: {kind.__name__}{default}  {shown}" + (f" ({said})" if said else ""))
    return "\n".join(lines)
