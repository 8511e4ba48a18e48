"""Which hop a method missed. The converters keep each question's gold hops in order (`gold_hops`: MuSiQue's
decomposition, each sub-question with its supporting paragraph; HotpotQA's and 2WikiMultihopQA's supporting
pages, one hop a page in the order the release lists their facts, a comparison's pages in parallel). Held
against an answer's steps, each hop says at which step its paragraph was first retrieved, by which query, at
which rank among what that step brought, and whether it is among the paragraphs the method kept (the first
`budget`, as recall counts them). Own corpora (JSONL, DPR, BEIR) have no hops: nothing is diagnosed there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def diagnose(
    prediction: Mapping[str, Any], question: Mapping[str, Any], budget: int | None
) -> list[dict[str, Any]] | None:
    """Each gold hop of `question` in `prediction`: {"hop", "kept", "step", "query", "rank"} (step, query and rank
    None where no step retrieved it); None for a question with no hops."""
    hops = question.get("gold_hops")
    if not isinstance(hops, list) or not hops:
        return None
    kept = [str(paragraph.get("id")) for paragraph in prediction.get("retrieved") or []][:budget]
    steps = [step for step in prediction.get("steps") or [] if isinstance(step, dict)]
    if not any(step.get("retrieved_ids") for step in steps) and kept:  # one retrieval, recorded as its result
        steps = [{"query": prediction.get("question", ""), "retrieved_ids": kept}]
    found = []
    for number, hop in enumerate(hops, 1):
        ids = set(hop.get("paragraph_ids") or []) if isinstance(hop, dict) else set()
        first = next(
            (
                (step_number, step, rank)
                for step_number, step in enumerate(steps, 1)
                for rank, paragraph_id in enumerate(step.get("retrieved_ids") or [], 1)
                if paragraph_id in ids
            ),
            None,
        )
        found.append(
            {
                "hop": number,
                "kept": bool(ids) and any(paragraph_id in ids for paragraph_id in kept),
                "step": first[0] if first else None,
                "query": first[1].get("query") if first else None,
                "rank": first[2] if first else None,
            }
        )
    return found


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def hop_summary(
    predictions: Mapping[str, Mapping[str, Any]], questions: Mapping[str, Mapping[str, Any]], budget: int
) -> dict[str, Any]:
    """A method's hops over the questions that have them (a failed answer found none): each hop's recall (the
    share of questions whose hop-n paragraph it kept) and all hops', the mean step each hop was first found
    at (over the questions it was found for), and how many steps the method took where it missed a hop.
    Empty where no question has hops."""
    diagnosed = {
        qid: found
        for qid, question in questions.items()
        if (found := diagnose(predictions.get(qid) or {}, question, budget)) is not None
    }
    if not diagnosed:
        return {}
    depth = max(len(found) for found in diagnosed.values())
    recall: dict[str, float | None] = {}
    first_step: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for number in range(1, depth + 1):
        nth = [found[number - 1] for found in diagnosed.values() if len(found) >= number]
        counts[str(number)] = len(nth)
        recall[str(number)] = _mean([float(hop["kept"]) for hop in nth])
        first_step[str(number)] = _mean([float(hop["step"]) for hop in nth if hop["step"] is not None])
    recall["all"] = _mean([float(all(hop["kept"] for hop in found)) for found in diagnosed.values()])
    missed = [qid for qid, found in diagnosed.items() if not all(hop["kept"] for hop in found)]
    steps_when_missed = [float(len((predictions.get(qid) or {}).get("steps") or [])) for qid in missed]
    return {
        "questions": len(diagnosed),
        "with_hop": counts,  # how many questions have an n-th hop
        "recall": recall,
        "first_step": first_step,
        "missed": len(missed),
        "steps_when_missed": _mean(steps_when_missed),
    }
