"""`mhindex eval`: run methods on a reproducible sample of a corpus's questions and score them.

Predictions are appended to `<out>/<method>.jsonl` as each question finishes (the `ask --json`
records), so an interrupted evaluation resumes where it stopped: questions already answered
are not asked again, and a torn last line is dropped. Metrics go to `<out>/metrics.json`.
`<out>/run.json` records what made the predictions, so a resume with another LM, backend or
setting is refused instead of silently mixing two configurations in one table.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from mhindex.corpora import shown_dataset
from mhindex.errors import BadInput, Interrupted, UsageError, redact
from mhindex.eval.metrics import aggregate, paired_differences
from mhindex.eval.ranking import judged, run_predictions, scores_retrieval
from mhindex.eval.report import Scored, bar_chart, run_title
from mhindex.eval.splits import trained_overlap
from mhindex.eval.spread import seed_spread
from mhindex.eval.sweep import (
    TUNE_METRICS,
    Variant,
    choose_settings,
    parse_sweeps,
    variants,
    with_draws,
    with_overrides,
)
from mhindex.files import atomic_file, parse_jsonl, unlinked
from mhindex.home import CorpusDir


class OpenedSession(Protocol):
    """What `evaluate` is handed, opened by the layer above (methods.session.Session): the corpus's index, the
    model and the judge, the methods made from them, and how a figure names the model and the engine."""

    dataset: str | None
    index: Any
    lm: Any

    def method(self, name: str, settings: Any) -> Any: ...

    def judge(self) -> Any: ...

    def titles(self) -> tuple[str, str]: ...

    def close(self) -> None: ...


def question_problem(record: Any) -> str | None:
    """Why a line of a questions file is not a question record, or None."""
    if not isinstance(record, dict):
        return "a question line should be a JSON object"
    for name, kind in (("id", str), ("question", str)):
        if not isinstance(record.get(name), kind):
            return f"field '{name}' is missing or not a string"
    for name in ("answers", "gold_ids"):
        value = record.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"field '{name}' should be a list of strings"
    relevance = record.get("relevance", {})
    if not isinstance(relevance, dict) or not all(
        isinstance(grade, int) and not isinstance(grade, bool) for grade in relevance.values()
    ):
        return "field 'relevance' should map paragraph ids to whole grades"
    return None


def read_questions_file(path: Path) -> list[dict]:
    """Every question record of a questions.jsonl, in file order; a bad line is a one-line error
    that names the file, the line and the field."""
    from mhindex.files import parse_jsonl

    questions = []
    with open(path, "rb") as handle:
        for number, record, problem in parse_jsonl(handle):
            problem = problem or question_problem(record)
            if problem:
                raise BadInput(f"{path} line {number}: {problem}; if the corpus built it, rebuild it with --force")
            questions.append(record)
    return questions


def sample_questions(corpus: CorpusDir, limit: int | None, seed: int, split: str = "auto") -> list[dict]:
    """Questions with answers of `split` (eval/splits.py), in file order; with `limit`, a seeded sample of that many.

    Samples are nested: the first `limit` of one seeded shuffle, so a larger sample contains every
    smaller one and growing an evaluation reuses the predictions already made.
    """
    return sample_of_split(corpus, limit, seed, split)[0]


def sample_of_split(
    corpus: CorpusDir, limit: int | None, seed: int, split: str, skip: int = 0
) -> tuple[list[dict], str]:
    """`sample_questions`, and the split it resolved to; `skip`: after the first `skip` of the seeded
    order (the questions a setting was tuned on), so that the two samples are disjoint."""
    from mhindex.eval.splits import select_split

    every = read_questions_file(corpus.questions)
    # Scored on its answers; a corpus with none (BEIR's queries) on its relevance judgements (eval/ranking.py).
    answered = [q for q in every if q.get("answers")] or [q for q in every if judged(q)]
    questions, resolved = select_split(answered, split, corpus.name)
    if skip or (limit is not None and limit < len(questions)):
        order = list(range(len(questions)))
        random.Random(seed).shuffle(order)
        chosen = order[skip:] if limit is None else order[skip : skip + limit]
        questions = [questions[i] for i in sorted(chosen)]
    return questions, resolved


_COSTS = ("lm_calls", "prompt_tokens", "completion_tokens", "seconds")


def prediction_problem(record: Any) -> str | None:
    """Why a line of a predictions file is not a prediction (an `ask --json` record, or the error
    record of a question that failed), or None."""
    if not isinstance(record, dict):
        return "a prediction line should be a JSON object"
    if not isinstance(record.get("id"), str):
        return "field 'id' is missing or not a string"
    if "error" in record:
        return None if isinstance(record["error"], str) else "field 'error' should be a string"
    if not isinstance(record.get("answer", ""), str):
        return "field 'answer' should be a string"
    retrieved = record.get("retrieved", [])
    if not isinstance(retrieved, list) or not all(
        isinstance(r, dict) and isinstance(r.get("id"), str) for r in retrieved
    ):
        return 'field \'retrieved\' should be a list of {"id", "title"}'
    for name in _COSTS:
        if name in record and (not isinstance(record[name], int | float) or isinstance(record[name], bool)):
            return f"field '{name}' should be a number"
    return None


def read_predictions(path: Path, repair: bool = False) -> list[dict]:
    """Records of a predictions file; a line that is not a prediction is a one-line error naming
    the file, the line and the field. With `repair` (eval resuming its own file): a torn last
    line, the mark of a write cut short, is dropped; a bad line anywhere else is set aside in
    `<name>.rejected.jsonl` with a warning, and the file keeps every good line."""
    if not path.is_file():
        return []
    if repair:  # a repair writes the file: never through a link under the data root
        unlinked(path)
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    records, kept, rejected, torn = [], [], [], False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
            problem = prediction_problem(record)
        except orjson.JSONDecodeError as error:
            problem = f"not valid JSON ({error})"
        if problem is None:
            records.append(record)
            kept.append(line)
        elif not repair:
            raise BadInput(f"{path} line {number}: {problem}")
        elif number == len(lines) and not line.endswith(b"\n"):
            torn = True
        else:
            rejected.append((number, line, problem))
    if rejected:
        _set_aside(path, kept, rejected)
    elif torn:
        with open(path, "r+b") as handle:
            handle.truncate(len(data) - len(lines[-1]))
    return records


def _set_aside(path: Path, kept: list[bytes], rejected: list[tuple[int, bytes, str]]) -> None:
    """Rewrite `path` with its good lines only; bad lines go to `<name>.rejected.jsonl`."""
    from mhindex import ui

    aside = unlinked(path.with_name(path.stem + ".rejected.jsonl"))
    with open(aside, "ab") as handle:
        for number, line, problem in rejected:
            handle.write(
                orjson.dumps(
                    {
                        "file": str(path),
                        "line": number,
                        "problem": problem,
                        "text": line.decode("utf-8", "replace").rstrip("\n"),
                    }
                )
                + b"\n"
            )
            ui.reporter().warning(
                f"{path} line {number}: {problem}; set aside in {aside}, and the question is asked again"
            )
    with atomic_file(path) as handle:
        handle.write(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in kept))


class PredictionLog:
    """Appends one record a line and makes it durable before the next question starts."""

    def __init__(self, path: Path) -> None:
        unlinked(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "ab")

    def __call__(self, record: dict) -> None:
        self._handle.write(orjson.dumps(record) + b"\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


# Recorded for the reader of run.json, not compared: a new mhindex may resume an older run.
# The judge scores the predictions, it does not make them; a local model's threads follow the machine's load
# (they can move a log-probability in its second decimal, measured not to change answers: benchmarks/README.md).
INFORMATIONAL = ("tool_version", "judge", "lm_threads")
# Older run.json and metrics.json files held one flat, IRCoT-shaped "settings" for every method.
RENAMED = {"style": "prompt_style"}


def _before(method: str, setting: str) -> object:
    """What a run recorded before `setting` existed did: the option's declared `before` (options.py)."""
    from mhindex.methods import method_class
    from mhindex.options import ALWAYS, declared

    try:
        found = declared(method_class(method).Settings).get(setting)
    except UsageError:
        return ALWAYS
    return found[1].before if found else ALWAYS


