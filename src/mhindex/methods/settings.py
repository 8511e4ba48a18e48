"""The settings every reader-based method shares: how the reader is prompted (IRCoT's
demonstrations and readers). A method's own settings extend these; each field is an option of
`ask` and `eval` (see mhindex/options.py), validated, shown in --help and recorded in run.json.

Every method's settings type has `recorded(dataset) -> dict`: what `run.json` keeps of them, with
defaults that depend on the corpus or the models resolved, so that a changed default is a changed
configuration."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from mhindex.methods.prompts import prompt_set_for, prompt_sets
from mhindex.options import option

DEMO_SETS = prompt_sets("ircot")  # IRCoT's released demonstrations, one folder per dataset
DEFAULT_DEMOS = "musique"  # for a corpus whose dataset has none (a user's own corpus)
CLEAN_QUERIES_HELP = (
    "Queries as IRCoT's release sends them: without the words who, what, when, where, why, which, how, does, is, and "
    "a reasoning step's query is the last sentence that is not reasoning ('So ...', arithmetic), else "
    "the question (--no-clean-queries: each sentence as generated)."
)


class MethodSettings(Protocol):
    """What every method's settings are: a frozen dataclass of `option(...)` fields that can say what
    run.json records of them (`recorded`), defaults that depend on the corpus resolved."""

    def recorded(self, dataset: str | None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ReaderSettings:
    reader: str = option(
        "auto",
        "Reader prompting: direct, cot, or auto (direct for Flan-T5 and models under 3B parameters, else cot).",
        choices=("auto", "direct", "cot"),
    )
    prompt_style: str = option(
        "auto",
        "Demonstration style: codex, flan_t5, or auto (flan_t5 for seq2seq hf: models).",
        choices=("auto", "codex", "flan_t5"),
    )
    distractors: int = option(2, "M: distractor paragraphs in each demonstration (1-3).", min=1, max=3)
    demos_from: str | None = option(
        None,
        "Demonstration set: hotpotqa, 2wikimultihopqa, musique or iirc "
        "\\[default: the corpus's dataset, else musique].",
        choices=DEMO_SETS,
    )
    max_demos: int | None = option(None, "At most this many demonstrations \\[default: as many as fit].", min=0)
    demo_budget: int | None = option(None, "Tokens for demonstrations \\[default: half the context].", min=1)
    max_paragraph_words: int = option(350, "Paragraphs are cut to this many words in prompts.", min=1)
    answer_tokens: int = option(100, "Most tokens for the reader's answer.", min=1)
    short_answer: bool = option(
        True,
        "Keep the reader's first sentence, and a list up to its first repeated item (F1 +1.3 IRCoT, +1.6 OneR "
        "over the stored answers: benchmarks/studies/span_study.py); --no-short-answer keeps its whole line, as "
        "IRCoT's release.",
        before=False,
    )

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        """The settings as run.json records them, with the demonstration set actually used."""
        return {**asdict(self), "demos_from": demo_set(self, dataset)}


def demo_set(settings: ReaderSettings, dataset: str | None) -> str:
    """The demonstrations to use: those asked for, else the corpus's dataset's, else MuSiQue's."""
    return settings.demos_from or prompt_set_for(dataset, DEMO_SETS, DEFAULT_DEMOS)


def demo_choice(
    settings: ReaderSettings, dataset: str | None, used: int, available: int, chosen: str | None = None
) -> dict[str, Any]:
    """Which demonstrations a prompt opens with (`chosen`: the set the prompt was made from, where the caller
    chose it), why those, and how many of the set fit its budget: what the record and the trace say (an own
    corpus takes MuSiQue's, which nothing said before)."""
    expected = demo_set(settings, dataset)
    if settings.demos_from:
        why = "--demos-from"
    elif chosen is not None and chosen != expected:
        why = "the method's own choice"
    elif prompt_set_for(dataset, DEMO_SETS, ""):
        why = "the corpus's dataset's own"
    else:
        why = f"the default: the corpus's dataset has none of its own (--demos-from {', '.join(DEMO_SETS)})"
    return {"set": chosen or expected, "why": why, "used": used, "available": available}
