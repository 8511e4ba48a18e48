"""A corpus, a backend and a language model opened once for answering: every method made from
the session shares its retriever and model (and the model's prompt cache). `ask` opens one for
its method, `eval` one for all the methods it compares."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any, cast

from mhindex.backends import DEFAULT_BACKEND, BackendSpec
from mhindex.backends.base import Retriever
from mhindex.errors import UsageError, redact
from mhindex.home import CorpusDir
from mhindex.lm import LanguageModel, ModelOptions
from mhindex.methods import Method, MethodContext, make_method, method_class
from mhindex.ui import reporter


class _NoModel:
    """What a method that declares `needs_lm = False` is handed: any call is mhindex's mistake, said as one."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"a method that declares needs_lm = False used its language model ({name})")


#: typed as the model it stands in for: a method that declares needs_lm = False never reads it
_NO_LM = cast(LanguageModel, _NoModel())


def titles(lm: str | None, backend: str) -> tuple[str, str]:
    """A model and an engine as a figure's title names them ("Qwen2.5-0.5B (local)", "BM25 (Lucene)"), for the
    layers above that name them without loading either; no model (a run that called none) is ""."""
    from mhindex.backends import backend_title
    from mhindex.lm import lm_title

    return (lm_title(lm) if lm and lm != "None" else ""), backend_title(backend)


def session_of_record(
    corpus: CorpusDir, methods: list[str], run: dict[str, Any], home: Path | None, judge: str | None
) -> Session:
    """The session an evaluation's run.json recorded (its backend, model, threads and context), the call cache
    off: what `rerun` answers with again. Each recorded value is checked as `--lm`, `--lm-threads`, `--lm-context`
    and `--backend` are, in one line naming the record's field."""
    from mhindex.options import settings_from

    given = {"lm": run.get("lm"), "lm_threads": run.get("lm_threads"), "lm_context": run.get("lm_context")}
    try:
        model = settings_from(ModelOptions, {k: v for k, v in given.items() if v is not None}, "run.json")
    except UsageError as error:
        raise UsageError(f"run.json: {error}") from None
    model = dataclasses.replace(model, cache=False)
    if not isinstance(run.get("backend"), str):
        raise UsageError(f"run.json: backend must be a backend's name, not {run.get('backend')!r}")
    backend = BackendSpec.parse(str(run.get("backend")))
    return Session(corpus, methods=methods, backend=backend, model=model, home=home, judge=judge)


def load_judge(spec: str | None, model: ModelOptions | None, home: Path | None) -> LanguageModel | None:
    """The judge's language model (loaded like --lm, with its threads and call cache), or None."""
    if not spec:
        return None
    from mhindex.lm import load_lm

    return load_lm(spec, home=home, threads=model.lm_threads if model else None, cache=model.cache if model else True)


class Session:
    """`judge`: the LM that scores answers (EfficientRAG's Accuracy), loaded when first asked for.
    `lm`, `retriever`: a model or a retriever of the caller's own (the Python API's), used instead of
    loading one; the caller closes them."""

    def __init__(
        self,
        corpus: CorpusDir | None,
        *,
        methods: list[str],
        backend: BackendSpec | None = None,
        model: ModelOptions | None = None,
        home: Path | None = None,
        workers: int = 1,
        judge: str | None = None,
        lm: LanguageModel | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        from mhindex.backends import open_index
        from mhindex.lm import load_lm

        model = model or ModelOptions()
        self.model, self.judge_spec = model, judge
        self._judge: LanguageModel | None = None
        self.corpus = corpus
        self._said_titles: set[str] = set()
        self.dataset = corpus.manifest().get("dataset") if corpus else None
        retrieves = any(method_class(name).needs_retriever for name in methods)
        #: the index, opened once for every method of the session (None when none retrieves)
        spec = backend or BackendSpec.parse(DEFAULT_BACKEND)
        self.backend_label = spec.label
        self.index = open_index(corpus, spec) if retrieves and retriever is None else None
        self.retriever = retriever if retriever is not None else self.index.retriever if self.index else None
        self.home = home
        # A local model gets one slot per question answered at once, so `workers` questions decode together.
        self.load_lm = functools.partial(
            load_lm, home=home, threads=model.lm_threads, cache=model.cache, slots=workers, timeout=model.lm_timeout
        )
        self._own_lm = lm is None
        #: the model, loaded once for every method of the session; None when none of them calls one (retrieve)
        self.lm: LanguageModel | None = None
        try:
            if lm is not None or any(method_class(name).needs_lm for name in methods):
                self.lm = lm if lm is not None else model.load(home, slots=workers)
        except BaseException:
            self.close()
            raise

    def method(self, name: str, settings: Any) -> Method:
        retriever = self.retriever if method_class(name).needs_retriever else None
        if retriever is not None and method_class(name).uses_titles:
            self._say_titles_missing(name, method_class(name).uses_titles)
        return make_method(
            name,
            retriever,
            self.lm if self.lm is not None else _NO_LM,
            settings,
            MethodContext(
                dataset=self.dataset,
                load_lm=self.load_lm,
                home=self.home,
                corpus=self.corpus.name if self.corpus else None,
            ),
        )

    def _say_titles_missing(self, name: str, uses: str) -> None:
        """A method that searches by title, over a corpus whose paragraphs mostly have none, answers worse than
        it should and nothing would say why: it is said once, with the way to give them titles."""
        counts = self.corpus.manifest() if self.corpus else {}
        untitled, total = (
            counts.get("counts", {}).get("untitled_paragraphs", 0),
            counts.get("counts", {}).get("paragraphs", 0),
        )
        if total and untitled * 2 > total and name not in self._said_titles:
            self._said_titles.add(name)
            reporter().warning(
                f"{name} relies on paragraph titles ({uses}), and {untitled:,} of {total:,} paragraphs of "
                f"'{self.corpus.name if self.corpus else ''}' have none: import it again with --title-from "
                "first-line or id"
            )

    def answering(self) -> dict[str, Any] | None:
        """What decides the answers besides the prompts, for the run's fingerprint: the model's own fingerprint and
        whether its completions can move with what ran before (the settings that decide it and the last `mhindex
        doctor --determinism` of it here: lm/determinism.py). None when no model was loaded."""
        from mhindex.home import resolve_home
        from mhindex.lm import resolve_spec
        from mhindex.lm.determinism import recorded

        if self.lm is None:
            return None
        spec = redact(resolve_spec(self.model.lm))
        return {**self.lm.fingerprint(), "determinism": recorded(resolve_home(self.home), spec, self.lm)}

    def titles(self) -> tuple[str, str]:
        """The session's model and engine as a figure's title names them (no model where none was loaded)."""
        lm, backend = titles(redact(str(self.model.lm)), self.backend_label)
        return (lm if self.lm is not None else "", backend)

    def judge(self) -> LanguageModel | None:
        """The judge's model (None when none was asked for), loaded once."""
        if self._judge is None and self.judge_spec:
            self._judge = load_judge(self.judge_spec, self.model, self.home)
        return self._judge

    def close(self) -> None:
        judge = getattr(self, "_judge", None)
        if judge is not None:
            judge.close()
        lm = getattr(self, "lm", None)
        if lm is not None and self._own_lm:
            lm.close()
        if self.index is not None:
            self.index.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
