"""Whether two evaluations searched the same retrieval environment, and answered with the same model: the
question reproduction threads across the field end on ("the retriever setup differs"). Read from the fingerprint
each evaluation folder's run.json records, or a served index's /info (its corpus and retrieval alone): the corpus
(its sha256 and paragraph count, its release files, the converter's options, the seed), the backend with every
setting that changes a ranking (k1 and b, the encoder and its weights' sha256, pooling, the index type and its
parameters) and how queries are read, the model (its file's and chat template's sha256, its context), and each
method's settings. Each difference is one line; none means the two are comparable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mhindex.errors import UsageError, redact
from mhindex.options import RANK_NEUTRAL

#: The environment's parts: what decides the paragraphs, the rankings, and (between evaluations) the answers.
PARTS = ("corpus", "retrieval", "answering")
#: Recorded, not compared: two names for one sha256 are one corpus; when a model's determinism was last checked.
NOT_COMPARED = frozenset({"corpus.name", "answering.determinism.check.checked"})


def _served(address: str) -> dict[str, Any]:
    """A served index's /info (`mhindex serve`), its key from $MHINDEX_API_KEY where it needs one."""
    import os

    import httpx

    from mhindex.http import client, peer_json

    key = os.environ.get("MHINDEX_API_KEY")
    try:
        with client(timeout=10.0, retries=1, headers={"Authorization": f"Bearer {key}"} if key else None) as http:
            found = peer_json(http, address.rstrip("/") + "/info", seconds=30.0, limit=1 << 20, depth=16)
    except (httpx.HTTPError, ValueError) as error:
        said = redact(f"{address}: no /info of a served index there ({type(error).__name__}: {error})", [key or ""])
        raise UsageError(said) from None
    if not isinstance(found, dict):
        raise UsageError(f"{address}/info: not a JSON object")
    return {"server": True, **_shaped(found, address)}


def _shaped(info: dict[str, Any], address: str) -> dict[str, Any]:
    """A served index's /info as far as `diff` reads it: each part a JSON object where there is one, its fingerprint
    an object of objects; anything else is one line naming the field, not a traceback further on."""
    for field in ("index", "fingerprint"):
        if field in info and not isinstance(info[field], dict):
            raise UsageError(f"{address}/info: field {field!r} is not a JSON object")
    for part, value in (info.get("fingerprint") or {}).items():
        if value is not None and not isinstance(value, dict):
            raise UsageError(f"{address}/info: fingerprint.{part} is not a JSON object")
    return info


def environment_of(source: str | Path) -> dict[str, Any]:
    """The fingerprint an evaluation folder's run.json, or a served index's /info, records (its `fingerprint`,
    PARTS), completed from the fields every run.json has (a folder from before the fingerprint: the corpus's
    sha256, the backend and index settings, the model and its context), and each method's settings."""
    from mhindex.eval.rerun import read_record

    text = str(source)
    if text.startswith(("http://", "https://")):
        run = _served(text)
    elif Path(text).expanduser().is_dir():
        run = read_record(Path(text).expanduser() / "run.json")
    else:
        raise UsageError(f"{text}: no such folder (give folders `mhindex eval` wrote, or a served index's address)")
    index: dict[str, Any] = run["index"] if isinstance(run.get("index"), dict) else {}
    fields: dict[str, dict[str, Any] | None] = {
        "corpus": {"name": run.get("corpus"), "sha256": run.get("corpus_sha256")},
        "retrieval": {"backend": run.get("backend"), **{k: v for k, v in index.items() if k not in RANK_NEUTRAL}},
        "answering": None if run.get("server") else {"lm": run.get("lm"), "context": run.get("lm_context"),
                                                     "judge": run.get("judge")},
    }  # fmt: skip
    recorded: dict[str, Any] = run["fingerprint"] if isinstance(run.get("fingerprint"), dict) else {}
    return {
        **{part: None if (field := fields[part]) is None else {**field, **(recorded.get(part) or {})}
           for part in PARTS},
        "settings": run.get("settings") if isinstance(run.get("settings"), dict) else {},
        "server": bool(run.get("server")),
    }  # fmt: skip


_ABSENT = object()


def _shown(value: Any) -> str:
    return "nothing" if value is _ABSENT else repr(value)


def _compared_part(value: Any, prefix: str) -> Any:
    """`value` (found at `prefix`) without what is recorded and not compared (when a check was made)."""
    if not isinstance(value, dict):
        return value
    return {k: _compared_part(v, f"{prefix}.{k}") for k, v in value.items() if f"{prefix}.{k}" not in NOT_COMPARED}


def _walk(prefix: str, a: Any, b: Any, top: bool = True) -> tuple[list[str], list[str]]:
    """How `a` and `b` differ, a line each (dicts key by key), and, at the top, the keys only one records (an older
    mhindex's folder has no encoder sha256): those are not compared. Deeper, a key one lacks is a difference (an
    index part, a converter option, a release file one has and the other has not)."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        a, b = _compared_part(a, prefix), _compared_part(b, prefix)
        differs = a != b and prefix not in NOT_COMPARED
        return [f"{prefix}: {_shown(a)} in the first, {_shown(b)} in the second"] if differs else [], []
    said: list[str] = []
    unrecorded = sorted(f"{prefix}.{key}" for key in a.keys() ^ b.keys()) if top else []
    for key in sorted(a.keys() & b.keys() if top else a.keys() | b.keys()):
        lines, one_side = _walk(f"{prefix}.{key}", a.get(key, _ABSENT), b.get(key, _ABSENT), top=False)
        said += lines
        unrecorded += one_side
    return said, unrecorded


def _compared(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """The parts both record: the retrieval alone when either is a server (a server answers nothing)."""
    return [part for part in PARTS if first.get(part) is not None and second.get(part) is not None]


def differences(first: dict[str, Any], second: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Each way the two environments differ, one line each ("retrieval.k1: 1.2 in the first, 0.9 in the
    second"), on what both record, and what only one records; the methods' settings are compared between two
    evaluations, for the methods both ran (one only the first or second ran is said so)."""
    said: list[str] = []
    unrecorded: list[str] = []
    for part in _compared(first, second):
        lines, one_side = _walk(part, first[part], second[part])
        said, unrecorded = said + lines, unrecorded + one_side
    if first.get("server") or second.get("server"):
        return said, unrecorded
    ran_a, ran_b = first.get("settings") or {}, second.get("settings") or {}
    said += [
        f"method {m}: only in the {'first' if m in ran_a else 'second'}" for m in sorted(ran_a.keys() ^ ran_b.keys())
    ]
    for method in sorted(ran_a.keys() & ran_b.keys()):
        lines, one_side = _walk(method, ran_a[method], ran_b[method])
        said, unrecorded = said + lines, unrecorded + one_side
    return said, unrecorded


def compare(first: str | Path, second: str | Path) -> dict[str, Any]:
    """Two environments (evaluation folders, or served indexes' addresses), their differences (`differences`:
    [] when the same; with a server, the corpus and the retrieval alone) and what only one records."""
    a, b = environment_of(first), environment_of(second)
    said, unrecorded = differences(a, b)
    return {"first": a, "second": b, "differences": said, "unrecorded": unrecorded}
