"""What IRCoT's released code sends to the retriever (StonyBrookNLP/ircot, commaqa/inference/ircot.py
at 3c1820f: `remove_wh_words`, `is_reasoning_sentence`, and the participant's query source
"question_or_last_generated_sentence"), for OneR and IRCoT alike:

- every query loses the words who, what, when, where, why, which, how, does and is (compared
  lower-cased, words split on single spaces as the release splits them);
- a reasoning step retrieves with the last generated sentence that is not reasoning ("Thus ...",
  "So ...", "Therefore ...", "Hence ...", "That is, ...", or arithmetic such as "3 + 4 = 7"), or with
  the question when every sentence so far is reasoning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WH_WORDS = frozenset({"who", "what", "when", "where", "why", "which", "how", "does", "is"})
_REASONING_STARTS = ("thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence")
_ARITHMETIC = re.compile(r"(.*)(\d[\d,]*\.?\d+|\d+) ([+-]) (\d[\d,]*\.?\d+|\d+) = (\d[\d,]*\.?\d+|\d+)(.*)")


def remove_wh_words(text: str) -> str:
    return " ".join(word for word in text.split(" ") if word.strip().lower() not in _WH_WORDS)


def is_reasoning_sentence(sentence: str) -> bool:
    return sentence.lower().startswith(_REASONING_STARTS) or bool(_ARITHMETIC.match(sentence))


def retrieval_query(question: str, sentences: Sequence[str], clean: bool = True) -> str:
    """The query for the next retrieval: with `clean`, as IRCoT's release builds it; without, the
    last sentence as it was generated (or the question before the first)."""
    if not clean:
        return sentences[-1] if sentences else question
    factual = [s for s in sentences if not is_reasoning_sentence(s)]
    last = factual[-1].strip() if factual else ""
    return remove_wh_words(last or question)
