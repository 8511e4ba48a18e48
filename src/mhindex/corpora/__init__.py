"""Dataset releases -> paragraph corpora. One module per dataset; this registry names them.

Adding a dataset: a module with `convert(inputs, guard, on_bytes, **settings)` yielding
`Paragraph`s and `Question`s and a `Dataset(...)` declared with keywords (its title, release, sample,
scoring rule and, for a converter with options of its own, a `Settings` dataclass of `option(...)`
fields, as Freebase's `cvt`), then one line in DATASETS below, or an entry point in the group
`mhindex.datasets` of a package of its own. `corpus` and `build` offer its options, check them and
record them in the corpus manifest; `eval` scores its questions by the rule it declares.
"""

from __future__ import annotations

import os
from pathlib import Path

from mhindex.corpora.dataset import Dataset
from mhindex.registry import Owners, Registry

DATASETS: Registry[Dataset] = Registry(
    "dataset",
    {
        "hotpotqa": "mhindex.corpora.hotpotqa:DATASET",
        "2wikimultihopqa": "mhindex.corpora.wikimultihopqa:DATASET",
        "musique": "mhindex.corpora.musique:DATASET",
        "iirc": "mhindex.corpora.iirc:DATASET",
        "webqsp": "mhindex.corpora.freebase:WEBQSP",
        "cwq": "mhindex.corpora.freebase:CWQ",
        "jsonl": "mhindex.corpora.own:JSONL",
        "dpr": "mhindex.corpora.own:DPR",
        "beir": "mhindex.corpora.own:BEIR",
    },
    lambda loaded: None if isinstance(loaded, Dataset) else "is not an mhindex.corpora.dataset.Dataset",
)


def settings_types() -> Owners:
    """Each dataset's converter settings, for the options of corpus and build."""
    return Owners(DATASETS, {name: d.Settings for name, d in DATASETS.available().items() if d.Settings is not None})


def get_dataset(name: str) -> Dataset:
    return DATASETS.get(name)


def declared_dataset(name: str | None) -> Dataset | None:
    """The registered dataset of that name, None for one that is not (a corpus recorded by a plug-in no
    longer installed, or no dataset at all): what scores and titles fall back from."""
    if name is None or name not in DATASETS:
        return None
    try:
        return DATASETS.get(name)
    except Exception:  # noqa: BLE001 - a broken plug-in's dataset is scored by the defaults
        return None


def demonstration_set(name: str | None) -> str | None:
    """The demonstration set a corpus of this dataset takes (None: a user's own corpus, or no dataset)."""
    declared = declared_dataset(name)
    return declared.demonstration_set if declared else None


def shown_dataset(dataset: str | None, corpus: str) -> str:
    """What a table or a figure calls a corpus's questions: its dataset ("musique"), or for a corpus in a format of
    one's own (BEIR, Pyserini JSONL, DPR TSV: the format names no data) the corpus's own name."""
    declared = declared_dataset(dataset)
    return corpus if not dataset or (declared is not None and declared.own_corpus) else dataset


def dataset_title(name: str) -> str:
    declared = declared_dataset(name)
    return declared.shown if declared else name


def samples_dir() -> Path:
    """The bundled samples (package data, so an installed wheel has them too), or `$MHINDEX_SAMPLES`."""
    if env := os.environ.get("MHINDEX_SAMPLES"):
        return Path(env)
    return Path(__file__).resolve().parent / "samples"


def default_inputs(dataset: Dataset, downloads: Path) -> tuple[list[Path], str]:
    """The downloaded release files if any, else the bundled sample; and which it was."""
    release = [path for pattern in dataset.release_inputs for path in sorted(downloads.glob(pattern)) if path.is_file()]
    if release:
        return release, "release"
    sample = [samples_dir() / dataset.name / f for f in dataset.samples]
    if sample and all(p.is_file() for p in sample):
        return sample, "sample"
    return [], "none"
