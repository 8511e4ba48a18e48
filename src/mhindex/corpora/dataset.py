"""What a dataset is to mhindex: how its release is read into paragraphs and questions, and where
its release and bundled sample are. Each dataset's module declares its own `Dataset(...)`, with its
converter's options (a `Settings` dataclass whose fields are declared with `option(...)`, as a
method's are: each becomes an option of `corpus` and `build`, is checked, and is recorded in the
corpus manifest); `corpora.DATASETS` lists them, one line each."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mhindex.corpora.download import Download
from mhindex.requirements import Requirement


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    #: `convert(inputs, guard, on_bytes, **settings)`: the release's paragraphs and questions, in order
    convert: Callable[..., Iterator]
    release: tuple[Download, ...] = ()
    #: files under <home>/downloads/<name>/ that `mhindex corpus NAME` uses when no --input is given
    #: (glob patterns: parquet shards)
    release_inputs: tuple[str, ...] = ()
    #: small real samples shipped in the package (mhindex/corpora/samples/<name>/) for trying things out
    samples: tuple[str, ...] = ()
    #: the converter's options, a frozen dataclass of `option(...)` fields; None when it has none
    Settings: type | None = None
    #: the conversion of one record of a JSON-lines input, for datasets whose `convert` is no more
    #: than that over each line: large such inputs are converted on every core (corpora/parallel.py)
    convert_line: Callable[[dict], list] | None = None
    #: the inputs in the order conversion needs them (paragraphs before the questions that name them)
    order_inputs: Callable[[list[Path]], list[Path]] | None = None
    #: the files of inputs given as the dataset's own loader takes them (BEIR's: its folder), said in a line
    expand_inputs: Callable[[list[Path]], list[Path]] | None = None
    #: paragraphs keep the ids their source gives (a user's own corpus), one paragraph an id
    given_ids: bool = False
    #: as tables and the report name it ("2WikiMultihopQA"); the name when empty
    title: str = ""
    #: how its official script scores an answer's F1: "strict_yes_no" (HotpotQA's, 0 when either side is
    #: yes/no/noanswer and the two differ) or "squad" (SQuAD's compute_f1: two empty answers score 1)
    answer_f1: str = "strict_yes_no"
    #: metrics.py keys its papers score its questions with beyond EM/F1/recall (KD-CoT's Hit@1 on WebQSP)
    paper_metrics: tuple[str, ...] = ()
    #: what its converter needs installed beyond mhindex's own dependencies (checked by `mhindex doctor`)
    requirements: tuple[Requirement, ...] = ()
    #: the demonstrations its questions take, where a method's prompts have that set: its own name unless
    #: said (a variant of a dataset takes the original's); none for a user's own corpus
    demos: str | None = None
    own_corpus: bool = False

    @property
    def demonstration_set(self) -> str | None:
        return None if self.own_corpus else (self.demos or self.name)

    @property
    def shown(self) -> str:
        return self.title or self.name
