"""One HTTP layer for everything mhindex fetches: dataset downloads, remote language models and
remote retrievers. httpx with httpx-retries' transport: 429 and 5xx answers, timeouts and dropped
connections are retried with exponential back-off that honours Retry-After. A server that is not
there at all (connection refused) is not waited for. What still fails becomes one line that names
the URL, as the project's own error type, so one failing call never ends a run with a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from httpx_retries import Retry, RetryTransport

from mhindex.errors import MhindexError

RETRY_STATUS = (429, 500, 502, 503, 504)
# Retried: a server that answered and then failed. Not retried: nothing listening (ConnectError).
RETRY_EXCEPTIONS = (httpx.TimeoutException, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


def client(base_url: str = "", *, timeout: float = 60.0, retries: int = 4, backoff: float = 0.5, headers: dict | None = None) -> httpx.Client:
    """A client whose every request (POST included: completions are safe to repeat) is retried."""
    retry = Retry(
        total=retries,
        backoff_factor=backoff,
        status_forcelist=RETRY_STATUS,
        allowed_methods=["GET", "HEAD", "POST"],
        retry_on_exceptions=RETRY_EXCEPTIONS,
        max_backoff_wait=60,
    )
    return httpx.Client(base_url=base_url, timeout=timeout, headers=headers, transport=RetryTransport(retry=retry), follow_redirects=True)


@contextmanager
def one_line_errors(what: str, url: str, error: type[MhindexError] = MhindexError, tries: int | None = None) -> Iterator[None]:
    """Transport failures and error answers inside the block become `error` with one line."""
    after = f" ({tries} tries)" if tries else ""
    try:
        yield
    except httpx.ConnectError:
        raise error(f"cannot reach {what} at {url}: connection refused; is it running?") from None
    except httpx.TimeoutException as timeout:
        limit = getattr(getattr(timeout, "request", None), "extensions", {}).get("timeout", {}).get("read")
        raise error(f"{what} at {url} did not answer within {limit}s{after}" if limit else f"{what} at {url} did not answer in time{after}") from None
    except httpx.HTTPStatusError as status:
        raise error(f"{what} at {url} answered HTTP {status.response.status_code}: {brief(status.response.text)}") from None
    except httpx.TransportError as failure:
        raise error(f"the connection to {what} at {url} failed{after}: {failure or type(failure).__name__}") from None


def brief(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
