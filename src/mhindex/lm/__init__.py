"""Language models behind one interface (`base.LanguageModel`), chosen with one option:

    local:qwen2.5-0.5b            packaged GGUF model (default: the best reader that installs in a minute)
    local:smollm2-135m            packaged GGUF model (fast, weak; the test suite's)
    gguf:/path/model.gguf         any GGUF file, through llama.cpp
    hf:/path/to/flan-t5-large     a transformers folder (or a cached hub name), offline
    openai:MODEL@URL              an OpenAI-compatible /v1/completions endpoint
    openai-chat:MODEL@URL         the same server's /v1/chat/completions

Each runtime is imported only when its kind is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mhindex.errors import UsageError, redact
from mhindex.lm.base import Completion, LanguageModel, LMError
from mhindex.lm.cache import CachedModel, CallCache
from mhindex.options import option

__all__ = [
    "DEFAULT_LM",
    "Completion",
    "LMError",
    "LanguageModel",
    "ModelOptions",
    "load_lm",
    "parse_lm",
    "resolve_spec",
]

DEFAULT_LM = "local:qwen2.5-0.5b"
DEFAULT_TIMEOUT = 300.0  # seconds a remote call may take in all
KINDS = ("local", "gguf", "hf", "openai", "openai-chat")


def parse_lm(spec: str) -> tuple[str, str]:
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in KINDS or not rest:
        raise UsageError(
            f"--lm {redact(spec)!r} is not one of: local:NAME, gguf:PATH, hf:PATH, openai:MODEL@URL, "
            "openai-chat:MODEL@URL"
        )
    return kind, rest


@dataclass(frozen=True)
class ModelOptions:
    """How to load the language model, for every command that runs one (lm, ask, eval)."""

    lm: str | None = option(
        None,
        "Language model: local:qwen2.5-0.5b, local:smollm2-135m, gguf:PATH, hf:PATH, openai:MODEL@URL, "
        "openai-chat:MODEL@URL \\[default: $MHINDEX_LM, else local:qwen2.5-0.5b].",
    )
    lm_threads: int | None = option(
        None, "CPU threads of a local model \\[default: the cores other processes leave free].", min=1
    )
    lm_context: int | None = option(
        None, "Context length in tokens \\[default: 8192 local, else what the server reports].", min=256
    )
    cache: bool = option(True, "Read and write the call cache of greedy LM calls (--no-cache bypasses it).")
    lm_timeout: float = option(
        DEFAULT_TIMEOUT,
        "Remote LMs: seconds one call may take in all (connecting, retries, a body that trickles in).",
        min=1,
    )

    def load(self, home: Path | None = None, spec: str | None = None, slots: int = 1) -> LanguageModel:
        return load_lm(
            self.lm or spec,
            home=home,
            threads=self.lm_threads,
            context_length=self.lm_context,
            cache=self.cache,
            slots=slots,
            timeout=self.lm_timeout,
        )


def resolve_spec(spec: str | None = None) -> str:
    """The model to use: the one named, else $MHINDEX_LM, else the packaged default."""
    return spec or os.environ.get("MHINDEX_LM") or DEFAULT_LM


def load_lm(
    spec: str | None = None,
    home: Path | None = None,
    threads: int | None = None,
    context_length: int | None = None,
    cache: bool = True,
    slots: int = 1,
    timeout: float = DEFAULT_TIMEOUT,
) -> LanguageModel:
    """The model `spec` names, wrapped in the persistent call cache unless `cache` is False.
    `slots`: how many calls a local model runs at once (one per question answered in parallel);
    servers take as many as they are sent."""
    from mhindex.home import resolve_home

    root = resolve_home(home)
    spec = resolve_spec(spec)
    kind, rest = parse_lm(spec)
    model: LanguageModel
    if kind in ("local", "gguf"):
        from mhindex.lm.llamacpp import LlamaCppModel

        if kind == "local":
            from mhindex.lm.packaged import packaged_model_path

            path = packaged_model_path(rest, root / "models")
        else:
            path = Path(rest).expanduser()
        from mhindex.lm.state import private_folder

        # Prompt openings kept evaluated on disk (lm/state.py); this process's own without the cache.
        states = root / "cache" / "llama-state"
        states = states if cache else private_folder(states)
        model = LlamaCppModel(
            path, name=spec, threads=threads, context_length=context_length or 8192, slots=slots, state_folder=states
        )
    elif kind == "hf":
        from mhindex.lm.transformers_lm import TransformersModel

        model = TransformersModel(rest, threads=threads, context_length=context_length)
    else:
        from mhindex.lm.remote import RemoteModel

        name, at, url = _model_at(rest)
        if not at or not name or not url.startswith(("http://", "https://")):
            raise UsageError(f"--lm {redact(spec)!r}: write {kind}:MODEL@http://host:port/v1")
        model = RemoteModel(name, url, chat=kind == "openai-chat", context_length=context_length, timeout=timeout)
    if cache:
        model = CachedModel(model, CallCache(root / "cache" / "lm.sqlite"))
    return model


def _model_at(rest: str) -> tuple[str, str, str]:
    """MODEL@URL, where the URL may hold credentials of its own (http://user:key@host)."""
    for scheme in ("@http://", "@https://"):
        if scheme in rest:
            name, _, url = rest.partition(scheme)
            return name, "@", scheme[1:] + url
    return rest.rpartition("@")