def claim_folder(folder: Path, run: dict) -> dict:
    """Record `run` (corpus and its hash, LM, backend and index, each method's settings and the
    demonstrations it used) in `<folder>/run.json`, or check it against what is recorded there.

    Whatever both record must agree, so one folder never mixes two configurations; a method not
    yet recorded is added. The question sample is not part of it: a larger `--limit` or another
    seed reuses the answers already made, which is what nested samples are for.
    """
    path = folder / "run.json"
    recorded: dict = {}
    for source in (path, folder / "metrics.json"):  # metrics.json: a folder from before run.json
        if source.exists():
            try:
                found = orjson.loads(source.read_bytes())
            except orjson.JSONDecodeError as error:
                found = f"not valid JSON ({error})"
            if not isinstance(found, dict):
                raise UsageError(
                    f"{source}: {found if isinstance(found, str) else 'not a JSON object'}; remove it, or pass "
                    "--out for a new folder"
                )
            recorded = found
            break
    before, now = _flatten(recorded, run["settings"]), _flatten(run, run["settings"])
    from mhindex.options import ALWAYS

    for key in now:
        method, _, setting = key.partition(".")
        if key in before or method == "index" or not any(k.startswith(f"{method}.") for k in before):
            continue
        if (was := _before(method, setting)) is not ALWAYS:
            before[key] = was
    differing = [key for key in now if key in before and before[key] != now[key] and key not in INFORMATIONAL]
    if differing:
        was = ", ".join(f"{key}={_shown(before[key])}" for key in differing)
        asked = ", ".join(f"{key}={_shown(now[key])}" for key in differing)
        raise UsageError(
            f"{folder} holds predictions made with {was}; this run has {asked}: pass --out for a new folder, "
            "or remove it to start over"
        )
    earlier: dict = recorded["settings"] if path.exists() and _per_method(recorded.get("settings")) else {}
    merged = {**run, "settings": {**earlier, **run["settings"]}}
    if merged != recorded:
        with atomic_file(path) as handle:
            handle.write(orjson.dumps(merged, option=orjson.OPT_INDENT_2) + b"\n")
    return merged


