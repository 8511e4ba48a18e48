"""mhindex: multi-hop question answering over your own corpora.

From Python, everything public is a name of this module (listed in `__all__`)::

    import mhindex

    corpus = mhindex.build("musique")                      # the bundled sample, indexed with Lucene
    with corpus.searcher("lucene") as searcher:
        hits = searcher.search("Van Hook Township county seat", k=3)
    answer = mhindex.ask("What is the seat of the county where Van Hook Township is located?",
                         method="ircot", corpus=corpus)
    evaluation = mhindex.evaluate(corpus, ["nor", "oner"], limit=5)
    evaluation.table()                                      # a DataFrame where pandas is installed

The tree is the architecture: `corpora/` turns dataset releases into paragraph corpora, `backends/` indexes
and searches them, `lm/` completes prompts, `methods/` answer questions with retrieval and reasoning,
`eval/` scores them, `_api/` is what this module exports, and `cli/` is a thin layer over all of it.
The names are imported on first use, so `import mhindex` (and every CLI command) stays fast.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# ONNX Runtime (the dense encoder's runtime) since 1.29 writes a device id and an event database under
# ~/.cache/Microsoft/DeveloperTools and sends usage events, from its import on: outside the data root, and a network
# call nobody asked for. Its opt-out, before any import of it (a user's own setting is kept).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from mhindex._lazy import lazy_exports

__version__ = "0.1.0"

# name -> the module that defines it (imported when the name is first used: PEP 562)
_EXPORTS = {
    "Corpus": "mhindex._api.corpora",
    "Paragraph": "mhindex._api.corpora",
    "Question": "mhindex._api.corpora",
    "Searcher": "mhindex._api.corpora",
    "build": "mhindex._api.corpora",
    "corpus": "mhindex._api.corpora",
    "list_corpora": "mhindex._api.corpora",
    "Answer": "mhindex._api.answering",
    "Asker": "mhindex._api.answering",
    "ask": "mhindex._api.answering",
    "ask_many": "mhindex._api.answering",
    "Evaluation": "mhindex._api.evaluation",
    "evaluate": "mhindex._api.evaluation",
    "read_evaluation": "mhindex._api.evaluation",
    "latest_evaluation": "mhindex._api.evaluation",
    "score": "mhindex._api.evaluation",
    "diff": "mhindex._api.evaluation",
    "show_progress": "mhindex.ui",
    "Hit": "mhindex.backends.base",
    "Completion": "mhindex.lm.base",
    "LanguageModel": "mhindex.lm.base",
    "MhindexError": "mhindex.errors",
    "UsageError": "mhindex.errors",
    "BadInput": "mhindex.errors",
    "Interrupted": "mhindex.errors",
    "LMError": "mhindex.lm.base",
}

__all__ = [
    "__version__",
    "Corpus",
    "Paragraph",
    "Question",
    "Searcher",
    "build",
    "corpus",
    "list_corpora",
    "Answer",
    "Asker",
    "ask",
    "ask_many",
    "Evaluation",
    "evaluate",
    "read_evaluation",
    "latest_evaluation",
    "score",
    "diff",
    "show_progress",
    "Hit",
    "Completion",
    "LanguageModel",
    "MhindexError",
    "UsageError",
    "BadInput",
    "Interrupted",
    "LMError",
]

if TYPE_CHECKING:  # what a type checker and an editor see; at run time __getattr__ imports on first use
    from mhindex._api.answering import Answer, Asker, ask, ask_many
    from mhindex._api.corpora import Corpus, Paragraph, Question, Searcher, build, corpus, list_corpora
    from mhindex._api.evaluation import Evaluation, diff, evaluate, latest_evaluation, read_evaluation, score
    from mhindex.backends.base import Hit
    from mhindex.errors import BadInput, Interrupted, MhindexError, UsageError
    from mhindex.lm.base import Completion, LanguageModel, LMError
    from mhindex.ui import show_progress


# help(mhindex.ask) lists the installed methods' settings: read from every method, so not when the CLI imports it
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, prepare={"mhindex._api.answering": "document_settings"})
