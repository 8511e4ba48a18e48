"""How the server refuses or fails a request: one line saying why, in the body each protocol's
clients read an error from, with the HTTP status that says whose fault it was."""

from __future__ import annotations

from typing import Any


class Refused(Exception):
    """A request the server will not answer: bad input (400), no key (401), unknown corpus (404),
    a body too slow (408) or too large (413), or no worker free soon enough (503, with Retry-After). The message
    is the one line a client sees."""

    def __init__(self, message: str, status: int = 400, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # seconds, for a busy server's 503: the Retry-After header


# Where each protocol's clients look for the reason. IRCoT's and Search-R1's servers are FastAPI
# apps, whose errors are {"detail": ...}; DSPy's ColBERTv2 client reads "error", then "message"
# (dspy/dsp/colbertv2.py); mhindex's own API answers {"error": ...}.
_SHAPES = {
    "mhindex": lambda message: {"error": message},
    "ircot": lambda message: {"detail": message},
    "search-r1": lambda message: {"detail": message},
    "colbert": lambda message: {"error": message, "message": message},
}


def error_body(protocol: str, message: str) -> dict[str, Any]:
    return _SHAPES.get(protocol, _SHAPES["mhindex"])(message)