def _shown(value) -> str:
    return "default" if value is None else str(value)


def _per_method(settings) -> bool:
    return isinstance(settings, dict) and all(isinstance(v, dict) for v in settings.values())


#: What of the model's fingerprint decides its answers (lm/llamacpp.py): a folder's predictions are never made by two
DECIDING = ("sha256", "kernels", "ubatch")


def _flatten(run: dict, methods: dict) -> dict:
    """`run` as one level of keys: a method's settings as `method.key`, the index's as `index.key`, and what decides a
    local model's answers as `answering.key` (a run of an mhindex that recorded no kernels ran llama.cpp's default
    ones). A legacy flat "settings" (one IRCoT-shaped set for all) applies to each method being run."""
    flat = {key: value for key, value in run.items() if not isinstance(value, dict)}
    for key, value in (run.get("index") or {}).items():
        flat[f"index.{key}"] = value
    fingerprint = run.get("fingerprint")
    answering = fingerprint.get("answering") if isinstance(fingerprint, dict) else None
    if isinstance(answering, dict) and answering.get("sha256"):  # a local model: its file, and the kernels that ran it
        defaults = {"kernels": "llama.cpp's defaults", "ubatch": 512}
        for key in DECIDING:
            flat[f"answering.{key}"] = answering.get(key, defaults.get(key))
    settings = run.get("settings")
    if isinstance(settings, dict) and _per_method(settings):
        for method, values in settings.items():
            for key, value in values.items():
                flat[f"{method}.{key}"] = value
    elif isinstance(settings, dict):
        for method in methods:
            for key, value in settings.items():
                flat[f"{method}.{RENAMED.get(key, key)}"] = value
    return flat


def evaluate_method(
    name: str,
    questions: Sequence[dict],
    out: Path,
    run: Callable[[list[dict], Callable[[dict], None]], None],
) -> list[dict]:
    """Answer the questions not yet in `<out>/<name>.jsonl`; returns all predictions for the sample."""
    path = out / f"{name}.jsonl"
    done = {r["id"] for r in read_predictions(path, repair=True) if "id" in r and "error" not in r}
    todo = [q for q in questions if q["id"] not in done]
    if todo:
        log = PredictionLog(path)
        try:
            run(todo, log)
        finally:
            log.close()
    wanted = {q["id"] for q in questions}
    latest: dict[str, dict] = {}
    for record in read_predictions(path):
        if record.get("id") in wanted and ("error" not in record or record["id"] not in latest):
            latest[record["id"]] = record
    return [latest[q["id"]] for q in questions if q["id"] in latest]


def score_methods(
    predictions: dict[str, list[dict]], questions: Sequence[dict], budget: int, judge: Any = None
) -> dict[str, dict]:
    """Each method's metrics; with a `judge` (a language model), EfficientRAG's Accuracy too."""
    from mhindex.eval.judge import judge_predictions

    by_id = {q["id"]: q for q in questions}
    verdicts = (
        {name: judge_predictions(judge, records, by_id, f"judging {name}") for name, records in predictions.items()}
        if judge is not None
        else {}
    )
    return {name: aggregate(records, by_id, budget, verdicts.get(name)) for name, records in predictions.items()}


@dataclass
class Evaluation:
    folder: Path
    report: dict  # what metrics.json holds


