"""Where a llama.cpp call may start reading its prompt, so that what it writes depends on the prompt alone.

llama.cpp reuses the longest prefix a slot's cache shares with a new prompt and evaluates the rest in
micro-batches from there. Whether that changes the values depends on the kernels, measured on this machine's
CPU build (xllamacpp 2026.10, Qwen2.5 Q4_K_M; benchmarks/speed/bench_batch_invariance.py):

- with llama.cpp's defaults (weights repacked for AVX2, its tiled K-quant matmul for batches of 8 or more,
  flash attention with its per-thread split of the cache), a token's values change with the size of the
  micro-batch it is read in, and with the threads: a prompt read after another one kept 37, 600 or 2,000 of
  its tokens gave log-probabilities that differed by up to 0.14, and a small model's greedy token can go the
  other way on such a difference;
- with the three turned off (`INVARIANT`, lm/llamacpp.py), every micro-batch of two tokens or more gives
  the same values, whatever else it holds and on any thread count; a micro-batch of one token does not (its
  attention goes through ggml's vector dot product, wider batches through llamafile's sgemm).

So a call's values are those of its prompt alone when every prompt token it reuses was itself read in a
micro-batch of two or more (`SlotState.canonical`: never a generated token, which is read alone), and no
token of the prompt is read alone: the evaluated part is at least two tokens, and its last micro-batch is
not a single token. `plan` finds where to start; when the slot holds more of the prompt than may be reused
(a generated token the next prompt repeats, say), a one-token "cut" call first leaves it holding exactly the
reusable part, since llama.cpp reuses all it shares and has no way to be told less.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

UBATCH = 512  # llama.cpp's micro-batch (its default), set explicitly on every server


@dataclass
class SlotState:
    """What a slot holds: `canonical`, tokens whose values are those of the tokens alone, and whether other
    tokens follow them (`trailing`: generated ones, a cut's token, or unknown ones after a restore)."""

    canonical: list[int] = field(default_factory=list)
    trailing: bool = False


@dataclass(frozen=True)
class Start:
    """Read the prompt from token `at` (from nothing, llama.cpp's `cache_prompt` off, where `at` is 0), after
    `prepare`: "none"; "cut", a call of the prompt's first `at` tokens and one other that reuses what the slot
    holds, so that it then holds exactly those; or "scratch", the same call read from nothing (a prompt whose
    last token would be read alone from nothing starts after its first two, read with the cut's token)."""

    at: int
    prepare: Literal["none", "cut", "scratch"]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _alone_at_the_end(evaluated: int, ubatch: int) -> bool:
    """Whether reading `evaluated` tokens in micro-batches of `ubatch` leaves the last one alone."""
    return evaluated % ubatch == 1


def plan(prompt: Sequence[int], slot: SlotState, ubatch: int = UBATCH) -> Start:
    """Where to start reading `prompt` in a slot holding `slot`, and what must be done first (the module's
    docstring says why). At least two tokens are read, and never one alone at the end."""
    n, shared = len(prompt), common_prefix(slot.canonical, prompt)
    if n < 3:  # too short to choose: read whole (a one-token prompt is read alone wherever it is read)
        return Start(0, "none")
    at = min(shared, n - 2)
    while at > 0 and _alone_at_the_end(n - at, ubatch):
        at -= 1
    if at == 0:
        return Start(2, "scratch") if _alone_at_the_end(n, ubatch) else Start(0, "none")
    if at < shared or (at == len(slot.canonical) and slot.trailing):
        return Start(at, "cut")
    return Start(at, "none")


def cut_tokens(prompt: Sequence[int], at: int) -> list[int]:
    """The cut call's prompt: the first `at` tokens and one that is not the prompt's next, so that the slot
    then shares exactly `at` tokens with the prompt."""
    other = 0 if prompt[at] != 0 else 1
    return [*prompt[:at], other]
