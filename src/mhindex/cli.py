"""The `mhindex` command. Each subcommand parses, calls the library, prints; errors are one
line on stderr with a non-zero exit code (2 for bad input or usage, 1 otherwise)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer

from mhindex import __version__, ui
from mhindex.errors import MhindexError, UsageError
from mhindex.home import built_corpora, claim_corpus_dir, corpus_dir, downloads_dir, open_corpus, resolve_home

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
    typer.Option("--home", help="Data root \\[default: $MHINDEX_HOME, else $XDG_DATA_HOME/mhindex, i.e. ~/.local/share/mhindex].", show_default=False),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", metavar="", help="No progress bars or log lines (results and errors are still printed).")]
JsonOption = Annotated[bool, typer.Option("--json", metavar="", help="Print machine-readable JSON on stdout.")]


class _Globals:
    home: Path | None = None
    quiet: bool = False
    lm: str | None = None


_globals = _Globals()


def _setup(home: Path | None, quiet: bool) -> Path:
    """Apply the options given before or after the subcommand; returns the data root."""
    ui.configure(quiet=quiet or _globals.quiet)
    return resolve_home(home or _globals.home)


def _print_json(value) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _out():
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 100_000  # in a pipe or a file, never crop a trace; tables are drawn at their natural width
    return console


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _version(value: bool) -> None:
    if value:
        print(f"mhindex {__version__}")
        raise typer.Exit()


LmOption = Annotated[
    Optional[str],
    typer.Option(
        "--lm",
        help="Language model: local:qwen2.5-0.5b (default), local:smollm2-135m, gguf:PATH, hf:PATH, openai:MODEL@URL, openai-chat:MODEL@URL \\[default: $MHINDEX_LM, else local:qwen2.5-0.5b].",
        show_default=False,
    ),
]
LmThreadsOption = Annotated[Optional[int], typer.Option("--lm-threads", min=1, help="CPU threads of a local model \\[default: half the cores].", show_default=False)]
LmContextOption = Annotated[Optional[int], typer.Option("--lm-context", min=256, help="Context length in tokens \\[default: 8192 local, else what the server reports].", show_default=False)]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", metavar="", help="Do not read or write the LM call cache.")]


def _lm_spec(lm: str | None) -> str:
    """--lm after the subcommand, else before it, else $MHINDEX_LM, else the packaged default."""
    import os

    from mhindex.lm import DEFAULT_LM

    return lm or _globals.lm or os.environ.get("MHINDEX_LM") or DEFAULT_LM


def _lm(lm: str | None, root: Path, threads: int | None, context: int | None, no_cache: bool):
    from mhindex.lm import load_lm

    return load_lm(_lm_spec(lm), home=root, threads=threads, context_length=context, cache=not no_cache)


@app.callback()
def _root(
    home: HomeOption = None,
    quiet: QuietOption = False,
    lm: LmOption = None,
    version: Annotated[bool, typer.Option("--version", metavar="", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """Multi-hop question answering over your own corpora.

    Start with [bold]mhindex build musique[/bold] (corpus and index from the bundled sample), then
    [bold]mhindex ask "..."[/bold]. Data lives under --home (or $MHINDEX_HOME).
    """
    _globals.home = home
    _globals.quiet = quiet
    _globals.lm = lm


DatasetArgument = Annotated[str, typer.Argument(help="hotpotqa, 2wikimultihopqa, musique or iirc.", show_default=False)]
InputsOption = Annotated[
    Optional[list[Path]],
    typer.Option("--input", "-i", help="A release file; repeat for several (train, dev, test; ans and full). Default: the downloaded release, else the bundled sample."),
]
NameOption = Annotated[Optional[str], typer.Option(help="Corpus name \\[default: the dataset name].", show_default=False)]
SeedOption = Annotated[int, typer.Option(help="Seed of the deterministic corpus shuffle (IRCoT's).")]
SkipBadOption = Annotated[bool, typer.Option("--skip-bad", metavar="", help="Pass over malformed records (and count them) instead of stopping.")]


def _convert(root: Path, dataset: str, inputs: list[Path] | None, name: str | None, seed: int, force: bool, skip_bad: bool):
    """Build the corpus from the given files, else the downloaded release, else the bundled sample."""
    from mhindex.corpora import default_inputs, get_dataset
    from mhindex.corpora.build import build_corpus

    spec = get_dataset(dataset)
    claim_corpus_dir(corpus_dir(root, spec.name if name is None else name))  # before anything is read or said
    files = list(inputs or [])
    if not files:
        files, origin = default_inputs(spec, downloads_dir(root, spec.name))
        if origin == "sample":
            ui.reporter().info(f"no release of {spec.name} under {downloads_dir(root, spec.name)}: using the bundled sample")
    result = build_corpus(spec, files, root, name=name, seed=seed, force=force, skip_bad=skip_bad)
    for warning in result.warnings:
        ui.reporter().warning(warning)
    return result


@app.command()
def corpus(
    dataset: DatasetArgument,
    inputs: InputsOption = None,
    name: NameOption = None,
    seed: SeedOption = 13370,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild even if inputs and seed are unchanged.")] = False,
    skip_bad: SkipBadOption = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Convert a dataset release into a deduplicated, shuffled paragraph corpus and a question file."""
    root = _setup(home, quiet)
    result = _convert(root, dataset, inputs, name, seed, force, skip_bad)
    if result.rebuilt and result.stale_indexes:
        backends = ", ".join(result.stale_indexes)
        ui.reporter().warning(f"the {backends} index of {result.corpus.name} was built from the previous corpus: run `mhindex index {result.corpus.name}` (or `mhindex build`) to rebuild it")
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
        f"built corpus [bold]{result.corpus.name}[/bold]: {_plural(counts['paragraphs'], 'paragraph')} "
        f"({_plural(counts['duplicate_paragraphs'], 'duplicate')} dropped), {_plural(counts['questions'], 'question')} "
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



