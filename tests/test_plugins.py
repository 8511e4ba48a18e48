"""Plug-ins: the example package (examples/mhindex-example-plugin) installed into a fresh virtualenv adds a
method, a backend and a metric that ask, eval, report and --help show with no edit to mhindex; a broken
plug-in is one line naming its package while the built-ins keep working; and no module outside a plug-in's
own names it, so that adding one is its module and one registry line."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

from conftest import HANG_S
from mhindex.backends import BACKENDS
from mhindex.corpora import DATASETS
from mhindex.lm import LMS
from mhindex.methods import METHODS

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "mhindex"
EXAMPLE = REPO / "examples" / "mhindex-example-plugin"


def run(python: Path | str, *args: str, env: dict | None = None, stdin: str | None = None):
    return subprocess.run(
        [str(python), "-m", "mhindex", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=stdin,
        timeout=HANG_S,
    )


@pytest.fixture(scope="module")
def plugin_python(tmp_path_factory) -> Path:
    """A new virtualenv that sees this environment's packages (mhindex among them) and has the example
    package installed into it by pip, from the checkout, the way a user installs a plug-in."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # This environment's site folder, processed as a site folder (its editable mhindex and pip included).
    Path(site, "mhindex-env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    source = shutil.copytree(EXAMPLE, tmp_path_factory.mktemp("example") / EXAMPLE.name)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", str(source)],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python


