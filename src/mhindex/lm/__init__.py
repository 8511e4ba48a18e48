"""Language models behind one interface (`base.LanguageModel`), chosen with one option:

    local:qwen2.5-0.5b            packaged GGUF model (default: the best reader that installs in a minute)
    local:smollm2-135m            packaged GGUF model (fast, weak; the test suite's)
    gguf:/path/model.gguf         any GGUF file, through llama.cpp
    hf:/path/to/flan-t5-large     a transformers folder (or a cached hub name), offline
    openai:MODEL@URL              an OpenAI-compatible /v1/completions endpoint
    openai-chat:MODEL@URL         the same server's /v1/chat/completions

Each kind is a provider in `LMS` (another package adds one through the entry-point group `mhindex.lms`);
each runtime is imported only when its kind is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mhindex.errors import UsageError, redact
from mhindex.files import unlinked
from mhindex.lm.base import Completion, LanguageModel, LMError, LMProvider, LoadRequest, lacking
from mhindex.lm.cache import CachedModel, CallCache
from mhindex.lm.packaged import DEFAULT_PACKAGED
from mhindex.options import option
from mhindex.registry import Registry

__all__ = [
    "DEFAULT_LM",
    "LMS",
    "Completion",
    "LMProvider",
    "LoadRequest",
    "LMError",
    "LanguageModel",
    "ModelOptions",
    "load_lm",
    "parse_lm",
    "resolve_spec",
]

DEFAULT_LM = f"local:{DEFAULT_PACKAGED}"
DEFAULT_TIMEOUT = 300.0  # seconds a remote call may take in all


def _check(loaded: object) -> str | None:
    return None if isinstance(loaded, LMProvider) else "is not an mhindex.lm.base.LMProvider"


#: `--lm KIND:REST`: each kind a provider that loads what REST names (another package's through an entry
#: point in the group `mhindex.lms`)
LMS: Registry[LMProvider] = Registry(
    "lm",
    {
        "local": "mhindex.lm.llamacpp:LOCAL",
        "gguf": "mhindex.lm.llamacpp:GGUF",
        "hf": "mhindex.lm.transformers_lm:HF",
        "openai": "mhindex.lm.remote:OPENAI",
        "openai-chat": "mhindex.lm.remote:OPENAI_CHAT",
    },
    _check,
)


def parse_lm(spec: str) -> tuple[str, str]:
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in LMS or not rest:
        raise UsageError(f"--lm {redact(spec)!r} is not one of: {', '.join(_usages())}")
    return kind, rest


def _usages() -> list[str]:
    return [provider.usage for provider in LMS.available().values()]


@dataclass(frozen=True)
class ModelOptions:
    """How to load the language model, for every command that runs one (lm, ask, eval)."""

    lm: str | None = option(
        None,
        "Language model: local:qwen2.5-0.5b, local:smollm2-135m, gguf:PATH, hf:PATH, openai:MODEL@URL, "
        "openai-chat:MODEL@URL, or a plug-in's KIND:... \\[default: $MHINDEX_LM, else local:qwen2.5-0.5b].",
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


def lm_title(spec: str) -> str:
    """How a figure's title names a model: its provider's words for it, else the spec as written."""
    kind, _, rest = spec.partition(":")
    try:
        provider = LMS.get(kind) if kind in LMS else None
    except UsageError:
        provider = None
    shown = provider.title(rest) if provider and provider.title else None
    return shown or spec


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
    request = LoadRequest(spec, root, threads, context_length, cache, slots, timeout)
    model = lacking(LMS.get(kind).load(rest, request), f"the model --lm {spec} loads")
    if cache:
        store = CallCache.open(unlinked(root / "cache" / "lm.sqlite"))
        if store is not None:
            model = CachedModel(model, store)
    return model
