"""Which questions a run uses, by the split of the release file each came from (the corpus keeps it).

The papers report on dev (IRCoT, SearChain and EfficientRAG sample their test questions from the
releases' dev sets, whose test sets have no public answers) and train on train; `auto` does the
same where the corpus has those splits, and uses every question where it has none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from mhindex.errors import UsageError

SPLIT_HELP = (
    "Questions of this split: train, dev, test (from each question's release file), all, or auto: the papers' "
    "choice (dev to evaluate, train to train; all where the corpus has no splits)."
)


def select_split(questions: Sequence[dict], split: str, corpus: str, training: bool = False) -> tuple[list[dict], str]:
    """The questions of `split` and the split resolved (`auto` -> dev or test, or train for `training`; `all`)."""
    present = Counter(q.get("split") for q in questions)
    if split == "all":
        return list(questions), "all"
    if split == "auto":
        for preferred in ("train",) if training else ("dev", "test"):
            if present.get(preferred):
                return [q for q in questions if q.get("split") == preferred], preferred
        return list(questions), "all"
    chosen = [q for q in questions if q.get("split") == split]
    if not chosen:
        have = ", ".join(f"{name} ({count})" for name, count in present.items() if name) or "none recorded"
        raise UsageError(
            f"corpus '{corpus}' has no {split} questions (its splits: {have}); give --split all or one of those"
        )
    return chosen, split


def trained_overlap(method: str, trained_ids: set[str], questions: Sequence[dict]) -> None:
    """Refuse to evaluate a trained method on questions its models learnt from: the table would
    measure memory, not the method."""
    seen = [q["id"] for q in questions if q["id"] in trained_ids]
    if seen:
        raise UsageError(
            f"{len(seen)} of the {len(questions)} questions sampled trained {method}'s models (first: {seen[0]}; "
            "their trained.json lists them): evaluate on other questions (--split dev), or train on another split, "
            "or evaluate on those held out of training (--questions-of the models' folder)"
        )