@pytest.mark.slow
def test_an_installed_plugin_package_works_through_ask_eval_report_and_help(plugin_python, tmp_path):
    env = {"MHINDEX_HOME": str(tmp_path / "home"), "MHINDEX_LM": "local:smollm2-135m"}
    shown = run(plugin_python, "ask", "--method", "pivot", "--help", env={**env, "COLUMNS": "300"})
    assert shown.returncode == 0 and re.search(r"One of: [^.]*\bkdcot\b[^.]*\bpivot\b", shown.stdout), shown.stdout
    assert re.search(r"--k +-k .*\[default: 5\]", shown.stdout)  # its -k (shared): its own default alone
    assert "overlap" in run(plugin_python, "index", "--help", env=env).stdout
    listed = json.loads(run(plugin_python, "list", "tables", "--json", env=env).stdout)
    added = [row for row in listed if row["runs"] == "pivot@k=5"]
    assert added == [{"table": "IRCoT", "row": "Pivot", "runs": "pivot@k=5", "added": True, "why_not": None,
                      "paper": {}}]  # fmt: skip
    assert run(plugin_python, "--quiet", "corpus", "musique", env=env).returncode == 0
    built = run(plugin_python, "index", "musique", "--backend", "overlap", "--json", env=env)
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["backend"] == "overlap" and json.loads(built.stdout)["paragraphs"] > 1000

    fast = ["-k", "2", "--max-demos", "1", "--answer-tokens", "8"]
    question = "Who founded the company that made the Van Hook Township?"
    asked = run(plugin_python, "ask", question, "--method", "pivot", "--backend", "overlap", "--json", *fast, env=env)
    assert asked.returncode == 0, asked.stderr
    record = json.loads(asked.stdout)
    assert record["method"] == "pivot" and record["lm_calls"] == 1 and record["pivot"]
    assert len(record["steps"]) == 2 and record["steps"][1]["query"].endswith(record["pivot"])
    trace = run(plugin_python, "ask", question, "--method", "pivot", "--backend", "overlap", *fast, env=env)
    assert "page: " + record["pivot"] in " ".join(trace.stdout.split())  # the plug-in's own trace, drawn by ask

    out = tmp_path / "eval"
    evaluated = run(
        plugin_python, "eval", "musique", "--method", "pivot,oner", "--backend", "overlap", "--limit", "3",
        "--out", str(out), "--json", *fast, env=env,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    methods = json.loads(evaluated.stdout)["methods"]
    assert set(methods) == {"pivot", "oner"} and all("token_recall" in m for m in methods.values())
    assert len((out / "pivot.jsonl").read_text().splitlines()) == 3

    page = tmp_path / "report.html"
    assert run(plugin_python, "report", str(out), "-o", str(page), env=env).returncode == 0
    html = page.read_text()
    assert "Pivot − OneR" in html and "Tok. recall" in html and '"title":"Pivot","rows":[["page"' in html

    # `serve` over the plug-in's index: its /search answers with what the backend ranks.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = subprocess.Popen(
        [str(plugin_python), "-m", "mhindex", "serve", "musique", "--backend", "overlap", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url, deadline, hits = f"http://127.0.0.1:{port}", time.time() + 60, None
        while hits is None and time.time() < deadline and served.poll() is None:
            try:
                hits = httpx.post(url + "/search", json={"query": question, "k": 2}).json()["hits"]
            except httpx.TransportError:
                time.sleep(0.3)
        assert hits and record["steps"][0]["retrieved_ids"] == [h["id"] for h in hits]
        assert httpx.get(url + "/info").json()["backend"] == "overlap"
    finally:
        served.send_signal(signal.SIGINT)
        served.communicate(timeout=HANG_S)


def broken_distribution(root: Path) -> Path:
    """An installed distribution (its dist-info, as pip writes one) whose entry points are broken three ways."""
    info = root / "mhindex_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mhindex-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[mhindex.methods]\n"
        "ghost = mhindex_broken_missing.method:Ghost\n"  # a module that does not exist
        "ircot = mhindex_broken_missing.method:Other\n"  # a built-in's name
        "notamethod = json:loads\n"  # imports, but is no Method
        "[mhindex.backends]\n"
        "nowhere = mhindex_broken_missing.backend:Nowhere\n"
    )
    return root


@pytest.mark.slow
def test_a_broken_plugin_is_one_line_naming_its_package_and_the_builtins_keep_working(tmp_path):
    env = {"PYTHONPATH": str(broken_distribution(tmp_path / "site")), "MHINDEX_HOME": str(tmp_path / "home")}
    shown = run(sys.executable, "ask", "--help", env=env)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr and "ircot" in shown.stdout
    # Not named, the broken plug-ins are not imported: only the clash of names (read with no import) is said.
    warnings = [line for line in shown.stderr.splitlines() if "plug-in" in line]
    assert len(warnings) == 1 and "the plug-in method 'ircot' of mhindex-broken takes a built-in's name" in warnings[0]
    listed = run(sys.executable, "list", "methods", env=env)  # listed, each is imported and each fault said
    warnings = [line for line in listed.stderr.splitlines() if "plug-in" in line]
    assert len(warnings) == 3 and all("mhindex-broken" in line for line in warnings), listed.stderr
    assert any("ghost" in line and "cannot be imported" in line for line in warnings)
    assert any("notamethod" in line and "not a subclass" in line for line in warnings)
    assert listed.returncode == 0 and "ghost" not in listed.stdout and "ircot" in listed.stdout

    asked = run(sys.executable, "ask", "x", "--method", "ghost", env=env)
    assert asked.returncode == 2 and "Traceback" not in asked.stderr
    assert "the plug-in method 'ghost' of mhindex-broken is broken: cannot be imported" in asked.stderr
    nowhere = run(sys.executable, "index", "musique", "--backend", "nowhere", env=env)
    assert nowhere.returncode == 2 and "the plug-in backend 'nowhere' of mhindex-broken is broken" in nowhere.stderr

    # The built-ins keep working beside it: a corpus, a Lucene index and a search.
    assert run(sys.executable, "--quiet", "corpus", "musique", env=env).returncode == 0
    assert run(sys.executable, "--quiet", "index", "musique", env=env).returncode == 0
    found = run(sys.executable, "search", "musique", "Van Hook Township", "-k", "1", "--json", env=env)
    assert found.returncode == 0 and "Van Hook" in found.stdout


# Where a plug-in's name may be written: its own module, its registry line, its prompts and tests. Names that
# are also words of another meaning are checked only where that meaning cannot occur: "ircot", "colbert" and
# "search-r1" name the wire protocols `serve` speaks and the remote backend reads (server/, backends/remote.py),
# "dense" and "hybrid" are Elasticsearch's query modes, "jsonl" an output format of `search`, "dpr" a model type,
# "cot" a prompting of IRCoT's reader.
OTHER_MEANINGS = {
    "ircot": ("server/", "backends/remote.py"),
    "colbert": ("server/", "backends/remote.py"),
    "dense": ("backends/elasticsearch.py",),
    "hybrid": ("backends/elasticsearch.py",),
    "jsonl": ("ui.py",),  # search's output format
    "dpr": ("encoders.py",),
    # IRCoT's reader: --reader direct|cot, and the rows of IRCoT's table that take each reader
    "cot": ("methods/settings.py", "methods/reader.py", "methods/ircot.py", "methods/nor.py", "methods/oner.py"),
    "direct": ("methods/settings.py", "methods/reader.py", "methods/ircot.py", "methods/nor.py", "methods/oner.py"),
    # a paper's table names the datasets of its columns
    **{dataset: ("papers/",) for dataset in ("hotpotqa", "2wikimultihopqa", "musique", "iirc", "webqsp", "cwq")},
}
# A plug-in that builds on another, in its own module: EfficientRAG may answer with IRCoT's reader
# (`--generator ircot`), the fusion's default parts are Lucene and dense, SearChain's DPR reader is an hf: path,
# bm25s has a BM25 variant it calls "lucene"; and the prompt set (a dataset's) a method falls back on for a
# corpus of its own: MuSiQue's for IRCoT's reader and EfficientRAG's answers, WebQSP's for KD-CoT, IIRC's
# open-retrieval prompt for IRCoT's title step. (Prompt folders, named after papers, are not counted.)
BUILDS_ON = {
    ("ircot", "methods/efficientrag.py"),
    ("lucene", "backends/hybrid.py"),
    ("dense", "backends/hybrid.py"),
    ("hf", "methods/searchain.py"),
    ("lucene", "backends/bm25s.py"),
    ("musique", "methods/settings.py"),
    ("musique", "methods/efficientrag.py"),
    ("webqsp", "methods/kdcot.py"),
    ("iirc", "methods/ircot.py"),
    ("hotpotqa", "methods/react.py"),  # SearChain ran ReAct -> CoT-SC with 6 demonstrations on HotpotQA, 4 elsewhere
}


def strings_in(text: str) -> list[tuple[int, str]]:
    """The string constants of a module that are code, not prose: docstrings and comments left out."""
    tree = ast.parse(text)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # A folder of mhindex/prompts is named by the paper whose prompts it holds, not the plug-in of that name.
    prompt_folders = {
        id(argument)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            getattr(node.func, "id", getattr(node.func, "attr", "")) == "prompt_sets"
            or (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "prompts")
        )
        for argument in node.args
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings | prompt_folders
    ]


