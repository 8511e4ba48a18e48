"""Dataset records -> a deduplicated, shuffled corpus and its question file, written atomically.

Memory stays bounded on the largest releases (5.2M HotpotQA abstracts): paragraphs are
written once to a staging file as they arrive (or to the workers' part files, corpora/parallel.py),
only their 8-byte ids and byte offsets are kept, and the shuffle is a permutation of offsets that
copies lines into the final file.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import accumulate
from pathlib import Path

import orjson

from mhindex import __version__
from mhindex.corpora.dataset import Dataset
from mhindex.corpora.parallel import (
    MIN_BYTES,
    KeptLines,
    PartResult,
    available_cores,
    can_split,
    convert_parts,
    merge_parts,
    paragraph_line,
)
from mhindex.corpora.records import COMPRESSED, Paragraph, Question, RecordGuard, id_key
from mhindex.errors import BadInput, UsageError
from mhindex.files import atomic_directory, file_digest, human_size, refuse_unless_room, room
from mhindex.home import (
    CHECKS,
    OFFSETS,
    CorpusDamaged,
    CorpusDir,
    claim_corpus_dir,
    corpus_dir,
    line_check,
    remember_default,
)
from mhindex.locks import changing
from mhindex.options import declared, flag_among, option, settings_from
from mhindex.ui import reporter

FORMAT = 2  # bump when the corpus layout changes, so that old builds are rebuilt (2: questions keep their split)

# The conversion's preflight (see `conversion_footprint`), from the measured runs in benchmarks/results/
# (bench_scale_*): a corpus's JSON lines take about the bytes of a plain-text release (DPR's 21M-passage TSV,
# 15.9 GiB, made 16.4 GiB) and about 3x those of a compressed one (HotpotQA's abstracts, a 1.42 GiB tar.bz2,
# made 4.41 GiB); 1.1x and 4x are kept, upper bounds.
CORPUS_PER_PLAIN_BYTE = 1.1
CORPUS_PER_COMPRESSED_BYTE = 4.0
COMPRESSED_SUFFIXES = (*COMPRESSED, ".tgz", ".tbz2")  # what the converters read compressed, tars too
# Peak disk: the unshuffled staging copy and the shuffled corpus side by side.
DISK_PER_CORPUS_BYTE = 2.0
# Peak memory: the kept lines' offsets, the duplicate check's digests and the shuffle's order, about 130 bytes a
# paragraph (2.61 GiB at 21M passages, 0.61 GiB at 5.2M abstracts), here 0.2 bytes a corpus byte (paragraphs
# of 650 bytes or more) over what the process holds before it begins.
MEMORY_PER_CORPUS_BYTE = 0.2
MEMORY_BASE = 200 * 2**20
CONVERSION_BASIS = (
    f"measured: the corpus about {CORPUS_PER_PLAIN_BYTE}x a plain release's bytes ({CORPUS_PER_COMPRESSED_BYTE:.0f}x a "
    f"compressed one's), {DISK_PER_CORPUS_BYTE:.0f}x that on disk while shuffled, {MEMORY_PER_CORPUS_BYTE}x in memory"
)


@dataclass
class BuildResult:
    corpus: CorpusDir
    manifest: dict
    rebuilt: bool
    warnings: list[str] = field(default_factory=list)
    # Indexes of the previous build, kept beside the new corpus: they are stale until rebuilt.
    stale_indexes: list[str] = field(default_factory=list)

    def notes(self, indexing: bool) -> list[str]:
        """What the user should hear: records passed over, repeated ids, and (unless the index is rebuilt next)
        the indexes the new corpus left stale."""
        if indexing or not (self.rebuilt and self.stale_indexes):
            return self.warnings
        name = self.corpus.name
        return [*self.warnings, f"the {', '.join(self.stale_indexes)} index of {name} was built from the previous "
                f"corpus: run `mhindex index {name}` (or `mhindex build`) to rebuild it"]  # fmt: skip


def describe_inputs(inputs: list[Path]) -> list[dict]:
    described = []
    for path in inputs:
        if not path.exists():
            raise BadInput(f"{path}: no such file")
        if path.is_dir():
            raise BadInput(f"{path} is a folder; give the release files in it, e.g. -i {path}/FILE")
        if not path.is_file():
            raise BadInput(f"{path} is not a regular file (a pipe or a device); give a release file")
        described.append({"path": str(path.resolve()), "bytes": path.stat().st_size})
    return described


def is_up_to_date(
    target: CorpusDir, dataset: str, inputs: list[dict], digests: _Digests, seed: int, options: dict, sources: list
) -> bool:
    """Whether the last build is of these inputs with these settings. The inputs' digests are
    waited for only when all else matches."""
    if not target.exists():
        return False
    try:
        old = target.manifest()
    except (OSError, CorpusDamaged):
        return False
    return (
        old.get("format") == FORMAT
        and old.get("dataset") == dataset
        and old.get("seed") == seed
        and [(i.get("path"), i.get("bytes")) for i in old.get("inputs", [])]
        == [(i["path"], i["bytes"]) for i in inputs]
        and old.get("options", {}) == options
        and old.get("sources", []) == sources
        and target.corpus.is_file()
        and target.questions.is_file()
        and [i.get("sha256") for i in old["inputs"]] == digests.result()
    )


class _Digests:
    """The inputs' sha256 for the rebuild check, computed on a thread beside the conversion
    (hashlib lets go of the GIL, and MuSiQue's release takes a second to hash). The thread starts
    after any conversion workers are forked: a fork would copy a running thread's held locks."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self._thread: threading.Thread | None = None
        self._values: list[str] = []
        self._error: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mhindex-digests", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self._values = [file_digest(path) for path in self.paths]
        except BaseException as error:  # noqa: BLE001 - raised in the caller by result()
            self._error = error

    def __enter__(self) -> _Digests:
        return self

    def __exit__(self, *exc) -> None:
        """No thread outlives the build, even a failed one: a later build in the same process may fork."""
        if self._thread is not None:
            self._thread.join()

    def result(self) -> list[str]:
        self.start()
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._values


@dataclass
class Source:
    """One dataset's files feeding a corpus; an added source gives paragraphs, not questions."""

    dataset: Dataset
    inputs: list[Path]
    questions: bool = True


@dataclass(frozen=True)
class CorpusOptions:
    """How a corpus is built: the options `corpus` and `build` share (each a flag, see options.py)."""

    inputs: list[Path] | None = option(
        None,
        "A release file; repeat for several (train, dev, test; ans and full) \\[default: the downloaded "
        "release, else the bundled sample].",
        flag="--input",
        short="-i",
        metavar="FILE",
    )
    name: str | None = option(None, "Corpus name \\[default: the dataset name].")
    seed: int = option(13370, "Seed of the deterministic corpus shuffle (IRCoT's).")
    skip_bad: bool = option(False, "Pass over malformed records (and count them) instead of stopping.")
    add: list[str] | None = option(
        None,
        "Also put this dataset's paragraphs (not its questions) into the corpus, each keeping its `source`; "
        "its files, else its release or sample. Repeatable: KD-CoT's Freebase + Wikipedia corpus is "
        "`mhindex corpus webqsp --add hotpotqa`.",
        metavar="DATASET[=FILE,...]",
    )
    workers: int | None = option(
        None,
        "Processes converting a JSON-lines release (MuSiQue) \\[default: every core for inputs of 32 MB or "
        "more]. The corpus is the same byte for byte whatever the number.",
        min=1,
    )

    def added(self) -> list[tuple[str, list[Path]]]:
        """--add DATASET[=FILE,...] as (dataset, files)."""
        added = []
        for spec in self.add or []:
            dataset, _, files = spec.partition("=")
            added.append((dataset.strip(), [Path(f).expanduser() for f in files.split(",") if f.strip()]))
        return added


def expected_corpus_bytes(inputs: Sequence[Path]) -> float:
    """The bytes of JSON lines these release files are expected to make (an upper bound)."""
    ratio = {True: CORPUS_PER_COMPRESSED_BYTE, False: CORPUS_PER_PLAIN_BYTE}
    return sum(p.stat().st_size * ratio[p.name.endswith(COMPRESSED_SUFFIXES)] for p in inputs if p.is_file())


def conversion_footprint(corpus_bytes: float) -> tuple[int, int]:
    """The memory and the disk a conversion into a corpus of this size is expected to take at its peak (disk
    under the data root, where the old corpus is kept until the new one is whole), known before any work."""
    return int(MEMORY_BASE + MEMORY_PER_CORPUS_BYTE * corpus_bytes), int(DISK_PER_CORPUS_BYTE * corpus_bytes)


def build_dataset(
    home: Path,
    dataset: str,
    options: CorpusOptions = CorpusOptions(),
    converter: dict | None = None,
    force: bool = False,
    preflight: bool = True,
) -> BuildResult:
    """`mhindex corpus DATASET`: the files given, else the downloaded release, else the bundled
    sample; added sources put their paragraphs into the same corpus. The target is checked
    before anything is read, so a bad name fails at once; with `preflight`, a conversion that cannot fit
    in the memory and disk there are is refused before it begins."""
    from mhindex.corpora import get_dataset

    spec = get_dataset(dataset)
    claim_corpus_dir(corpus_dir(home, spec.name if options.name is None else options.name))
    extra = [
        Source(get_dataset(other), _inputs_of(home, get_dataset(other), files), questions=False)
        for other, files in options.added()
    ]
    result = build_corpus(
        spec,
        _inputs_of(home, spec, options.inputs),
        home,
        name=options.name,
        seed=options.seed,
        force=force,
        skip_bad=options.skip_bad,
        extra_sources=extra,
        options=converter,
        workers=options.workers,
        preflight=preflight,
    )
    remember_default(home, result.corpus.name)
    return result


def _inputs_of(home: Path, spec, given: list[Path] | None) -> list[Path]:
    from mhindex.corpora import default_inputs
    from mhindex.home import downloads_dir

    if given:
        return spec.expand_inputs(list(given)) if spec.expand_inputs else list(given)
    files, origin = default_inputs(spec, downloads_dir(home, spec.name))
    if origin == "sample":
        reporter().info(f"no release of {spec.name} under {downloads_dir(home, spec.name)}: using the bundled sample")
    return files


def converter_options(sources: list[Source], given: dict) -> list[dict]:
    """Each source's converter options, as its `Settings` declares them: its defaults, with those
    given; an option that no source takes is refused, naming the datasets that take it."""
    from mhindex.corpora import settings_types

    for key in given:
        if not any(s.dataset.Settings and key in declared(s.dataset.Settings) for s in sources):
            owners = [name for name, settings in settings_types().items() if key in declared(settings)]
            raise UsageError(
                f"{flag_among(key, settings_types().values())} is an option of "
                f"{', '.join(owners) or 'no dataset'}, not of {', '.join(s.dataset.name for s in sources)}"
            )
    return [
        asdict(
            settings_from(
                s.dataset.Settings,
                {k: v for k, v in given.items() if k in declared(s.dataset.Settings)},
                f"dataset {s.dataset.name}",
            )
        )
        if s.dataset.Settings
        else {}
        for s in sources
    ]


def build_corpus(
    dataset,
    inputs: list[Path],
    home: Path,
    name: str | None = None,
    seed: int = 13370,
    force: bool = False,
    skip_bad: bool = False,
    extra_sources: Sequence[Source] = (),
    options: dict | None = None,
    workers: int | None = None,
    preflight: bool = True,
) -> BuildResult:
    """Convert `inputs` of `dataset` (a corpora.Dataset), and the paragraphs of `extra_sources`,
    into `<home>/<name>/`. With several sources every paragraph records its `source` dataset.
    `workers`: processes for JSON-lines releases (default: every core for inputs of 32 MB or
    more); the corpus is the same byte for byte whatever the number. `preflight`: refuse, before any
    work, a conversion whose expected peak memory or disk is not there (`conversion_footprint`)."""
    for given in [inputs, *(s.inputs for s in extra_sources)]:
        describe_inputs(given)  # before anything opens them: a named pipe with no writer would hang the open
    if dataset.order_inputs is not None:
        inputs = dataset.order_inputs(inputs)
    sources = [Source(dataset, inputs), *extra_sources]
    for source in sources:
        if not source.inputs:
            fetch = f" or run `mhindex download {source.dataset.name}`" if source.dataset.release else ""
            raise UsageError(f"no input files for {source.dataset.name}; pass --input FILE{fetch}")
    per_source = converter_options(sources, options or {})
    recorded_options = {k: v for o in per_source for k, v in o.items()}
    recorded_sources = (
        [{"dataset": s.dataset.name, "inputs": [str(p.resolve()) for p in s.inputs]} for s in sources]
        if extra_sources
        else []
    )
    target = corpus_dir(home, dataset.name if name is None else name)
    with changing(home, target.name, "building the corpus"):
        return _build(
            _Job(dataset, inputs, home, target, sources, per_source, recorded_options, recorded_sources),
            seed=seed,
            force=force,
            skip_bad=skip_bad,
            workers=workers,
            preflight=preflight,
        )


def _merged(
    results: list[PartResult], staging: Path, questions: _Questions, guard: RecordGuard
) -> tuple[KeptLines, int]:
    """The parts converted on every core, merged: their kept lines, how many paragraphs they read, and what
    they skipped (added to `guard`, the first few warned about)."""
    lines = merge_parts(results, staging, questions.add)
    for result in results:
        guard.skipped += result.skipped
        guard.first_skipped.extend(result.first_skipped[: 5 - len(guard.first_skipped)])
        guard.notes.update(result.notes)
    for where in guard.first_skipped:
        reporter().warning(f"skipped bad record: {where}")
    return lines, sum(r.paragraphs_read for r in results)


def _counts(paragraphs: int, read: int, questions: _Questions, guard: RecordGuard) -> dict[str, int]:
    """The manifest's counts: what was kept, dropped as a duplicate, skipped as bad, and why."""
    counts = questions.counts
    return {
        "paragraphs": paragraphs,
        "duplicate_paragraphs": read - paragraphs,
        "questions": counts["questions"],
        "duplicate_questions": counts["duplicate_questions"],
        "gold_paragraphs": counts["gold_paragraphs"],
        "questions_with_unmapped_gold": questions.unmapped_questions,
        "skipped_bad_records": guard.skipped,
        **{f"dropped {reason}": n for reason, n in sorted(guard.notes.items())},
    }


@dataclass
class _Job:
    """What one build converts, settled before the corpus's lock is taken."""

    dataset: Dataset
    inputs: list[Path]
    home: Path
    target: CorpusDir
    sources: list[Source]
    per_source: list[dict]
    recorded_options: dict
    recorded_sources: list

    @property
    def paths(self) -> list[Path]:
        return [p for s in self.sources for p in s.inputs]


def _build(job: _Job, *, seed: int, force: bool, skip_bad: bool, workers: int | None, preflight: bool) -> BuildResult:
    """The build itself, under the corpus's lock: nothing if the corpus is up to date, else converted into a
    staging folder that replaces the corpus whole."""
    dataset, target = job.dataset, job.target
    claim_corpus_dir(target)
    described, digests = describe_inputs(job.paths), _Digests(job.paths)
    recorded = (seed, job.recorded_options, job.recorded_sources)
    if not force and is_up_to_date(target, dataset.name, described, digests, *recorded):
        return BuildResult(target, target.manifest(), rebuilt=False)
    budget: float | None = None
    if preflight:
        need = conversion_footprint(expected_corpus_bytes(job.paths))
        refuse_unless_room(f"convert {dataset.name} into '{target.name}'", *need, job.home)
        # the bytes the corpus may take as it is made: a compressed input that expands past the estimate (81 KB of
        # gzip made 40 MB) is stopped when it passes the room there is, not when the disk is full
        budget = room()[1](job.home) / DISK_PER_CORPUS_BYTE
    log = reporter()
    guard = RecordGuard(skip_bad=skip_bad, on_skip=lambda where: log.warning(f"skipped bad record: {where}"))
    started = time.perf_counter()
    with atomic_directory(target.root, job.home) as staging, digests:
        lines, paragraphs_read, questions = _convert(job, staging, described, digests, guard, workers, budget)
        corpus_sha = _write_shuffled(lines, staging / "corpus.jsonl", seed)
        untitled = _untitled(staging / "corpus.jsonl") if dataset.own_corpus else 0
        for done in lines.files:
            done.unlink()
        counts = {
            **_counts(len(lines.ends), paragraphs_read, questions, guard),
            **({"untitled_paragraphs": untitled} if dataset.own_corpus else {}),
        }
        manifest = {
            "name": target.name,
            "dataset": dataset.name,
            "format": FORMAT,
            "tool_version": __version__,
            "seed": seed,
            "inputs": [{**d, "sha256": digest} for d, digest in zip(described, digests.result(), strict=True)],
            **({"options": job.recorded_options} if job.recorded_options else {}),
            **({"sources": job.recorded_sources} if job.recorded_sources else {}),
            "counts": counts,
            "unmapped_gold_examples": questions.unmapped[:20],
            "corpus_sha256": corpus_sha,
            "seconds": round(time.perf_counter() - started, 2),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (staging / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
        for kept in ("indexes", "eval"):
            # Indexes are kept so that searching them says they are stale and what to run, instead of
            # vanishing; evaluation runs are the user's results (each records the corpus it ran on).
            if (target.root / kept).is_dir():
                os.replace(target.root / kept, staging / kept)
    warnings = _build_warnings(job, manifest, questions, guard)
    return BuildResult(target, manifest, rebuilt=True, warnings=warnings, stale_indexes=_stale(target, corpus_sha))


def _convert(
    job: _Job,
    staging: Path,
    described: list[dict],
    digests: _Digests,
    guard: RecordGuard,
    workers: int | None,
    budget: float | None = None,
) -> tuple[KeptLines, int, _Questions]:
    """Every source's paragraphs staged (each kept once) and the questions written to `staging`: on every core
    where the release is one JSON-lines dataset large enough, else in this process."""
    dataset, total_bytes = job.dataset, sum(i["bytes"] for i in described)
    if workers is None:
        workers = available_cores() if total_bytes >= MIN_BYTES else 1
    parallel = workers > 1 and len(job.sources) == 1 and can_split(dataset, job.inputs)
    if parallel and job.per_source[0] and dataset.convert_line is not None:  # options ride the line function into forks
        dataset = replace(dataset, convert_line=functools.partial(dataset.convert_line, **job.per_source[0]))
    with open(staging / "questions.jsonl", "wb") as questions_out:
        questions = _Questions(questions_out)
        with reporter().progress(f"converting {dataset.name}", total=total_bytes, unit="bytes") as bar:
            if parallel:
                results = convert_parts(
                    dataset, job.inputs, staging, workers, guard.skip_bad, bar.advance, digests.start
                )
                lines, paragraphs_read = _merged(results, staging, questions, guard)
            else:
                staged = staging / "paragraphs.staging"
                digests.start()
                items = _items(job.sources, job.per_source, guard, bar.advance)
                offsets, paragraphs_read = _stage(items, staged, questions, budget)
                lines = KeptLines([staged], memoryview(offsets)[:-1], memoryview(offsets)[1:])
    if len(lines.ends) == 0:
        raise BadInput(f"no paragraphs found in {', '.join(map(str, job.paths))}: are these {dataset.name} files?")
    return lines, paragraphs_read, questions


def _build_warnings(job: _Job, manifest: dict, questions: _Questions, guard: RecordGuard) -> list[str]:
    """What a finished build says: gold references that named no paragraph, skipped records, missing titles."""
    warnings, counts = [], manifest["counts"]
    if questions.unmapped:
        warnings.append(
            f"{questions.unmapped_questions} questions have gold references that name no paragraph (e.g. "
            f"{questions.unmapped[0]}); they keep the gold ids that did map"
        )
    if guard.skipped:
        warnings.append(f"skipped {guard.skipped} bad records (first: {guard.first_skipped[0]})")
    untitled = counts.get("untitled_paragraphs", 0)
    if untitled and job.per_source[0].get("title_from") != "none":
        warnings.append(
            f"{untitled:,} of {counts['paragraphs']:,} paragraphs have no title (their records give none); IRCoT's "
            "title filter and ReAct's Search[] go by titles: --title-from first-line or id gives each one, "
            "--title-from none says there are none"
        )
    if job.dataset.given_ids and (repeated := counts["duplicate_paragraphs"]):
        warnings.append(f"{repeated} paragraphs repeated an id seen before; the first paragraph of each id was kept")
    return warnings


def _untitled(corpus: Path) -> int:
    """Paragraphs of a written corpus.jsonl with an empty title, counted in its bytes: each line is
    `{"id":...,"title":...` as orjson writes it, and a quote inside a text is escaped, so the pattern is
    only ever an empty title field."""
    pattern, count, carry = b',"title":"",', 0, b""
    with open(corpus, "rb") as handle:
        while block := handle.read(1 << 24):
            joined = carry + block
            count += joined.count(pattern)
            carry = joined[-(len(pattern) - 1) :]  # a match across blocks, never one counted twice
    return count


def _stale(target: CorpusDir, corpus_sha: str) -> list[str]:
    """The indexes of the corpus that were built from other contents than it now has."""
    if not target.indexes.is_dir():
        return []
    return sorted(
        p.name
        for p in target.indexes.iterdir()
        if p.is_dir() and not p.name.startswith(".") and _built_from(p) != corpus_sha
    )


def _built_from(index: Path) -> str | None:
    """The corpus hash an index records (a rebuild of identical inputs leaves its indexes current)."""
    try:
        manifest = orjson.loads((index / "manifest.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return manifest.get("corpus_sha256") if isinstance(manifest, dict) else None


def _question_line(record: dict, fixed: list[str] | None) -> bytes:
    """A question's line; with `fixed`, its gold ids replaced (those that named no paragraph dropped)."""
    return orjson.dumps(record if fixed is None else {**record, "gold_ids": fixed}) + b"\n"


def _stage(items, staged: Path, questions: _Questions, budget: float | None = None) -> tuple[array, int]:
    """The one-process loop: each paragraph id's first line into `staged`, each question to
    `questions` once the paragraphs before it are in; returns the staged offsets and the paragraphs read. Past
    `budget` bytes staged (the room the preflight saw), refused in one line: the inputs expand past it."""
    most = float("inf") if budget is None else budget
    seen: set[int] = set()
    offsets = array("q", [0])
    # The loop runs once per paragraph read (millions): locals instead of attribute lookups.
    paragraphs_read, position, seen_add, offsets_append = 0, 0, seen.add, offsets.append
    with open(staged, "wb", buffering=1 << 20) as paragraphs_out:
        write = paragraphs_out.write
        for item in items:
            if type(item) is Paragraph:
                paragraphs_read += 1
                key = item.key
                if key in seen:
                    continue
                seen_add(key)
                line = paragraph_line(item)
                write(line)
                position += len(line)
                offsets_append(position)
                if position > most:
                    raise BadInput(
                        f"the inputs expand to more than the {human_size(most)} of corpus there is room for (a "
                        "compressed file far larger than its size?): nothing was kept; free room, or pass "
                        "--no-preflight to go on"
                    )
            elif isinstance(item, Question):
                questions.add(
                    item.id, item.gold_ids, item.unmapped, functools.partial(_question_line, item.record()), seen
                )
    return offsets, paragraphs_read


class _Questions:
    """The question file: each question id once, its gold ids checked against the paragraphs kept
    before it (a converter's gold paragraph must have been emitted before its question)."""

    def __init__(self, out) -> None:
        self.out = out
        self.ids: set[str] = set()
        self.counts = {"questions": 0, "duplicate_questions": 0, "gold_paragraphs": 0}
        self.unmapped: list[str] = []
        self.unmapped_questions = 0

    def add(
        self, qid: str, gold: list[str], unmapped: list[str], line: Callable[[list[str] | None], bytes], kept: set[int]
    ) -> None:
        """`line(None)` is the question's line as converted; `line(gold)` the same with these gold ids."""
        if qid in self.ids:
            self.counts["duplicate_questions"] += 1
            return
        self.ids.add(qid)
        missing = [g for g in gold if id_key(g) not in kept]  # per question: rare next to paragraphs
        fixed = None
        if missing:
            unmapped = [*unmapped, *(f"paragraph {g}" for g in missing)]
            gold = fixed = [g for g in gold if g not in missing]
        if unmapped:
            self.unmapped_questions += 1
            self.unmapped.extend(f"{qid}: {u}" for u in unmapped)
        self.counts["questions"] += 1
        self.counts["gold_paragraphs"] += len(gold)
        self.out.write(line(fixed))


def _items(sources: list[Source], options: list[dict], guard: RecordGuard, advance):
    """Every source's paragraphs (tagged with their source when there are several) and the
    questions of those that give questions."""
    several = len(sources) > 1
    for source, keywords in zip(sources, options, strict=True):
        for item in source.dataset.convert(source.inputs, guard, advance, **keywords):
            if type(item) is Paragraph:
                if several and not (item.meta or {}).get("source"):
                    item.meta = {**(item.meta or {}), "source": source.dataset.name}
                yield item
            elif source.questions:
                yield item


def _write_shuffled(lines: KeptLines, out: Path, seed: int) -> str:
    """Copy the kept lines into `out` in a seeded random order, and their byte offsets into
    `corpus.offsets` beside it (for reading paragraph N directly); returns the sha256 of `out`.

    Lines go out in blocks of a few thousand: one write and one hash update a block, not a line.
    Each line is read with pread, not from a memory map: a random order touches every page of the
    input, and mapped pages all count as this process's memory, where read ones stay in the page
    cache (280k MuSiQue paragraphs, two workers: 194 MB peak mapped, 74 MB read, for 0.15 s more)."""
    import hashlib

    # An array, not a list: 8 bytes a line instead of 36. `shuffle` swaps items the same way in
    # either, so the order is the one every earlier build had for the same count and seed.
    order = array("q", range(len(lines.ends)))
    random.Random(seed).shuffle(order)
    digest = hashlib.sha256()
    positions = array("q", [0])
    checks = array("Q")  # each line's own 8-byte blake2b: a line changed in place is caught where it is read
    starts, ends, part = lines.starts, lines.ends, lines.part
    with contextlib.ExitStack() as stack, open(out, "wb") as sink:
        files = [stack.enter_context(open(path, "rb")).fileno() for path in lines.files]
        only, pread = files[0], os.pread
        for first in range(0, len(order), 4096):
            chunk = order[first : first + 4096]
            if part is None:
                block = [pread(only, ends[i] - starts[i], starts[i]) for i in chunk]
            else:
                block = [pread(files[part[i]], ends[i] - starts[i], starts[i]) for i in chunk]
            joined = b"".join(block)
            ends_in_out = accumulate(map(len, block), initial=positions[-1])
            next(ends_in_out)
            positions.extend(ends_in_out)
            checks.extend(line_check(line) for line in block)
            digest.update(joined)
            sink.write(joined)
    with open(out.with_name(OFFSETS), "wb") as handle:
        positions.tofile(handle)
    with open(out.with_name(CHECKS), "wb") as handle:
        checks.tofile(handle)
    return digest.hexdigest()
