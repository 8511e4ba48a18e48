"""Corpora: `download`, `corpus`, `list`, `info`, and `build` (a corpus and its index in one go)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mhindex import render, ui
from mhindex.cli.app import BackendOption, HomeOption, JsonOption, QuietOption, app, backend_options, console, print_json, setup
from mhindex.home import built_corpora, damaged_corpora, downloads_dir, leftovers, open_corpus

DatasetArgument = Annotated[str, typer.Argument(help="hotpotqa, 2wikimultihopqa, musique, iirc, webqsp or cwq.", show_default=False)]
InputsOption = Annotated[
    Optional[list[Path]],
    typer.Option("--input", "-i", help="A release file; repeat for several (train, dev, test; ans and full). Default: the downloaded release, else the bundled sample."),
]
NameOption = Annotated[Optional[str], typer.Option(help="Corpus name \\[default: the dataset name].", show_default=False)]
SeedOption = Annotated[int, typer.Option(help="Seed of the deterministic corpus shuffle (IRCoT's).")]
CvtOption = Annotated[
    Optional[str],
    typer.Option(
        "--cvt",
        help="webqsp, cwq: CVT nodes are collapsed into their parent's passage (collapse) or kept as DecAF does, in subject-less passages of their own (decaf) \\[default: collapse].",
        show_default=False,
    ),
]
AddOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--add",
        metavar="DATASET[=FILE,...]",
        help="Also put this dataset's paragraphs (not its questions) into the corpus, each keeping its `source`; its files, else its release or sample. Repeatable: KD-CoT's Freebase + Wikipedia corpus is `mhindex corpus webqsp --add hotpotqa`.",
    ),
]
SkipBadOption = Annotated[bool, typer.Option("--skip-bad", metavar="", help="Pass over malformed records (and count them) instead of stopping.")]
ConvertWorkersOption = Annotated[
    Optional[int],
    typer.Option(
        "--workers",
        min=1,
        help="Processes converting a JSON-lines release (MuSiQue) \\[default: every core for inputs of 32 MB or more]. The corpus is the same byte for byte whatever the number.",
        show_default=False,
    ),
]


def _added(specs: list[str] | None) -> list[tuple[str, list[Path]]]:
    added = []
    for spec in specs or []:
        dataset, _, files = spec.partition("=")
        added.append((dataset.strip(), [Path(f).expanduser() for f in files.split(",") if f.strip()]))
    return added


def _convert(
    root: Path, dataset: str, inputs: list[Path] | None, name: str | None, seed: int, force: bool, skip_bad: bool, cvt: str | None, add: list[str] | None, workers: int | None
):
    from mhindex.corpora.build import build_dataset

    options = {"cvt": cvt} if cvt is not None else {}
    result = build_dataset(root, dataset, inputs, name=name, added=_added(add), seed=seed, force=force, skip_bad=skip_bad, options=options, workers=workers)
    for warning in result.warnings:
        ui.reporter().warning(warning)
    return result


def _report_build(result, json: bool) -> None:
    if json:
        print_json({"rebuilt": result.rebuilt, "path": str(result.corpus.root), **result.manifest})
    else:
        console().print(render.build_summary(result))


@app.command()
def corpus(
    dataset: DatasetArgument,
    inputs: InputsOption = None,
    name: NameOption = None,
    seed: SeedOption = 13370,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild even if inputs and seed are unchanged.")] = False,
    skip_bad: SkipBadOption = False,
    cvt: CvtOption = None,
    add: AddOption = None,
    workers: ConvertWorkersOption = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Convert a dataset release into a deduplicated, shuffled paragraph corpus and a question file."""
    root = setup(home, quiet)
    result = _convert(root, dataset, inputs, name, seed, force, skip_bad, cvt, add, workers)
    if result.rebuilt and result.stale_indexes:
        backends = ", ".join(result.stale_indexes)
        ui.reporter().warning(f"the {backends} index of {result.corpus.name} was built from the previous corpus: run `mhindex index {result.corpus.name}` (or `mhindex build`) to rebuild it")
    _report_build(result, json)


@app.command()
def download(
    dataset: DatasetArgument,
    only: Annotated[Optional[list[str]], typer.Option("--file", help="Fetch only this release file (repeatable).")] = None,
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


@app.command(name="list")
def list_(home: HomeOption = None, quiet: QuietOption = False, json: JsonOption = False) -> None:
    """List the corpora built under the data root, with counts, indexes and sizes."""
    from mhindex.files import human_size, size_on_disk

    root = setup(home, quiet)
    rows = [c.summary() for c in built_corpora(root)]
    log = ui.reporter()
    for folder in damaged_corpora(root):
        log.warning(f"{folder}: damaged (its manifest.json cannot be read); rebuild it: mhindex corpus DATASET --name {folder.name} --force")
    stale, resumable = leftovers(root)
    if stale:
        log.warning(f"{human_size(sum(map(size_on_disk, stale)))} in {len(stale)} temporary folders of builds that were killed; `mhindex gc` removes them")
    if resumable:
        log.info(f"{human_size(sum(map(size_on_disk, resumable)))} kept to resume interrupted encodings or training; `mhindex gc --resumable` removes them")
    if json:
        print_json(rows)
    else:
        console().print(render.corpora_table(rows, root) if rows else f"no corpora in {root}; try: mhindex build musique")


@app.command()
def gc(
    resumable: Annotated[bool, typer.Option("--resumable", metavar="", help="Also remove the work kept to resume an interrupted dense encoding or training.")] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Remove what killed builds left in the data root: temporary folders of processes that are gone."""
    from mhindex.files import OutsideRoot, human_size, inside, remove, size_on_disk

    root = setup(home, quiet)
    stale, kept = leftovers(root)
    doomed = [*stale, *(kept if resumable else [])]
    freed, removed, log = 0, [], ui.reporter()
    for path in doomed:
        try:
            inside(root, path.parent)  # never through a link out of the data root
        except OutsideRoot as error:
            log.warning(f"left alone: {error}")
            continue
        freed += size_on_disk(path)
        remove(path)  # a link itself is unlinked, never followed
        removed.append(str(path))
    if json:
        print_json({"removed": removed, "bytes": freed})
    else:
        console().print(f"removed {len(removed)} leftovers, {human_size(freed)}" + (f"; {len(kept)} kept for resuming (--resumable removes them)" if kept and not resumable else ""))


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
def build(
    dataset: DatasetArgument,
    inputs: InputsOption = None,
    name: NameOption = None,
    backend: BackendOption = "lucene",
    seed: SeedOption = 13370,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild corpus and index.")] = False,
    skip_bad: SkipBadOption = False,
    cvt: CvtOption = None,
    add: AddOption = None,
    workers: ConvertWorkersOption = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
    backend_options: dict | None = None,
) -> None:
    """Corpus, then index, in one command: `mhindex build musique`."""
    from mhindex.backends import build_index
    from mhindex.cli.indexes import report_index

    root = setup(home, quiet)
    built = _convert(root, dataset, inputs, name, seed, force, skip_bad, cvt, add, workers)
    indexed = build_index(built.corpus, backend, backend_options, force=force)
    if json:
        print_json({"corpus": {"rebuilt": built.rebuilt, **built.manifest}, "index": {"rebuilt": indexed.rebuilt, **indexed.manifest}})
        return
    _report_build(built, False)
    report_index(indexed, False)
    if indexed.rebuilt or built.rebuilt:
        console().print(f'next: mhindex search {built.corpus.name} "your query"   or   mhindex ask "your question" --corpus {built.corpus.name}')