def test_no_module_names_a_plugin_outside_its_own():
    """Each registered method, backend, LM kind and dataset is written as a string (code that means it, not
    prose) only in its own module, its registry and what builds on it; the layers above loop over the
    registries. The registry files hold one line per plug-in and the defaults (DEFAULT_BACKEND...)."""
    registries = {
        "method": (METHODS, {"methods/__init__.py"}),
        "backend": (BACKENDS, {"backends/registry.py"}),
        "lm": (LMS, {"lm/__init__.py"}),
        "dataset": (DATASETS, {"corpora/__init__.py"}),
    }
    # Each module's strings read once (parsing every module again for each name took this test 86 s)
    strings = {str(p.relative_to(SRC)): strings_in(p.read_text()) for p in SRC.rglob("*.py")}
    found = []
    for kind, (registry, registry_files) in registries.items():
        for name in registry:
            module = registry.target(name).split(":")[0]
            own = module.removeprefix("mhindex.").replace(".", "/") + ".py"
            allowed = {own, *registry_files, *(f for n, f in BUILDS_ON if n == name)}
            family = own.removesuffix(".py") + "_"  # its helper modules: methods/efficientrag_models.py
            # A string that is the name, or the name before a separator a spec uses (local:..., oner@k=5).
            written = re.compile(rf"{re.escape(name)}(?:[:@].*)?", re.S)
            for path, constants in strings.items():
                if path in allowed or path.startswith((family, *OTHER_MEANINGS.get(name, ()))):
                    continue
                found += [
                    f"{kind} '{name}' in {path}:{number}: {value!r}"
                    for number, value in constants
                    if written.fullmatch(value)
                ]
    assert found == []