def default_folder(
    corpus: CorpusDir,
    lm_spec: str,
    backend: str,
    seed: int,
    limit: int | None = None,
    split: str = "dev",
    tuned_on: int | None = None,
) -> Path:
    """`<lm>-<backend>-s<seed>`, `-<split>` for a split other than the usual dev (or all), and
    `-tuned<N>` when a setting was tuned on N questions first (the reported sample is then another).
    Not the limit: samples of one seed are nested, so a larger --limit grows the same folder."""
    del limit  # named by older versions (-n<limit>); kept as a parameter for callers
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", redact(lm_spec)).strip("-")
    suffix = ("" if split in ("dev", "all") else f"-{split}") + (f"-tuned{tuned_on}" if tuned_on else "")
    return corpus.root / "eval" / f"{slug}-{backend}-s{seed}{suffix}"


@dataclass(frozen=True)
class EvalPlan:
    """What `mhindex eval` was asked, parsed and checked once where the command starts: the corpus, the
    methods and each one's settings, the variants a `--sweep` makes and which of them a tuning chooses
    among, the backend and the model, the sample, and where the answers go."""

    corpus: CorpusDir
    methods: list[str]
    #: `--backend` as run.json records it (`lucene`, `lucene+dense`, an address)
    backend: str
    #: the model, as resolved from --lm (never a key: run.json keeps it redacted)
    lm: str
    #: every variant's name (`oner@k=5`, or the method's own) and its settings
    settings: dict[str, Any]
    runs: list[Variant]
    #: the variants a tuning chooses among (a method swept over two or more values)
    grid: list[Variant]
    limit: int | None = None
    seed: int = 13370
    split: str = "auto"
    tune_limit: int | None = None
    tune_metric: str = "recall"
    out: Path | None = None
    workers: int = 1
    budget: int = 15
    judge: str | None = None
    #: exactly these questions (a rerun of a recorded evaluation), instead of a seeded sample
    question_ids: list[str] | None = None
    #: the paper's table the variants are rows of (`eval --table`), as metrics.json records it (`TablePlan.record`)
    table: dict[str, Any] | None = None
    #: the index's settings a rerun must find (run.json's `index`): checked before any question is asked
    index: dict[str, Any] | None = None
    #: the engine's name in the default folder's (`remote` for an address); the label where empty
    backend_name: str = ""
    #: `--seeds`: each sampled row's draws by the row's name (eval/spread.py), the row itself first
    draws: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @classmethod
    def make(
        cls,
        corpus: CorpusDir,
        methods: Sequence[str],
        engines: tuple[str, str, str],
        method_options: dict[str, Any] | None = None,
        sweeps: Sequence[str] = (),
        rows: Sequence[tuple[str, dict[str, Any]]] = (),
        **sample: Any,
    ) -> EvalPlan:
        """The plan, or a one-line UsageError for what cannot be run (no method, an unknown setting, a
        tuning with nothing to choose); `engines`: the backend's label and name and the resolved model, as the
        caller parsed them; `rows`: a paper's table's, each a method with its settings, before `methods`;
        `sample`: limit, seed, split, tune_limit, tune_metric, out, workers, budget, judge, table, seeds."""
        from mhindex.methods import settings_for

        names = list(dict.fromkeys([*(method for method, _ in rows), *methods]))
        if not names:
            raise UsageError("no method to evaluate; give --method, e.g. nor,oner,ircot")
        if sample.get("tune_metric", "recall") not in TUNE_METRICS:
            raise UsageError(f"--tune-metric must be one of {', '.join(TUNE_METRICS)}, not {sample['tune_metric']!r}")
        base = settings_for(names, method_options or {})
        row_methods = {method for method, _ in rows}
        runs = variants([m for m in dict.fromkeys(methods) if m not in row_methods], parse_sweeps(list(sweeps), names),
                        rows)  # fmt: skip
        grid = [v for v in runs if sum(w.tuned_as == v.tuned_as for w in runs) > 1]
        if sample.get("tune_limit") is not None and not grid:
            raise UsageError("--tune-on picks the best of a --sweep: give one of two or more values, e.g. k=2,4,6,8")
        settings = {v.name: with_overrides(base[v.method], v.overrides, v.name) for v in runs}
        seeds = sample.pop("seeds", 1)
        if seeds > 1 and sample.get("tune_limit") is not None:
            raise UsageError(f"--seeds {seeds} with --tune-on: a tuning would choose among the seeds' luck; tune "
                             "first, then run the chosen setting with --seeds")  # fmt: skip
        runs, draws = with_draws(runs, settings, seeds)
        settings = {v.name: with_overrides(base[v.method], v.overrides, v.name) for v in runs}
        if sample.get("table"):
            sample["table"] = _table_of_runs(sample["table"], runs)
        backend, backend_name, lm = engines
        return cls(corpus, names, backend, lm, settings, runs, grid, backend_name=backend_name, draws=draws, **sample)


