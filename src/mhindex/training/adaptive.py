"""Training Adaptive-RAG's router (`mhindex train adaptive --from EVAL_FOLDER`) from an evaluation's own answers.

Labels as the release makes them (starsuzi/Adaptive-RAG @0c88670, `classifier/preprocess/preprocess_utils.py`
`label_complexity`): a question NoR answered right is A, else one OneR answered right is B, else one IRCoT answered
right is C (the simplest method that answers wins); the release's files of rightly answered questions are made
outside the repository, so "right" here is the dataset's official EM, best over the gold answers. A question no
method answered takes the dataset's bias, as the release adds it (`preprocess_binary_train.py`: multi-hop
datasets' questions C, single-hop B), read here from the question's own gold paragraphs: two or more, C; one, B;
none, left out. The folder must hold all three methods' predictions (`mhindex eval CORPUS -m nor,oner,ircot`); a
question one of them has not answered (an evaluation stopped midway) is left out.

The classifier is a softmax layer over the packaged MiniLM's question vectors, fitted by full-batch gradient
descent (deterministic, seconds on CPU) on four fifths of the questions (by their id's hash); the fifth held out
is where its accuracy is measured, and its ids are recorded (`held_out_question_ids`), so that `eval --questions-of
ROUTER_FOLDER` asks the router questions it did not learn from. The vectors are kept in a work folder beside the
router until it is written, with the questions they are of, so a stopped training resumes without encoding again,
and a work folder of other questions (another evaluation's, under the same name) is encoded anew, said so; the
router replaces the folder of that name only when whole.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mhindex.encoders import PACKAGED_ENCODER, make_encoder
from mhindex.errors import UsageError
from mhindex.eval.metrics import best, exact_match
from mhindex.eval.run import read_predictions, read_questions_file
from mhindex.files import atomic_directory, inside, remove
from mhindex.home import corpus_dir
from mhindex.methods.adaptive import ROUTER_FILE, ROUTES, TRAINED_FILE, routers_root, softmax
from mhindex.methods.ircot import IRCoT
from mhindex.methods.nor import NoRetrieval
from mhindex.methods.oner import OneRetrieval

#: each route's method, in the order the release tries them (the simplest first)
ROUTED = (("A", NoRetrieval.name), ("B", OneRetrieval.name), ("C", IRCoT.name))
STEPS, RATE, L2 = 500, 1.0, 1e-3


@dataclass
class RouterTrained:
    folder: Path
    labels: dict[str, int]  # by route
    by_bias: int  # labels from the dataset's bias (no method answered)
    held_out_accuracy: float | None
    questions: int

    def record(self) -> dict[str, Any]:
        return {"router": str(self.folder), "labels": self.labels, "by_bias": self.by_bias,
                "held_out_accuracy": self.held_out_accuracy, "questions": self.questions}  # fmt: skip


def labelled(home: Path, folder: Path) -> tuple[str, list[dict[str, Any]]]:
    """The evaluation's corpus, and its questions each with its route (`label`) and whether the dataset's bias
    gave it (`bias`)."""
    from mhindex.eval.rerun import read_record

    run = read_record(folder / "run.json") if (folder / "run.json").is_file() else None  # damaged: one line
    if not isinstance(run, dict) or not isinstance(run.get("corpus"), str):
        raise UsageError(f"{folder}: not an evaluation's folder (no run.json naming its corpus)")
    missing = [name for _, name in ROUTED if not (folder / f"{name}.jsonl").is_file()]
    if missing:
        raise UsageError(f"{folder}: no predictions of {', '.join(missing)}: run mhindex eval {run['corpus']} -m "
                         f"{','.join(name for _, name in ROUTED)} --out {folder}")  # fmt: skip
    answers = {name: {r["id"]: r.get("answer") or "" for r in read_predictions(folder / f"{name}.jsonl")}
               for _, name in ROUTED}  # fmt: skip
    every = read_questions_file(corpus_dir(home, run["corpus"]).questions)
    found = []
    common = set.intersection(*(set(by_id) for by_id in answers.values()))  # an interrupted eval's are left out
    for question in (q for q in every if q["id"] in common):
        golds = question.get("answers") or []
        right = [route for route, name in ROUTED if best(exact_match, answers[name][question["id"]], golds)]
        evidence = len(question.get("gold_ids") or [])
        label = right[0] if right else ("C" if evidence >= 2 else "B" if evidence == 1 else None)
        if label is not None:
            found.append({"id": question["id"], "question": question["question"], "label": label, "bias": not right})
    if not found:
        raise UsageError(f"{folder}: no question to learn from (none answered, none with gold paragraphs)")
    return run["corpus"], found


def fit(vectors: Any, labels: list[int]) -> tuple[Any, Any]:
    """Softmax regression by full-batch gradient descent with a little L2: deterministic, no sampling."""
    import numpy as np

    count, dim = vectors.shape
    weights, bias = np.zeros((dim, len(ROUTES)), dtype=np.float64), np.zeros(len(ROUTES), dtype=np.float64)
    target = np.eye(len(ROUTES))[labels]
    for _ in range(STEPS):
        error = (softmax(vectors @ weights + bias) - target) / count
        weights -= RATE * (vectors.T @ error + L2 * weights)
        bias -= RATE * error.sum(axis=0)
    return weights, bias


def _held_out(question_id: str) -> bool:
    return int(hashlib.sha256(question_id.encode()).hexdigest(), 16) % 5 == 0


def train(home: Path, folder: Path, name: str | None = None, restart: bool = False, threads: int = 1) -> RouterTrained:
    """The router for the evaluation in `folder`, into <home>/models/adaptive/NAME (NAME: its corpus's)."""
    import numpy as np

    corpus, found = labelled(home, folder)
    target = inside(home, routers_root(home) / (name or corpus))
    vectors = _vectors(home, target.with_name(f".{target.name}.partial"), found, restart, threads)
    labels = [ROUTES.index(q["label"]) for q in found]
    held = [_held_out(q["id"]) for q in found]
    if all(held):  # too few questions to hold a fifth out: the router learns from them all, and says so
        held = [False] * len(found)
    kept = [i for i, h in enumerate(held) if not h]
    weights, bias = fit(vectors[kept], [labels[i] for i in kept])
    tested = [i for i, h in enumerate(held) if h]
    accuracy = None
    if tested:
        guessed = (vectors[tested] @ weights + bias).argmax(axis=1)
        accuracy = float(np.mean([guess == labels[i] for guess, i in zip(guessed, tested, strict=True)]))
    counts = Counter(q["label"] for q in found)
    result = RouterTrained(target, {route: counts.get(route, 0) for route in ROUTES},
                           sum(q["bias"] for q in found), accuracy, len(found))  # fmt: skip
    with atomic_directory(target, home) as staging:
        np.savez(staging / ROUTER_FILE, weights=weights, bias=bias)
        about = {**result.record(), "from": str(folder), "corpus": corpus, "encoder": PACKAGED_ENCODER,
                 "question_ids": [found[i]["id"] for i in kept],
                 "held_out_question_ids": [found[i]["id"] for i in tested]}  # fmt: skip
        (staging / TRAINED_FILE).write_text(json.dumps(about, indent=1) + "\n")
    remove(target.with_name(f".{target.name}.partial"))
    return result


def _vectors(home: Path, work: Path, found: list[dict[str, Any]], restart: bool, threads: int) -> Any:
    """The questions' vectors: those a stopped training kept in `work` where they are of these very questions (their
    ids and texts, by digest), else encoded now (and kept until the router is written)."""
    import numpy as np

    from mhindex.ui import reporter

    digest = hashlib.sha256(json.dumps([[q["id"], q["question"]] for q in found]).encode()).hexdigest()
    vectors_file, of = work / "vectors.npy", work / "questions.sha256"
    if not restart and vectors_file.is_file():
        if of.is_file() and of.read_text().strip() == digest:
            return np.load(vectors_file)
        reporter().warning(f"{work} holds the vectors of other questions (another evaluation's): encoding these")
    encoder = make_encoder(PACKAGED_ENCODER, "onnx-int8", 128, threads, home / "models")
    work.mkdir(parents=True, exist_ok=True)
    np.save(vectors_file, np.asarray(encoder.encode_queries([q["question"] for q in found]), dtype=np.float64))
    of.write_text(digest + "\n")
    return np.load(vectors_file)