FOUNDATION = {
    "__init__", "_lazy", "errors", "files", "text", "ui", "options", "registry", "requirements", "http", "locks",
    "processes", "home", "encoders",
}  # fmt: skip
# Each layer and what it may import besides the foundation (docs/development.md, "Architecture").
MAY_IMPORT = {
    "corpora": set(),
    "lm": set(),
    "backends": set(),  # an engine reads a corpus through the CorpusDir it is handed (home.py)
    "methods": {"corpora", "backends", "lm"},
    # Handed an opened session (methods.session), eval never reaches an engine or a model itself.
    "eval": {"corpora", "methods", "papers"},
    # The papers' tables: data about each paper (its rows and figures), naming no method.
    "papers": set(),
    "training": {"corpora", "backends", "lm", "methods", "eval"},
    "server": {"corpora", "backends"},
    "render": {"methods"},
    "doctor": {"corpora", "backends", "lm", "methods"},
    # The Python API: what `import mhindex` exports (mhindex/__init__.py names it, lazily), over every layer.
    "_api": {"corpora", "backends", "lm", "methods", "eval", "render", "papers"},
    # What a plug-in codes against: it names the five kinds' interfaces (lazily), and nothing above them.
    "plugins": {"corpora", "backends", "lm", "methods", "eval", "papers"},
}


def test_each_layer_imports_only_the_layers_below_it():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        layer = parts[0]
        if layer in ("cli", "__main__"):
            continue  # the command line may import anything
        allowed = FOUNDATION if layer in FOUNDATION else FOUNDATION | MAY_IMPORT[layer] | {layer}
        if parts == ("__init__",):  # the package's face: it exports the API's names (and the interfaces')
            allowed = FOUNDATION | MAY_IMPORT["_api"] | {"_api"}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mhindex"):
                names = node.module.split(".")[1:2] or [alias.name for alias in node.names]
                imported = {"__init__" if name == "__version__" else name for name in names}
                found += [f"{'/'.join(parts)} imports mhindex.{name}" for name in imported - allowed]
    assert found == []


def test_the_command_line_stays_a_layer_that_parses_and_prints():
    """What a command decides (a default folder, a fallback, a check) belongs in the library, where Python
    callers get it too; the CLI grew to 1,482 lines once by deciding: held under 960 (docs/development.md), 900
    until `mhindex diff`, a command that parses two paths and prints what the library compared, took 16, 920
    until `train adaptive`, which parses a folder and prints what the library trained, took 18, and 940 until
    `doctor --determinism`, a flag parsed and a check printed, took 14."""
    lines = sum(len(path.read_text().splitlines()) for path in (SRC / "cli").glob("*.py"))
    assert lines < 960, f"cli/ is {lines} lines: move what it decides into the library"


def test_no_function_of_the_library_is_over_80_lines():
    """A long function decides several things at once; each part is split out by what it decides (a build's
    conversion from its manifest, an option's declaration from its Typer wiring, a chart's bar from its panel)."""
    long = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                if (length := node.end_lineno - node.lineno + 1) > 80:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {length} lines")
    assert long == []


