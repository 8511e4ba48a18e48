"""Dataset releases -> paragraph corpora. One module per dataset; this registry names them.

Adding a dataset: write a module with `convert(inputs, guard, on_bytes)` yielding
`Paragraph`s and `Question`s, and add one `Dataset` entry below. A converter with options of its
own (Freebase's `cvt`) names them in `options`; `mhindex corpus` passes them as keywords.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mhindex.corpora import freebase, hotpotqa, iirc, musique, wikimultihopqa
from mhindex.corpora.download import Download
from mhindex.errors import UsageError


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    convert: Callable[..., Iterator]
    release: tuple[Download, ...]
    # Files under <home>/downloads/<name>/ that `mhindex corpus NAME` uses when no --input is given
    # (glob patterns: parquet shards).
    release_inputs: tuple[str, ...]
    # Small real samples shipped in the package (mhindex/corpora/samples/<name>/) for trying things out.
    samples: tuple[str, ...] = ()
    # Keyword options of `convert` (and their defaults), recorded in the manifest.
    options: tuple[tuple[str, str], ...] = ()
    # The conversion of one record of a JSON-lines input, for datasets whose `convert` is no more
    # than that over each line: large such inputs are converted on every core (corpora/parallel.py).
    convert_line: Callable[[dict], list] | None = None


_HOTPOT = "http://curtis.ml.cmu.edu/datasets/hotpot/"
_WEBQSP = "https://download.microsoft.com/download/F/5/0/F5012144-A4FB-4084-897F-CFDA99C60BDF/WebQSP.zip"
# RoG's per-question Freebase subgraphs (test split), as parquet shards on the Hugging Face hub.
_ROG = "https://huggingface.co/datasets/rmanluo/{name}/resolve/main/data/{shard}"


def _rog(name: str, shards: int) -> tuple[Download, ...]:
    files = [f"test-{i:05d}-of-{shards:05d}.parquet" for i in range(shards)]
    return tuple(Download(_ROG.format(name=name, shard=f), f"{name}-{f}") for f in files)


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "hotpotqa",
            "HotpotQA: train and dev-distractor questions; corpus from the Wikipedia abstracts release",
            hotpotqa.convert,
            (
                # Sizes and SHA-1 sums as published with GluonNLP's dataset scripts.
                Download(_HOTPOT + "hotpot_train_v1.1.json", "hotpot_train_v1.1.json", "sha1:08c42431c22984f362e94de0e635c7b858c3cff0", 566426227),
                Download(_HOTPOT + "hotpot_dev_distractor_v1.json", "hotpot_dev_distractor_v1.json", "sha1:825b6cfc34a61db41e82bbb14d978d5a834925f8", 46320117),
                Download(
                    "https://nlp.stanford.edu/projects/hotpotqa/enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2",
                    "enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2",
                ),
            ),
            ("hotpot_train_v1.1.json", "hotpot_dev_distractor_v1.json", "enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2"),
            ("hotpot_dev_distractor_v1.sample.json",),
        ),
        Dataset(
            "2wikimultihopqa",
            "2WikiMultihopQA: train, dev and test of the data_ids release",
            wikimultihopqa.convert,
            (Download("https://www.dropbox.com/s/7ep3h8unu2njfxv/data_ids.zip?dl=1", "data_ids.zip", unpack=True),),
            ("train.json", "dev.json", "test.json", "id_aliases.json"),
            ("dev.sample.json",),
        ),
        Dataset(
            "musique",
            "MuSiQue v1.0: the ans and full variants of train, dev and test",
            musique.convert,
            (
                Download(
                    "https://drive.usercontent.google.com/download?id=1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h&export=download&confirm=t",
                    "musique_v1.0.zip",
                    unpack=True,
                ),
            ),
            tuple(f"musique_{v}_v1.0_{s}.jsonl" for v in ("ans", "full") for s in ("train", "dev", "test")),
            ("musique_ans_v1.0_dev.sample.jsonl",),
            convert_line=musique.convert_question,
        ),
        Dataset(
            "iirc",
            "IIRC: train and dev questions with the linked Wikipedia articles as corpus",
            iirc.convert,
            (
                Download("https://iirc-dataset.s3.us-west-2.amazonaws.com/iirc_train_dev.tgz", "iirc_train_dev.tgz", unpack=True),
                Download("https://iirc-dataset.s3.us-west-2.amazonaws.com/context_articles.tar.gz", "context_articles.tar.gz", unpack=True),
            ),
            ("train.json", "dev.json", "context_articles.json"),
            ("dev.handmade.json", "context_articles.handmade.json"),
        ),
        Dataset(
            "webqsp",
            "WebQuestionsSP: Freebase passages (one per head entity) from RoG's subgraphs, questions from the official files",
            functools.partial(freebase.convert, dataset="webqsp"),
            (Download(_WEBQSP, "WebQSP.zip", unpack=True), *_rog("RoG-webqsp", 2)),
            ("WebQSP.test.json", "RoG-webqsp-test-*.parquet"),
            ("WebQSP.test.sample.json", "RoG-webqsp_test.gnn-rag_reasoning_paths.sample.jsonl"),
            (("cvt", "collapse"),),
        ),
        Dataset(
            "cwq",
            "ComplexWebQuestions: Freebase passages (one per head entity) from RoG's subgraphs or named triples",
            functools.partial(freebase.convert, dataset="cwq"),
            _rog("RoG-cwq", 3),
            ("ComplexWebQuestions_test.json", "RoG-cwq-test-*.parquet"),
            ("cwq_test.sample.crucial_triples.json",),
            (("cvt", "collapse"),),
        ),
    )
}


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise UsageError(f"unknown dataset '{name}'; choose one of: {', '.join(DATASETS)}") from None


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
