"""IRCoT's prompts: the released demonstrations, the paragraph and question format, packing
demonstrations into the model's context, and reading the answer out of a generation.

The demonstrations are IRCoT's own files (package data, Apache-2.0; see
`mhindex/prompts/ircot/SOURCE.md`): per dataset, `gold_with_{M}_distractors_context_*` holds
each annotated training question with its gold paragraphs and M distractors, and
`no_context_*` the same questions without paragraphs. `codex` files suit completion models;
`flan_t5` files prefix each question with an instruction, as the paper does for Flan-T5.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from mhindex.errors import UsageError


@cache
def prompt_sets(method: str, prefix: str = "", suffix: str = "") -> tuple[str, ...]:
    """The datasets a method's shipped prompts cover, read off its folder under mhindex/prompts: the
    folders in it (IRCoT's, one per dataset), or the files `PREFIX<dataset>SUFFIX` (one file per dataset)."""
    folder = resources.files("mhindex").joinpath("prompts", method)
    names = []
    for entry in folder.iterdir():
        if not prefix and not suffix and entry.is_dir():
            names.append(entry.name)
        elif (prefix or suffix) and entry.name.startswith(prefix) and entry.name.endswith(suffix):
            names.append(entry.name[len(prefix) : len(entry.name) - len(suffix)])
    return tuple(sorted(names))


def prompt_set_for(dataset: str | None, sets: tuple[str, ...], default: str) -> str:
    """The set a corpus of `dataset` takes (its declared demonstration set, where the prompts have it), else
    the method's default."""
    from mhindex.corpora import demonstration_set

    wanted = demonstration_set(dataset)
    return wanted if wanted in sets else default


DEMO_DATASETS = prompt_sets("ircot")
SEPARATOR = "\n\n\n"  # between demonstrations, as in the released files
COT_INSTRUCTION = "Answer the following question by reasoning step-by-step."
DIRECT_INSTRUCTION = "Answer the following question."


@cache
def demonstrations(dataset: str, kind: str, style: str) -> tuple[str, ...]:
    """The demonstrations of one released file, METADATA lines removed, in file order.

    kind: "gold_with_1_distractors_context_cot_qa", "no_context_direct_qa", ...; style: codex|flan_t5.
    """
    if dataset not in DEMO_DATASETS:
        raise UsageError(
            f"no IRCoT demonstrations for '{dataset}'; use --demos-from with one of {', '.join(DEMO_DATASETS)}"
        )
    name = f"{kind}_{style}.txt"
    try:
        text = resources.files("mhindex").joinpath("prompts", "ircot", dataset, name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no demonstration file {dataset}/{name}") from None
    blocks = re.split(r"^# METADATA: .*$\n", text, flags=re.M)
    return tuple(b.strip() for b in blocks if b.strip())


def paragraph_block(title: str, text: str, max_words: int | None = None) -> str:
    words = text.split()
    if max_words and len(words) > max_words:
        text = " ".join(words[:max_words])
    return f"Wikipedia Title: {title}\n{text}"


def question_block(question: str, style: str, cot: bool, answer_so_far: str = "") -> str:
    if style == "flan_t5":
        question = f"{COT_INSTRUCTION if cot else DIRECT_INSTRUCTION}\n{question}"
    answer = f"A: {answer_so_far}".rstrip() if answer_so_far else "A:"
    return f"Q: {question}\n{answer}"


@dataclass
class PromptPacker:
    """Fits demonstrations into the context: as many as fit in `budget` tokens, in file order.

    Chosen once per method (not per call), so that every prompt of a run starts with the same
    demonstrations and a local model reuses their evaluation from one call to the next.
    """

    count_tokens: Callable[[str], int]
    context_length: int

    def choose(self, demos: Sequence[str], budget: int, limit: int | None = None) -> list[str]:
        chosen: list[str] = []
        used = 0
        for demo in demos[: limit if limit is not None else len(demos)]:
            cost = self.count_tokens(demo + SEPARATOR)
            if used + cost > budget:
                break
            chosen.append(demo)
            used += cost
        return chosen

    def render(self, demos: Sequence[str], instance: str, max_tokens: int) -> str:
        """Demonstrations then the test instance; demonstrations are dropped from the end if needed."""
        kept = list(demos)
        while True:
            prompt = SEPARATOR.join([*kept, instance])
            if not kept or self.count_tokens(prompt) + max_tokens <= self.context_length:
                return prompt
            kept.pop()


_ANSWER = re.compile(r"answer is:?\s*(.*)", re.I | re.S)


def extract_answer(generation: str) -> str:
    """The sentence after the first "answer is:" if present, else the whole first line; trailing period dropped.

    Small models often repeat "So the answer is: X." until the token limit: only the first one counts.
    """
    text = generation.strip()
    if match := _ANSWER.search(text):
        text = first_sentence(match.group(1).strip())
    text = text.split("\n")[0].strip()
    if text.endswith(".") and not re.search(r"\b[A-Z]\.$", text):
        text = text[:-1].rstrip()
    return text.strip().strip('"').strip()


_ABBREVIATION = re.compile(r"(\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Prof|Gen|Col|Lt|Mt|No|v|vs|etc|Inc|Ltd|Co|U\.S))\.$")


def concludes(generation: str) -> bool:
    """Whether a chain-of-thought generation reached its "answer is:" (else it rambled or was cut off)."""
    return bool(_ANSWER.search(generation))


_UNIT = re.compile(r"[^\n]*?(?:[.!?:](?=\s)|\n|$)")


def cut_repetition(text: str) -> str:
    """The text up to the first sentence (or line, or "...:" clause) of three words or more that it
    already said: small models loop ("The answer is: The answer is: ..."), and the loop says nothing new.
    Shorter ones may repeat (SearChain's "[Unsolved Query]:" tags, "Yes. No. Yes.")."""
    seen: set[str] = set()
    for unit in _UNIT.finditer(text):
        said = " ".join(unit.group().lower().split())
        if said in seen:
            return text[: unit.start()].rstrip()
        if len(said.split()) >= 3:
            seen.add(said)
        if unit.end() >= len(text):
            break
    return text


def first_sentence_answer(answer: str) -> str:
    """An answer's first sentence, its closing period dropped: a small reader sometimes answers with a
    sentence or two ("Picturegoer was founded first. It ...") where a span is asked for."""
    return extract_answer(first_sentence(answer)) if answer else answer


def without_repeated_items(answer: str) -> str:
    """A comma-separated answer up to its first repeated item: small models loop through lists
    ("Austin, Austin, Austin, ..."), short items that `cut_repetition`'s three-word rule lets through."""
    items = answer.split(", ")
    seen: set[str] = set()
    for i, item in enumerate(items):
        said = " ".join(item.lower().split())
        if said in seen:
            return ", ".join(items[:i])
        seen.add(said)
    return answer


def short_span(answer: str) -> str:
    """The reader's answer as a short span (`--short-answer`): a looping list cut, then its first sentence."""
    return first_sentence_answer(without_repeated_items(answer))


def first_sentence(text: str) -> str:
    """The first sentence of a generation (IRCoT keeps one per step); abbreviations do not end one."""
    text = text.strip()
    for match in re.finditer(r"[.!?](?=\s+[\"'(]?[A-Z0-9])", text):
        candidate = text[: match.end()]
        if not _ABBREVIATION.search(candidate):
            return candidate.strip()
    return text


def sentence_complete(text: str) -> bool:
    """Whether the first sentence of a generation has ended, the next one begun: IRCoT keeps only
    that sentence, so its steps stop generating here with the same result (`first_sentence` of
    any longer text is this text's)."""
    stripped = text.strip()
    return bool(stripped) and first_sentence(stripped) != stripped


def mentions_answer(sentence: str) -> bool:
    return "answer is" in sentence.lower()
