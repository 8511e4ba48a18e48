"""PISA, Lucene and bm25s side by side in one run, on the same synthetic DPR-layout corpus (bench_scale.py's passages)
and the same queries (4-11 words drawn from one of the corpus's passages each): each build's seconds, peak memory
(the command's process tree) and peak disk, with the preflight's estimate beside them; then queries a second at top 3
and top 100, one query at a time and in one batch, on one thread and two; and how often their top 10s agree with
Lucene's.

    .venv/bin/python benchmarks/speed/bench_pisa.py [--paragraphs 300000] [--queries 500]
    # 21M passages (the wiki-18 size) on a disk that holds the corpus and one index build at a time:
    .venv/bin/python benchmarks/speed/bench_pisa.py --paragraphs 21000000 --workdir /work/pisa21 --lean
    # -> benchmarks/results/bench_pisa.txt (appended, with the date, the command and the load)

Timings follow the machine's load: the engines run one after another in the same run, so they meet the same load.
A build the preflight refuses, or that the kernel kills, is a result: it is printed with its reason and the run goes
on with the other engines. With `--workdir` the corpus is kept, and a rerun starts from it (its input, a synthetic
DPR TSV, is written again only if the corpus is not there); each engine's results are kept there too
(`done-ENGINE-PARAGRAPHS-QUERIES.json`, for an engine that built), so a run stopped part way goes on with the next
engine, reprinting the earlier ones' lines (remove the file to measure an engine again).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# the scale runs' passages and meters
from bench_scale import TreePeak, disk, measured, passages, write_input  # noqa: E402

OUT = REPO / "benchmarks" / "results" / "bench_pisa.txt"
ENGINES = ("lucene", "pisa", "bm25s")
GIB = 2**30


def say(lines: list[str], line: str) -> None:
    """Print a result line as soon as it is known (a 21M run takes hours) and keep it for the results file."""
    print(line, flush=True)
    lines.append(line)


def build(
    home: Path, name: str, backend: str, threads: int, checked: bool = True
) -> tuple[float, TreePeak, str | None]:
    """Build one index in its own process: its seconds, its peaks, and why it failed (None when it did not).
    `checked=False` builds past the preflight, to measure a build it would refuse (the kernel may kill it)."""
    env = {**os.environ, "MHINDEX_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, "-m", "mhindex", "--quiet", "index", name, "--backend", backend, "--threads",
               str(threads), *([] if checked else ["--no-preflight"])]  # fmt: skip
    seconds, peak, returncode, err = measured(command, env, home)
    if returncode == 0:
        return seconds, peak, None
    if returncode in (-9, 137):
        return seconds, peak, "killed (the kernel's out-of-memory killer, most likely)"
    said = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    return seconds, peak, f"exit {returncode}: {said[-1] if said else 'nothing said'}"


def rate(retriever, queries: list[str], k: int, batched: bool) -> float:
    """Queries a second: one at a time, or all in one `search_many`."""
    retriever.search(queries[0], k)  # warm (the JVM's code, PISA's lists)
    began = time.perf_counter()
    if batched:
        retriever.search_many(queries, k)
    else:
        for query in queries:
            retriever.search(query, k)
    return len(queries) / (time.perf_counter() - began)


def preflight(home: Path, engine: str) -> str:
    """What `mhindex index` expects the build to take at its peak (it refuses a build that does not fit)."""
    from mhindex.backends import BackendSpec
    from mhindex.backends.indexes import footprint_of
    from mhindex.home import open_corpus

    spec = BackendSpec.parse(engine, {"threads": 2})
    need = footprint_of(open_corpus(home, "wiki"), spec.backend(), spec.index_options())
    return "not estimated" if need is None else f"{need.memory / GIB:.2f} GiB memory, {need.disk / GIB:.2f} GiB disk"


def measure(home: Path, engine: str, queries: list[str], lines: list[str]) -> list[list[str]]:
    """Queries a second on one thread and two, at top 3 and top 100; the top 10s on one thread."""
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import open_corpus

    top10: list[list[str]] = []
    for threads in (1, 2):
        retriever = open_retriever(open_corpus(home, "wiki"), BackendSpec.parse(engine, {"threads": threads}))
        try:
            # Every query once first: otherwise the first figure measured alone pays for the JVM's compiling and
            # for reading the postings from disk (Lucene's one thread read 3x slower than its two at 300,000).
            retriever.search_many(queries, 100)
            for k in (3, 100):
                alone, batch = rate(retriever, queries, k, False), rate(retriever, queries, k, True)
                say(lines, f"    {threads} thread(s), top {k:>3}: {alone:7.1f} q/s one at a time, "
                           f"{batch:7.1f} q/s in one batch")  # fmt: skip
            if threads == 1:
                top10 = [[h.id for h in hits] for hits in retriever.search_many(queries, 10)]
        finally:
            retriever.close()
    return top10


def build_and_measure(
    home: Path, engine: str, queries: list[str], lean: bool, checked: bool
) -> tuple[list[str], list[list[str]] | None]:
    """One engine's build and measures, its lines printed as they come; its top 10s, None when it did not build."""
    lines: list[str] = []
    index = home / "wiki" / "indexes" / engine
    shutil.rmtree(index, ignore_errors=True)  # one a stopped run left would be taken as built, and nothing timed
    estimate = preflight(home, engine)
    seconds, peak, failed = build(home, "wiki", engine, 2, checked)
    memory = f"peak {peak.tree / GIB:.2f} GiB memory ({peak.anonymous / GIB:.2f} anonymous)"
    peaks = f"{memory}, +{peak.disk / GIB:.2f} GiB disk; preflight: {estimate}"
    peaks += "" if checked else " (not checked: --no-preflight)"
    if failed:
        say(lines, f"  {engine:<7} not built after {seconds:.1f} s: {failed} ({peaks})")
        return lines, None
    say(lines, f"  {engine:<7} built in {seconds:6.1f} s (2 threads), {peaks}; {disk(index)} on disk")
    ranked = measure(home, engine, queries, lines)
    if lean:
        shutil.rmtree(index)
    return lines, ranked


