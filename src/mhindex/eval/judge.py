"""EfficientRAG's Accuracy: a language model judges whether each prediction is correct, as the
released `src/evaluation/correctness.py` asks it (microsoft/EfficientRAG at 6b2489f, MIT; the prompt
is mhindex/prompts/efficientrag/judge.txt): the question, the prediction and the dataset's answer,
one chat turn after the system message "You are a helpful assistant.", and the verdict is the
"response" of the first `{...}` in the reply. A reply that is not such a verdict counts as "no",
as the release counts it after its retries (a greedy judge would give the same reply again).

Any `--lm` can judge; the calls go through the call cache, so scoring again costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any, Protocol

from mhindex import ui

SYSTEM = "You are a helpful assistant."


class Judge(Protocol):
    """The judge as scoring uses it: any mhindex.lm.LanguageModel, handed over already loaded."""

    def chat(self, messages: list[dict[str, str]], max_tokens: int, *, temperature: float = ...) -> Any: ...


@cache
def _prompt() -> str:
    return (
        resources.files("mhindex").joinpath("prompts", "efficientrag", "judge.txt").read_text(encoding="utf-8").strip()
    )


def verdict(lm: Judge, question: str, prediction: str, answer: str) -> bool:
    from mhindex.methods.efficientrag import parse_json_object

    prompt = _prompt().format(question=question, prediction=prediction, answer=answer)
    reply = lm.chat(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}], max_tokens=32, temperature=0.0
    ).text
    parsed = parse_json_object(reply)
    return parsed is not None and parsed.get("response") == "yes"


def judge_predictions(
    lm: Judge, predictions: Sequence[dict], questions: dict[str, dict], label: str = "judging"
) -> dict[str, bool]:
    """The judge's verdict for each answered question (a missing or failed prediction is not asked)."""
    verdicts: dict[str, bool] = {}
    todo = [p for p in predictions if "error" not in p and p.get("id") in questions]
    with ui.reporter().progress(label, total=len(todo)) as bar:
        for prediction in todo:
            ui.check_stop()
            question = questions[prediction["id"]]
            answers = question.get("answers") or [""]
            verdicts[prediction["id"]] = verdict(
                lm, question.get("question") or "", prediction.get("answer") or "", answers[0]
            )
            bar.advance()
    return verdicts
