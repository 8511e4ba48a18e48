"""Local GGUF models through llama.cpp, in process.

The runtime is `xllamacpp`, a prebuilt wheel (installs in seconds) around llama.cpp's own
server code; `llama-cpp-python` compiles llama.cpp from source (about 14 minutes on 2 cores).
Every call sets `cache_prompt`, so a prompt that shares a prefix with the previous one (IRCoT's
demonstrations and the paragraphs found so far) evaluates only the new tokens. The model has
one slot per question answered at once (`--workers`): each slot keeps its own prefix cache
and its own `context_length`, llama.cpp decodes the running slots' tokens in one batch, and at
most `slots` calls run at a time. llama.cpp gives a call the idle slot whose cache shares the most
with its prompt, so a question's next call mostly finds its own prefix where it left it.

Calls stream their tokens through a callback and run in a helper thread: the caller's thread
stays free for Ctrl-C (which stops the generation at the next token) and the live status line
can count tokens as they come. Streamed and whole answers are the same greedy tokens.
"""

from __future__ import annotations

import contextvars
import ctypes
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mhindex import ui
from mhindex.lm.base import (
    Completion,
    LanguageModel,
    LMError,
    Messages,
    StopWhen,
    as_messages,
    cut_at_stop,
    tokens_within,
)

# One llama.cpp server per (model file, threads, context, slots) per process, shared by every model
# object that asks for it, with one semaphore of `slots` permits: loading is paid once, and the
# prompt caches are shared. A server is
# never destroyed: xllamacpp's destructor joins a server thread that does not always stop (seen
# hanging when torch had been loaded in the same process), so servers live until the process exits.
_SERVERS: dict[tuple, tuple[Any, threading.BoundedSemaphore]] = {}
_SERVERS_LOCK = threading.Lock()
# Where llama.cpp calls run, so that the calling thread waits in Python and takes Ctrl-C at once.
_CALLS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="llama.cpp")


def _shared_server(path: Path, threads: int, context_length: int, slots: int) -> tuple[Any, threading.BoundedSemaphore]:
    import xllamacpp

    key = (str(Path(path).resolve()), threads, context_length, slots)
    with _SERVERS_LOCK:
        if key not in _SERVERS:
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = context_length * slots  # llama.cpp gives each slot n_ctx / n_parallel
            params.n_parallel = slots
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads
            params.warmup = False
            params.verbosity = -1  # llama.cpp's own logs are not for our users
            try:
                server = xllamacpp.Server(params)
            except Exception as error:  # noqa: BLE001 - llama.cpp reports load failures as generic errors
                raise LMError(f"llama.cpp could not load {path}: {error}") from None
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(server))  # never freed, see above
            _SERVERS[key] = (server, threading.BoundedSemaphore(slots))
        return _SERVERS[key]


def _generated(kind: str, chunks: list[dict]) -> int:
    """Tokens generated, one a streamed chunk (llama.cpp streams token by token)."""
    return sum(
        1
        for c in chunks
        for ch in c.get("choices") or ()
        if (ch.get("delta", {}).get("content") if kind == "chat" else ch.get("text"))
    )


