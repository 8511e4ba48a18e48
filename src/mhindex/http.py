"""One HTTP layer for everything mhindex fetches: dataset downloads, remote language models and
remote retrievers. httpx with httpx-retries' transport: 429 and 5xx answers, timeouts and dropped
connections are retried with exponential back-off that honours Retry-After. A server that is not
there at all (connection refused) is not waited for. A request may carry a deadline (the
`deadline` extension, a `time.monotonic()` value) that bounds it as a whole, retries included:
each attempt gets only the time left, and a body that trickles in is cut off when it passes
(httpx's own timeouts are per connection, read and write, so a server sending a byte every few
seconds would never hit them). What still fails becomes one line that names the URL, as the
project's own error type, with any secret it held blanked, so one failing call never ends a run
with a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import httpx
from httpx_retries import Retry, RetryTransport

from mhindex.errors import MhindexError, redact

RETRY_STATUS = (429, 500, 502, 503, 504)
# Retried: a server that answered and then failed. Not retried: nothing listening (ConnectError).
RETRY_EXCEPTIONS = (httpx.TimeoutException, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


class DeadlineExceeded(httpx.TransportError):
    """The request's deadline passed (never retried: it is the limit of all the tries)."""

    def __init__(self, seconds: float, request: httpx.Request | None = None) -> None:
        super().__init__(f"did not finish within {seconds:g} s", request=request)
        self.seconds = seconds
        # A server that failed every try until the deadline: its last answer, said, not a silent "timeout".
        self.last_status: int | None = request.extensions.get("last_status") if request is not None else None