def test_the_example_plugin_codes_against_the_public_surface_alone():
    """A plug-in imports `mhindex` and `mhindex.plugins`, whose names are kept stable; every other module path is
    internal. The example package shows it can: it imports nothing else of mhindex, and each name it takes is
    one `mhindex.plugins` lists and resolves to the interface itself."""
    import mhindex.plugins

    example = Path(__file__).parents[1] / "examples" / "mhindex-example-plugin" / "src"
    imported, private = set(), []
    for path in sorted(example.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mhindex":
                if node.module == "mhindex.plugins":
                    imported |= {alias.name for alias in node.names}
                elif node.module != "mhindex":
                    private.append(f"{path.name}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                private += [f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("mhindex.")]
    assert private == []
    assert imported and imported <= set(mhindex.plugins.__all__)
    from mhindex.backends.base import Backend
    from mhindex.methods.base import Method

    assert mhindex.plugins.Method is Method and mhindex.plugins.Backend is Backend
    for name in mhindex.plugins.__all__:  # each listed name resolves (an AttributeError otherwise)
        getattr(mhindex.plugins, name)
    with pytest.raises(AttributeError, match="no attribute 'session'"):
        mhindex.plugins.session  # noqa: B018 (the internal modules are not reached through it)


def test_a_plugin_metric_may_not_take_a_built_in_measures_key():
    """Its column would replace that figure with no word (a metric keyed `f1` showed NoR at 100.0): refused, as a
    broken plug-in is, naming why; the built-ins themselves pass."""
    from mhindex.eval.metrics import ANSWER_METRICS, AnswerMetric, _metric_problem

    assert all(_metric_problem(metric) is None for metric in ANSWER_METRICS)
    for key in ("f1", "em", "recall", "efficientrag_em", "kdcot_hit1"):
        clash = AnswerMetric(key, "Mine", "a plug-in's", lambda prediction, gold: 1.0)
        assert _metric_problem(clash) == f"its key {key!r} is a built-in measure's, whose figures it would replace"
    assert _metric_problem(AnswerMetric("token_recall", "Tok.", "mine", lambda p, g: 1.0)) is None


@pytest.fixture(scope="module")
def hostile_python(tmp_path_factory) -> Path:
    """A new virtualenv that sees this environment's packages and a distribution `hostile` (its dist-info written
    by hand, as pip would) whose plug-ins misbehave: one's import calls sys.exit, one's raises KeyboardInterrupt,
    a method that calls sys.exit in the middle of its answer, and one whose import is slow ($HOSTILE_SLEEP seconds)
    and leaves a mark ($HOSTILE_MARK) that says it was imported."""
    venv = tmp_path_factory.mktemp("hostile-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    (site / "mhindex-env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    (site / "hostile_exit.py").write_text("import sys\nsys.exit(3)\n")
    (site / "hostile_interrupt.py").write_text("raise KeyboardInterrupt\n")
    (site / "hostile_method.py").write_text(
        "import sys\nfrom mhindex.plugins import Method\n\n\nclass Quits(Method):\n    name = 'quits'\n"
        "    title = 'Quits'\n    needs_retriever = False\n\n    def answer(self, query):\n        sys.exit(4)\n"
    )
    (site / "hostile_slow.py").write_text(
        "import os, pathlib, time\nfrom dataclasses import dataclass\nfrom mhindex.plugins import Method, "
        "ReaderSettings, option\n\nif os.environ.get('HOSTILE_MARK'):\n    pathlib.Path(os.environ['HOSTILE_MARK'])"
        ".touch()\ntime.sleep(float(os.environ.get('HOSTILE_SLEEP', '0')))\n\n\n@dataclass(frozen=True)\n"
        "class SlowSettings(ReaderSettings):\n    patience: int = option(3, 'How long to wait.', min=1)\n\n\n"
        "class Slow(Method):\n    name = 'slow'\n    title = 'Slow'\n    needs_retriever = False\n"
        "    Settings = SlowSettings\n\n    def answer(self, query):\n        raise NotImplementedError\n"
    )
    (site / "hostile_clash.py").write_text(
        "from dataclasses import dataclass\nfrom mhindex.plugins import Method, ReaderSettings, option\n\n\n"
        "@dataclass(frozen=True)\nclass ClashSettings(ReaderSettings):\n    budget: int = option(3, 'Its own budget.')"
        "\n\n\nclass Clash(Method):\n    name = 'clash'\n    title = 'Clash'\n    needs_retriever = False\n"
        "    Settings = ClashSettings\n\n    def answer(self, query):\n        raise NotImplementedError\n"
    )
    (site / "hostile_reseed.py").write_text(
        "import os\nfrom mhindex.plugins import Method\n\n\nclass Reseeds(Method):\n    name = 'reseeds'\n"
        "    title = 'Reseeds'\n    needs_retriever = False\n\n    @classmethod\n"
        "    def reseeded(cls, settings, draw):\n"
        "        if os.environ.get('HOSTILE_RESEED') == 'raise':\n            raise KeyError('seed')\n"
        "        if os.environ.get('HOSTILE_RESEED') == 'seven':\n            return 7\n"
        "        return {'temperature': 1.0}\n\n    def answer(self, query):\n        raise NotImplementedError\n"
    )
    dist = site / "hostile-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[mhindex.methods]\nexits = hostile_exit:Nothing\ninterrupts = hostile_interrupt:Nothing\n"
        "quits = hostile_method:Quits\nslow = hostile_slow:Slow\nclash = hostile_clash:Clash\n"
        "reseeds = hostile_reseed:Reseeds\n"
    )
    return python


@pytest.mark.slow
def test_a_plugin_that_exits_or_interrupts_is_one_warning_and_a_method_that_exits_is_that_questions_error(
    hostile_python, tmp_path
):
    env = {"MHINDEX_HOME": str(tmp_path / "home"), "MHINDEX_LM": "local:smollm2-135m"}
    for args in (["--version"], ["--help"], ["list", "methods"]):
        shown = run(hostile_python, *args, env=env)
        assert shown.returncode == 0, (args, shown.stderr)
    listed = run(hostile_python, "list", "methods", env=env)
    for plugin, what in (("exits", "SystemExit: 3"), ("interrupts", "KeyboardInterrupt")):
        assert f"the plug-in method '{plugin}' of hostile is broken: cannot be imported ({what}" in listed.stderr
    assert run(hostile_python, "--quiet", "corpus", "musique", env=env).returncode == 0
    out = tmp_path / "eval"
    evaluated = run(hostile_python, "eval", "musique", "--method", "quits", "--limit", "2", "--out", str(out),
                    "--json", env=env)  # fmt: skip
    assert evaluated.returncode == 1 and "2 answers failed" in evaluated.stderr
    report = json.loads(evaluated.stdout)
    assert report["methods"]["quits"]["failed"] == 2
    errors = [json.loads(line)["error"] for line in (out / "quits.jsonl").read_text().splitlines()]
    assert errors == ["the method exited (SystemExit: 4)"] * 2


def test_a_plugin_is_imported_only_by_a_command_that_names_or_lists_it(hostile_python, tmp_path):
    """A slow plug-in (40 s to import) and two that exit on import delay and warn only the commands that use
    them: not --version, --help, another method's help, a build, `info`, `list corpora`, an index or a search (the
    last four imported every plug-in while they ran, round three). Named or listed, it is imported."""
    mark = tmp_path / "imported"
    env = {"MHINDEX_HOME": str(tmp_path / "home"), "HOSTILE_MARK": str(mark), "HOSTILE_SLEEP": "40"}
    ran = (["--version"], ["--help"], ["ask", "--help"], ["eval", "-m", "ircot", "-h"], ["corpus", "musique"],
           ["info", "musique"], ["list", "corpora"], ["index", "musique", "--backend", "bm25s"],
           ["search", "musique", "Van Hook Township", "--backend", "bm25s", "-k", "1"])  # fmt: skip
    for args in ran:
        shown = run(hostile_python, *args, env=env)
        assert shown.returncode == 0, (args, shown.stderr)
        assert not mark.exists(), f"{args}: the slow plug-in was imported"
        assert "hostile" not in shown.stderr, (args, shown.stderr)
    env["HOSTILE_SLEEP"] = "0"
    helped = run(hostile_python, "ask", "--method", "slow", "--help", env=env)
    assert helped.returncode == 0 and mark.exists() and "--patience" in helped.stdout, helped.stdout + helped.stderr
    assert "hostile" not in helped.stderr  # the plug-ins that exit were not named: not imported, no warning
    mark.unlink()
    listed = run(hostile_python, "list", "methods", env=env)
    assert (
        mark.exists() and "slow" in listed.stdout and "the plug-in method 'exits' of hostile is broken" in listed.stderr
    )


def test_a_plugin_option_named_like_a_commands_own_is_that_plugin_refused_not_every_command(hostile_python, tmp_path):
    """A method declaring `budget` (eval has --budget): the plug-in is left out with one warning naming it, its
    package and the option; every command, `--help` and `doctor` included, keeps working."""
    env = {"MHINDEX_HOME": str(tmp_path / "home")}
    for args in (["--help"], ["eval", "--help"], ["list", "methods"], ["eval", "--method", "clash", "--help"]):
        shown = run(hostile_python, *args, env=env)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, (args, shown.stderr)
    assert run(hostile_python, "--quiet", "corpus", "musique", env=env).returncode == 0
    asked = run(hostile_python, "eval", "musique", "--method", "clash", "--limit", "1", env=env)
    assert asked.returncode == 2 and "Traceback" not in asked.stderr, asked.stderr
    said = "the plug-in method 'clash' of hostile is broken: its option --budget is one `eval` has itself: rename it"
    assert said in asked.stderr and asked.stderr.count(said) == 2  # the warning, then the one-line error


# -- a plug-in's return values, checked at their door (round three) ------------------------------------------------


class _Answers:
    """A model (an LM plug-in's) whose every completion is the one given."""

    name, context_length = "plugin-lm", 4096

    def __init__(self, made) -> None:
        self.made = made

    def complete(self, prompt, **kwargs):
        return self.made

    def count_tokens(self, text):
        return len(text)


@pytest.mark.parametrize(
    "made, said",
    [
        ("text", "returned a str, not a Completion"),
        (dict(text=None), "whose text is None, not a string"),
        (dict(prompt_tokens="12"), "prompt_tokens = '12', not a whole number"),
        (dict(seconds=float("nan")), "seconds = nan, not a finite number"),
        (dict(token_logprobs=[("a", "x")]), "a token log-probability"),
        (dict(token_logprobs=[("a", 1e308)]), "a token log-probability"),
        (dict(token_logprobs=[]), "no token log-probabilities for its text, though asked"),
    ],
)
def test_an_lm_plugin_s_completion_is_checked_before_a_method_reads_it(made, said):
    from mhindex.lm.base import Completion, LMError
    from mhindex.methods.base import Meter

    fields = {"text": "an answer", "prompt_tokens": 3, "completion_tokens": 2, "seconds": 0.1}
    completion = made if isinstance(made, str) else Completion(**{**fields, **made})
    with pytest.raises(LMError, match=said):
        Meter(_Answers(completion)).complete("Q?", 8, [], logprobs=True)


class _Retriever:
    def __init__(self, found) -> None:
        self.found = found

    def search(self, query, k, titles=None):
        return self.found

    def search_many(self, queries, k):
        return self.found

    def close(self):
        pass


@pytest.mark.parametrize("found", [None, [1, 2], [{"id": "p1"}], "p1"])
def test_a_backend_plugin_s_hits_are_checked_before_they_are_read(found):
    from mhindex.backends.indexes import _Checked
    from mhindex.errors import MhindexError

    checked = _Checked(_Retriever(found), "searching the plugin index of 'x'", "rebuild it")
    for search in (lambda: checked.search("q", 3), lambda: checked.search_many(["q"], 3)):
        with pytest.raises(MhindexError, match="not a list of hits.*a fault of its backend's code, not of the index"):
            search()


def test_a_metric_plugin_that_raises_or_scores_none_is_one_line(monkeypatch):
    from mhindex.errors import UsageError
    from mhindex.eval import metrics

    def failing(prediction, gold):
        raise ZeroDivisionError("division by zero")

    for score, said in ((failing, "failed on the answer 'Paris': ZeroDivisionError"), (lambda p, g: None, "as None")):
        monkeypatch.setattr(metrics, "answer_metrics", lambda s=score: (metrics.AnswerMetric("mine", "Mine", "", s),))
        with pytest.raises(UsageError, match=f"the metric 'mine' (scored the answer 'Paris' )?{said}"):
            metrics.score_one({"answer": "Paris"}, {"answers": ["Paris"]})


def test_a_method_plugin_s_reseeding_that_fails_or_gives_no_settings_is_one_line(hostile_python, tmp_path):
    """`eval --seeds` asks each method how its draws are seeded (`Method.reseeded`): a plug-in's answer is checked, in
    one line before any answer or folder is made; a built-in's gives disjoint seeds."""
    from mhindex.eval.sweep import Variant, with_draws
    from mhindex.methods import settings_for

    settings = {"react": settings_for(["react"], {"fallback": "cot-sc"})["react"]}
    runs, draws = with_draws([Variant("react", "react", {})], settings, 3)
    assert draws == {"react": ["react", "react@sc_seed=21", "react@sc_seed=42"]} and len(runs) == 3

    env = {"MHINDEX_HOME": str(tmp_path / "home"), "MHINDEX_LM": "local:smollm2-135m"}
    assert run(hostile_python, "--quiet", "corpus", "musique", env=env).returncode == 0
    out = tmp_path / "eval"
    for mode, said in (("raise", "reseeded(settings, 1) failed: KeyError: 'seed'"),
                       ("seven", "reseeded(settings, 1) gave 7, not settings of its own"),
                       ("", "reseeded(settings, 1) gave {'temperature': 1.0}, not settings of its own")):  # fmt: skip
        ran = run(hostile_python, "eval", "musique", "--method", "reseeds", "--seeds", "3", "--limit", "1", "--out",
                  str(out), env={**env, "HOSTILE_RESEED": mode})  # fmt: skip
        lines = ran.stderr.strip().splitlines()
        assert ran.returncode == 2 and len(lines) == 1 and f"method reseeds: {said}" in lines[0], ran.stderr
        assert not out.exists()
