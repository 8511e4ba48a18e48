"""Corpora: `download`, `corpus`, `list`, `info`, `gc`, and `build` (a corpus and its index in one go)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Optional

from mhindex import render, ui
from mhindex._api.corpora import build_and_index
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import BackendOption, Output, PreflightOption, arg, backend_options, command, flag, opt
from mhindex.corpora import DATASETS
from mhindex.corpora import settings_types as corpora_settings
from mhindex.corpora.build import CorpusOptions
from mhindex.home import built_corpora, downloads_dir, open_corpus
from mhindex.methods import resumable_work
from mhindex.options import with_options

DatasetArgument = Annotated[str, arg(f"One of: {', '.join(DATASETS)}.")]


#: The options of building a corpus (corpora.build.CorpusOptions) and each dataset's converter options (its
#: `Settings`), as options of corpus and build.
converter_options = with_options("converter_options", corpora_settings, panel="Dataset options")
corpus_options = with_options("corpus_options", lambda: {"corpus": CorpusOptions}, panel="Corpus options",
                              checked_as="corpus")  # fmt: skip


@command()
@corpus_options
@converter_options
def corpus(
    dataset: DatasetArgument,
    force: Annotated[bool, flag("Rebuild even if inputs and seed are unchanged.")] = False,
    preflight: PreflightOption = True,
    *,
    root: Path,
    output: Output,
    corpus_options: CorpusOptions,
    converter_options: dict,
) -> None:
    """Convert a dataset release into a deduplicated, shuffled paragraph corpus and a question file."""
    said = ui.reporter().warning
    result, _ = build_and_index(root, dataset, corpus_options, converter_options, None, force, preflight, said)
    output.show(
        {"rebuilt": result.rebuilt, "path": str(result.corpus.root), **result.manifest}, render.build_summary(result)
    )


@command(json=False)
def download(
    dataset: DatasetArgument,
    only: Annotated[Optional[list[str]], opt("Fetch only this release file (repeatable).", "--file")] = None,
    *,
    root: Path,
    output: Output,
) -> None:
    """Fetch a dataset's official release files into <home>/downloads/DATASET (resumable, verified)."""
    from mhindex.corpora import get_dataset
    from mhindex.corpora.download import download_release

    spec = get_dataset(dataset)
    folder = downloads_dir(root, spec.name)
    files = download_release(spec, folder, only)
    output.show(None, f"{len(files)} files of {spec.name} in {folder}; next: mhindex corpus {spec.name}")


class Listing(StrEnum):
    corpora = "corpora"
    methods = "methods"
    tables = "tables"


@command(name="list")
def list_(
    what: Annotated[Listing, arg("corpora, methods (their papers and rows) or tables (the papers' rows).")] = (
        Listing.corpora
    ),
    *,
    root: Path,
    output: Output,
) -> None:
    """List the corpora built under the data root (counts, indexes, sizes), the methods installed, or the papers'
    tables that `eval --table` runs, row by row with the paper's figures."""
    from mhindex.eval.tables import table_listing
    from mhindex.home import say_what_needs_care
    from mhindex.methods import method_rows

    if what is not Listing.corpora:
        rows = method_rows() if what is Listing.methods else table_listing()
        return output.show(rows, (render.methods_table if what is Listing.methods else render.paper_tables_table)(rows))
    rows = [c.summary() for c in built_corpora(root)]
    say_what_needs_care(root, resumable_work(root))
    output.show(rows, render.corpora_table(rows, root) if rows else f"no corpora in {root}; try: mhindex build musique")


@command()
def gc(
    resumable: Annotated[bool, flag("Also remove what is kept to resume a dense encoding or a training.")] = False,
    *,
    root: Path,
    output: Output,
) -> None:
    """Remove what killed builds left in the data root: temporary folders of processes that are gone."""
    from mhindex.home import collect_leftovers

    removed, freed, kept = collect_leftovers(root, resumable_work(root, every=True), resumable)
    output.show({"removed": [str(p) for p in removed], "bytes": freed}, render.collected(removed, freed, kept))


@command()
def info(name: Annotated[str, arg("Corpus name.")], *, root: Path, output: Output) -> None:
    """Show one corpus: its manifest (inputs, hashes, seed, counts), its indexes, and the retrieval environment's
    fingerprint of each (what `mhindex diff` compares)."""
    from mhindex.backends.indexes import corpus_environment

    found = open_corpus(root, name)
    summary = {**found.summary(), "manifest": found.manifest(), "fingerprint": corpus_environment(found)}
    output.show(summary, render.corpus_info(summary))


@command()
@backend_options
@corpus_options
@converter_options
def build(
    dataset: DatasetArgument,
    backend: BackendOption = DEFAULT_BACKEND,
    force: Annotated[bool, flag("Rebuild corpus and index.")] = False,
    preflight: PreflightOption = True,
    *,
    root: Path,
    output: Output,
    corpus_options: CorpusOptions,
    converter_options: dict,
    backend_options: dict | None = None,
) -> None:
    """Corpus, then index, in one command: `mhindex build musique`."""
    from mhindex.backends import BackendSpec

    spec = BackendSpec.parse(backend, backend_options)
    said = ui.reporter().warning
    built, indexed = build_and_index(root, dataset, corpus_options, converter_options, spec, force, preflight, said)
    indexes = [{"rebuilt": i.rebuilt, **i.manifest} for i in indexed]
    data = {"corpus": {"rebuilt": built.rebuilt, **built.manifest}}
    output.show(data | ({"indexes": indexes} if spec.parts else {"index": indexes[0]}), *render.built(built, indexed))
