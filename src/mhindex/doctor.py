"""`mhindex doctor`: every piece mhindex can run on, checked at once, with versions and the one line
that installs what is missing, instead of four failures met one at a time.

A check only looks (an import spec, a file, a version string, `java -version`); it loads no model and
starts no JVM, so the whole report takes about a second.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mhindex.requirements import Requirement


@dataclass
class Check:
    area: str  # what it is for, as a user thinks of it
    name: str
    ok: bool
    detail: str  # the version or path when ok, what is wrong when not
    fix: str = ""  # the one line that installs it
    needed: bool = True  # part of the default path (build, search, ask with the default model)

    def record(self) -> dict:
        return dataclasses.asdict(self)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _package(area: str, module: str, distribution: str, fix: str, needed: bool) -> Check:
    found = importlib.util.find_spec(module) is not None
    version = _version(distribution)
    detail = f"{distribution} {version}" if found and version else ("installed" if found else "not installed")
    return Check(area, distribution, found, detail, "" if found else fix, needed)


def _guarded(area: str, name: str, fix: str, needed: bool, probe: Callable[[], str]) -> Check:
    try:
        return Check(area, name, True, probe(), "", needed)
    except Exception as error:  # noqa: BLE001 - any failure of a probe is what the report shows
        said = str(error).splitlines()[0]
        # The fix has its own column: a probe's message that ends with it ("...: reinstall: pip install ...") says
        # what is wrong, and the fix is not printed twice in one row.
        for joint in (f"; reinstall: {fix}", f": {fix}"):
            said = said.removesuffix(joint) if fix else said
        return Check(area, name, False, said[:160], fix, needed)


def check(requirement: Requirement, home: Path) -> Check:
    if requirement.probe is not None:
        probe = requirement.probe
        return _guarded(requirement.area, requirement.name, requirement.fix, requirement.needed, lambda: probe(home))
    assert requirement.module is not None, f"{requirement.name}: a requirement names a module or a probe"
    return _package(requirement.area, requirement.module, requirement.name, requirement.fix, requirement.needed)


def requirements() -> list[Requirement]:
    """What every registered backend, LM provider, dataset and method declares it needs: the default
    path's first, then the rest in registry order, each once."""
    from mhindex.backends import BACKENDS
    from mhindex.corpora import DATASETS
    from mhindex.lm import LMS
    from mhindex.methods import METHODS
    from mhindex.requirements import MCP_SDK as MCP

    found: dict[tuple[str, str], Requirement] = {}
    for registry in (BACKENDS, LMS, DATASETS, METHODS):
        for plugin in registry.available(every=True).values():
            for requirement in getattr(plugin, "requirements", ()):
                found.setdefault((requirement.area, requirement.name), requirement)
    found.setdefault((MCP.area, MCP.name), MCP)  # `serve --mcp`: not a plug-in's, the server's own
    return sorted(found.values(), key=lambda r: not r.needed)


def checks(home: Path) -> list[Check]:
    return [check(requirement, home) for requirement in requirements()]


#: The corpus the preflight's figures are shown for: a million 100-word passages (DPR's, 0.78 GB of corpus.jsonl
#: measured by benchmarks/speed/bench_scale.py)
MILLION = (1_000_000, 780 * 10**6)


@dataclass
class Room:
    """What a build may use here, and what each backend's build of a million paragraphs is expected to need
    (the preflight `index` and `build` run, shown before anyone waits for it)."""

    memory: int | None  # available now
    disk: int  # free under the data root
    needs: dict[str, tuple[int, int, str] | None]  # backend -> (memory, disk, basis) for a million paragraphs
    conversion: tuple[int, int, str]  # `corpus`'s, into a million paragraphs

    def record(self) -> dict:
        needs = {name: dict(zip(("memory", "disk", "basis"), need, strict=True)) if need else None
                 for name, need in {"corpus": self.conversion, **self.needs}.items()}  # fmt: skip
        return {"memory_available": self.memory, "disk_free": self.disk, "per_million_paragraphs": needs}


def room(home: Path) -> Room:
    from mhindex.backends import BACKENDS
    from mhindex.corpora.build import CONVERSION_BASIS, conversion_footprint
    from mhindex.files import room as free_room

    memory, free_under = free_room()
    needs: dict[str, tuple[int, int, str] | None] = {}
    for name, backend in BACKENDS.available(every=True).items():
        if backend.builds_index and not backend.fuses:
            need = backend().footprint(*MILLION, backend.Settings())
            needs[name] = (need.memory, need.disk, need.basis) if need else None
    return Room(memory, free_under(home), needs, (*conversion_footprint(MILLION[1]), CONVERSION_BASIS))


@dataclass
class Diagnosis:
    """`mhindex doctor`'s findings: every check, those the default path needs and lacks, and the room here."""

    checks: list[Check]
    room: Room

    @property
    def missing(self) -> list[Check]:
        return [c for c in self.checks if not c.ok and c.needed]

    def record(self) -> dict:
        return {"ok": not self.missing, "checks": [c.record() for c in self.checks], "room": self.room.record()}


def determinism(home: Path, spec: str | None = None) -> dict:
    """`mhindex doctor --determinism`: lm/determinism.py's check of the model `spec` names (the configured one),
    kept in the data root for the next evaluations' fingerprints; the result, with the settings that decide it."""
    from mhindex.errors import redact
    from mhindex.lm import LanguageModel, load_lm, resolve_spec
    from mhindex.lm.cache import CachedModel
    from mhindex.lm.determinism import check, keep, settings_of
    from mhindex.ui import reporter

    named = resolve_spec(spec)

    def load(threads: int, slots: int, cache: bool) -> LanguageModel:
        model = load_lm(named, home, threads=threads, slots=slots, cache=cache)
        return model.inner if isinstance(model, CachedModel) else model  # the prompt states kept, no stored calls

    probe = load(threads=2, slots=1, cache=False)
    try:
        settings, local = settings_of(probe), probe.threads is not None
    finally:
        probe.close()
    with reporter().activity(f"checking that {redact(named)} answers alike whatever ran before"):
        result = {**check(load, local), "settings": settings, "lm": redact(named)}
    keep(home, redact(named), result)
    return result


def examine(home: Path, fetch_jar: bool = False) -> Diagnosis:
    """Everything checked at once; with `fetch_jar`, Anserini's jar fetched first (out of pyserini's source
    package on PyPI), so that its check then finds it."""
    if fetch_jar:
        from mhindex.backends.lucene import PYSERINI_RELEASE
        from mhindex.backends.lucene import fetch_jar as fetch
        from mhindex.ui import reporter

        with reporter().activity(f"fetching Anserini's jar from {PYSERINI_RELEASE}'s source package (165 MB)"):
            jar = fetch()
        reporter().info(f"Anserini's jar: {jar}")
    return Diagnosis(checks(home), room(home))
