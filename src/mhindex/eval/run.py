"""`mhindex eval`: run methods on a reproducible sample of a corpus's questions and score them.

Predictions are appended to `<out>/<method>.jsonl` as each question finishes (the `ask --json`
records), so an interrupted evaluation resumes where it stopped: questions already answered
are not asked again, and a torn last line is dropped. Metrics go to `<out>/metrics.json`.
`<out>/run.json` records what made the predictions, so a resume with another LM, backend or
setting is refused instead of silently mixing two configurations in one table.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Callable, Sequence

import orjson

from mhindex.errors import BadInput, UsageError
from mhindex.eval.metrics import aggregate
from mhindex.files import atomic_file
from mhindex.home import CorpusDir


def sample_questions(corpus: CorpusDir, limit: int | None, seed: int) -> list[dict]:
    """Questions with answers, in file order; with `limit`, a seeded sample of that many.

    Samples are nested: the first `limit` of one seeded shuffle, so a larger sample contains every
    smaller one and growing an evaluation reuses the predictions already made.
    """
    questions = [orjson.loads(line) for line in corpus.questions.read_bytes().splitlines() if line.strip()]
    questions = [q for q in questions if q.get("answers")]
    if limit is not None and limit < len(questions):
        order = list(range(len(questions)))
        random.Random(seed).shuffle(order)
        questions = [questions[i] for i in sorted(order[:limit])]
    return questions


def read_predictions(path: Path, repair: bool = False) -> list[dict]:
    """Records of a predictions file; with `repair`, a torn last line (an interrupted write) is cut off."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    records, good_end = [], 0
    for line in data.splitlines(keepends=True):
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            if not repair:
                raise BadInput(f"{path} line {len(records) + 1}: not valid JSON") from None
            break
        good_end += len(line)
    if repair and good_end < len(data):
        with open(path, "r+b") as handle:
            handle.truncate(good_end)
    return records


class PredictionLog:
    """Appends one record a line and makes it durable before the next question starts."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "ab")

    def __call__(self, record: dict) -> None:
        self._handle.write(orjson.dumps(record) + b"\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


def claim_folder(folder: Path, run: dict) -> None:
    """Record `run` (corpus, lm, backend, settings) in `<folder>/run.json`, or check that it matches.

    The question sample is not part of it: a larger `--limit` or another seed reuses the answers
    already made, which is what nested samples are for.
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
                raise UsageError(f"{source}: {found if isinstance(found, str) else 'not a JSON object'}; remove it, or pass --out for a new folder")
            recorded = {key: found[key] for key in run if key in found}
            break
    before, now = _flatten(recorded), _flatten(run)
    differing = [key for key in now if key in before and before[key] != now[key]]
    if differing:
        was = ", ".join(f"{key}={_shown(before[key])}" for key in differing)
        asked = ", ".join(f"{key}={_shown(now[key])}" for key in differing)
        raise UsageError(f"{folder} holds predictions made with {was}; this run has {asked}: pass --out for a new folder, or remove it to start over")
    if not path.exists():
        with atomic_file(path) as handle:
            handle.write(orjson.dumps(run, option=orjson.OPT_INDENT_2) + b"\n")


def _shown(value) -> str:
    return "default" if value is None else str(value)


def _flatten(run: dict) -> dict:
    flat = {key: value for key, value in run.items() if not isinstance(value, dict)}
    for key, value in run.items():
        if isinstance(value, dict):
            flat.update(value)
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


def score_methods(predictions: dict[str, list[dict]], questions: Sequence[dict], budget: int) -> dict[str, dict]:
    by_id = {q["id"]: q for q in questions}
    return {name: aggregate(records, by_id, budget) for name, records in predictions.items()}
