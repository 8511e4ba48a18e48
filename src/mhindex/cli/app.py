"""The Typer application and what its commands share: the global options, the option groups
generated from the registries, and the two ways of printing (a rich console, or JSON)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer

from mhindex import __version__, ui
from mhindex.backends import engine_names
from mhindex.backends import settings_types as backend_settings
from mhindex.backends.spec import named_by
from mhindex.home import resolve_home
from mhindex.lm import ModelOptions
from mhindex.methods import settings_types as method_settings
from mhindex.options import declared, with_options

app = typer.Typer(
    name="mhindex",
    help="Multi-hop question answering over your own corpora: build corpora, index them, ask questions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion and --show-completion (bash, zsh, fish, PowerShell)
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def opt(help: str, *names: str, **details: Any) -> Any:
    """A Typer option; where its default needs words, `help` says it ("\\[default: ...]") and Typer's is not shown."""
    return typer.Option(*names, help=help, show_default="[default" not in help, **details)


def flag(help: str, *names: str) -> Any:
    """An on/off option: no value, no type shown."""
    return typer.Option(*names, metavar="", help=help)


def arg(help: str, **details: Any) -> Any:
    """A positional argument."""
    return typer.Argument(help=help, show_default="[default" not in help, **details)


HOME_HELP = "Data root \\[default: $MHINDEX_HOME, else $XDG_DATA_HOME/mhindex, i.e. ~/.local/share/mhindex]."
BACKEND_HELP = (
    f"Retrieval engine: {', '.join(engine_names())} (lucene is embedded; see docs/search.md); two or more fused, e.g. "
    "lucene+dense; or http://HOST:PORT for a served index."
)
HomeOption = Annotated[Optional[Path], opt(HOME_HELP, "--home")]
QuietOption = Annotated[
    bool, flag("No progress bars or log lines (results and errors are still printed).", "--quiet", "-q")
]
JsonOption = Annotated[bool, flag("Print machine-readable JSON on stdout.", "--json")]
BackendOption = Annotated[str, opt(BACKEND_HELP, "--backend", "-b")]
PreflightOption = Annotated[
    bool,
    opt(
        "Before a conversion or an index build, the memory and disk it needs are estimated from the release's or "
        "the corpus's size (`mhindex doctor` shows them); one that cannot fit is refused. --no-preflight goes on.",
        "--preflight/--no-preflight",
    ),
]


#: the options given before the subcommand (`mhindex --home H ask ...`)
_globals: dict[str, Any] = {"home": None, "quiet": False, "lm": None}


def _version(value: bool) -> None:
    if value:
        print(f"mhindex {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    home: HomeOption = None,
    quiet: QuietOption = False,
    lm: Annotated[Optional[str], opt(declared(ModelOptions)["lm"][1].help, "--lm")] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.", show_default=False)
    ] = False,
) -> None:
    """Multi-hop question answering over your own corpora.

    Start with [bold]mhindex build musique[/bold] (corpus and index from the bundled sample), then
    [bold]mhindex ask "..."[/bold]. Data lives under --home (or $MHINDEX_HOME).
    """
    _globals.update(home=home, quiet=quiet, lm=lm)


def setup(home: Path | None, quiet: bool) -> Path:
    """Apply the options given before or after the subcommand; returns the data root (temporary files go under it)."""
    from mhindex.files import temporary_under

    ui.configure(quiet=quiet or _globals["quiet"])
    root = resolve_home(home or _globals["home"])
    temporary_under(root)
    return root


@dataclass(frozen=True)
class Output:
    """Where a command's result goes: JSON on stdout with --json, else rich renderables on the console."""

    json: bool = False

    def show(self, data: Any, *views: Any) -> None:
        if self.json:
            return ui.print_json(data)
        shown = ui.result_console()
        for view in views:
            shown.print(view)

    @property
    def terminal(self) -> bool:
        return bool(ui.result_console().is_terminal)

    @staticmethod
    def failed(said: str, code: int = 1) -> NoReturn:
        """The result is printed, and not whole: one warning, and the exit code that says so."""
        ui.reporter().warning(said)
        raise typer.Exit(code)


def command(name: str | None = None, *, json: bool = True, group: typer.Typer = app) -> Callable[[Callable], Callable]:
    """A command of `group` with --home and --quiet (and --json): it is called with `root`, the data root with the
    output set up, and `output` (an Output) in their place. Applied over any option groups listed below it."""

    def decorate(function: Callable) -> Callable:
        original = inspect.signature(function, eval_str=True)
        keyword = inspect.Parameter.KEYWORD_ONLY
        added = [
            inspect.Parameter("home", keyword, default=None, annotation=HomeOption),
            inspect.Parameter("quiet", keyword, default=False, annotation=QuietOption),
            *([inspect.Parameter("json", keyword, default=False, annotation=JsonOption)] if json else []),
        ]
        kept = [p for p in original.parameters.values() if p.name not in ("root", "output")]

        @functools.wraps(function)
        def wrapper(
            *args: Any, home: Path | None = None, quiet: bool = False, json: bool = False, **kwargs: Any
        ) -> Any:
            return function(*args, root=setup(home, quiet), output=Output(json), **kwargs)

        wrapper.__signature__ = original.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in [*kept, *added]}
        return group.command(name=name)(wrapper)

    return decorate


def model_from(given: dict | None) -> ModelOptions:
    """The model options of a command, with the global --lm as the fallback for its own --lm."""
    options = ModelOptions(**(given or {}))
    return options if options.lm else dataclasses.replace(options, lm=_globals["lm"])


def _backend_panel(opt: Any) -> str:
    stages = {"index": "fixed when the index is built", "search": "applied when searching"}
    return f"Backend options, {stages[opt.stage]}" if opt.stage in stages else "Backend options"


#: How to load the language model (mhindex.lm.ModelOptions), for lm, ask and eval alike.
model_options = with_options("model_options", lambda: {"model": ModelOptions}, panel="Model options")
#: Every registered backend's options, grouped by when they take effect (see mhindex/options.py): index-time
#: ones are also accepted when searching, to be checked against what the index was built with.
backend_options = with_options("backend_options", backend_settings, panel=_backend_panel, named=named_by)
#: Every registered method's settings, as options of `ask` and `eval` (see mhindex/options.py).
method_options = with_options("method_options", method_settings, panel="Method options")