def _table_of_runs(table: dict[str, Any], runs: Sequence[Variant]) -> dict[str, Any]:
    """A table's record with each variant run under its row (a swept row's variants too: `ircot@reader=cot,k=2`
    under `ircot@reader=cot`'s), and a method given beside the table as a row mhindex added."""
    from mhindex.methods import method_title

    rows = table.get("rows") or {}
    added = {"added": True, "paper": None}
    return {**table, "rows": {v.name: rows.get(v.tuned_as) or {"row": method_title(v.tuned_as), **added} for v in runs}}


def evaluate(plan: EvalPlan, open_session: Callable[[], OpenedSession], home: Path | None = None) -> Evaluation:
    """Run the plan's methods on a seeded sample of the corpus's questions, resuming from the predictions
    already in the folder, and write `metrics.json` and `chart.png` there (the papers' table). `open_session`
    opens the index and the models (methods.session.Session), once the sample and the folder are settled."""
    corpus, lm_spec = plan.corpus, plan.lm
    # Tuning questions come first in the seeded order and the reported ones after them: disjoint by id.
    tuning: list[dict] = []
    split = plan.split
    if plan.tune_limit is not None:
        tuning, split = sample_of_split(corpus, plan.tune_limit, plan.seed, split)
    questions, split = sample_of_split(corpus, plan.limit, plan.seed, split, skip=len(tuning))
    if plan.question_ids is not None:  # a rerun: the recorded sample, whatever the seed would draw now
        recorded = {q["id"]: q for q in read_questions_file(corpus.questions)}
        missing = [i for i in plan.question_ids if i not in recorded]
        if missing:
            raise UsageError(f"corpus '{corpus.name}' has no question {missing[0]} (and {len(missing) - 1} more)")
        questions = [recorded[i] for i in plan.question_ids]
        if tuned_on := [q["id"] for q in tuning if q["id"] in set(plan.question_ids)]:
            raise UsageError(f"{len(tuned_on)} of the questions asked are among the --tune-on ones (first: "
                             f"{tuned_on[0]}): tune on others (another --seed)")  # fmt: skip
    if not questions:
        raise UsageError(
            f"corpus '{corpus.name}' has no questions with answers or relevance judgements to evaluate"
            + (f" beyond the {len(tuning)} tuned on" if tuning else "")
        )
    ranked = scores_retrieval(questions)
    if plan.tune_limit is not None and plan.tune_metric in (("f1", "em") if ranked else ("ndcg_10", "map", "mrr")):
        scored = "retrieval: give recall, ndcg_10, map or mrr" if ranked else "answers: give recall, f1 or em"
        raise UsageError(f"--tune-metric {plan.tune_metric}: corpus '{corpus.name}' is scored on {scored}")
    if plan.out is not None:
        _check_out(plan.out, home)
    from mhindex.methods import method_class

    if not any(method_class(m).needs_lm for m in plan.methods):  # retrieval alone: no model loaded, none named
        lm_spec = "no-lm"
    folder = plan.out or default_folder(
        corpus, lm_spec, plan.backend_name or plan.backend, plan.seed, plan.limit, split, len(tuning) or None
    )
    session = open_session()
    try:
        try:
            check_index(plan, session)
            solvers = {v.name: session.method(v.method, plan.settings[v.name]) for v in plan.runs}
            for name, solver in solvers.items():
                trained_overlap(name, solver.trained_on(), [*tuning, *questions])
            configuration = _claim(plan, session, solvers, folder, home)
            answering = _Answering(plan, session, solvers, folder, home)
            answering.say_estimate(tuning, questions)
            tuned, scores, reported = answering.tune(tuning, split)
            predictions = {name: answering.answer(name, questions, "") for name in reported}
        except KeyboardInterrupt:
            raise Interrupted(f"the answers so far are kept in {folder}; the same command resumes from them") from None
        try:
            metrics = score_methods(predictions, questions, plan.budget, session.judge())
        except KeyboardInterrupt:
            raise Interrupted(
                f"the answers are kept in {folder}; the same command judges them again (the judge's calls are cached)"
            ) from None
    finally:
        session.close()
    titles = session.titles()
    report = {
        **configuration,
        "dataset": session.dataset,
        "questions": len(questions),
        "limit": plan.limit,
        "seed": plan.seed,
        "split": split,
        "budget": plan.budget,
        **({"table": plan.table} if plan.table else {}),
        **({"tuned": tuned} if tuned else {}),
        # Every variant on the tuning sample: the sweep's recall-budget curve, as only the chosen ones go on.
        **({"tuning_methods": scores} if tuned else {}),
        "methods": metrics,
        "question_ids": [q["id"] for q in questions],  # the sample scored (mhindex report lists these)
        **_compared(plan, predictions, questions, metrics),
        **earlier_evaluations(folder / "metrics.json", set(metrics)),
    }
    _write_report(folder, report, plan, len(questions), titles)
    return Evaluation(folder, report)


