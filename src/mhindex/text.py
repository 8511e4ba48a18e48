"""Answer text compared as the datasets' official scripts compare it (SQuAD's normalisation),
shared by the metrics and by the methods that match answers while they run (SearChain)."""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and the articles a/an/the, collapse white space."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def shell_unescape(text: str) -> str:
    r"""\n, \t and \\ as typed in a shell (`mhindex lm "Q:\nA:"`); everything else (accents, other scripts) as it is."""
    return re.sub(r"\\([nt\\])", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], text)
