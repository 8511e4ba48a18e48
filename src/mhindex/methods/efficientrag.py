"""EfficientRAG (Zhuang et al., EMNLP 2024): multi-hop retrieval with no LM call per hop.

The loop of the released `src/efficientrag_retrieve.py`: the query is the question; for at most
--rounds rounds, retrieve the top -k chunks, let the Labeler & Tagger mark each chunk's useful
words and tag it <Continue> or <Terminate>, and keep the useful words of the <Continue> chunks;
if there are none, stop; else the Filter keeps the words of `Query: {query} Info: {info1}; Info:
{info2}` that make the next query. Then one LM call answers from every chunk not tagged
<Terminate>, with the released QA prompt of the corpus's dataset (`src/efficientrag_qa.py`: the
chunks' texts one a line, a JSON answer; mhindex/prompts/efficientrag/, MIT): one LM call per
question, whatever the hops. `--generator ircot` answers with IRCoT's reader instead.

The models come from `mhindex train efficientrag --from NAME` (kept under the data root and
found without flags: those trained from the corpus asked about, else the latest) or from
--labeler and --filter folders. See methods/efficientrag_models.py for how they differ from the
released DeBERTa models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from mhindex.backends.base import Retriever
from mhindex.errors import UsageError
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import (
    Answer,
    Clock,
    Meter,
    Method,
    MethodContext,
    Query,
    Step,
    TraceStep,
    reader_step,
    text_of,
    trace_step,
)
from mhindex.methods.prompts import prompt_set_for, prompt_sets
from mhindex.methods.reader import Reader
from mhindex.methods.settings import ReaderSettings, demo_set
from mhindex.options import option
from mhindex.requirements import package

DEVICES = ("auto", "cpu", "cuda")
GENERATORS = ("efficientrag", "ircot")
# The released QA prompts (src/efficientrag_qa.py), by the corpus's dataset; others get MuSiQue's.
ANSWER_PROMPTS = prompt_sets("efficientrag", "answer_", ".txt")  # the released QA prompt of each dataset
#: the prompts a corpus of a dataset the release has none for takes (its baselines' default dataset)
DEFAULT_PROMPTS = "musique"
SYSTEM = "You are a helpful assistant."  # the released models' system message (language_models/llama.py)


def released_prompt(name: str) -> str:
    """One of the release's prompts, as shipped in mhindex/prompts/efficientrag (its SOURCE.md says which)."""
    return resources.files("mhindex").joinpath("prompts", "efficientrag", f"{name}.txt").read_text("utf-8").strip()


@dataclass(frozen=True)
class BaselineSettings:
    """What EfficientRAG's baselines (CoT, Self-Ask, Iter-RetGen, Decompose) share: the dataset whose released prompts
    they use, the corpus's own where the release has them."""

    prompt_from: str | None = option(
        None,
        "The dataset whose released prompts to use: hotpotqa, 2wikimultihopqa or musique \\[default: the "
        "corpus's dataset's, else musique].",
        choices=ANSWER_PROMPTS,
    )

    def prompts_for(self, dataset: str | None) -> str:
        return self.prompt_from or prompt_set_for(dataset, ANSWER_PROMPTS, DEFAULT_PROMPTS)

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        """With the prompts actually used."""
        return {**asdict(self), "prompt_from": self.prompts_for(dataset)}


def answer_prompt(dataset: str | None) -> str:
    """The released QA prompt a corpus of `dataset` takes: its own where the release has one, else MuSiQue's."""
    return prompt_set_for(dataset, ANSWER_PROMPTS, DEFAULT_PROMPTS)