def _compared(plan: EvalPlan, predictions: dict[str, list[dict]], questions: list[dict], metrics: dict) -> dict:
    """metrics.json's `paired` differences of every two rows, and with `--seeds` their `spread` over the draws (the
    paper's own measures first: `papers.Measure`'s keys)."""
    paired = paired_differences(predictions, {q["id"]: q for q in questions}, plan.budget)
    if not plan.draws:
        return {"paired": paired}
    measures = [str(m["key"]) for m in (plan.table or {}).get("measures") or [] if isinstance(m, dict) and m.get("key")]
    return {"paired": paired, "spread": seed_spread(plan.draws, metrics, paired, measures)}


def check_index(plan: EvalPlan, session: OpenedSession) -> None:
    """A rerun's index must be the one its record searched: said before any question is asked, not after."""
    if plan.index is None:
        return
    now = session.index.settings if session.index else None
    if now != plan.index:
        raise UsageError(
            f"the {plan.backend} index of '{plan.corpus.name}' is not the one the record searched (then "
            f"{plan.index}, now {now}): rebuild it with those settings (mhindex index ... --force)"
        )


def _check_out(out: Path, home: Path | None) -> None:
    """Refuse an `--out` inside a corpus's folder but not under its `eval/`: a rebuild of the corpus replaces
    everything there but its indexes and evaluations, and would take the answers with it."""
    from mhindex.home import RESERVED, built_corpora, resolve_home

    target, data_root = out.expanduser().resolve(), resolve_home(home).resolve()
    # The data root itself and its own folders (the call cache, models, downloads, locks) are mhindex's, not a run's.
    for own in (data_root, *(data_root / name for name in (*RESERVED, ".locks"))):
        if target == own or (own != data_root and own in target.parents):
            raise UsageError(
                f"--out {out} is {'the data root' if own == data_root else 'inside ' + str(own)}, which mhindex "
                f"keeps for itself; give a folder of its own (under a corpus's eval/, or outside {data_root})"
            )
    for corpus in built_corpora(resolve_home(home)):
        root = corpus.root.resolve()
        if (target == root or root in target.parents) and (root / "eval") not in target.parents:
            raise UsageError(
                f"--out {out} is inside corpus '{corpus.name}''s folder, which `mhindex corpus --force` replaces; "
                f"give a folder under {root / 'eval'} or outside the corpus"
            )


def _claim(plan: EvalPlan, session: Any, solvers: dict[str, Any], folder: Path, home: Path | None) -> dict:
    """Record what makes the predictions in run.json, or check it against what the folder holds."""
    from mhindex import __version__
    from mhindex.locks import evaluating

    configuration = {
        "corpus": plan.corpus.name,
        "corpus_sha256": plan.corpus.manifest().get("corpus_sha256"),
        "lm": redact(plan.lm) if session.lm else None,  # never a key written in the URL; none loaded, none named
        "lm_context": session.lm.context_length if session.lm else None,  # none loaded: no method calls one
        "lm_threads": session.lm.threads if session.lm else None,
        "backend": plan.backend,
        "index": session.index.settings if session.index else None,
        "settings": {
            name: {**s.recorded(session.dataset), **solvers[name].recorded_models()}
            for name, s in plan.settings.items()
        },
        "tool_version": __version__,
        **({"judge": plan.judge} if plan.judge else {}),
        "fingerprint": {
            "corpus": plan.corpus.fingerprint(),
            "retrieval": session.index.fingerprint if session.index else None,
            "answering": session.answering() if session.lm else None,
        },
    }
    with evaluating(folder, None, "recording an evaluation's settings"):
        return claim_folder(folder, configuration)