class _DeadlineTransport(httpx.BaseTransport):
    """Gives each attempt of a request with a `deadline` only the time left before it, and cuts
    its body off when the deadline passes."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline, seconds = request.extensions.get("deadline"), request.extensions.get("deadline_seconds", 0.0)
        if deadline is None:
            return self.inner.handle_request(request)
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(seconds, request)
        limits = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {
            k: min(limits.get(k) or left, left) for k in ("connect", "read", "write", "pool")
        }
        try:
            response = self.inner.handle_request(request)
        except httpx.TimeoutException:
            if time.monotonic() >= deadline - 0.05:
                raise DeadlineExceeded(seconds, request) from None
            raise
        if response.status_code in RETRY_STATUS:
            request.extensions["last_status"] = response.status_code
        response.stream = _DeadlineStream(response.stream, deadline, seconds, request)
        return response

    def close(self) -> None:
        self.inner.close()


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, inner, deadline: float, seconds: float, request: httpx.Request) -> None:
        self.inner, self.deadline, self.seconds, self.request = inner, deadline, seconds, request

    def __iter__(self):
        for chunk in self.inner:
            if time.monotonic() > self.deadline:
                raise DeadlineExceeded(self.seconds, self.request)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _BoundedRetry(Retry):
    """Retry whose wait before the next try never passes the request's deadline: httpx-retries sleeps its
    back-off (or a server's Retry-After) whatever is left, so a server answering 500 every time ran a call
    2.4x past --lm-timeout. After a wait cut short the next try finds no time left: DeadlineExceeded."""

    deadline: float | None = None

    def copy_with(self, **changes):  # every field of Retry's, as Retry takes them
        copied = super().copy_with(**changes)
        copied.deadline = self.deadline
        return copied

    def _calculate_sleep(self, headers) -> float:
        wait = super()._calculate_sleep(headers)
        return wait if self.deadline is None else min(wait, max(0.0, self.deadline - time.monotonic()))


class _RetryTransport(RetryTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.extensions.get("deadline") is not None and "retry" not in request.extensions:
            retry = self.retry.copy_with()
            assert isinstance(retry, _BoundedRetry)  # client() makes this transport with one
            retry.deadline = request.extensions["deadline"]
            request.extensions["retry"] = retry  # this request's own: read by httpx-retries as it retries
        return super().handle_request(request)


def deadline(seconds: float) -> dict:
    """The extensions of a request that must be over, retries included, within `seconds`."""
    return {"deadline": time.monotonic() + seconds, "deadline_seconds": seconds}


def client(
    base_url: str = "", *, timeout: float = 60.0, retries: int = 4, backoff: float = 0.5, headers: dict | None = None
) -> httpx.Client:
    """A client whose every request (POST included: completions are safe to repeat) is retried."""
    retry = _BoundedRetry(
        total=retries,
        backoff_factor=backoff,
        status_forcelist=RETRY_STATUS,
        allowed_methods=["GET", "HEAD", "POST"],
        retry_on_exceptions=RETRY_EXCEPTIONS,
        max_backoff_wait=60,
    )
    transport = _RetryTransport(transport=_DeadlineTransport(httpx.HTTPTransport()), retry=retry)
    return httpx.Client(base_url=base_url, timeout=timeout, headers=headers, transport=transport, follow_redirects=True)


@contextmanager
def one_line_errors(
    what: str,
    url: str,
    error: type[MhindexError] = MhindexError,
    tries: int | None = None,
    secrets: Iterable[str] = (),
    hint: str = "",
) -> Iterator[None]:
    """Transport failures and error answers inside the block become `error` with one line, with
    `secrets` (an API key) and credentials blanked wherever they appear in it."""
    after = f" ({tries} tries)" if tries else ""
    url = redact(url, secrets)
    try:
        yield
    except httpx.ConnectError:
        raise error(f"cannot reach {what} at {url}: connection refused; is it running?") from None
    except DeadlineExceeded as late:
        failing = f": it answered HTTP {late.last_status} until then" if late.last_status else ""
        raise error(f"{what} at {url} did not finish within {late.seconds:g} s{hint}{failing}") from None
    except httpx.TimeoutException as timeout:
        limit = getattr(getattr(timeout, "request", None), "extensions", {}).get("timeout", {}).get("read")
        raise error(
            f"{what} at {url} did not answer within {limit}s{after}"
            if limit
            else f"{what} at {url} did not answer in time{after}"
        ) from None
    except httpx.HTTPStatusError as status:
        raise error(
            f"{what} at {url} answered HTTP {status.response.status_code}: "
            f"{brief(status.response.text, secrets=secrets)}"
        ) from None
    except httpx.TransportError as failure:
        raise error(
            f"the connection to {what} at {url} failed{after}: "
            f"{redact(str(failure) or type(failure).__name__, secrets)}"
        ) from None


def brief(text: str, limit: int = 160, secrets: Iterable[str] = ()) -> str:
    text = redact(" ".join(text.split()), secrets)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: What a peer's JSON reply may be, at most (`peer_json`): a served index's /info, a remote search's hits.
PEER_BYTES = 16 << 20
PEER_DEPTH = 64


def peer_json(
    http: httpx.Client, url: str, *, seconds: float = 30.0, limit: int = PEER_BYTES, depth: int = PEER_DEPTH, **send
) -> object:
    """A peer's JSON reply, read with limits a peer cannot pass: `seconds` for the whole call (a reply trickled a
    byte at a time is cut off), `limit` bytes (the body is read no further), and `depth` levels of nesting (a reply
    nested a million deep is refused before anything recurses into it). Raises httpx's errors for one_line_errors,
    and ValueError naming the limit a reply passed."""
    import orjson

    method = send.pop("method", "GET")
    with http.stream(method, url, extensions=deadline(seconds), **send) as response:
        response.raise_for_status()
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise ValueError(f"its reply passed {limit:,} bytes")
    if _nesting(body) > depth:
        raise ValueError(f"its reply is nested more than {depth} levels deep")
    try:
        return orjson.loads(bytes(body))
    except orjson.JSONDecodeError as error:
        raise ValueError(f"its reply is not JSON ({error})") from None


def _nesting(body: bytes | bytearray) -> int:
    """How deep brackets nest in a JSON text (strings skipped), without parsing it."""
    deepest = level = 0
    inside = escaped = False
    for byte in body:
        if inside:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                inside = False
        elif byte == 0x22:
            inside = True
        elif byte in (0x5B, 0x7B):
            level += 1
            deepest = max(deepest, level)
        elif byte in (0x5D, 0x7D):
            level -= 1
    return deepest
