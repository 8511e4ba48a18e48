"""Small paper tables pinned to their exact answers and scores, as Pyserini pins its regressions: a change
that moves a number fails and says which table, row, question and metric it moved.

A table is an `eval` folder (greedy packaged model, one thread, call cache off), reduced to each row's answer
to each question and its scores; the timings are left out, everything else (calls, tokens) is pinned. After a
change that is meant to move answers, re-pin and commit the files with the change that moved them:
    MHINDEX_REPIN=1 .venv/bin/python -m pytest tests -k pinned
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mhindex.eval.run import read_predictions

PINNED = Path(__file__).parent / "tables"


def _scores(metrics: dict) -> dict:
    # Seconds follow the machine's load, and intervals are bootstrapped from the same scores.
    return {
        key: round(value, 6)
        for key, value in sorted(metrics.items())
        if isinstance(value, (int, float)) and "seconds" not in key and not key.endswith("_ci95")
    }


def table_of(folder: Path) -> dict:
    """Each row's answers (by question id) and scores, as an `eval` folder holds them."""
    metrics = json.loads((folder / "metrics.json").read_text())
    rows = {}
    for row, scores in metrics["methods"].items():
        answers = {r["id"]: r.get("answer", r.get("error")) for r in read_predictions(folder / f"{row}.jsonl")}
        rows[row] = {"answers": {i: answers.get(i) for i in metrics["question_ids"]}, "scores": _scores(scores)}
    return {"lm": metrics["lm"], "questions": metrics["question_ids"], "rows": rows}


def moved(pinned: dict, now: dict) -> list[str]:
    """What differs, one line each: a row added or gone, an answer, a score."""
    lines = (
        [f"questions {pinned['questions']} -> {now['questions']}"] if pinned["questions"] != now["questions"] else []
    )
    for row in sorted(pinned["rows"].keys() | now["rows"].keys()):
        if row not in now["rows"] or row not in pinned["rows"]:
            lines.append(f"row {row}: {'gone' if row in pinned['rows'] else 'new'}")
            continue
        was, is_ = pinned["rows"][row], now["rows"][row]
        for qid in sorted(was["answers"].keys() | is_["answers"].keys()):
            if was["answers"].get(qid) != is_["answers"].get(qid):
                lines.append(
                    f"row {row}, question {qid}: answer {was['answers'].get(qid)!r} -> {is_['answers'].get(qid)!r}"
                )
        for key in sorted(was["scores"].keys() | is_["scores"].keys()):
            if was["scores"].get(key) != is_["scores"].get(key):
                lines.append(f"row {row}: {key} {was['scores'].get(key)} -> {is_['scores'].get(key)}")
    return lines


def check_pinned(name: str, folder: Path) -> None:
    """The table in `folder` is the one pinned as `tests/tables/NAME.json`; MHINDEX_REPIN=1 pins it instead."""
    now, path = table_of(folder), PINNED / f"{name}.json"
    if os.environ.get("MHINDEX_REPIN") == "1":
        PINNED.mkdir(exist_ok=True)
        path.write_text(json.dumps(now, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        return
    assert path.is_file(), f"no pinned table {path}: pin it with MHINDEX_REPIN=1 (see tests/pinned.py)"
    differences = moved(json.loads(path.read_text()), now)
    assert not differences, f"the pinned {name} table moved (tests/pinned.py says how to re-pin):\n" + "\n".join(
        differences
    )
