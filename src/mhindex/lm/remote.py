"""Any OpenAI-compatible server: vLLM, Ollama, llama.cpp's server, OpenAI itself.

`/v1/completions` for `openai:MODEL@URL`, `/v1/chat/completions` for `openai-chat:MODEL@URL`.
A llama.cpp server (its /props says so) is used as mhindex uses llama.cpp in process: each call pinned to a
slot (`id_slot`) and reusing only what lm/slots.py allows of what that slot holds, checked against the reply's
`timings.cache_n`; run with batch-invariant kernels and one slot (scripts/lm_server.py), it answers as in
process, byte for byte (tests/test_determinism.py). Several slots decode in one batch: load-dependent.
The API key comes from `$MHINDEX_LM_API_KEY` (else `$OPENAI_API_KEY`). Calls retry 429 and 5xx
answers (and dropped connections) with exponential back-off that honours `Retry-After`, and at
most `concurrency` run at once. Each call, retries included, has one deadline (`--lm-timeout`):
connecting, waiting for the first byte and reading a body that trickles in all count against it,
and the caller stops waiting when it passes. Failures are one clear line that names the server,
with the key and any credentials in the URL blanked.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from mhindex import http
from mhindex.errors import UsageError, redact
from mhindex.lm.base import (
    Completion,
    LanguageModel,
    LMError,
    LMProvider,
    LoadRequest,
    Messages,
    StopWhen,
    as_messages,
    cut_at_stop,
    tokens_within,
)
from mhindex.lm.slots import SlotState, common_prefix, cut_tokens, plan

#: the most characters a token is taken to hold: a completion longer than max_tokens of these was not cut by its
#: server
CHARS_PER_TOKEN = 32


class RemoteModel(LanguageModel):
    def __init__(
        self,
        model: str,
        base_url: str,
        chat: bool = False,
        api_key: str | None = None,
        timeout: float = 300.0,
        retries: int = 4,
        backoff: float = 1.0,
        concurrency: int = 4,
        context_length: int | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.chat_only = chat
        self.name = redact(f"{'openai-chat' if chat else 'openai'}:{model}@{self.base_url}")
        key = api_key or os.environ.get("MHINDEX_LM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._secrets = [key] if key else []
        self.timeout = timeout  # the whole call, retries included
        self._client = http.client(self.base_url, timeout=timeout, retries=retries, backoff=backoff, headers=headers)
        # Calls run here while the caller waits at most until their deadline.
        self._calls = ThreadPoolExecutor(max_workers=concurrency + 2, thread_name_prefix="lm-call")
        self._tries = retries + 1
        self._slots = threading.BoundedSemaphore(concurrency)
        self._tokenize_url: str | None = None  # None: not probed yet; "": the server has none
        self._concurrency = concurrency
        self._llama: _LlamaSlots | None = None
        self._llama_probed = False
        self._parameters: int | None = None
        self.context_length = context_length or self._probe_context_length() or 4096

    # -- transport -------------------------------------------------------------------------

    def _errors(self, url: str) -> contextlib.AbstractContextManager[None]:
        return http.one_line_errors("the LM server", url, LMError, self._tries, self._secrets, hint=" (--lm-timeout)")

    def _within_deadline(self, call: Callable[[dict[str, Any]], Any], url: str) -> Any:
        """`call(extensions)` in a helper thread, waited for until the call's deadline at most."""
        extensions = http.deadline(self.timeout)
        future = self._calls.submit(call, extensions)
        try:
            return future.result(timeout=self.timeout + 1)
        except FutureTimeout:
            future.cancel()
            raise LMError(
                f"the LM server at {redact(url, self._secrets)} did not finish within {self.timeout:g} s (--lm-timeout)"
            ) from None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = self.base_url + path

        def call(extensions: dict[str, Any]) -> dict[str, Any]:
            with self._errors(url), self._slots:
                response = self._client.post(path, json=body, extensions=extensions)
                response.raise_for_status()
            try:
                found: dict[str, Any] = response.json()
                return found
            except ValueError:
                raise LMError(
                    f"the LM server at {redact(url)} answered with something that is not JSON: "
                    f"{http.brief(response.text, secrets=self._secrets)}"
                ) from None

        answered: dict[str, Any] = self._within_deadline(call, url)
        return answered

    def _probe_context_length(self) -> int | None:
        """vLLM reports max_model_len and llama.cpp n_ctx_train (and n_params) on /models; others say nothing."""
        try:
            response = self._client.get("/models", timeout=10)
            data = response.json().get("data") or []
        except Exception:  # noqa: BLE001 - a probe: any failure means "unknown"
            return None
        for entry in data:
            if entry.get("id") == self.model or len(data) == 1:
                meta = entry.get("meta") or {}
                if isinstance(meta.get("n_params"), int):
                    self._parameters = meta["n_params"]
                value = entry.get("max_model_len") or meta.get("n_ctx") or meta.get("n_ctx_train")
                if isinstance(value, int):
                    return value
        return None

    @property
    def parameters(self) -> int | None:
        return self._parameters

    def fingerprint(self) -> dict[str, Any]:
        """The server as far as it says: llama.cpp's build and slots (and how calls reuse its cache), else what its
        /version says (vLLM's); whether its answers can move with its load (another request in its batch)."""
        slots = self.llama_slots()
        if slots is not None:
            load = ("one slot: no other request shares its batch" if slots.total == 1 else
                    f"load-dependent: its {slots.total} slots decode in one batch")  # fmt: skip
            return {**super().fingerprint(), "runtime": f"llama.cpp server {http.brief(slots.build, 80)}",
                    "server_slots": slots.total, "prefix_reuse": "prompt tokens only, a slot a call (lm/slots.py)",
                    "load": load}  # fmt: skip
        try:
            version = self._client.get(self._root + "/version", timeout=10).json().get("version")
        except Exception:  # noqa: BLE001 - a probe: unknown is an answer
            version = None
        named = f"vLLM {http.brief(str(version), 40)}" if isinstance(version, str) else "an OpenAI-compatible server"
        return {**super().fingerprint(), "runtime": named,
                "load": "load-dependent unless the server runs batch-invariant (vLLM: VLLM_BATCH_INVARIANT=1), "
                        "which it does not say"}  # fmt: skip

    # -- interface ----------------------------------------------------------------------------

    def _stream(self, path: str, body: dict[str, Any], stop_when: StopWhen) -> dict[str, Any]:
        """A streamed call (server-sent events), read until `stop_when` holds or the server ends;
        closing the stream early tells the server to stop generating. Returns a reply shaped like
        a whole one, so both are read by the same code."""
        from httpx_sse import connect_sse

        url = self.base_url + path
        pieces: list[str] = []
        content: list[dict[str, Any]] = []
        usage: Any = None
        timings: Any = {}
        finish = "stop_when"
        most, written = int(body.get("max_tokens") or 0), 0  # a stream past max_tokens is read no further

        def call(extensions: dict[str, Any]) -> None:
            nonlocal usage, timings, finish, written
            with self._errors(url), self._slots:
                with connect_sse(
                    self._client,
                    "POST",
                    path,
                    json={**body, "stream": True, "stream_options": {"include_usage": True}},
                    extensions=extensions,
                ) as events:
                    if events.response.is_error:
                        events.response.read()  # the error answer's text, for the one-line message
                        events.response.raise_for_status()
                    for event in events.iter_sse():
                        if event.data.strip() == "[DONE]":
                            break
                        try:
                            chunk = event.json()
                        except ValueError:
                            raise LMError(
                                f"the LM server at {redact(url)} streamed something that is not JSON: "
                                f"{http.brief(event.data, secrets=self._secrets)}"
                            ) from None
                        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices") or [], list):
                            raise LMError(
                                f"the LM server at {redact(url)} streamed a chunk of another shape than "
                                f"OpenAI's: {http.brief(event.data, secrets=self._secrets)}"
                            )
                        usage, timings = chunk.get("usage") or usage, chunk.get("timings") or timings
                        for choice in chunk.get("choices") or ():
                            piece = _piece(choice, path)
                            if piece is None:
                                raise LMError(
                                    f"the LM server at {redact(url)} streamed a choice of another shape "
                                    f"than OpenAI's: {http.brief(str(choice), secrets=self._secrets)}"
                                )
                            pieces.append(piece)
                            written += len(piece)
                            content.extend({"token": t, "logprob": lp} for t, lp in _logprobs(choice, redact(url)))
                            finish = choice.get("finish_reason") or finish
                        if stop_when("".join(pieces)):
                            break
                        if most and (written > most * CHARS_PER_TOKEN or len(pieces) > 2 * most):
                            finish = "capped"  # as a whole reply past max_tokens is cut (_completion)
                            break

        self._within_deadline(call, url)
        text = "".join(pieces)
        if usage is None:  # stopped early: no summary came
            prompt = body.get("prompt") or "\n".join(m["content"] for m in body.get("messages", []))
            usage = {
                "prompt_tokens": self.count_tokens(prompt),
                "completion_tokens": len(content) or sum(1 for p in pieces if p),
            }
        choice = {"message": {"content": text}} if path == "/chat/completions" else {"text": text}
        return {
            "choices": [{**choice, "finish_reason": finish, "logprobs": {"content": content}}],
            "usage": usage,
            "timings": timings,
        }

    def _reply(self, path: str, body: dict[str, Any], stop_when: StopWhen | None) -> dict[str, Any]:
        return self._post(path, body) if stop_when is None else self._stream(path, body, stop_when)

    def _completion(
        self, path: str, body: dict[str, Any], stop: Sequence[str], stop_when: StopWhen | None = None
    ) -> Completion:
        started = time.perf_counter()
        slots = self.llama_slots()
        reply = self._reply(path, body, stop_when) if slots is None else self._planned(slots, path, body, stop_when)
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] if path == "/chat/completions" else choice["text"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (KeyError, IndexError, TypeError) as error:
            raise LMError(
                f"the LM server at {redact(self.base_url + path)} answered without a completion "
                f"({error}): {http.brief(str(reply), secrets=self._secrets)}"
            ) from None
        where = redact(self.base_url + path)
        usage = reply.get("usage") or {}
        if not isinstance(usage, dict):
            raise LMError(
                f"the LM server at {where} answered with a usage that is not an object: {http.brief(str(usage))}"
            )
        timings = reply.get("timings")
        timings = timings if isinstance(timings, dict) else {}  # llama.cpp's extra; anything else is not timings
        text = cut_at_stop(text, stop)
        # A server that ignores max_tokens could hand back any amount (700 MB, once): what is kept is cut at a bound
        # no tokenizer's max_tokens tokens pass, and the call says so (`finish_reason` "capped", in the trace).
        limit = int(body.get("max_tokens") or 0) * CHARS_PER_TOKEN
        capped = bool(limit) and len(text) > limit
        text = text[:limit] if capped else text
        return Completion(
            text=text,
            prompt_tokens=_count(usage, "prompt_tokens", where),
            completion_tokens=_count(usage, "completion_tokens", where),
            seconds=time.perf_counter() - started,
            prompt_tokens_evaluated=timings.get("prompt_n") if isinstance(timings.get("prompt_n"), int) else None,
            finish_reason="capped"
            if capped
            else (choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None),  # fmt: skip
            prompt_seconds=_seconds(timings, "prompt_ms"),
            token_logprobs=tokens_within(_logprobs(choice, where), text) if "logprobs" in body else None,
            # a llama.cpp server's own split of its time (outside it: the network, the queue, the server's HTTP)
            generation_seconds=_seconds(timings, "predicted_ms"),
            prompt_tokens_reused=timings.get("cache_n") if isinstance(timings.get("cache_n"), int) else None,
        )

    def _body(
        self, max_tokens: int, stop: Sequence[str], temperature: float, seed: int | None = None
    ) -> dict[str, Any]:
        body = {"model": self.model, "max_tokens": max_tokens, "temperature": temperature}
        if seed is not None:
            body["seed"] = seed  # OpenAI's, vLLM's and llama.cpp's servers take it
        if stop:
            body["stop"] = list(stop)[:4]  # OpenAI's limit; the rest are cut here
        return body

    def complete(
        self,
        prompt: str,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        if self.chat_only:
            return self.chat(prompt, max_tokens, stop, temperature, logprobs, stop_when, seed=seed)
        body = {"prompt": prompt, **self._body(max_tokens, stop, temperature, seed)} | (
            {"logprobs": 1} if logprobs else {}
        )
        return self._completion("/completions", body, stop, stop_when)

    def chat(
        self,
        messages: Messages,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        body = {"messages": as_messages(messages), **self._body(max_tokens, stop, temperature, seed)} | (
            {"logprobs": True} if logprobs else {}
        )
        return self._completion("/chat/completions", body, stop, stop_when)

    # -- a llama.cpp server: slots pinned, prefixes reused as lm/slots.py plans ----------------------------------

    def llama_slots(self) -> _LlamaSlots | None:
        """The server's slots where it is llama.cpp's (its /props: `total_slots`, `build_info`), else None."""
        if not self._llama_probed:
            self._llama_probed = True
            try:
                props = self._client.get(self._root + "/props", timeout=10).json()
                total = props.get("total_slots") if isinstance(props, dict) else None
                if isinstance(total, int) and not isinstance(total, bool) and 0 < total <= 4096:
                    self._llama = _LlamaSlots(min(total, self._concurrency), total, str(props.get("build_info", "")))
            except Exception:  # noqa: BLE001 - a probe: any failure means "not llama.cpp"
                pass
        return self._llama

    def _tokens(self, path: str, body: dict[str, Any]) -> list[int]:
        """The prompt's tokens as the server reads it (a chat's through its own template)."""
        prompt = self._rendered(body["messages"]) if path == "/chat/completions" else str(body["prompt"])
        url = self._root + "/tokenize"
        with self._errors(url):
            response = self._client.post(url, json={"content": prompt, "add_special": True})
            response.raise_for_status()
        try:
            answer = response.json()
        except ValueError:
            answer = None
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise LMError(f"the LM server at {redact(url)} tokenized into something that is not a list of tokens")
        return tokens

    def _planned(
        self, slots: _LlamaSlots, path: str, body: dict[str, Any], stop_when: StopWhen | None
    ) -> dict[str, Any]:
        """The call in a slot of its own, after the cut lm/slots.py plans; made again, from what the plan then
        allows, where the server reused other than planned (another client used the slot)."""
        tokens = self._tokens(path, body)
        number = slots.acquire(tokens)
        if number not in slots.learnt:
            slots.learnt.add(number)
            slots.states[number] = self._held(number)
        try:
            for _ in range(2):
                start = plan(tokens, slots.states[number])
                if start.prepare != "none":
                    cut = {"model": self.model, "prompt": cut_tokens(tokens, start.at), "max_tokens": 1,
                           "temperature": 0.0, "cache_prompt": start.prepare == "cut", "id_slot": number}  # fmt: skip
                    self._post("/completions", cut)
                extra = {"cache_prompt": start.at > 0, "id_slot": number, "timings_per_token": True}
                reply = self._reply(path, {**body, **extra}, stop_when)
                slots.states[number] = SlotState(list(tokens), trailing=True)
                timings = reply.get("timings")
                if not isinstance(timings, dict) or timings.get("cache_n", start.at) == start.at:
                    return reply
                slots.states[number] = SlotState(trailing=True)
            raise LMError(f"the LM server at {redact(self._root)} reused other prompt tokens than planned, twice: "
                          f"another client is using its slot {number}")  # fmt: skip
        finally:
            slots.release(number)

    def _held(self, number: int) -> SlotState:
        """What a llama.cpp server's slot holds as this process first uses it (its GET /slots: the last prompt it
        read), so that a new process reuses what an earlier one left there. All but that prompt's last token are
        taken as read in batches of two or more (its last may have been read alone, by another client's call);
        unknown (nothing reusable) where the server does not say."""
        try:
            found = self._client.get(self._root + "/slots", timeout=10).json()
            slot = next(s for s in found if isinstance(s, dict) and s.get("id") == number)
            prompt = slot.get("prompt")
            if not isinstance(prompt, str) or not prompt:
                return SlotState(trailing=True)
            answer = self._client.post(self._root + "/tokenize", json={"content": prompt, "add_special": False}).json()
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
        except Exception:  # noqa: BLE001 - a probe: any failure means "unknown"
            return SlotState(trailing=True)
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return SlotState(trailing=True)
        return SlotState(tokens[:-1], trailing=True)

    @property
    def _root(self) -> str:
        """The server's own root, where llama.cpp and vLLM answer /tokenize and llama.cpp /apply-template."""
        return self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url

    def chat_prompt(self, messages: Messages) -> str | None:
        """The server's own rendering of its chat template, where it has one to give (llama.cpp's server answers
        /apply-template); a server that does not (vLLM) is said in one line, not guessed at."""
        if self.chat_only:
            raise LMError(f"{self.name} is a chat endpoint: a method that continues the assistant's turn needs "
                          "completions (--lm openai:MODEL@URL)")  # fmt: skip
        return self._rendered(messages)

    def _rendered(self, messages: Messages) -> str:
        root = self._root
        with self._errors(root + "/apply-template"):
            response = self._client.post(root + "/apply-template", json={"messages": as_messages(messages)})
            if response.status_code != 404:
                response.raise_for_status()
        if response.status_code == 404:
            raise LMError(
                f"the LM server at {redact(root, self._secrets)} does not render its chat template "
                "(/apply-template, as llama.cpp's server does), which this method continues"
            )
        try:
            answer = response.json()
        except ValueError:
            answer = None
        rendered = answer.get("prompt") if isinstance(answer, dict) else None
        if not isinstance(rendered, str):
            raise LMError(
                f"the LM server at {redact(root, self._secrets)} rendered its chat template as "
                f"{http.brief(response.text, secrets=self._secrets)}, not a prompt"
            )
        return rendered

    def count_tokens(self, text: str) -> int:
        """The server's /tokenize where it has one (llama.cpp, vLLM); else a cautious estimate."""
        root = self._root
        if self._tokenize_url is None:
            self._tokenize_url = ""
            try:
                response = self._client.post(
                    root + "/tokenize", json={"content": "probe", "model": self.model, "prompt": "probe"}, timeout=10
                )
                if response.status_code == 200 and isinstance(response.json().get("tokens"), list):
                    self._tokenize_url = root + "/tokenize"
            except Exception:  # noqa: BLE001 - a probe: any failure means the server has none
                pass
        if self._tokenize_url:
            with self._errors(self._tokenize_url):
                response = self._client.post(
                    self._tokenize_url,
                    json={"content": text, "model": self.model, "prompt": text, "add_special": False},
                )
                response.raise_for_status()
            return len(response.json()["tokens"])
        return len(text) // 3 + 1  # English BPE averages ~4 characters a token; err on the long side

    def close(self) -> None:
        self._calls.shutdown(wait=False, cancel_futures=True)
        self._client.close()


class _LlamaSlots:
    """The slots of a llama.cpp server this process uses (`usable` of its `total`), what each holds
    (lm/slots.py) and which are free."""

    def __init__(self, usable: int, total: int, build: str) -> None:
        self.total, self.build = total, build
        self.states = [SlotState(trailing=True) for _ in range(usable)]  # unknown: another process may have used it
        self.learnt: set[int] = set()  # the slots whose state was asked of the server (RemoteModel._held)
        self._free = list(range(usable))
        self._changed = threading.Condition()

    def acquire(self, tokens: Sequence[int]) -> int:
        with self._changed:
            while not self._free:
                self._changed.wait()
            chosen = max(self._free, key=lambda n: (common_prefix(self.states[n].canonical, tokens), -n))
            self._free.remove(chosen)
            return chosen

    def release(self, number: int) -> None:
        with self._changed:
            self._free.append(number)
            self._changed.notify()


def _piece(choice: Any, path: str) -> str | None:
    """The text a streamed choice adds ("" for none), or None for a choice of another shape."""
    if not isinstance(choice, dict):
        return None
    if path == "/chat/completions":
        delta = choice.get("delta") or {}
        piece = delta.get("content") if isinstance(delta, dict) else 0
    else:
        piece = choice.get("text")
    return piece or "" if piece is None or isinstance(piece, str) else None


def _seconds(timings: dict[str, Any], key: str) -> float | None:
    return timings[key] / 1000 if isinstance(timings.get(key), int | float) else None


def _count(usage: dict[str, Any], key: str, where: str) -> int:
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LMError(
            f"the LM server at {where} answered with usage.{key} = {http.brief(repr(value))}, not a number of tokens"
        )
    return int(value)


def _logprobs(choice: dict[str, Any], where: str = "") -> list[tuple[str, float]]:
    """Token log-probabilities in either layout: chat's (and llama.cpp's) `content` list, or the
    legacy completions' parallel `tokens`/`token_logprobs` lists (OpenAI, vLLM). A value of another kind (a string,
    1e308, NaN) is the server's mistake, said in one line (LMError), never dropped: a method that judges them (FLARE)
    would otherwise judge an empty list."""
    found = choice.get("logprobs") or {}
    if not isinstance(found, dict):
        return []
    if isinstance(found.get("content"), list):
        pairs = [(t.get("token"), t.get("logprob")) if isinstance(t, dict) else (None, t) for t in found["content"]]
    else:
        tokens, values = found.get("tokens") or [], found.get("token_logprobs") or []
        pairs = list(zip(tokens, values)) if isinstance(tokens, list) and isinstance(values, list) else []
    read: list[tuple[str, float]] = []
    for token, value in pairs:
        if (
            not isinstance(token, str)
            or isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and value <= 1e-6)
        ):
            raise LMError(f"the LM server at {where} answered a token log-probability "
                          f"{http.brief(repr((token, value)), 80)}: not a token and a finite log-probability of at "
                          "most 0")  # fmt: skip
        read.append((token, float(value)))
    return read


def _model_at(rest: str) -> tuple[str, str, str]:
    """MODEL@URL, where the URL may hold credentials of its own (http://user:key@host)."""
    for scheme in ("@http://", "@https://"):
        if scheme in rest:
            name, _, url = rest.partition(scheme)
            return name, "@", scheme[1:] + url
    return rest.rpartition("@")


def _loader(chat: bool) -> Callable[[str, LoadRequest], RemoteModel]:
    def load(rest: str, request: LoadRequest) -> RemoteModel:
        name, at, url = _model_at(rest)
        if not at or not name or not url.startswith(("http://", "https://")):
            kind = request.spec.partition(":")[0]
            raise UsageError(f"--lm {redact(request.spec)!r}: write {kind}:MODEL@http://host:port/v1")
        return RemoteModel(name, url, chat=chat, context_length=request.context_length, timeout=request.timeout)

    return load


#: an OpenAI-compatible server's /v1/completions, and its /v1/chat/completions
OPENAI = LMProvider("openai:MODEL@URL", _loader(chat=False))
OPENAI_CHAT = LMProvider("openai-chat:MODEL@URL", _loader(chat=True))
