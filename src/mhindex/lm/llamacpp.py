"""Local GGUF models through llama.cpp, in process.

The runtime is `xllamacpp`, a prebuilt wheel (installs in seconds) around llama.cpp's own
server code; `llama-cpp-python` compiles llama.cpp from source (about 14 minutes on 2 cores).
The model gets one slot and every call sets `cache_prompt`, so a prompt that shares a prefix
with the previous one (IRCoT's demonstrations and the paragraphs found so far) evaluates only
the new tokens. Calls are serialised: one slot, one prefix cache, no thrashing.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from mhindex.lm.base import Completion, LanguageModel, LMError, cut_at_stop


# One llama.cpp server per (model file, threads, context) per process, shared by every model object
# that asks for it, with one lock: loading is paid once, and the prompt cache is shared. A server is
# never destroyed: xllamacpp's destructor joins a server thread that does not always stop (seen
# hanging when torch had been loaded in the same process), so servers live until the process exits.
_SERVERS: dict[tuple, tuple[Any, threading.Lock]] = {}
_SERVERS_LOCK = threading.Lock()


def _shared_server(path: Path, threads: int, context_length: int) -> tuple[Any, threading.Lock]:
    import xllamacpp

    key = (str(Path(path).resolve()), threads, context_length)
    with _SERVERS_LOCK:
        if key not in _SERVERS:
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = context_length
            params.n_parallel = 1
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads
            params.warmup = False
            params.verbosity = -1  # llama.cpp's own logs are not for our users
            try:
                server = xllamacpp.Server(params)
            except Exception as error:  # noqa: BLE001 - llama.cpp reports load failures as generic errors
                raise LMError(f"llama.cpp could not load {path}: {error}") from None
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(server))  # never freed, see above
            _SERVERS[key] = (server, threading.Lock())
        return _SERVERS[key]


def default_threads() -> int:
    """Half the cores: on a busy 2-core machine two threads were 20x slower than one."""
    return max(1, (os.cpu_count() or 2) // 2)


class LlamaCppModel(LanguageModel):
    def __init__(
        self, path: Path, name: str | None = None, threads: int | None = None, context_length: int = 8192, reuse_prefix: bool = True
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
        self._server, self._lock = _shared_server(self.path, threads, context_length)
        self.context_length = context_length
        self.threads = threads
        self.reuse_prefix = reuse_prefix  # off only to measure what reuse saves
        stat = self.path.stat()
        self._identity = f"gguf:{self.path.name}:{stat.st_size}:{stat.st_mtime_ns}"
        self._http = None

    @property
    def identity(self) -> str:
        return self._identity

    def _answer(self, kind: str, body: dict) -> dict:
        with self._lock:
            handle = self._server.handle_chat_completions if kind == "chat" else self._server.handle_completions
            response = handle(body)
        if not isinstance(response, dict) or "choices" not in response:
            message = response.get("error", {}).get("message") if isinstance(response, dict) else None
            raise LMError(f"llama.cpp failed on {self.path.name}: {message or response}")
        return response

    def _completion(self, kind: str, body: dict, stop: Sequence[str]) -> Completion:
        started = time.perf_counter()
        response = self._answer(kind, body)
        choice = response["choices"][0]
        text = choice["message"]["content"] if kind == "chat" else choice["text"]
        usage = response.get("usage", {})
        timings = response.get("timings", {})
        return Completion(
            text=cut_at_stop(text or "", stop),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.perf_counter() - started,
            prompt_tokens_evaluated=timings.get("prompt_n"),
            finish_reason=choice.get("finish_reason"),
            prompt_seconds=timings["prompt_ms"] / 1000 if "prompt_ms" in timings else None,
        )

    def complete(self, prompt: str, max_tokens: int = 256, stop: Sequence[str] = (), temperature: float = 0.0) -> Completion:
        body = {"prompt": prompt, "max_tokens": max_tokens, "stop": list(stop), "temperature": temperature, "cache_prompt": self.reuse_prefix, "seed": 0}
        return self._completion("complete", body, stop)

    def chat(self, prompt: str, max_tokens: int = 256, stop: Sequence[str] = (), temperature: float = 0.0) -> Completion:
        body = {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "stop": list(stop),
            "temperature": temperature,
            "cache_prompt": self.reuse_prefix,
            "seed": 0,
        }
        return self._completion("chat", body, stop)

    def count_tokens(self, text: str) -> int:
        # llama.cpp's server code answers /tokenize on its loopback port; no tokenizer is exposed otherwise.
        import httpx

        if self._http is None:
            self._http = httpx.Client(base_url=self._server.listening_address, timeout=30)
        response = self._http.post("/tokenize", json={"content": text, "add_special": False})
        response.raise_for_status()
        return len(response.json()["tokens"])

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