BackendOption = Annotated[str, typer.Option("--backend", "-b", help="lucene (embedded, default), elasticsearch, dense (FAISS) or colbert (ColBERTv2 PLAID).")]
K1Option = Annotated[Optional[float], typer.Option("--k1", help="BM25 k1 \\[default: 1.2, as Lucene and Elasticsearch].", show_default=False)]
BOption = Annotated[Optional[float], typer.Option("--b", help="BM25 b \\[default: 0.75].", show_default=False)]
ThreadsOption = Annotated[Optional[int], typer.Option("--threads", min=1, help="Threads for indexing and batched search \\[default: 1].", show_default=False)]
EsUrlOption = Annotated[Optional[str], typer.Option("--es-url", help="Elasticsearch URL \\[env MHINDEX_ES_URL, default http://localhost:9200].", show_default=False)]
EsKeyOption = Annotated[Optional[str], typer.Option("--es-api-key", help="Elasticsearch API key \\[env MHINDEX_ES_API_KEY].", show_default=False)]
EncoderOption = Annotated[Optional[str], typer.Option("--encoder", help="Dense: encoder folder or cached hub name \\[default: the packaged all-MiniLM-L6-v2].", show_default=False)]
QueryEncoderOption = Annotated[Optional[str], typer.Option("--query-encoder", help="Dense: question encoder of a DPR pair \\[default: --encoder].", show_default=False)]
CheckpointOption = Annotated[Optional[str], typer.Option("--checkpoint", help="ColBERT: checkpoint folder, e.g. colbertv2.0 \\[default: MiniLM with an identity projection, untrained].", show_default=False)]
EfSearchOption = Annotated[Optional[int], typer.Option("--ef-search", min=1, help="Dense HNSW: search breadth \\[default: 128].", show_default=False)]
NprobeOption = Annotated[Optional[int], typer.Option("--nprobe", min=1, help="Dense IVF-PQ: lists probed \\[default: 16].", show_default=False)]
EsCaOption = Annotated[Optional[Path], typer.Option("--es-ca-file", help="CA certificate for Elasticsearch over TLS \\[env MHINDEX_ES_CA_FILE].", show_default=False)]


def _backend_options(k1=None, b=None, threads=None, es_url=None, es_api_key=None, es_ca_file=None, **more) -> dict:
    options = {"k1": k1, "b": b, "threads": threads, "url": es_url, "api_key": es_api_key, "ca_file": str(es_ca_file) if es_ca_file else None}
    options.update(more)
    return {k: v for k, v in options.items() if v is not None}


def _report_index(result, json: bool) -> None:
    manifest = result.manifest
    if json:
        _print_json({"rebuilt": result.rebuilt, "path": str(result.path), **manifest})
    elif not result.rebuilt:
        _out().print(f"the {manifest['backend']} index of {manifest['corpus']} is up to date; --force rebuilds it")
    else:
        _out().print(
            f"indexed [bold]{manifest['corpus']}[/bold] with {manifest['backend']}: {manifest['paragraphs']:,} paragraphs "
            f"in {manifest['seconds']:.1f}s -> {result.path}"
        )


