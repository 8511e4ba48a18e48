"""Whether two evaluations searched the same retrieval environment, and answered with the same model: the
question reproduction threads across the field end on ("the retriever setup differs"). Read from what each
evaluation folder's run.json records, or a served index's /info (its retrieval alone): the corpus (its sha256),
the backend and every index setting that changes a ranking (k1 and b, the encoder, the index type and its
parameters), the model with its context and threads, and each method's settings. Each difference is one line;
none means the two are comparable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mhindex.errors import UsageError, redact

#: Index settings that change no ranking (how many threads search, how vectors were batched while encoding);
#: the index's own corpus_sha256 repeats the corpus's, compared once.
NOT_RANKING = frozenset({"threads", "batch_size", "shard_size", "mmap", "corpus_sha256"})
#: What decides the answers besides the retrieval: compared between two evaluations.
ANSWERING = ("lm", "lm_context", "lm_threads", "judge")


def _served(address: str) -> dict[str, Any]:
    """A served index's /info (`mhindex serve`), its key from $MHINDEX_API_KEY where it needs one."""
    import os

    import httpx

    from mhindex.http import client

    key = os.environ.get("MHINDEX_API_KEY")
    try:
        with client(timeout=10.0, retries=1, headers={"Authorization": f"Bearer {key}"} if key else None) as http:
            reply = http.get(address.rstrip("/") + "/info")
            reply.raise_for_status()
            found = reply.json()
    except (httpx.HTTPError, ValueError) as error:
        said = redact(f"{address}: no /info of a served index there ({type(error).__name__}: {error})", [key or ""])
        raise UsageError(said) from None
    if not isinstance(found, dict):
        raise UsageError(f"{address}/info: not a JSON object")
    return {"server": True, **found}


def environment_of(source: str | Path) -> dict[str, Any]:
    """What an evaluation folder's run.json, or a served index's /info, records of its environment."""
    from mhindex.eval.rerun import read_record

    text = str(source)
    if text.startswith(("http://", "https://")):
        run = _served(text)
    elif Path(text).expanduser().is_dir():
        run = read_record(Path(text).expanduser() / "run.json")
    else:
        raise UsageError(f"{text}: no such folder (give folders `mhindex eval` wrote, or a served index's address)")
    index: dict[str, Any] = run["index"] if isinstance(run.get("index"), dict) else {}
    return {
        "corpus": run.get("corpus"),
        "corpus_sha256": run.get("corpus_sha256"),
        "backend": run.get("backend"),
        "index": {key: value for key, value in index.items() if key not in NOT_RANKING},
        **({} if run.get("server") else {key: run.get(key) for key in ANSWERING}),
        "settings": run.get("settings") if isinstance(run.get("settings"), dict) else {},
        "server": bool(run.get("server")),
    }


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {key: found for name, part in value.items() for key, found in _flat(f"{prefix}.{name}", part).items()}
    return {prefix: value}


def _said(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [
        f"{name}: {a.get(name)!r} in the first, {b.get(name)!r} in the second"
        for name in sorted(a.keys() | b.keys())
        if a.get(name) != b.get(name)
    ]


def differences(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """Each way the two environments differ, one line each ("index.k1: 1.2 in the first, 0.9 in the second"); the
    methods' settings are compared for the methods both ran (one only the first or second ran is said so)."""
    answering = () if first.get("server") or second.get("server") else ANSWERING  # a server answers nothing
    said = [line for key in ("corpus_sha256", "backend", "index", *answering)
            for line in _said(_flat(key, first.get(key)), _flat(key, second.get(key)))]  # fmt: skip
    if not answering:
        return said
    ran_a, ran_b = first.get("settings") or {}, second.get("settings") or {}
    said += [
        f"method {m}: only in the {'first' if m in ran_a else 'second'}" for m in sorted(ran_a.keys() ^ ran_b.keys())
    ]
    for method in sorted(ran_a.keys() & ran_b.keys()):
        said += _said(_flat(method, ran_a[method]), _flat(method, ran_b[method]))
    return said


def compare(first: str | Path, second: str | Path) -> dict[str, Any]:
    """Two environments (evaluation folders, or served indexes' addresses) and their differences (`differences`:
    [] when the same): with a server, the retrieval alone is compared."""
    a, b = environment_of(first), environment_of(second)
    return {"first": a, "second": b, "differences": differences(a, b)}
