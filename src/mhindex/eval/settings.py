"""What an evaluation run is asked for, declared once: `mhindex eval`'s options are these fields, and
`mhindex.evaluate` checks its keywords against them (same bounds, same messages)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mhindex.eval.splits import SPLIT_HELP
from mhindex.eval.sweep import TUNE_METRICS
from mhindex.options import option


@dataclass(frozen=True)
class EvalSettings:
    limit: int | None = option(None, "Evaluate a seeded sample of this many questions \\[default: all].", min=1)
    seed: int = option(13370, "Seed of the question sample.")
    split: str = option("auto", SPLIT_HELP)
    sweep: list[str] | None = option(
        None,
        "Run each method once per value, as METHOD@SETTING=V with its own predictions file (repeatable; several "
        "multiply): --sweep oner.k=5,10,15 --sweep ircot.k=2,4,6,8.",
        metavar="[METHOD.]SETTING=V,V,...",
    )
    seeds: int = option(
        1,
        "Run each row that samples (e.g. React->CoT-SC) this many times on seeds no two runs share, each its own "
        "predictions file, and print the spread over them beside the paired intervals.",
        min=1,
        max=20,
    )
    tune_on: int | None = option(
        None,
        "Pick each method's best --sweep setting on this many questions, then report it on --limit others "
        "(disjoint, as IRCoT's paper chose K on 100 dev questions); a method not swept answers only the others.",
        min=1,
    )
    tune_metric: str = option(
        "recall", "What --tune-on maximises: recall, f1 or em (a retrieval evaluation: ndcg_10, map, mrr).",
        choices=TUNE_METRICS,
    )  # fmt: skip
    questions_of: Path | None = option(
        None,
        "Ask exactly the questions an earlier evaluation reported (its folder or metrics.json), whatever --limit, "
        "--seed and --tune-on would draw: a new row on the same questions as a table made before. A trained "
        "model's folder (or its trained.json): the questions held out of its training.",
        metavar="EVAL_DIR",
    )
    out: Path | None = option(
        None, "Output folder \\[default: <home>/NAME/eval/<lm>-<backend>-s<seed>; a larger --limit grows it]."
    )
    budget: int = option(15, "Recall counts the first this many paragraphs retrieved (IRCoT's budget).", min=1)
    judge_lm: str | None = option(
        None,
        "Also score EfficientRAG's Accuracy: this LM (any --lm spec) judges each answer with the released prompt "
        "\\[default: none].",
        metavar="LM",
    )