@app.command()
def index(
    name: Annotated[str, typer.Argument(help="Corpus name (see mhindex list).", show_default=False)],
    backend: BackendOption = "lucene",
    threads: ThreadsOption = None,
    encoder: EncoderOption = None,
    query_encoder: QueryEncoderOption = None,
    checkpoint: CheckpointOption = None,
    nbits: Annotated[Optional[int], typer.Option("--nbits", min=1, help="ColBERT: bits per residual dimension \\[default: 2].", show_default=False)] = None,
    doc_maxlen: Annotated[Optional[int], typer.Option("--doc-maxlen", min=1, help="ColBERT: tokens kept per paragraph \\[default: 180].", show_default=False)] = None,
    faiss_index: Annotated[Optional[str], typer.Option("--faiss-index", help="Dense: flat (exact), hnsw or ivfpq \\[default: flat].", show_default=False)] = None,
    hnsw_m: Annotated[Optional[int], typer.Option("--hnsw-m", min=1, help="Dense HNSW: links per node \\[default: 32].", show_default=False)] = None,
    ivf_lists: Annotated[Optional[int], typer.Option("--ivf-lists", min=1, help="Dense IVF-PQ: lists \\[default: 4 sqrt(paragraphs)].", show_default=False)] = None,
    pq_m: Annotated[Optional[int], typer.Option("--pq-m", min=1, help="Dense IVF-PQ: sub-quantizers, dividing the dimension \\[default: 16].", show_default=False)] = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", min=1, help="Dense: paragraphs encoded per batch \\[default: 32].", show_default=False)] = None,
    shard_size: Annotated[Optional[int], typer.Option("--shard-size", min=1, help="Dense: paragraphs per resumable shard \\[default: 10000].", show_default=False)] = None,
    shards: Annotated[Optional[int], typer.Option(min=1, help="Elasticsearch: primary shards \\[default: 1].", show_default=False)] = None,
    replicas: Annotated[Optional[int], typer.Option(min=0, help="Elasticsearch: replicas \\[default: 0].", show_default=False)] = None,
    k1: K1Option = None,
    b: BOption = None,
    es_url: EsUrlOption = None,
    es_api_key: EsKeyOption = None,
    es_ca_file: EsCaOption = None,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild even if the index is up to date.")] = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Index a built corpus. The new index replaces the old one only when complete."""
    from mhindex.backends import build_index

    root = _setup(home, quiet)
    found = open_corpus(root, name)
    options = _backend_options(
        k1, b, threads, es_url, es_api_key, es_ca_file, shards=shards, replicas=replicas, encoder=encoder, query_encoder=query_encoder,
        faiss_index=faiss_index, hnsw_m=hnsw_m, ivf_lists=ivf_lists, pq_m=pq_m, batch=batch_size, shard_size=shard_size,
        checkpoint=checkpoint, nbits=nbits, doc_maxlen=doc_maxlen,
    )  # fmt: skip
    _report_index(build_index(found, backend, options, force=force), json)


@app.command()
def build(
    dataset: DatasetArgument,
    inputs: InputsOption = None,
    name: NameOption = None,
    backend: BackendOption = "lucene",
    seed: SeedOption = 13370,
    threads: ThreadsOption = None,
    es_url: EsUrlOption = None,
    es_api_key: EsKeyOption = None,
    es_ca_file: EsCaOption = None,
    force: Annotated[bool, typer.Option("--force", metavar="", help="Rebuild corpus and index.")] = False,
    skip_bad: SkipBadOption = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Corpus, then index, in one command: `mhindex build musique`."""
    from mhindex.backends import build_index

    root = _setup(home, quiet)
    built = _convert(root, dataset, inputs, name, seed, force, skip_bad)
    indexed = build_index(built.corpus, backend, _backend_options(None, None, threads, es_url, es_api_key, es_ca_file), force=force)
    if json:
        _print_json({"corpus": {"rebuilt": built.rebuilt, **built.manifest}, "index": {"rebuilt": indexed.rebuilt, **indexed.manifest}})
        return
    _report_build(built, False)
    _report_index(indexed, False)
    if indexed.rebuilt or built.rebuilt:
        _out().print(f'next: mhindex search {built.corpus.name} "your query"   or   mhindex ask "your question" --corpus {built.corpus.name}')


def _read_stdin_jsonl(required: str):
    """(line number, record or error message) for each non-blank line of stdin."""
    for number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            yield number, f"not valid JSON ({error})"
            continue
        if not isinstance(record, dict) or not isinstance(record.get(required), str):
            yield number, f"field '{required}' is missing or not a string"
            continue
        yield number, record


def _write_line(record: dict) -> None:
    sys.stdout.write(orjson.dumps(record).decode() + "\n")
    sys.stdout.flush()


@app.command()
def search(
    name: Annotated[str, typer.Argument(help="Corpus name.", show_default=False)],
    query: Annotated[str, typer.Argument(help='Query text, or "-" to read JSONL {"id", "query"} from stdin.', show_default=False)],
    k: Annotated[int, typer.Option("-k", min=1, help="Paragraphs per query.")] = 10,
    backend: BackendOption = "lucene",
    k1: K1Option = None,
    b: BOption = None,
    threads: ThreadsOption = None,
    es_url: EsUrlOption = None,
    es_api_key: EsKeyOption = None,
    es_ca_file: EsCaOption = None,
    encoder: EncoderOption = None,
    checkpoint: CheckpointOption = None,
    ef_search: EfSearchOption = None,
    nprobe: NprobeOption = None,
    batch: Annotated[int, typer.Option(min=1, help="Stdin queries searched together.")] = 64,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Search a corpus's index. With "-", one JSONL result per input line, in order:
    {"id", "hits": [{"id", "title", "text", "score"}]}; a bad line gets {"line", "error"}."""
    from mhindex.backends import open_retriever

    root = _setup(home, quiet)
    found = open_corpus(root, name)
    options = _backend_options(k1, b, threads, es_url, es_api_key, es_ca_file, encoder=encoder, checkpoint=checkpoint, ef_search=ef_search, nprobe=nprobe)
    retriever = open_retriever(found, backend, options)
    try:
        if query == "-":
            failed = _search_stream(retriever, k, batch)
            if failed:
                ui.reporter().warning(f"{failed} input lines were not valid queries")
                raise typer.Exit(1)
            return
        hits = retriever.search(query, k)
    finally:
        retriever.close()
    if json:
        _print_json({"query": query, "hits": [h.record() for h in hits]})
        return
    from rich.table import Table

    out = _out()
    table = Table("#", "score", "title", "text", show_lines=False, expand=out.is_terminal)
    for rank, hit in enumerate(hits, start=1):
        snippet = hit.text if len(hit.text) <= 160 else hit.text[:157] + "..."
        table.add_row(str(rank), f"{hit.score:.2f}", hit.title, snippet)
    out.print(table if hits else "no paragraph matches")


def _search_stream(retriever, k: int, batch: int) -> int:
    failed = 0
    pending: list[tuple[int, dict | str]] = []

    def flush() -> None:
        good = [(n, r) for n, r in pending if isinstance(r, dict)]
        results = iter(retriever.search_many([r["query"] for _, r in good], k))
        for number, record in pending:
            if isinstance(record, str):
                _write_line({"line": number, "error": record})
            else:
                _write_line({"id": record.get("id", str(number)), "hits": [h.record() for h in next(results)]})
        pending.clear()

    for number, record in _read_stdin_jsonl("query"):
        failed += isinstance(record, str)
        pending.append((number, record))
        if len(pending) >= batch:
            flush()
    flush()
    return failed


def _unescape(text: str) -> str:
    r"""\n, \t and \\ as typed in a shell; everything else (accents, other scripts) as it is."""
    import re

    return re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)


@app.command(name="lm")
def lm_(
    prompt: Annotated[str, typer.Argument(help="The prompt to complete; \\n and \\t are read as a newline and a tab.", show_default=False)],
    lm: LmOption = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Most tokens to generate.")] = 64,
    stop: Annotated[Optional[list[str]], typer.Option("--stop", help="Stop sequence (repeatable; \\n for a newline, \\t for a tab).")] = None,
    temperature: Annotated[float, typer.Option(help="0 is greedy.")] = 0.0,
    chat: Annotated[bool, typer.Option("--chat", metavar="", help="Send the prompt as one user turn through the chat template.")] = False,
    lm_threads: LmThreadsOption = None,
    lm_context: LmContextOption = None,
    no_cache: NoCacheOption = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Complete one prompt and print the text: a check that a model is set up."""
    root = _setup(home, quiet)
    prompt, stops = _unescape(prompt), [_unescape(s) for s in stop or []]
    with _lm(lm, root, lm_threads, lm_context, no_cache) as model:
        call = model.chat if chat else model.complete
        completion = call(prompt, max_tokens=max_tokens, stop=stops, temperature=temperature)
        if json:
            _print_json({"lm": model.name, "context_length": model.context_length, **completion.record()})
            return
    print(completion.text)
    ui.reporter().info(
        f"{model.name}: {completion.prompt_tokens} prompt + {completion.completion_tokens} completion tokens "
        f"in {completion.seconds:.2f}s{' (cached)' if completion.cached else ''}"
    )


KOption = Annotated[Optional[int], typer.Option("-k", min=1, help="Paragraphs per retrieval (K) \\[default: ircot 4, oner 15].", show_default=False)]
MaxStepsOption = Annotated[int, typer.Option(min=1, help="IRCoT: most reasoning steps.")]
MaxParagraphsOption = Annotated[int, typer.Option(min=1, help="Most paragraphs collected (the recall budget).")]
DistractorsOption = Annotated[int, typer.Option(min=1, max=3, help="M: distractor paragraphs in each demonstration (1-3).")]
ReaderOption = Annotated[str, typer.Option(help="Reader prompting: direct, cot, or auto (direct for Flan-T5, else cot).")]
PromptStyleOption = Annotated[str, typer.Option(help="codex, flan_t5 or auto (flan_t5 for seq2seq hf: models).")]
DemosFromOption = Annotated[Optional[str], typer.Option(help="Demonstration set: hotpotqa, 2wikimultihopqa, musique, iirc \\[default: the corpus's dataset].", show_default=False)]
MaxDemosOption = Annotated[Optional[int], typer.Option(min=0, help="At most this many demonstrations \\[default: as many as fit].", show_default=False)]
DemoBudgetOption = Annotated[Optional[int], typer.Option(min=1, help="Tokens for demonstrations \\[default: half the context].", show_default=False)]
ParagraphWordsOption = Annotated[int, typer.Option(min=1, help="Paragraphs are cut to this many words in prompts.")]
StepTokensOption = Annotated[int, typer.Option(min=1, help="Most tokens generated for one IRCoT reasoning step (only its first sentence is kept).")]
AnswerTokensOption = Annotated[int, typer.Option(min=1, help="Most tokens for the reader's answer; a CoT reader cut off before \"answer is\" answers with its whole text.")]
WorkersOption = Annotated[int, typer.Option(min=1, max=64, help="Questions answered at once (useful with a remote LM).")]


def _settings(**values):
    from mhindex.methods import Settings

    return Settings(**values)


def _demo_set(demos_from: str | None, dataset: str | None) -> str:
    from mhindex.methods.prompts import DEMO_DATASETS

    return demos_from or (dataset if dataset in DEMO_DATASETS else "musique")


def _pick_corpus(root: Path, name: str | None, required: bool):
    if name:
        return open_corpus(root, name)
    corpora = built_corpora(root)
    if len(corpora) == 1:
        return corpora[0]
    if not required:
        return None
    if not corpora:
        raise UsageError(f"no corpus is built in {root}; run `mhindex build musique` first")
    raise UsageError(f"several corpora are built ({', '.join(c.name for c in corpora)}); pick one with --corpus")


def _query_from_record(number: int, record: dict):
    from mhindex.methods import Query

    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        return "field 'question' is missing or empty"
    main = record.get("main_passage")
    if main is not None and not (isinstance(main, dict) and isinstance(main.get("title"), str) and isinstance(main.get("text"), str)):
        return "field 'main_passage' should be {\"title\", \"text\"}"
    links = record.get("links") or []
    return Query(str(record.get("id", number)), question, main, tuple(l for l in links if isinstance(l, str)))


TITLE_SEPARATOR = " · "  # titles contain commas ("Paris, Texas"), never a middle dot


def _print_trace(answer) -> None:
    from rich.text import Text
    from rich.tree import Tree

    out = _out()
    out.print(f"[bold green]{answer.answer or '(no answer)'}[/bold green]")
    tree = Tree(f"[dim]{answer.method}: {answer.question}[/dim]")
    for number, step in enumerate(answer.steps):
        label = f"[bold]step {number}[/bold]" + (f": {step.text}" if step.text else " (the question)")
        node = tree.add(label)
        if step.query:
            node.add(Text(f"query: {step.query}"))
            node.add(Text(f"retrieved: {TITLE_SEPARATOR.join(step.titles) if step.titles else 'nothing new'}"))
        node.add(f"[dim]{step.seconds:.1f}s, {step.prompt_tokens:,} prompt + {step.completion_tokens:,} completion tokens[/dim]")
    # IRCoT's reasoning is its steps, with the reader's own generation after "[reader] " when it
    # differs from the answer; for methods without a chain, the reasoning is the reader's generation.
    chain, _, reader = answer.reasoning.partition("[reader] ")
    if not reader and not any(step.text for step in answer.steps):
        reader = chain
    if reader.strip() and reader.strip() != answer.answer:
        tree.add(Text(f"reader: {reader.strip()}", style="italic"))
    out.print(tree)
    titles = TITLE_SEPARATOR.join(dict.fromkeys(r["title"] for r in answer.retrieved))
    if titles:
        out.print(Text(f"paragraphs used ({len(answer.retrieved)}): {titles}", style="dim"))
    out.print(
        f"[dim]{answer.seconds:.1f}s, {answer.lm_calls} LM calls, {answer.prompt_tokens} prompt + "
        f"{answer.completion_tokens} completion tokens[/dim]"
    )


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help='The question, or "-" to read JSONL {"id", "question"} from stdin.', show_default=False)],
    corpus_name: Annotated[Optional[str], typer.Option("--corpus", "-c", help="Corpus to search \\[default: the only one built].", show_default=False)] = None,
    method: Annotated[str, typer.Option("--method", "-m", help="ircot, oner or nor.")] = "ircot",
    backend: BackendOption = "lucene",
    lm: LmOption = None,
    k: KOption = None,
    max_steps: MaxStepsOption = 8,
    max_paragraphs: MaxParagraphsOption = 15,
    distractors: DistractorsOption = 2,
    reader: ReaderOption = "auto",
    prompt_style: PromptStyleOption = "auto",
    demos_from: DemosFromOption = None,
    max_demos: MaxDemosOption = None,
    demo_budget: DemoBudgetOption = None,
    max_paragraph_words: ParagraphWordsOption = 350,
    step_tokens: StepTokensOption = 100,
    answer_tokens: AnswerTokensOption = 100,
    workers: WorkersOption = 1,
    lm_threads: LmThreadsOption = None,
    lm_context: LmContextOption = None,
    no_cache: NoCacheOption = False,
    k1: K1Option = None,
    b: BOption = None,
    es_url: EsUrlOption = None,
    es_api_key: EsKeyOption = None,
    es_ca_file: EsCaOption = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Answer a question with retrieval and reasoning, and show the trace and the paragraphs used.

    With "-", reads JSONL from stdin ({"id", "question"}, plus "main_passage" for IIRC) and writes
    one JSON result per line in input order; a bad line gets {"line", "error"} and the exit code is 1.
    """
    from mhindex.backends import open_retriever
    from mhindex.methods import METHODS, make_method

    root = _setup(home, quiet)
    if not question.strip():
        raise UsageError('the question is empty; ask something, or pass "-" to read JSONL questions from stdin')
    if method not in METHODS:
        raise UsageError(f"unknown method '{method}'; choose one of: {', '.join(METHODS)}")
    settings = _settings(
        k=k, max_steps=max_steps, max_paragraphs=max_paragraphs, distractors=distractors, reader=reader,
        style=prompt_style, demos_from=demos_from, max_demos=max_demos, demo_budget=demo_budget,
        max_paragraph_words=max_paragraph_words, step_tokens=step_tokens, answer_tokens=answer_tokens,
    )  # fmt: skip
    found = _pick_corpus(root, corpus_name, required=method != "nor")
    demo_set = _demo_set(demos_from, found.manifest().get("dataset") if found else None)
    retriever = None
    if method != "nor":
        retriever = open_retriever(found, backend, _backend_options(k1, b, None, es_url, es_api_key, es_ca_file))
    with ui.graceful_interrupts():
        model = _lm(lm, root, lm_threads, lm_context, no_cache)
        try:
            solver = make_method(method, retriever, model, settings, demo_set)
            if question == "-":
                from mhindex.methods.run import run_questions

                items = ((n, r if isinstance(r, str) else _query_from_record(n, r)) for n, r in _read_stdin_jsonl("question"))
                stats = run_questions(solver, items, _write_line, workers=workers)
                if stats.interrupted:
                    ui.reporter().warning(f"interrupted: {stats.answered} answered, {stats.failed} failed")
                    raise typer.Exit(130)
                if stats.failed:
                    ui.reporter().warning(f"{stats.failed} of {stats.answered + stats.failed} questions failed")
                    raise typer.Exit(1)
                return
            from mhindex.methods import Query

            with ui.reporter().activity(f"{method}: starting"):
                answer = solver.answer(Query("cli", question))
        finally:
            model.close()
            if retriever is not None:
                retriever.close()
    if json:
        _print_json(answer.record())
    else:
        _print_trace(answer)


def _show_metrics(metrics: dict, title: str, chart: Path | None, dataset: str = "") -> None:
    from mhindex.eval.report import bar_chart, table, terminal_bars

    out = _out()
    out.print(table(metrics, title))
    if chart is not None:
        bar_chart({dataset: metrics}, chart, title)
        out.print(f"[dim]chart: {chart}[/dim]")
    if out.is_terminal:
        out.print(terminal_bars(metrics))


@app.command(name="eval")
def eval_(
    name: Annotated[str, typer.Argument(help="Corpus whose questions.jsonl is evaluated.", show_default=False)],
    methods: Annotated[str, typer.Option("--method", "-m", help="Comma-separated methods, e.g. nor,oner,ircot.")] = "nor,oner,ircot",
    limit: Annotated[Optional[int], typer.Option(min=1, help="Evaluate a seeded sample of this many questions \\[default: all].", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed of the question sample.")] = 13370,
    out: Annotated[Optional[Path], typer.Option(help="Output folder \\[default: <home>/NAME/eval/<lm>-<backend>-s<seed>-n<limit>].", show_default=False)] = None,
    backend: BackendOption = "lucene",
    lm: LmOption = None,
    k: KOption = None,
    max_steps: MaxStepsOption = 8,
    max_paragraphs: MaxParagraphsOption = 15,
    distractors: DistractorsOption = 2,
    reader: ReaderOption = "auto",
    prompt_style: PromptStyleOption = "auto",
    demos_from: DemosFromOption = None,
    max_demos: MaxDemosOption = None,
    demo_budget: DemoBudgetOption = None,
    max_paragraph_words: ParagraphWordsOption = 350,
    step_tokens: StepTokensOption = 100,
    answer_tokens: AnswerTokensOption = 100,
    workers: WorkersOption = 1,
    lm_threads: LmThreadsOption = None,
    lm_context: LmContextOption = None,
    no_cache: NoCacheOption = False,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Run methods on a reproducible sample of a corpus's questions and print the paper-style table.

    Predictions are appended to <out>/<method>.jsonl as each question finishes, so an interrupted run
    resumes where it stopped; metrics go to <out>/metrics.json and a recall/F1 chart to <out>/chart.png.
    """
    import re

    from mhindex.backends import open_retriever
    from mhindex.eval.run import claim_folder, evaluate_method, sample_questions, score_methods
    from mhindex.methods import METHODS, Query, make_method
    from mhindex.methods.run import run_questions

    root = _setup(home, quiet)
    names = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in names if m not in METHODS]
    if unknown or not names:
        raise UsageError(f"unknown method '{(unknown or [methods])[0]}'; choose from: {', '.join(METHODS)}")
    found = open_corpus(root, name)
    dataset = found.manifest().get("dataset")
    questions = sample_questions(found, limit, seed)
    if not questions:
        raise UsageError(f"corpus '{name}' has no questions with answers to evaluate")
    settings = _settings(
        k=k, max_steps=max_steps, max_paragraphs=max_paragraphs, distractors=distractors, reader=reader,
        style=prompt_style, demos_from=demos_from, max_demos=max_demos, demo_budget=demo_budget,
        max_paragraph_words=max_paragraph_words, step_tokens=step_tokens, answer_tokens=answer_tokens,
    )  # fmt: skip
    lm_spec = _lm_spec(lm)
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", lm_spec).strip("-")
    folder = out or found.root / "eval" / f"{slug}-{backend}-s{seed}-n{limit or 'all'}"
    configuration = {"corpus": name, "lm": lm_spec, "backend": backend, "settings": settings.__dict__}
    claim_folder(folder, configuration)
    retriever = open_retriever(found, backend) if any(m != "nor" for m in names) else None
    model = _lm(lm_spec, root, lm_threads, lm_context, no_cache)
    log = ui.reporter()
    predictions: dict[str, list[dict]] = {}
    with ui.graceful_interrupts():
        try:
            demo_set = _demo_set(demos_from, dataset)
            for method in names:
                solver = make_method(method, retriever, model, settings, demo_set)

                def run(todo: list[dict], emit, solver=solver, method=method) -> None:
                    with log.progress(f"{method} on {name}", total=len(todo)) as bar:

                        def record(result: dict) -> None:
                            emit(result)
                            bar.advance()

                        items = ((i, Query(q["id"], q["question"], q.get("main_passage"), tuple(q.get("links") or ()))) for i, q in enumerate(todo, 1))
                        stats = run_questions(solver, items, record, workers=workers)
                    if stats.interrupted:
                        raise KeyboardInterrupt

                predictions[method] = evaluate_method(method, questions, folder, run)
                log.info(f"{method}: {len(predictions[method])} predictions in {folder / (method + '.jsonl')}")
        except KeyboardInterrupt:
            log.warning(f"interrupted: the answers so far are kept in {folder}; the same command resumes from them")
            raise typer.Exit(130) from None
        finally:
            model.close()
            if retriever is not None:
                retriever.close()
    metrics = score_methods(predictions, questions, max_paragraphs)
    report = {**configuration, "dataset": dataset, "questions": len(questions), "limit": limit, "seed": seed, "methods": metrics}
    from mhindex.files import atomic_file

    with atomic_file(folder / "metrics.json") as handle:
        handle.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    from mhindex.eval.report import bar_chart

    title = f"{name}: {len(questions)} questions, {lm_spec}, {backend}"
    bar_chart({dataset or name: metrics}, folder / "chart.png", title)
    if json:
        _print_json(report)
        return
    _show_metrics(metrics, title, None)
    _out().print(f"[dim]predictions, metrics.json and chart.png in {folder}[/dim]")


@app.command()
def score(
    predictions: Annotated[Path, typer.Argument(help="A predictions file (ask --json records, one a line).", show_default=False)],
    questions: Annotated[str, typer.Option("--questions", help="A corpus name (its questions.jsonl) or a questions.jsonl with gold answers and gold paragraph ids.")],
    budget: Annotated[int, typer.Option(min=1, help="Recall counts the first this many paragraphs retrieved.")] = 15,
    chart: Annotated[Optional[Path], typer.Option(help="Also write a recall/F1 bar chart here (PNG).", show_default=False)] = None,
    home: HomeOption = None,
    quiet: QuietOption = False,
    json: JsonOption = False,
) -> None:
    """Score an existing predictions file against a question file."""
    from mhindex.eval.metrics import aggregate
    from mhindex.eval.run import read_predictions

    root = _setup(home, quiet)
    if not predictions.is_file():
        raise UsageError(f"{predictions}: no such file")
    questions_file = Path(questions).expanduser()
    if not questions_file.is_file():
        if "/" in questions or questions.endswith(".jsonl"):
            raise UsageError(f"{questions}: no such file")
        questions_file = open_corpus(root, questions).questions
    records = read_predictions(predictions)
    if not records:
        raise UsageError(f"{predictions}: holds no predictions")
    gold: dict[str, dict] = {}
    for number, line in enumerate(questions_file.read_bytes().splitlines(), start=1):
        if line.strip():
            try:
                record = orjson.loads(line)
                gold[record["id"]] = record
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise UsageError(f"{questions_file} line {number}: not a question record with an 'id'") from None
    ids = list(dict.fromkeys(r["id"] for r in records if "id" in r))
    missing = [i for i in ids if i not in gold]
    if missing:
        raise UsageError(f"{predictions}: {len(missing)} predictions have no question in {questions_file} (first: {missing[0]})")
    summary = {predictions.stem: aggregate(records, {i: gold[i] for i in ids}, budget)}
    if json:
        _print_json(summary)
        return
    _show_metrics(summary, f"{predictions.name} against {questions_file.name}", chart, questions_file.parent.name)


@app.command()
def chart(
    runs: Annotated[list[Path], typer.Argument(help="Evaluation folders (or their metrics.json), one per dataset.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="The PNG to write.")] = Path("chart.png"),
    title: Annotated[Optional[str], typer.Option(help="Title \\[default: the model and the question count].", show_default=False)] = None,
    quiet: QuietOption = False,
) -> None:
    """Draw several `mhindex eval` runs in one figure: recall and F1 per dataset, methods side by side."""
    from mhindex.eval.report import bar_chart, read_metrics

    _setup(None, quiet)
    reports = [read_metrics(path) for path in runs]
    by_dataset = {report.get("dataset") or report.get("corpus") or str(path): report["methods"] for path, report in zip(runs, reports, strict=True)}
    models = sorted({str(report.get("lm")) for report in reports})
    sizes = sorted({int(report.get("questions") or 0) for report in reports})
    default = f"{', '.join(models)}: {'/'.join(map(str, sizes))} questions per dataset"
    bar_chart(by_dataset, out, title or default)
    _out().print(f"chart: {out}")


def _usage_problem(error: BaseException) -> int | None:
    """Show click's usage errors as one line (a bare `mhindex` shows the help); returns the exit code.

    Recognised by class name along the MRO, not by class: typer 0.29 raises the exceptions of its
    own vendored click (`typer._click`), older typers raise click's, and both must read the same.
    """
    names = {cls.__name__ for cls in type(error).__mro__}
    if "NoArgsIsHelpError" in names:
        error.show()
        return 2
    if "ClickException" in names:
        ctx = getattr(error, "ctx", None)
        hint = f" (see '{ctx.command_path} -h')" if ctx is not None else ""
        message = " ".join(str(error.format_message()).split())
        print(f"mhindex: error: {message}{hint}", file=sys.stderr)
        return int(getattr(error, "exit_code", 2))
    if "Abort" in names:
        print("mhindex: aborted", file=sys.stderr)
        return 1
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising, so tests can call it in-process."""
    try:
        code = app(args=argv, prog_name="mhindex", standalone_mode=False)
        if isinstance(code, int):
            return code
    except MhindexError as error:
        message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"mhindex: error: {message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("mhindex: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if type(error).__name__ == "Exit":  # typer.Exit, from either click
            return int(getattr(error, "exit_code", 0) or 0)
        code = _usage_problem(error)
        if code is None:
            raise
        return code
    return 0


def entry() -> None:
    """The `mhindex` program. After Ctrl-C a model call abandoned in a helper thread may still be
    inside llama.cpp (a long prompt cannot be cut short): everything is written and flushed by
    then, so the process exits without waiting for it."""
    code = main()
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
