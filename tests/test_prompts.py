"""Answer extraction and sentence splitting on generations seen from the packaged models."""

from __future__ import annotations

import pytest

from mhindex.methods.prompts import (
    cut_repetition,
    extract_answer,
    first_sentence,
    short_span,
)


@pytest.mark.parametrize(
    ("generation", "answer"),
    [
        ("Raiatea is in the Leeward Islands. So the answer is: Raiatea.", "Raiatea"),
        # Qwen 0.5B repeats its answer sentence until the token limit; the first one is the answer.
        (
            "Force India was renamed in 2007. So the answer is: in 2007. Thus, Colin Kolles was. So the answer is: in",
            "in 2007",
        ),
        (
            "So the answer is: Edward Albee. Edward Albee lived a longer life, Edward Albee. So the answer is",
            "Edward Albee",
        ),
        ("So the answer is: J. M. Barrie. J. M. Barrie lived longer.", "J. M. Barrie"),
        ("So the answer is: U.S. Navy. The Navy is", "U.S. Navy"),
        ("The answer is yes", "yes"),
        ('answer is: "Sun Moon Lake".\nQ: next', "Sun Moon Lake"),
        ("Paris\nQ: another question", "Paris"),  # direct reader: the first line
        ("", ""),
    ],
)
def test_extract_answer(generation: str, answer: str) -> None:
    assert extract_answer(generation) == answer


def test_first_sentence_keeps_abbreviations() -> None:
    assert first_sentence("He was born in St. Louis in 1900. Later he moved.") == "He was born in St. Louis in 1900."
    assert first_sentence("No full stop here") == "No full stop here"
    # Seen from Qwen on HotpotQA: a case name must not end the sentence at "v.".
    assert first_sentence("Craig v. Boren came first. It was decided in 1976.") == "Craig v. Boren came first."


def test_concludes_tells_an_answer_from_a_ramble() -> None:
    from mhindex.methods.prompts import concludes

    assert concludes("Raiatea is in the Leeward Islands. So the answer is: Raiatea.")
    assert not concludes("John Lynch-Staunton held a position in the Senate of Canada, where he was")


def test_the_packer_drops_demonstrations_from_the_end_to_fit() -> None:
    from mhindex.methods.prompts import SEPARATOR, PromptPacker

    words = len  # a token per character keeps the arithmetic visible
    packer = PromptPacker(words, context_length=100)
    demos = ["a" * 30, "b" * 30, "c" * 30]
    assert packer.choose(demos, budget=70) == demos[:2]  # 33 + 33 fit in 70, a third does not
    assert packer.choose(demos, budget=1000, limit=1) == demos[:1]
    prompt = packer.render(demos, "Q: x", max_tokens=20)
    assert prompt == SEPARATOR.join([demos[0], demos[1], "Q: x"])  # 67 + 20 <= 100; with the third it would not fit
    assert (
        packer.render(demos, "Q: " + "y" * 200, max_tokens=20) == "Q: " + "y" * 200
    )  # never drops the question itself


@pytest.mark.parametrize(
    ("generation", "kept"),
    [
        ("The answer is: " * 70 + "Paris.", "The answer is:"),  # SearChain's loop, as the 0.5B model wrote it
        (
            "Ogro came out in 1979. Kalavar King came out in 1980. Ogro came out in 1979. Ogro came out in 1979.",
            "Ogro came out in 1979. Kalavar King came out in 1980.",
        ),
        ("So the answer is: 12.\nSo the answer is: 12.\n", "So the answer is: 12."),
        (
            "[Query 1]: Who is she?\n[Answer 1]: Ann.\n[Query 2]: Who is she?",
            "[Query 1]: Who is she?\n[Answer 1]: Ann.\n[Query 2]:",
        ),
        ("[Unsolved Query]: Who?\n[Unsolved Query]: Where?", "[Unsolved Query]: Who?\n[Unsolved Query]: Where?"),
        ("Paris", "Paris"),
        ("A. B. A. B.", "A. B. A. B."),  # one-word sentences may repeat: "Yes. No. Yes."
        ("", ""),
    ],
)
def test_cut_repetition(generation: str, kept: str) -> None:
    assert cut_repetition(generation) == kept


@pytest.mark.parametrize(
    ("answer", "short"),
    [
        # The 1.5B model's Direct reader, on 2WikiMQA: a sentence where a span is asked for.
        ("Picturegoer was founded first. It was published in the United Kingdom.", "Picturegoer was founded first"),
        ("Austin, Austin, Austin, Austin", "Austin"),  # a list that loops: up to its first repeated item
        ("New York, Chicago, Utah, Idaho, Utah, Idaho, Utah", "New York, Chicago, Utah, Idaho"),
        ("Kenny G, Kenny Dorham, kenny  g, Kenny G", "Kenny G, Kenny Dorham"),
        # Spans that must stay whole: initials, abbreviations, a list without repeats, a comma in a name.
        ("J. R. R. Tolkien", "J. R. R. Tolkien"),
        ("Dr. Smith", "Dr. Smith"),
        ("Germany, Austria, Switzerland", "Germany, Austria, Switzerland"),
        ("Washington, D.C.", "Washington, D.C."),
        ("3.5 million", "3.5 million"),
        ("", ""),
    ],
)
def test_short_answer(answer: str, short: str) -> None:
    assert short_span(answer) == short