def default_threads() -> int:
    """Half the cores: on a busy 2-core machine two threads were 20x slower than one."""
    return max(1, (os.cpu_count() or 2) // 2)


class LlamaCppModel(LanguageModel):
    def __init__(
        self,
        path: Path,
        name: str | None = None,
        threads: int | None = None,
        context_length: int = 8192,
        reuse_prefix: bool = True,
        slots: int = 1,
    ) -> None:
        try:
            import xllamacpp  # noqa: F401
        except ImportError:
            raise LMError("local GGUF models need llama.cpp's runtime: pip install xllamacpp") from None
        if not Path(path).is_file():
            raise LMError(f"no GGUF model file at {path}")
        self.path = Path(path)
        self.name = name or f"gguf:{path}"
        threads = threads or default_threads()
        self.slots = max(1, slots)
        self._server, self._permits = _shared_server(self.path, threads, context_length, self.slots)
        self.context_length = context_length
        self.threads = threads
        self.reuse_prefix = reuse_prefix  # off only to measure what reuse saves
        stat = self.path.stat()
        self._identity = f"gguf:{self.path.name}:{stat.st_size}:{stat.st_mtime_ns}"
        self._http = None
        self._parameters: int | None = None

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def parameters(self) -> int | None:
        """llama.cpp's own count, from its /v1/models on the loopback port of the in-process server."""
        if self._parameters is None:
            try:
                meta = self._client().get("/v1/models").json()["data"][0].get("meta") or {}
                self._parameters = int(meta["n_params"])
            except Exception:  # noqa: BLE001 - unknown is an answer
                self._parameters = 0
        return self._parameters or None

    def _client(self):
        import httpx

        if self._http is None:
            self._http = httpx.Client(base_url=self._server.listening_address, timeout=30)
        return self._http

    def _stream(
        self, kind: str, body: dict, stop_when: StopWhen | None
    ) -> tuple[str, list[dict], list[tuple[str, float]]]:
        """Run one streamed call; returns the text, the chunks and any token log-probabilities.
        Stops early on Ctrl-C, and once `stop_when` holds for the text so far."""
        chunks: list[dict] = []
        pieces: list[str] = []
        logprobs: list[tuple[str, float]] = []

        def on_chunk(chunk: dict) -> bool:
            chunks.append(chunk)
            for choice in chunk.get("choices") or ():
                piece = choice.get("delta", {}).get("content") if kind == "chat" else choice.get("text")
                if piece:
                    pieces.append(piece)
                for token in (choice.get("logprobs") or {}).get("content") or ():
                    logprobs.append((token["token"], float(token["logprob"])))
            ui.note_tokens(len(pieces))
            if stop_when is not None and pieces and stop_when("".join(pieces)):
                return True
            return ui.stop_requested()  # True tells llama.cpp to stop generating

        def call() -> None:
            with self._permits:
                handle = self._server.handle_chat_completions if kind == "chat" else self._server.handle_completions
                handle({**body, "stream": True, "stream_options": {"include_usage": True}}, on_chunk)

        _CALLS.submit(contextvars.copy_context().run, call).result()
        ui.check_stop()  # a generation cut short by Ctrl-C is not an answer
        errors = [c["error"] for c in chunks if isinstance(c, dict) and c.get("error")]
        if errors or not chunks:
            message = (
                errors[0].get("message")
                if errors and isinstance(errors[0], dict)
                else (errors[0] if errors else "no output")
            )
            raise LMError(f"llama.cpp failed on {self.path.name}: {message}")
        return "".join(pieces), chunks, logprobs

    def _completion(self, kind: str, body: dict, stop: Sequence[str], stop_when: StopWhen | None = None) -> Completion:
        started = time.perf_counter()
        text, chunks, logprobs = self._stream(kind, body, stop_when)
        text = cut_at_stop(text, stop)
        usage = next((c["usage"] for c in reversed(chunks) if c.get("usage")), None)
        if usage is None:  # stopped by stop_when: llama.cpp sends no summary, so count here
            usage = {
                "prompt_tokens": self.count_tokens(self._prompt_of(kind, body)),
                "completion_tokens": len(logprobs) or _generated(kind, chunks),
            }
        timings: dict[str, Any] = next((c["timings"] for c in reversed(chunks) if c.get("timings")), {})
        finish = next(
            (
                ch.get("finish_reason")
                for c in reversed(chunks)
                for ch in c.get("choices") or ()
                if ch.get("finish_reason")
            ),
            "stop_when",
        )
        return Completion(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.perf_counter() - started,
            prompt_tokens_evaluated=timings.get("prompt_n"),
            finish_reason=finish,
            prompt_seconds=timings["prompt_ms"] / 1000 if "prompt_ms" in timings else None,
            token_logprobs=tokens_within(logprobs, text) if "logprobs" in body else None,
        )

    def _prompt_of(self, kind: str, body: dict) -> str:
        """The prompt text a call evaluated: a chat's through llama.cpp's own template endpoint."""
        if kind == "complete":
            return body["prompt"]
        response = self._client().post("/apply-template", json={"messages": body["messages"]})
        response.raise_for_status()
        return response.json()["prompt"]

    def _body(self, max_tokens: int, stop: Sequence[str], temperature: float, logprobs: bool) -> dict:
        body = {
            "max_tokens": max_tokens,
            "stop": list(stop),
            "temperature": temperature,
            "cache_prompt": self.reuse_prefix,
            "seed": 0,
        }
        if logprobs:
            body |= {"logprobs": True, "n_probs": 1}  # the chosen token's log-probability; n_probs for /completion
        return body

    def complete(
        self,
        prompt: str,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
    ) -> Completion:
        return self._completion(
            "complete", {"prompt": prompt, **self._body(max_tokens, stop, temperature, logprobs)}, stop, stop_when
        )

    def chat(
        self,
        messages: Messages,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
    ) -> Completion:
        """Through the chat template in the GGUF file; the conversation's earlier turns are a
        prefix of the next call's, so llama.cpp's prompt cache evaluates only the new turns."""
        body = {"messages": as_messages(messages), **self._body(max_tokens, stop, temperature, logprobs)}
        return self._completion("chat", body, stop, stop_when)

    def count_tokens(self, text: str) -> int:
        # llama.cpp's server code answers /tokenize on its loopback port; no tokenizer is exposed otherwise.
        response = self._client().post("/tokenize", json={"content": text, "add_special": False})
        response.raise_for_status()
        return len(response.json()["tokens"])

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