class _Answering:
    """Each variant's answers to a sample, resumed from its predictions file under the folder's lock, with the
    run's estimate said before the first answer and again as each row finishes (eval/estimate.py)."""

    def __init__(self, plan: EvalPlan, session: Any, solvers: dict[str, Any], folder: Path, home: Path | None):
        self.plan, self.solvers, self.folder = plan, solvers, folder
        self.session, self.home = session, home
        self.estimate: Any = None

    def say_estimate(self, tuning: list[dict], questions: list[dict]) -> None:
        """Before the first answer: each row's questions still to answer, its bound on calls, the pace here."""
        from mhindex import ui
        from mhindex.eval.estimate import Estimate, Row
        from mhindex.home import resolve_home

        lm = self.session.lm
        if lm is None:  # no model: retrieval alone is quick
            return
        asked = [*((v.name, " (tuning)", tuning) for v in self.plan.grid if tuning),
                 *((name, "", questions) for name in self.solvers)]  # fmt: skip
        rows = []
        for name, what, sample in asked:
            done = _answered_ids(self.folder / f"{name}.jsonl")
            todo = sum(1 for q in sample if q["id"] not in done)
            rows.append(Row(name + what, todo, self.solvers[name].most_calls(self.solvers[name].settings)))
        model = f"{lm.name} at {lm.threads} threads" if lm.threads else lm.name
        self.estimate = Estimate(rows, resolve_home(self.home), model, self.plan.workers)
        ui.reporter().info(self.estimate.text("estimate"))

    def answer(self, name: str, asked: list[dict], what: str) -> list[dict]:
        from mhindex import ui
        from mhindex.locks import evaluating
        from mhindex.methods import Query
        from mhindex.methods.run import run_questions

        solver, log = self.solvers[name], ui.reporter()

        def run(todo: list[dict], emit: Callable[[dict], None]) -> None:
            with log.progress(f"{name} on {self.plan.corpus.name}{what}", total=len(todo)) as bar:

                def record(result: dict) -> None:
                    emit(result)
                    bar.advance()
                    if self.estimate is not None and (first := self.estimate.answered(name + what, result)):
                        log.info(first)

                items = ((i, Query.from_record(q, str(i))) for i, q in enumerate(todo, 1))
                stats = run_questions(solver, items, record, workers=self.plan.workers)
            if stats.interrupted:
                raise KeyboardInterrupt

        with evaluating(self.folder, name, f"answering {name}"):  # another eval may share the folder
            found = evaluate_method(name, asked, self.folder, run)
        log.info(f"{name}: {len(found)} predictions in {self.folder / (name + '.jsonl')}")
        if self.estimate is not None:
            log.info(self.estimate.finished(name + what))
        return found

    def tune(self, tuning: list[dict], split: str) -> tuple[dict[str, dict], dict[str, dict], list[str]]:
        """What each tuned method chose on the tuning sample, every variant's scores there, and the variants
        to report. Only a method with a choice to make answers the tuning sample; one beside the sweep
        (SearChain next to a tuned OneR and IRCoT) is reported on the same questions without that cost."""
        plan = self.plan
        if not tuning:
            return {}, {}, [v.name for v in plan.runs]
        on_tuning = {v.name: self.answer(v.name, tuning, " (tuning)") for v in plan.grid}
        scores = score_methods(on_tuning, tuning, plan.budget)
        tuned = choose_settings(plan.grid, scores, plan.tune_metric, tuning, split, plan.seed)
        chosen = {t["chosen"] for t in tuned.values()}
        reported = [v.name for v in plan.runs if v.name in chosen or v not in plan.grid]
        if self.estimate is not None:  # the variants not chosen answer nothing more
            self.estimate.drop([name for name in self.solvers if name not in reported])
        return tuned, scores, reported


def _answered_ids(path: Path) -> set[str]:
    """The ids a predictions file answers, for the estimate alone: nothing read through a link (the answering refuses
    it in one line) and a damaged line passed over (the answering sets it aside, under the folder's lock)."""
    if path.is_symlink() or not path.is_file():
        return set()
    try:
        with path.open("rb") as handle:
            return {str(r.get("id")) for _, r, problem in parse_jsonl(handle)
                    if not problem and isinstance(r, dict) and "error" not in r}  # fmt: skip
    except OSError:
        return set()


#: what an earlier evaluation in the same folder keeps of its metrics.json: what `rerun` needs to make it again
EARLIER_KEYS = ("question_ids", "seed", "split", "budget", "limit", "table")


def earlier_evaluations(path: Path, methods: set[str]) -> dict:
    """The evaluations of other methods written into the same folder before this one (`eval --method nor`, then
    `eval --method oner --out` the same folder): what their metrics.json said of their questions and sample, as
    `earlier`, which `rerun` makes again too; the new metrics.json would otherwise forget them. A method this
    evaluation scores again is its own now."""
    try:
        old = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(old, dict) or not isinstance(old.get("methods"), dict):
        return {}
    last = {"methods": list(old["methods"]), **{key: old[key] for key in EARLIER_KEYS if key in old}}
    kept = []
    for entry in [*(old.get("earlier") or []), last]:
        others = [name for name in entry.get("methods") or [] if name not in methods]
        if others:
            kept.append({**entry, "methods": others})
    return {"earlier": kept} if kept else {}


