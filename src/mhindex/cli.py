"""The `mhindex` command. Each subcommand parses, calls the library, prints; errors are one
line on stderr with a non-zero exit code (2 for bad input or usage, 1 otherwise)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer

from mhindex import __version__, ui
from mhindex.errors import MhindexError, UsageError
from mhindex.home import built_corpora, downloads_dir, open_corpus, resolve_home

app = typer.Typer(
    name="mhindex",
    help="Multi-hop question answering over your own corpora: build corpora, index them, ask questions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

HomeOption = Annotated[
    Optional[Path],
    typer.Option("--home", envvar="MHINDEX_HOME", help="Data root [default: $XDG_DATA_HOME/mhindex, i.e. ~/.local/share/mhindex].", show_default=False),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or log lines; errors only.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


class _Globals:
    home: Path | None = None
    quiet: bool = False


_globals = _Globals()


def _setup(home: Path | None, quiet: bool) -> Path:
    """Apply the options given before or after the subcommand; returns the data root."""
    ui.configure(quiet=quiet or _globals.quiet)
    return resolve_home(home or _globals.home)


def _print_json(value) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _out():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        print(f"mhindex {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    home: HomeOption = None,
    quiet: QuietOption = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """Multi-hop question answering over your own corpora.

    Start with [bold]mhindex build musique[/bold] (corpus and index from the bundled sample), then
    [bold]mhindex ask "..."[/bold]. Data lives under --home (or $MHINDEX_HOME).
    """
    _globals.home = home
    _globals.quiet = quiet


@app.command()
def corpus(
    dataset: Annotated[str, typer.Argument(help="hotpotqa, 2wikimultihopqa, musique or iirc.", show_default=False)],
    inputs: Annotated[
        Optional[list[Path]],
        typer.Option("--input", "-i", help="A release file; repeat for several (train, dev, test; ans and full). Default: the downloaded release, else the bundled sample."),
    ] = None,
    name: Annotated[Optional[str], typer.Option(help="Corpus name [default: the dataset name].", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed of the deterministic corpus shuffle (IRCoT's).")] = 13370,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if inputs and seed are unchanged.")] = False,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Pass over malformed records (and count them) instead of stopping.")] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Convert a dataset release into a deduplicated, shuffled paragraph corpus and a question file."""
    from mhindex.corpora import default_inputs, get_dataset
    from mhindex.corpora.build import build_corpus

    root = _setup(home, quiet)
    spec = get_dataset(dataset)
    files = list(inputs or [])
    if not files:
        files, origin = default_inputs(spec, downloads_dir(root, spec.name))
        if origin == "sample":
            ui.reporter().info(f"no release of {spec.name} under {downloads_dir(root, spec.name)}: using the bundled sample")
    result = build_corpus(spec, files, root, name=name, seed=seed, force=force, skip_bad=skip_bad)
    for warning in result.warnings:
        ui.reporter().warning(warning)
    _report_build(result, json)


def _report_build(result, json: bool) -> None:
    manifest = result.manifest
    if json:
        _print_json({"rebuilt": result.rebuilt, "path": str(result.corpus.root), **manifest})
        return
    counts = manifest["counts"]
    if not result.rebuilt:
        _out().print(f"{result.corpus.name} is up to date (same inputs and seed); --force rebuilds it: {result.corpus.root}")
        return
    _out().print(
        f"built corpus [bold]{result.corpus.name}[/bold]: {counts['paragraphs']:,} paragraphs "
        f"({counts['duplicate_paragraphs']:,} duplicates dropped), {counts['questions']:,} questions "
        f"in {manifest['seconds']:.1f}s -> {result.corpus.root}"
    )


@app.command()
def download(
    dataset: Annotated[str, typer.Argument(help="hotpotqa, 2wikimultihopqa, musique or iirc.", show_default=False)],
    only: Annotated[Optional[list[str]], typer.Option("--file", help="Fetch only this release file (repeatable).")] = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
) -> None:
    """Fetch a dataset's official release files into <home>/downloads/DATASET (resumable, verified)."""
    from mhindex.corpora import get_dataset
    from mhindex.corpora.download import download_release

    root = _setup(home, quiet)
    spec = get_dataset(dataset)
    folder = downloads_dir(root, spec.name)
    files = download_release(spec, folder, only)
    _out().print(f"{len(files)} files of {spec.name} in {folder}; next: mhindex corpus {spec.name}")


def _corpus_summary(found) -> dict:
    from mhindex.files import human_size

    manifest = found.manifest()
    size = sum(p.stat().st_size for p in found.root.rglob("*") if p.is_file())
    indexes = sorted(p.name for p in found.indexes.iterdir() if p.is_dir()) if found.indexes.is_dir() else []
    return {
        "name": found.name,
        "dataset": manifest.get("dataset"),
        "paragraphs": manifest["counts"]["paragraphs"],
        "questions": manifest["counts"]["questions"],
        "indexes": indexes,
        "bytes": size,
        "size": human_size(size),
        "path": str(found.root),
    }


@app.command(name="list")
def list_(home: HomeOption = None, quiet: QuietOption = False, json: JsonOption = False) -> None:
    """List the corpora built under the data root, with counts, indexes and sizes."""
    root = _setup(home, quiet)
    rows = [_corpus_summary(c) for c in built_corpora(root)]
    if json:
        _print_json(rows)
        return
    if not rows:
        _out().print(f"no corpora in {root}; try: mhindex build musique")
        return
    from rich.table import Table

    table = Table("name", "dataset", "paragraphs", "questions", "indexes", "size", title=str(root), title_justify="left")
    for row in rows:
        table.add_row(row["name"], row["dataset"], f"{row['paragraphs']:,}", f"{row['questions']:,}", ", ".join(row["indexes"]) or "-", row["size"])
    _out().print(table)


@app.command()
def info(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Show one corpus: its manifest (inputs, hashes, seed, counts) and indexes."""
    root = _setup(home, quiet)
    found = open_corpus(root, name)
    summary = {**_corpus_summary(found), "manifest": found.manifest()}
    if json:
        _print_json(summary)
        return
    manifest = summary["manifest"]
    out = _out()
    out.print(f"[bold]{found.name}[/bold] ({manifest['dataset']}) at {found.root}, {summary['size']}")
    for key, value in manifest["counts"].items():
        out.print(f"  {key}: {value:,}")
    out.print(f"  seed: {manifest['seed']}, built {manifest['created_at']} by mhindex {manifest['tool_version']}")
    for item in manifest["inputs"]:
        out.print(f"  input: {item['path']} (sha256 {item['sha256'][:12]}…)")
    out.print(f"  indexes: {', '.join(summary['indexes']) or 'none (run mhindex index ' + found.name + ')'}")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising, so tests can call it in-process."""
    try:
        app(args=argv, prog_name="mhindex", standalone_mode=False)
    except MhindexError as error:
        message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"mhindex: error: {message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("mhindex: interrupted", file=sys.stderr)
        return 130
    except typer.Exit as done:
        return done.exit_code
    except Exception as error:  # click's own usage errors and aborts
        import click

        if isinstance(error, click.exceptions.ClickException):
            error.show()
            return error.exit_code
        if isinstance(error, click.exceptions.Abort):
            print("mhindex: aborted", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
