"""The Typer application and what its commands share: the global options, the option groups
generated from the registries, and the two ways of printing (a rich console, or JSON)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer

from mhindex import __version__, ui
from mhindex.backends import BACKENDS
from mhindex.home import resolve_home
from mhindex.lm import LMS


def help_layout() -> None:
    """Two details of Typer's help, set once here because Typer has no setting for them (a small patch of
    its rendering rather than a help formatter of our own): option names are never cut (at 80 columns
    "--max-paragraph-words" read "--max-paragraph-…": now the name columns keep their width and the help
    column wraps), and a flag shows no "<bool>" type beside it (`--help -h <bool>` on every command).
    Applied only when help is asked for: Typer's rich_utils costs some 90 ms to import, on every command."""
    import typer.rich_utils
    from rich.table import Table
    from rich.text import Text
    from typer.core import TyperOption

    if getattr(typer.rich_utils.Table, "names_whole", False):  # once a process (tests call main many times)
        return

    class NamesWhole(Table):
        names_whole = True

        def add_row(self, *renderables, **kwargs) -> None:
            if len(renderables) in (6, 7):  # [required], long, short, negative long, negative short, type, help
                first = len(renderables) - 6
                long, short, negative, negative_short = renderables[first : first + 4]
                renderables = (
                    *renderables[:first],
                    Text.assemble(long, "\n", negative) if str(negative) else long,  # one column, two lines
                    Text.assemble(short, "\n", negative_short) if str(negative_short) else short,
                    *renderables[first + 4 :],
                )
            super().add_row(*renderables, **kwargs)
            for column in self.columns[:-2]:  # an option's names; then its type and its help
                column.no_wrap = True
            help_parts = getattr(renderables[-1], "renderables", [renderables[-1]])  # typer's help: Columns of Texts
            for part in help_parts:
                if isinstance(part, Text):
                    part.overflow = "fold"  # a long word in the help breaks, never ends in "…"

    typer.rich_utils.Table = NamesWhole  # type: ignore[misc]  # the options panel's table
    shown_type = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown_type(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


app = typer.Typer(
    name="mhindex",
    help="Multi-hop question answering over your own corpora: build corpora, index them, ask questions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion and --show-completion (bash, zsh, fish, PowerShell)
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

HomeOption = Annotated[
    Optional[Path],
    typer.Option(
        "--home",
        help="Data root \\[default: $MHINDEX_HOME, else $XDG_DATA_HOME/mhindex, i.e. ~/.local/share/mhindex].",
        show_default=False,
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", metavar="", help="No progress bars or log lines (results and errors are still printed)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", metavar="", help="Print machine-readable JSON on stdout.")]
BackendOption = Annotated[
    str,
    typer.Option(
        "--backend",
        "-b",
        help=f"Retrieval engine: {', '.join(n for n, b in BACKENDS.available().items() if not b.fuses)} (lucene is "
        "embedded; see docs/search.md); two or more fused, e.g. lucene+dense; or http://HOST:PORT for a served index.",
    ),
]
LmOption = Annotated[
    Optional[str],
    typer.Option(
        "--lm",
        help=f"Language model, KIND:... with KIND one of {', '.join(LMS)}; e.g. local:qwen2.5-0.5b (the default), "
        "local:smollm2-135m, local:qwen2.5-1.5b, gguf:PATH, hf:PATH, openai:MODEL@URL, openai-chat:MODEL@URL "
        "\\[default: $MHINDEX_LM, else local:qwen2.5-0.5b].",
        show_default=False,
    ),
]


class _Globals:
    """The options given before the subcommand (`mhindex --home H ask ...`)."""

    home: Path | None = None
    quiet: bool = False
    lm: str | None = None


_globals = _Globals()


def _version(value: bool) -> None:
    if value:
        print(f"mhindex {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    home: HomeOption = None,
    quiet: QuietOption = False,
    lm: LmOption = None,
    version: Annotated[
        bool, typer.Option("--version", metavar="", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Multi-hop question answering over your own corpora.

    Start with [bold]mhindex build musique[/bold] (corpus and index from the bundled sample), then
    [bold]mhindex ask "..."[/bold]. Data lives under --home (or $MHINDEX_HOME).
    """
    _globals.home = home
    _globals.quiet = quiet
    _globals.lm = lm


def setup(home: Path | None, quiet: bool) -> Path:
    """Apply the options given before or after the subcommand; returns the data root."""
    ui.configure(quiet=quiet or _globals.quiet)
    return resolve_home(home or _globals.home)


def model_from(given: dict | None):
    """The model options of a command, with the global --lm as the fallback for its own --lm."""
    from mhindex.lm import ModelOptions

    options = ModelOptions(**(given or {}))
    return options if options.lm else dataclasses.replace(options, lm=_globals.lm)


def model_options(command):
    """How to load the language model (mhindex.lm.ModelOptions), for lm, ask and eval alike."""
    from mhindex.lm import ModelOptions
    from mhindex.options import with_options

    return with_options("model_options", lambda: {"model": ModelOptions}, panel="Model options")(command)


def backend_options(command):
    """Every registered backend's options, grouped by when they take effect (see mhindex/options.py):
    index-time ones are also accepted when searching, to be checked against what the index was built with."""
    from mhindex.backends import settings_types
    from mhindex.backends.spec import named_by
    from mhindex.options import with_options

    panels = {
        "index": "Backend options, fixed when the index is built",
        "search": "Backend options, applied when searching",
    }
    return with_options(
        "backend_options", settings_types, panel=lambda opt: panels.get(opt.stage, "Backend options"), named=named_by
    )(command)


def method_options(command):
    """Every registered method's settings, as options of `ask` and `eval` (see mhindex/options.py)."""
    from mhindex.methods import settings_types
    from mhindex.options import with_options

    return with_options("method_options", settings_types, panel="Method options")(command)


def print_json(value) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def write_line(record: dict) -> None:
    """One JSONL record on stdout, flushed, so a pipe sees each answer as it is ready."""
    sys.stdout.write(orjson.dumps(record).decode() + "\n")
    sys.stdout.flush()


def console():
    from rich.console import Console

    out = Console(highlight=False, soft_wrap=True)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = 100_000  # in a pipe or a file, never crop a trace; tables at their natural width ($COLUMNS: its)
    return out
