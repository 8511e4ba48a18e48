"""A corpus, a backend and a language model opened once for answering: every method made from
the session shares its retriever and model (and the model's prompt cache). `ask` opens one for
its method, `eval` one for all the methods it compares."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from mhindex.backends import BackendSpec
from mhindex.home import CorpusDir
from mhindex.lm import ModelOptions
from mhindex.methods import MethodContext, make_method, method_class


class Session:
    def __init__(
        self,
        corpus: CorpusDir | None,
        *,
        methods: list[str],
        backend: BackendSpec | str = "lucene",
        model: ModelOptions | None = None,
        home: Path | None = None,
        workers: int = 1,
    ) -> None:
        from mhindex.backends import open_index
        from mhindex.lm import load_lm

        model = model or ModelOptions()
        self.corpus = corpus
        self.dataset = corpus.manifest().get("dataset") if corpus else None
        retrieves = any(method_class(name).needs_retriever for name in methods)
        #: the index, opened once for every method of the session (None when none retrieves)
        self.index = open_index(corpus, backend) if retrieves else None
        self.retriever = self.index.retriever if self.index else None
        self.home = home
        # A local model gets one slot per question answered at once, so `workers` questions decode together.
        self.load_lm = functools.partial(
            load_lm, home=home, threads=model.lm_threads, cache=model.cache, slots=workers, timeout=model.lm_timeout
        )
        try:
            self.lm = model.load(home, slots=workers)
        except BaseException:
            self.close()
            raise

    def method(self, name: str, settings: Any):
        retriever = self.retriever if method_class(name).needs_retriever else None
        return make_method(
            name,
            retriever,
            self.lm,
            settings,
            MethodContext(
                dataset=self.dataset,
                load_lm=self.load_lm,
                home=self.home,
                corpus=self.corpus.name if self.corpus else None,
            ),
        )

    def close(self) -> None:
        if getattr(self, "lm", None) is not None:
            self.lm.close()
        if self.index is not None:
            self.index.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
