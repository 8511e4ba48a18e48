"""Corpora: `download`, `corpus`, `list`, `info`, and `build` (a corpus and its index in one go)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Optional

import typer

from mhindex import render, ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.cli.app import (
    BackendOption,
    HomeOption,
    JsonOption,
    QuietOption,
    app,
    backend_options,
    console,
    print_json,
    setup,
)
from mhindex.corpora import DATASETS
from mhindex.home import built_corpora, damaged_corpora, downloads_dir, leftovers, open_corpus
from mhindex.methods import resumable_work

DatasetArgument = Annotated[str, typer.Argument(help=f"One of: {', '.join(DATASETS)}.", show_default=False)]


def corpus_options(command):
    """The options of building a corpus (corpora.build.CorpusOptions) and each dataset's converter
    options (its `Settings`), as options of corpus and build."""
    from mhindex.corpora import settings_types
    from mhindex.corpora.build import CorpusOptions
    from mhindex.options import with_options

    command = with_options("converter_options", settings_types, panel="Dataset options")(command)
    return with_options("corpus_options", lambda: {"corpus": CorpusOptions}, panel="Corpus options")(command)


def _convert(root: Path, dataset: str, options: dict | None, converter: dict | None, force: bool):
    from mhindex.corpora.build import CorpusOptions, build_dataset

    result = build_dataset(root, dataset, CorpusOptions(**(options or {})), converter or {}, force=force)
    for warning in result.warnings:
        ui.reporter().warning(warning)
    return result


def _report_build(result, json: bool) -> None:
    if json:
        print_json({"rebuilt": result.rebuilt, "path": str(result.corpus.root), **result.manifest})
    else:
        console().print(render.build_summary(result))


@app.command()
@corpus_options
def corpus(
    dataset: DatasetArgument,
    force: Annotated[
        bool, typer.Option("--force", metavar="", help="Rebuild even if inputs and seed are unchanged.")
    ] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    corpus_options: dict | None = None,
    converter_options: dict | None = None,
) -> None:
    """Convert a dataset release into a deduplicated, shuffled paragraph corpus and a question file."""
    root = setup(home, quiet)
    result = _convert(root, dataset, corpus_options, converter_options, force)
    if result.rebuilt and result.stale_indexes:
        backends = ", ".join(result.stale_indexes)
        ui.reporter().warning(
            f"the {backends} index of {result.corpus.name} was built from the previous corpus: run `mhindex "
            f"index {result.corpus.name}` (or `mhindex build`) to rebuild it"
        )
    _report_build(result, json)


@app.command()
def download(
    dataset: DatasetArgument,
    only: Annotated[
        Optional[list[str]], typer.Option("--file", help="Fetch only this release file (repeatable).")
    ] = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
) -> None:
    """Fetch a dataset's official release files into <home>/downloads/DATASET (resumable, verified)."""
    from mhindex.corpora import get_dataset
    from mhindex.corpora.download import download_release

    root = setup(home, quiet)
    spec = get_dataset(dataset)
    folder = downloads_dir(root, spec.name)
    files = download_release(spec, folder, only)
    console().print(f"{len(files)} files of {spec.name} in {folder}; next: mhindex corpus {spec.name}")


class Listing(StrEnum):
    corpora = "corpora"
    methods = "methods"


@app.command(name="list")
def list_(
    what: Annotated[
        Listing, typer.Argument(help="corpora, or methods (each with its paper and the tables it is a row of).")
    ] = Listing.corpora,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """List the corpora built under the data root (counts, indexes, sizes), or the methods installed."""
    from mhindex.files import human_size, size_on_disk

    root = setup(home, quiet)
    if what is Listing.methods:
        from mhindex.methods import method_rows

        print_json(method_rows()) if json else console().print(render.methods_table(method_rows()))
        return
    rows = [c.summary() for c in built_corpora(root)]
    log = ui.reporter()
    for folder in damaged_corpora(root):
        log.warning(
            f"{folder}: damaged (its manifest.json cannot be read); rebuild it: mhindex corpus DATASET --name "
            f"{folder.name} --force"
        )
    stale, resumable = leftovers(root, resumable_work(root))
    if stale:
        log.warning(
            f"{human_size(sum(map(size_on_disk, stale)))} in {len(stale)} temporary folders of builds that "
            "were killed; `mhindex gc` removes them"
        )
    if resumable:
        log.info(
            f"{human_size(sum(map(size_on_disk, resumable)))} kept to resume interrupted encodings or "
            "training; `mhindex gc --resumable` removes them"
        )
    if json:
        print_json(rows)
    else:
        console().print(
            render.corpora_table(rows, root) if rows else f"no corpora in {root}; try: mhindex build musique"
        )


@app.command()
def gc(
    resumable: Annotated[
        bool,
        typer.Option(
            "--resumable",
            metavar="",
            help="Also remove the work kept to resume an interrupted dense encoding or training.",
        ),
    ] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Remove what killed builds left in the data root: temporary folders of processes that are gone."""
    from mhindex.files import human_size
    from mhindex.home import remove_leftovers

    root = setup(home, quiet)
    stale, kept = leftovers(root, resumable_work(root))
    removed, freed, left = remove_leftovers(root, [*stale, *(kept if resumable else [])])
    for line in left:
        ui.reporter().warning(line)
    if json:
        print_json({"removed": [str(p) for p in removed], "bytes": freed})
    else:
        console().print(
            f"removed {len(removed)} leftovers, {human_size(freed)}"
            + (f"; {len(kept)} kept for resuming (--resumable removes them)" if kept and not resumable else "")
        )


@app.command()
def info(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Show one corpus: its manifest (inputs, hashes, seed, counts) and indexes."""
    found = open_corpus(setup(home, quiet), name)
    summary = {**found.summary(), "manifest": found.manifest()}
    if json:
        print_json(summary)
    else:
        console().print(render.corpus_info(summary))


@app.command()
@backend_options
@corpus_options
def build(
    dataset: DatasetArgument,
    backend: BackendOption = DEFAULT_BACKEND,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild corpus and index.")] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    corpus_options: dict | None = None,
    converter_options: dict | None = None,
    backend_options: dict | None = None,
) -> None:
    """Corpus, then index, in one command: `mhindex build musique`."""
    from mhindex.backends import BackendSpec, build_index
    from mhindex.cli.indexes import report_index

    root = setup(home, quiet)
    spec = BackendSpec.parse(backend, backend_options)
    parts = spec.parts or (spec,)  # a hybrid's parts, each built as itself
    for part in parts:
        part.index_options()  # a wrong option fails before any work
    built = _convert(root, dataset, corpus_options, converter_options, force)
    indexed = [build_index(built.corpus, part, force=force) for part in parts]
    if json:
        indexes = [{"rebuilt": i.rebuilt, **i.manifest} for i in indexed]
        print_json(
            {"corpus": {"rebuilt": built.rebuilt, **built.manifest}}
            | ({"indexes": indexes} if spec.parts else {"index": indexes[0]})
        )
        return
    _report_build(built, False)
    for index in indexed:
        report_index(index, False)
    if any(i.rebuilt for i in indexed) or built.rebuilt:
        console().print(
            f'next: mhindex search {built.corpus.name} "your query"   or   mhindex ask "your question" '
            f"--corpus {built.corpus.name}"
        )
