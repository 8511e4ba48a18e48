"""What a plug-in needs installed, declared beside it, so that `mhindex doctor` checks every
registered method, backend, dataset and LM provider without naming any of them.

A requirement only looks (an import spec, a distribution's version, or a probe that reads a file or
a version string): it loads no model and starts no JVM, so the whole report takes about a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Requirement:
    #: what it is for, as a user thinks of it ("dense backend", "Lucene (default backend)")
    area: str
    #: what is checked: a distribution's name, or a thing ("Java 21+")
    name: str
    #: the one line that installs it
    fix: str
    #: part of the default path (build, search, ask with the default model)
    needed: bool = False
    #: the module whose import spec must be found (with `name` as its distribution)
    module: str | None = None
    #: instead of a module: a look that returns what was found (a version, a path) or raises what is wrong;
    #: it gets the data root
    probe: Callable[[Path], str] | None = None


def package(area: str, module: str, distribution: str, fix: str, needed: bool = False) -> Requirement:
    return Requirement(area, distribution, fix, needed, module=module)


#: `serve --mcp`'s SDK: the server's own, not a plug-in's (doctor lists it beside the plug-ins' requirements)
MCP_SDK = package("serve --mcp", "mcp", "mcp", "pip install 'mhindex[mcp]'")