@dataclass(frozen=True)
class EfficientRAGSettings(ReaderSettings):
    k: int = option(10, "Paragraphs per retrieval (K).", flag="-k", min=1)
    rounds: int = option(4, "Most retrieval rounds of EfficientRAG (the released code's 4).", min=1)
    labeler: str | None = option(
        None,
        "Folder of a trained Labeler & Tagger \\[default: from 'mhindex train efficientrag': the corpus's own, "
        "else the latest].",
        reads="folder",
    )
    query_filter: str | None = option(
        None, "Folder of a trained Filter \\[default: beside the Labeler].", flag="--filter", reads="folder"
    )
    device: str = option(
        "auto", "Where EfficientRAG's models run: auto (CUDA when available), cpu or cuda.", choices=DEVICES
    )
    generator: str = option(
        "efficientrag",
        "How EfficientRAG writes its answer: efficientrag (the released QA prompt of the corpus's dataset, a "
        "JSON answer) or ircot (IRCoT's reader and demonstrations).",
        before="ircot",
        choices=GENERATORS,
    )

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        recorded = {**asdict(self), "demos_from": demo_set(self, dataset)}
        if self.generator == "efficientrag":  # IRCoT's reader settings do not apply
            recorded["answer_prompt"] = answer_prompt(dataset)
        return recorded


@dataclass
class Chunk:
    id: str
    title: str
    text: str
    tag: str
    kept: str