def _write_report(folder: Path, report: dict, plan: EvalPlan, questions: int, titles: tuple[str, str]) -> None:
    with atomic_file(folder / "metrics.json") as handle:
        handle.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    dataset = shown_dataset(report["dataset"], plan.corpus.name)
    bar_chart({dataset: report["methods"]}, folder / "chart.png", run_title(dataset, questions, *titles))


def score_files(
    predictions: Sequence[Path],
    questions: str,
    budget: int,
    home: Path,
    judge: str | None = None,
    model: Any = None,
    table: str | None = None,
) -> Scored:
    """`mhindex score`: prediction files (`ask --json` records, TREC runs, `search -` results) scored side by side
    against a questions file (or a corpus name, meaning its questions.jsonl), on every question any of them
    answers: a file that lacks one scores it 0, as `eval` scores a failed answer. Each is named by the method its
    records name (the file's name where that says more, as eval's `oner@k=5.jsonl`). `table`: the files are rows of
    that paper's table, each named as the row's run (`direct-r.jsonl`), and the paper's figures stand beside them."""
    from mhindex.eval.judge import judge_predictions
    from mhindex.home import open_corpus
    from mhindex.methods.session import load_judge

    for path in predictions:
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
    questions_file = Path(questions).expanduser()
    if not questions_file.is_file():
        if "/" in questions or questions.endswith(".jsonl"):
            raise UsageError(f"{questions}: no such file")
        questions_file = open_corpus(home, questions).questions
    gold = read_questions(questions_file)
    read: dict[str, list[dict]] = {}
    for path in predictions:
        ranked = run_predictions(path)  # a TREC run or search results, scored on their ranking
        records = read_predictions(path) if ranked is None else ranked
        if not records:
            raise UsageError(f"{path}: holds no predictions")
        missing = [r["id"] for r in records if "id" in r and r["id"] not in gold]
        if missing and ranked is not None:  # a run of every query (BEIR's queries.jsonl holds unjudged ones too)
            from mhindex.ui import reporter

            reporter().warning(f"{path}: {len(missing)} of its {len(records)} queries have no judgements in "
                               f"{questions_file} (first: {missing[0]}): skipped, as trec_eval skips them")  # fmt: skip
            records = [r for r in records if r.get("id") in gold]
            missing = [] if records else missing
        if missing:
            raise UsageError(
                f"{path}: {len(missing)} predictions have no question in {questions_file} (first: {missing[0]})"
            )
        read[_shown_name(path, records, read)] = records
    asked = {i: gold[i] for i in dict.fromkeys(r["id"] for records in read.values() for r in records if "id" in r)}
    judge_lm = load_judge(judge, model, home)
    try:
        verdicts = (
            {name: judge_predictions(judge_lm, records, asked) for name, records in read.items()} if judge_lm else {}
        )
    finally:
        if judge_lm is not None:
            judge_lm.close()
    methods = {name: aggregate(records, asked, budget, verdicts.get(name)) for name, records in read.items()}
    paired = paired_differences(read, asked, budget) if len(read) > 1 else []
    return Scored(methods, paired, questions_file, _table_of_files(table, list(read), asked) if table else None)


def _table_of_files(table: str, names: list[str], questions: Mapping[str, dict]) -> dict[str, Any]:
    """A paper's table for `score`: the files named as its rows' runs are those rows, the others rows added; a
    row whose file is not among them is not run, and says so."""
    from mhindex.eval.tables import plan_table

    datasets = {q.get("dataset") for q in questions.values()}
    planned = plan_table(table, datasets.pop() if len(datasets) == 1 else None)
    record = planned.record()
    absent = [{"row": r.label, "why": f"no {r.variant}.jsonl among the files scored", "paper": record["rows"][r.variant]
               ["paper"]} for r in planned.rows if r.variant not in names]  # fmt: skip
    return {**record, "rows": {n: v for n, v in record["rows"].items() if n in names}, "not_run": absent +
            record["not_run"]}  # fmt: skip


def _shown_name(path: Path, records: list[dict], taken: Mapping[str, Any]) -> str:
    recorded = {r["method"] for r in records if isinstance(r.get("method"), str) and r["method"]}
    method = recorded.pop() if len(recorded) == 1 else None
    name = path.stem if method is None or path.stem == method or path.stem.startswith(f"{method}@") else method
    return next(n for n in (name, path.stem, str(path)) if n not in taken)


def read_questions(path: Path) -> dict[str, dict]:
    """A questions.jsonl by id; a line that is not a question record is a one-line error."""
    return {record["id"]: record for record in read_questions_file(path)}
