"""2WikiMultihopQA (the `data_ids` release: train, dev, test JSON arrays, and id_aliases.json).

Same context layout as HotpotQA; gold paragraphs by supporting-fact titles; `type`, `evidences`
(the gold reasoning triples) and `answer_id` are kept with each question. Given the release's
`id_aliases.json` (one `{"Q_id", "aliases", "demonyms"}` a line), each answer's aliases and
demonyms join its gold answers, as the official evaluation script scores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from mhindex.corpora.dataset import Dataset
from mhindex.corpora.download import Download
from mhindex.corpora.hotpotqa import context_question
from mhindex.corpora.records import Question, RecordGuard, need, read_records, strings

NAME = "2wikimultihopqa"


def is_alias_file(path: Path) -> bool:
    return "alias" in path.name.lower()


def read_aliases(path: Path, guard: RecordGuard, on_bytes: Callable[[int], None]) -> dict[str, list[str]]:
    aliases: dict[str, list[str]] = {}

    def one(record) -> list:
        names = strings(record, "aliases", required=False) + strings(record, "demonyms", required=False)
        aliases[need(record, "Q_id", str)] = names
        return []

    for where, record in read_records(path, on_bytes):
        guard.convert(path, where, record, one)
    return aliases


def convert_question(record: dict, aliases: dict[str, list[str]] | None = None) -> list:
    items = context_question(record, NAME, ("type", "evidences", "answer_id"))
    question: Question = items[-1]
    extra = (aliases or {}).get(record.get("answer_id") or "", [])
    question.answers += [a for a in dict.fromkeys(extra) if a not in question.answers]
    return items


def convert(inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    aliases: dict[str, list[str]] = {}
    for path in (p for p in inputs if is_alias_file(p)):
        aliases.update(read_aliases(path, guard, on_bytes))
    for path in (p for p in inputs if not is_alias_file(p)):
        for where, record in read_records(path, on_bytes):
            yield from guard.convert(path, where, record, lambda r: convert_question(r, aliases))


DATASET = Dataset(
    title="2WikiMultihopQA",
    name=NAME,
    description="2WikiMultihopQA: train, dev and test of the data_ids release",
    convert=convert,
    release=(Download("https://www.dropbox.com/s/7ep3h8unu2njfxv/data_ids.zip?dl=1", "data_ids.zip", unpack=True),),
    release_inputs=("train.json", "dev.json", "test.json", "id_aliases.json"),
    samples=("dev.sample.json",),
)
