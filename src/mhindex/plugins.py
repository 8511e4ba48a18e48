"""What a plug-in codes against: the interfaces of the five kinds and the helpers they share, in one module
(and a paper's table, `PaperTable`, whose rows methods run).

A method, backend, dataset, LM kind or metric of your own is one module that imports from here (and from
`mhindex`); its package declares it under the entry-point group of its kind (`GROUPS`), and mhindex finds
it with no edit (docs/development.md, `examples/mhindex-example-plugin/`). With `mhindex` itself these are
the public surface, listed in `__all__` and kept stable; every other module path inside mhindex is internal
and may change between versions.

    from mhindex.plugins import Answer, Clock, Meter, Method, Query, Step, option

`Paragraph` and `Question` here are the records a dataset's converter yields; `Answer` is what a method's
`answer(query)` returns. They are not `mhindex.Paragraph`, `mhindex.Question` and `mhindex.Answer`, what a
notebook reads back from a built corpus or an answered question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mhindex._lazy import lazy_exports

# name -> the module that defines it, imported on first use (PEP 562), so that a metric's package does not
# import the methods' or the backends' modules.
_EXPORTS = {
    # every kind
    "GROUPS": "mhindex.registry",
    "option": "mhindex.options",
    "Requirement": "mhindex.requirements",
    "package": "mhindex.requirements",
    "MhindexError": "mhindex.errors",
    "UsageError": "mhindex.errors",
    "BadInput": "mhindex.errors",
    "normalize_answer": "mhindex.text",
    # a method (methods/base.py), and the reader most methods end with
    "Method": "mhindex.methods.base",
    "MethodContext": "mhindex.methods.base",
    "Query": "mhindex.methods.base",
    "Answer": "mhindex.methods.base",
    "Step": "mhindex.methods.base",
    "Meter": "mhindex.methods.base",
    "Clock": "mhindex.methods.base",
    "TraceStep": "mhindex.methods.base",
    "trace_step": "mhindex.methods.base",
    "reader_step": "mhindex.methods.base",
    "Reader": "mhindex.methods.reader",
    "ReaderSettings": "mhindex.methods.settings",
    "demo_set": "mhindex.methods.settings",
    # a backend (backends/base.py)
    "Backend": "mhindex.backends.base",
    "BackendContext": "mhindex.backends.base",
    "Retriever": "mhindex.backends.base",
    "TitleSearch": "mhindex.backends.base",
    "Hit": "mhindex.backends.base",
    "search_within_titles": "mhindex.backends.base",
    "title_key": "mhindex.backends.base",
    "CorpusDir": "mhindex.home",
    # a dataset (corpora/dataset.py, corpora/records.py)
    "Dataset": "mhindex.corpora.dataset",
    "Paragraph": "mhindex.corpora.records",
    "Question": "mhindex.corpora.records",
    "RecordGuard": "mhindex.corpora.records",
    "read_records": "mhindex.corpora.records",
    "need": "mhindex.corpora.records",
    "optional": "mhindex.corpora.records",
    "strings": "mhindex.corpora.records",
    # an LM kind (lm/base.py)
    "LMProvider": "mhindex.lm.base",
    "LoadRequest": "mhindex.lm.base",
    "LanguageModel": "mhindex.lm.base",
    "Completion": "mhindex.lm.base",
    "LMError": "mhindex.lm.base",
    # a metric (eval/metrics.py)
    "AnswerMetric": "mhindex.eval.metrics",
    # a paper's table (papers/__init__.py), whose rows methods claim
    "PaperTable": "mhindex.papers",
    "PaperRow": "mhindex.papers",
    "Measure": "mhindex.papers",
}

__all__ = [
    "GROUPS",
    "option",
    "Requirement",
    "package",
    "MhindexError",
    "UsageError",
    "BadInput",
    "normalize_answer",
    "Method",
    "MethodContext",
    "Query",
    "Answer",
    "Step",
    "Meter",
    "Clock",
    "TraceStep",
    "trace_step",
    "reader_step",
    "Reader",
    "ReaderSettings",
    "demo_set",
    "Backend",
    "BackendContext",
    "Retriever",
    "TitleSearch",
    "Hit",
    "search_within_titles",
    "title_key",
    "CorpusDir",
    "Dataset",
    "Paragraph",
    "Question",
    "RecordGuard",
    "read_records",
    "need",
    "optional",
    "strings",
    "LMProvider",
    "LoadRequest",
    "LanguageModel",
    "Completion",
    "LMError",
    "AnswerMetric",
    "PaperTable",
    "PaperRow",
    "Measure",
]

if TYPE_CHECKING:  # what a type checker and an editor see; at run time __getattr__ imports on first use
    from mhindex.backends.base import (
        Backend,
        BackendContext,
        Hit,
        Retriever,
        TitleSearch,
        search_within_titles,
        title_key,
    )
    from mhindex.corpora.dataset import Dataset
    from mhindex.corpora.records import Paragraph, Question, RecordGuard, need, optional, read_records, strings
    from mhindex.errors import BadInput, MhindexError, UsageError
    from mhindex.eval.metrics import AnswerMetric
    from mhindex.home import CorpusDir
    from mhindex.lm.base import Completion, LanguageModel, LMError, LMProvider, LoadRequest
    from mhindex.methods.base import (
        Answer,
        Clock,
        Meter,
        Method,
        MethodContext,
        Query,
        Step,
        TraceStep,
        reader_step,
        trace_step,
    )
    from mhindex.methods.reader import Reader
    from mhindex.methods.settings import ReaderSettings, demo_set
    from mhindex.options import option
    from mhindex.papers import Measure, PaperRow, PaperTable
    from mhindex.registry import GROUPS
    from mhindex.requirements import Requirement, package
    from mhindex.text import normalize_answer


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
