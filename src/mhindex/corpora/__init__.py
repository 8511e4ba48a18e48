"""Dataset releases -> paragraph corpora. One module per dataset; this registry names them.

Adding a dataset: a module with `convert(inputs, guard, on_bytes, **settings)` yielding
`Paragraph`s and `Question`s and a `Dataset(...)` declared with keywords (its release, sample and,
for a converter with options of its own, a `Settings` dataclass of `option(...)` fields, as
Freebase's `cvt`), then one line in DATASETS below. `corpus` and `build` offer its options,
check them and record them in the corpus manifest.
"""

from __future__ import annotations

import os
from pathlib import Path

from mhindex.corpora import freebase, hotpotqa, iirc, musique, own, wikimultihopqa
from mhindex.corpora.dataset import Dataset
from mhindex.registry import unknown

DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        hotpotqa.DATASET,
        wikimultihopqa.DATASET,
        musique.DATASET,
        iirc.DATASET,
        freebase.WEBQSP,
        freebase.CWQ,
        own.JSONL,
        own.DPR,
        own.BEIR,
    )
}


def settings_types() -> dict[str, type]:
    """Each dataset's converter settings, for the options of corpus and build."""
    return {name: d.Settings for name, d in DATASETS.items() if d.Settings is not None}


def get_dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise unknown("dataset", name, DATASETS)
    return DATASETS[name]


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
