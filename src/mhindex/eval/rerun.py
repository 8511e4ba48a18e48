"""An evaluation re-run from its own folder, as Pyserini's reproductions re-run a table: the corpus (checked by
its hash), the backend and its index settings, the model with its threads and context, every method's
settings (the demonstrations it used included) and the question ids come from the folder's run.json and
metrics.json. The call cache is off, so every answer is made again, into a new folder; the predictions are
then compared with the recorded ones, every field but the timings. A greedy local model on the same
threads gives the same answers: any difference is a change of the code, the model or the index, and the
comparison names the questions it moved."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson

from mhindex.errors import UsageError
from mhindex.eval.run import EvalPlan, Evaluation, OpenedSession, check_index, evaluate, read_predictions
from mhindex.eval.spread import draws_of
from mhindex.eval.sweep import Variant, base_method

#: what differs between two runs of the same answers without anything having changed: the timings, and why
#: a demonstration set was used (the rerun names the recorded set, where the first run may have defaulted to it)
TIMINGS = frozenset({"seconds", "lm", "prompt_seconds", "why"})


@dataclass
class Rerun:
    original: Path
    evaluation: Evaluation  # the new run (its folder, its metrics)
    #: each variant's questions whose records differ from the recorded ones, timings aside
    differences: dict[str, list[str]]
    compared: dict[str, int]  # each variant's questions compared

    def record(self) -> dict[str, Any]:
        """What `mhindex rerun --json` prints."""
        return {"folder": str(self.evaluation.folder), "compared": self.compared, "differences": self.differences}

    @property
    def moved(self) -> bool:
        """Whether any answer differs from the recorded one."""
        return any(self.differences.values())


def read_record(path: Path) -> dict[str, Any]:
    try:
        found = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise UsageError(f"{path} is missing: is {path.parent} a folder `mhindex eval` wrote?") from None
    except orjson.JSONDecodeError as error:
        raise UsageError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(found, dict):
        raise UsageError(f"{path}: not a JSON object")
    return found


def reported_questions(folder: Path) -> list[str]:
    """The ids of the questions an evaluation reported (its folder or metrics.json), in order: `--questions-of`.
    A trained model's folder (or its trained.json, `train efficientrag`'s): the questions held out of training,
    the ones to evaluate it on where the corpus has no train split."""
    trained = folder if folder.name == "trained.json" else folder / "trained.json"
    if trained.is_file() and not (folder / "metrics.json").is_file():
        held = read_record(trained).get("held_out_question_ids")
        if not isinstance(held, list) or not all(isinstance(i, str) for i in held):
            raise UsageError(f"{trained} lists no held_out_question_ids: train the models again with this mhindex")
        if not held:
            raise UsageError(f"{trained}: no question was held out of training (train with --held-out 0.3)")
        return held
    metrics = read_record(folder if folder.is_file() else folder / "metrics.json")
    ids = metrics.get("question_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise UsageError(f"{folder}: its metrics.json lists no question_ids to ask again")
    return ids


def plans_of(folder: Path, home: Path, out: Path) -> tuple[list[EvalPlan], dict[str, Any]]:
    """The evaluations `folder` records (those an earlier `eval` wrote there too, oldest first), each to be made
    again into `out`, and its run.json (whose backend and model the session opens); one line for what cannot be
    the same."""
    from mhindex.home import open_corpus

    run, metrics = read_record(folder / "run.json"), read_record(folder / "metrics.json")
    corpus = open_corpus(home, str(run.get("corpus")))
    now, then = corpus.manifest().get("corpus_sha256"), run.get("corpus_sha256")
    if now != then:
        raise UsageError(
            f"corpus '{corpus.name}' is not the one {folder} ran on (corpus_sha256 {str(then)[:12]}..., now "
            f"{str(now)[:12]}...): rebuild it from the same inputs and seed (`mhindex info {corpus.name}` shows them)"
        )
    earlier = [entry for entry in metrics.get("earlier") or [] if isinstance(entry, dict)]
    recorded = [*earlier, metrics]
    plans = [_plan(corpus, run, evaluation, out, folder) for evaluation in recorded]
    return plans, run


def _plan(corpus: Any, run: dict[str, Any], metrics: dict[str, Any], out: Path, folder: Path) -> EvalPlan:
    """One evaluation of the folder (`metrics`: its metrics.json, or what an earlier one kept of it) as a plan."""
    from mhindex.methods import method_class, settings_recorded

    settings, variants = {}, []
    reported = set(metrics.get("methods") or ())  # a tuned run's table: the variants chosen, not the swept others
    recorded_settings = run.get("settings") or {}
    if not isinstance(recorded_settings, dict):
        raise UsageError(f"{folder / 'run.json'}: settings is not a JSON object of each method's settings")
    for name, recorded in recorded_settings.items():
        method = base_method(name)
        # every one checked as the command line's would be (a record names what is read and where it is sent),
        # those the table left out too: a method this mhindex does not know is said, never passed over
        checked = settings_recorded(method, recorded, str(folder / "run.json"), corpus.root.parent)
        if reported and name not in reported:
            continue
        settings[name] = checked
        variants.append(Variant(name, method, {}))
    if not variants:
        raise UsageError(f"{folder / 'run.json'} records no method")
    searching = any(method_class(variant.method).needs_retriever for variant in variants)
    return EvalPlan(
        corpus,
        list(dict.fromkeys(v.method for v in variants)),
        str(run.get("backend")),
        str(run.get("lm")),
        settings,
        variants,
        [],
        limit=metrics["limit"] if isinstance(metrics.get("limit"), int) else None,  # as recorded; the ids decide
        seed=int(metrics.get("seed", 13370)),
        split=str(metrics.get("split", "auto")),
        out=out,
        budget=int(metrics.get("budget", 15)),
        judge=run.get("judge"),
        question_ids=list(metrics.get("question_ids") or []),
        table=metrics.get("table") if isinstance(metrics.get("table"), dict) else None,
        draws={row: names for row, names in draws_of(metrics.get("spread")).items() if set(names) <= set(settings)},
        # the index is checked where the evaluation searches one (not for NoR's alone)
        index=run.get("index") if isinstance(run.get("index"), dict) and searching else None,
    )


class _Shared:
    """The one session all the evaluations of a rerun are made with (the index opened and the model loaded once):
    `evaluate` closes what it is handed, so this closes only when the rerun is done."""

    def __init__(self, session: OpenedSession) -> None:
        self.session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def close(self) -> None:
        pass


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


#: what a rerun's folder records of the folder it makes again, so that a stopped rerun is resumed by the same command
RERUN_OF = ".rerun-of"


def _rerun_of(out: Path, folder: Path) -> bool:
    """Whether `out` is a rerun of `folder` (its mark names it), which the same command resumes."""
    mark = out / RERUN_OF
    return mark.is_file() and mark.read_text(encoding="utf-8").strip() == str(folder.resolve())


def _unfinished(folder: Path) -> Path | None:
    """The latest rerun of `folder` beside it that a Ctrl-C stopped (its mark there, its table not written yet)."""
    stopped = [
        p
        for p in folder.parent.glob(f"{folder.name}.rerun-*")
        if _rerun_of(p, folder) and not (p / "metrics.json").is_file()
    ]
    return max(stopped, default=None)


def rerun(
    folder: Path, home: Path, open_session: Callable[[EvalPlan, dict[str, Any]], OpenedSession], out: Path | None = None
) -> Rerun:
    """`mhindex rerun FOLDER`: the evaluation made again into `out` (default: beside it, `<name>.rerun-<time>`)
    and compared with the recorded one; `open_session` opens the session the plan and its run.json record
    (methods.session.session_of_record)."""
    folder = folder.expanduser()
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder")
    out = (
        out
        or _unfinished(folder)
        or folder.with_name(f"{folder.name}.rerun-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}")
    )
    if out.exists() and any(out.iterdir()) and not _rerun_of(out, folder):
        raise UsageError(f"{out} is not empty: give --out a new folder")
    plans, run = plans_of(folder, home, out)
    every = list(dict.fromkeys(method for plan in plans for method in plan.methods))
    session = open_session(dataclasses.replace(plans[-1], methods=every), run)
    out.mkdir(parents=True, exist_ok=True)
    (out / RERUN_OF).write_text(str(folder.resolve()) + "\n", encoding="utf-8")  # a Ctrl-C: the same command resumes
    differences, compared = {}, {}
    try:
        for plan in plans:  # a wrong index is refused before any evaluation is made again
            check_index(plan, session)
        shared = cast(OpenedSession, _Shared(session))
        for plan in plans:  # the last is the folder's metrics.json: its table is the new folder's
            made = evaluate(plan, lambda: shared, home)
            for variant in plan.runs:
                then = {r["id"]: _without_timings(r) for r in read_predictions(folder / f"{variant.name}.jsonl")}
                now = {r["id"]: _without_timings(r) for r in read_predictions(out / f"{variant.name}.jsonl")}
                ids = plan.question_ids or list(now)
                differences[variant.name] = [i for i in ids if then.get(i) != now.get(i)]
                compared[variant.name] = len(ids)
    finally:
        session.close()
    return Rerun(folder, made, differences, compared)