class EfficientRAG(Method):
    name = "efficientrag"
    title = "EfficientRAG"
    paper = "EfficientRAG (Zhuang et al., EMNLP 2024; microsoft/EfficientRAG)"
    tables = {"EfficientRAG": {"EfficientRAG": {}}}
    paper_metrics = ("efficientrag_em",)
    requirements = (
        package("EfficientRAG training", "transformers", "transformers", "pip install 'mhindex[efficientrag]'"),
    )
    Settings = EfficientRAGSettings

    settings: EfficientRAGSettings

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: EfficientRAGSettings, context: MethodContext
    ) -> None:
        from mhindex.methods.efficientrag_models import WordModel, resolve_device

        super().__init__(retriever, lm, settings, context)
        labeler_dir, filter_dir = self._folders(settings, context)
        device = resolve_device(settings.device)
        self.labeler = WordModel.load(labeler_dir, "labeler", device)
        self.filter = WordModel.load(filter_dir, "filter", device)
        self.models = {"labeler": str(labeler_dir), "filter": str(filter_dir), "trained": _trained(labeler_dir.parent)}
        self._trained_ids = _trained_ids(labeler_dir.parent)
        self.reader = Reader(lm, settings, demo_set(settings, context.dataset), True, context.dataset)
        self.answer_prompt_name = f"answer_{answer_prompt(context.dataset)}"
        self.answer_prompt = (
            resources.files("mhindex")
            .joinpath("prompts", "efficientrag", f"{self.answer_prompt_name}.txt")
            .read_text(encoding="utf-8")
            .strip()
        )

    @staticmethod
    def _folders(settings: EfficientRAGSettings, context: MethodContext) -> tuple[Path, Path]:
        from mhindex.methods.efficientrag_models import find_models

        if settings.labeler:
            labeler = Path(settings.labeler).expanduser()
        else:
            trained = find_models(context.home, context.corpus) if context.home else None
            if trained is None:
                raise UsageError(
                    "no trained EfficientRAG models: run 'mhindex train efficientrag --from musique' (after "
                    "'mhindex build musique'), or give --labeler and --filter"
                )
            labeler = trained / "labeler"
        query_filter = Path(settings.query_filter).expanduser() if settings.query_filter else labeler.parent / "filter"
        return labeler, query_filter

    def _generate(self, meter: Meter, question: str, texts: list[str]) -> tuple[str, str, dict[str, Any]]:
        """The released QA step: the kept chunks' texts in the dataset's QA prompt; the answer is the JSON's
        "answer" (else the reply's first line, cleaned)."""
        s = self.settings
        reply, read = answer_step(
            meter, self.answer_prompt, question, texts, answer_tokens=s.answer_tokens, max_words=s.max_paragraph_words
        )
        answer, parsed = json_answer(reply)
        facts = {
            "prompt": self.answer_prompt_name,
            "chunks": read,
            "left_out": len(texts) - read,
            "json": parsed is not None and "answer" in parsed,
        }
        return answer, reply, facts

    recorded_keys = ("models",)

    def recorded_models(self) -> dict[str, Any]:
        return {"models": self.models}

    def trained_on(self) -> set[str]:
        return self._trained_ids

    @classmethod
    def resumable(cls, home: Path) -> list[Path]:
        from mhindex.methods.efficientrag_models import models_root

        return list(models_root(home).glob("*.partial"))

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each round's query, its chunks with their tags and kept words, the next query; why it stopped;
        then the reader (or the generation)."""
        details = record.get("efficientrag")
        if not isinstance(details, dict):
            return super().trace_steps(record)
        steps: list[TraceStep] = []
        for number, round_ in enumerate(details.get("rounds", []), 1):
            rows = [["query", text_of(round_.get("query", ""))]]
            rows += [
                [f"[{chunk.get('tag', '')}]", f"{chunk.get('title', '')}: {chunk.get('kept', '')}"]
                for chunk in round_.get("chunks", [])
            ]
            if round_.get("next_query"):
                rows.append(["next query", text_of(round_["next_query"])])
            ids = [chunk["id"] for chunk in round_.get("chunks", []) if "id" in chunk]
            steps.append(trace_step(f"Round {number}", rows, ids))
        if details.get("stopped"):
            steps.append(trace_step("Stopped", [["because", text_of(details["stopped"])]]))
        if details.get("generation"):
            steps.append(trace_step("Generation", [["output", text_of(details["generation"])]]))
        return steps + reader_step(record)

    def answer(self, query: Query) -> Answer:
        from mhindex.methods.efficientrag_models import CONTINUE, TAGS, TERMINATE, filter_input, join_words, words

        clock, meter = Clock(), Meter(self.lm)
        current, sentence = query.question, ""
        steps: list[Step] = []
        rounds: list[dict[str, Any]] = []
        used: dict[str, Chunk] = {}  # every chunk not tagged <Terminate>, in the order first met
        stop = "rounds"
        for _ in range(self.settings.rounds):
            hits = self.retriever.search(current, self.settings.k)
            query_words = words(current)
            chunk_words = [words(h.text) for h in hits]
            labelled = self.labeler.predict([query_words] * len(hits), chunk_words) if hits else []
            chunks = [
                Chunk(h.id, h.title, h.text, TAGS[p.tag or 0], join_words([ws[i] for i in p.kept]))
                for h, ws, p in zip(hits, chunk_words, labelled, strict=True)
            ]
            for chunk in chunks:
                if chunk.tag != TAGS[TERMINATE]:
                    used.setdefault(chunk.id, chunk)
            infos = [c.kept for c in chunks if c.tag == TAGS[CONTINUE] and c.kept.strip()]
            record = {
                "query": current,
                "filter_input": sentence,
                "chunks": [{"id": c.id, "title": c.title, "tag": c.tag, "kept": c.kept} for c in chunks],
            }
            rounds.append(record)
            continuing = [c.title for c in chunks if c.tag == TAGS[CONTINUE]]
            steps.append(
                Step(
                    f"{len(continuing)} of {len(chunks)} chunks continue"
                    + (f"; useful: {' | '.join(infos)}" if infos else ""),
                    current,
                    [h.id for h in hits],
                    continuing,
                    clock(),
                )
            )
            if not infos:
                stop = "no chunk continues"
                break
            sentence = filter_input(current, infos)
            sentence_words = words(sentence)
            following = join_words([sentence_words[i] for i in self.filter.predict([sentence_words])[0].kept])
            record["next_query"] = following
            if not following.strip() or following == current:
                stop = "the next query is empty" if not following.strip() else "the next query repeats this one"
                break
            current = following
        pinned = [(query.main_passage["title"], query.main_passage["text"])] if query.main_passage else []
        paragraphs = list(used.values())
        details: dict[str, Any] = {"rounds": len(rounds), "efficientrag": {"rounds": rounds, "stopped": stop}}
        if self.settings.generator == "ircot":
            read = self.reader.read(meter, query.question, pinned + [(c.title, c.text) for c in paragraphs])
            answer, reasoning, details["reader"] = read.answer, read.output, read.record()
        else:
            answer, reasoning, details["efficientrag"]["generation"] = self._generate(
                meter, query.question, [text for _, text in pinned] + [c.text for c in paragraphs]
            )
        retrieved = [{"id": c.id, "title": c.title} for c in paragraphs]
        return Answer(
            query.id,
            query.question,
            answer,
            retrieved,
            steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            reasoning,
            self.name,
            details=details,
            departures=[NO_JSON] if details["efficientrag"].get("generation", {}).get("json") is False else [],
        )


def _trained(folder: Path) -> dict[str, Any]:
    """What `mhindex train` recorded about the models (corpus, questions, scores), if anything."""
    path = folder / "trained.json"
    if not path.is_file():
        return {}
    trained = orjson.loads(path.read_bytes())
    kept = ("corpus", "corpus_sha256", "encoder", "trained_at", "questions", "split")
    return {k: trained[k] for k in kept if k in trained}


def _trained_ids(folder: Path) -> set[str]:
    """The questions `mhindex train` fitted the models on (not those it held out to score them)."""
    path = folder / "trained.json"
    if not path.is_file():
        return set()
    return set(orjson.loads(path.read_bytes()).get("trained_question_ids") or ())


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The released reader of a model's JSON (utils/model.py `get_type_parser`): the first `{...}` of the reply,
    stripped, else the whole reply, read by the standard library's `json` as there (orjson refuses what it takes,
    such as NaN)."""
    found = re.search(r"{.*?}", text, re.S)
    try:
        value = json.loads(found.group(0).strip() if found else text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


#: the departure (methods.base.Answer) of a reply with no JSON answer, read from its first line where the release drops
#: the question
NO_JSON = "no JSON answer in the reply: its first line stands (the release fails the question)"


def json_answer(reply: str) -> tuple[str, dict[str, Any] | None]:
    """The answer of a JSON reply, as the release reads it (`ask_model`'s json parser and its check): the first
    `{...}`'s "answer", whatever its value, as Python writes it; where there is none (the release fails the
    question), the reply's first line that is not a code fence, unquoted. And the JSON."""
    parsed = parse_json_object(reply)
    if parsed is not None and "answer" in parsed:
        return str(parsed["answer"]), parsed
    first = next((line for line in reply.splitlines() if line.strip() and not line.strip().startswith("```")), "")
    return first.strip().strip('"').strip(), parsed


def answer_step(
    meter: Meter,
    template: str,
    question: str,
    texts: Sequence[str],
    *,
    answer_tokens: int,
    max_words: int,
    system: str = SYSTEM,
    slot: str = "knowledge",
) -> tuple[str, int]:
    """One answer step of EfficientRAG's release and its baselines: the texts, one a line, as `{slot}` in
    `template` (with `{question}`), one user turn after `system`. Texts are cut to `max_words` and those past
    what the context holds left out, the last first. The reply, and how many texts it read."""
    lm = meter.lm
    kept = [_cut(text, max_words) for text in texts]
    while True:
        prompt = template.format(question=question, **{slot: "\n".join(kept)})
        if not kept or lm.count_tokens(prompt) + answer_tokens + 64 <= lm.context_length:
            break
        kept.pop()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    reply = meter.chat(messages, answer_tokens, stop=[], label=f"answering from {len(kept)} paragraphs").text
    return reply.strip(), len(kept)


def _cut(text: str, words: int) -> str:
    split = text.split()
    return " ".join(split[:words]) if len(split) > words else text