def corpus_ready(home: Path, paragraphs: int, workdir: Path, lean: bool) -> None:
    """The corpus of `paragraphs` passages under `home`, made from a synthetic DPR TSV unless a run made it already."""
    made = workdir / "corpus-of"  # the passages asked for when the corpus was made (duplicates are dropped from it)
    if made.exists() and made.read_text() == str(paragraphs) and (home / "wiki" / "manifest.json").exists():
        return
    from mhindex.cli import main as mhindex

    source = write_input("dpr", paragraphs, workdir)
    assert mhindex(["--quiet", "corpus", "dpr", "-i", str(source), "--name", "wiki", "--force"]) == 0
    made.write_text(str(paragraphs))
    if lean:
        source.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paragraphs", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated, Lucene's first to compare")
    parser.add_argument("--workdir", type=Path, default=None, help="kept, with its corpus (default: a temporary one)")
    parser.add_argument("--lean", action="store_true",
                        help="remove the input once converted and each index once measured")  # fmt: skip
    parser.add_argument("--no-preflight", action="store_true",
                        help="build past mhindex's preflight: measure what it would refuse")  # fmt: skip
    args = parser.parse_args()
    engines = args.engines.split(",")
    if args.workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="bench-pisa-"))
        atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    else:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    os.environ["MHINDEX_HOME"] = str(home)
    corpus_ready(home, args.paragraphs, workdir, args.lean)
    rng = np.random.default_rng(0)
    texts = [p[1].split(" ") for p in passages(0, args.queries, 0)]  # the corpus's own first passages (its seed, 0)
    queries = [" ".join(rng.choice(words, int(rng.integers(4, 12)))) for words in texts]
    lines: list[str] = []
    say(lines, f"$ .venv/bin/python benchmarks/speed/{Path(__file__).name} {shlex.join(sys.argv[1:])}")
    say(lines, f"{time.strftime('%Y-%m-%d %H:%M')}: {args.paragraphs:,} DPR-layout paragraphs "
               f"({disk(home / 'wiki' / 'corpus.jsonl')} of corpus), {len(queries)} queries, "
               f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")  # fmt: skip
    top10: dict[str, list[list[str]]] = {}
    for engine in engines:
        done = workdir / f"done-{engine}-{args.paragraphs}-{args.queries}.json"  # a rerun goes on after it
        if done.exists():
            earlier = orjson.loads(done.read_bytes())
            for line in earlier["lines"]:
                say(lines, line)
            say(lines, f"    ({engine}: measured by an earlier run of this command, {earlier['at']})")
            top10[engine] = earlier["top10"]
            continue
        engine_lines, ranked = build_and_measure(home, engine, queries, args.lean, not args.no_preflight)
        lines.extend(engine_lines)
        if ranked is not None:  # a refused or killed build is tried again by a rerun (perhaps with --no-preflight)
            top10[engine] = ranked
            at = time.strftime("%Y-%m-%d %H:%M")
            done.write_bytes(orjson.dumps({"at": at, "lines": engine_lines, "top10": ranked}))
    if "lucene" in top10:
        for engine in (e for e in top10 if e != "lucene"):
            shared = [len(set(a) & set(b)) / 10 for a, b in zip(top10["lucene"], top10[engine], strict=True)]
            say(lines, f"  top 10 shared with Lucene's: {engine} {sum(shared) / len(shared):.3f} on average")
    with OUT.open("a") as out:
        out.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
