"""Training EfficientRAG's Labeler & Tagger and Filter without an LLM, from MuSiQue's gold
question decompositions.

The paper synthesises its labels with a 70B LLM; MuSiQue already holds what those labels stand
for. Each question's `question_decomposition` lists its hops, each with a sub-question, its
answer and its supporting paragraph; a later hop refers to an earlier answer as `#k`. For each hop:

- the resolved sub-question: `#k` replaced by hop k's answer, and `X >> relation` rendered
  `relation of X`;
- the Labeler's positive: (query, the supporting paragraph), tagged <Continue>, whose useful
  words are the hop's answer and the capitalised or numeric words of the next resolved
  sub-question (the entities the next hop needs) where the paragraph has them;
- its hard negative: the first retrieved paragraph for the query that supports no hop of the
  question, tagged <Terminate>, with no useful word;
- the Filter's example (all hops but the last): `Query: {query} Info: {useful words}`, keeping
  the words that make up the next resolved sub-question. That sub-question becomes the query of
  the next hop, as the Filter's output does when the method runs. The first hop's query is the
  question itself.

Two heuristics, measured on every build (`stats` in trained.json):
- the answer is found in its paragraph by case-insensitive word match; where it is not there
  verbatim the positive keeps its tag but no word labels (`answer_not_in_paragraph`);
- the Filter can only keep words its input has. Sub-question words are matched to input words by
  their Snowball stems; where the crowd's paraphrase left none of the next sub-question's own
  words (besides the bridge answer) in the question, the question's content words that the
  current sub-question does not cover are kept instead: the part still unasked
  (`filter_fallbacks`). `filter_target_coverage` is the share of the next sub-questions'
  content words found in the input.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from mhindex import ui
from mhindex.backends.registry import DEFAULT_BACKEND
from mhindex.errors import Interrupted, UsageError
from mhindex.eval.splits import SPLIT_HELP
from mhindex.files import unlinked
from mhindex.home import CorpusDir
from mhindex.methods.efficientrag_models import (
    CONTINUE,
    IGNORED,
    TERMINATE,
    WordModel,
    filter_input,
    join_words,
    models_root,
    resolve_device,
    words,
)
from mhindex.options import option

if TYPE_CHECKING:
    from mhindex.backends import BackendSpec

BUILDER_VERSION = 1
# Lucene's English stop set plus question words: not content words for coverage and fallbacks.
FUNCTION_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with "
    "what which who whom whose when where why how does did do were has have had".split()
)


@dataclass
class Hop:
    question: str  # resolved: no #k, no `>>`
    answer: str
    paragraph_id: str


@dataclass
class TrainingData:
    labeler: list[dict] = field(default_factory=list)
    filter: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    split: str = "all"  # the questions' split, as eval/splits.py resolved it

    def digest(self) -> str:
        return hashlib.sha256(orjson.dumps([self.labeler, self.filter])).hexdigest()


def resolve_hops(decomposition: list) -> list[Hop] | None:
    """The hops with their references to earlier answers resolved; None for a decomposition that
    lacks a field or refers to a hop that has not come yet."""
    hops: list[Hop] = []
    for hop in decomposition:
        if not isinstance(hop, dict) or not all(
            isinstance(hop.get(k), str) for k in ("question", "answer", "paragraph_id")
        ):
            return None
        unresolved = [int(n) for n in re.findall(r"#(\d+)", hop["question"]) if not 0 < int(n) <= len(hops)]
        if unresolved:
            return None
        text = re.sub(r"#(\d+)", lambda m: hops[int(m.group(1)) - 1].answer, hop["question"])
        if ">>" in text:
            subject, relation = (part.strip() for part in text.split(">>", 1))
            text = f"{relation} of {subject}"
        hops.append(Hop(text, hop["answer"], hop["paragraph_id"]))
    return hops


class _Stems:
    """Snowball stems of lower-cased words (PyStemmer), memoised."""

    def __init__(self) -> None:
        try:
            import Stemmer
        except ImportError:
            raise UsageError("training EfficientRAG needs PyStemmer: pip install 'mhindex[efficientrag]'") from None
        self._stemmer = Stemmer.Stemmer("english")
        self._cache: dict[str, str] = {}

    def __call__(self, word: str) -> str:
        if word not in self._cache:
            self._cache[word] = self._stemmer.stemWord(word.lower())
        return self._cache[word]


def _is_word(token: str) -> bool:
    return any(ch.isalnum() for ch in token)


def spans(haystack: list[str], needle: list[str]) -> list[int]:
    """Positions of the words that hold a case-insensitive occurrence of `needle`, compared as
    runs of letters and digits: "Avicenna" is found in "Avicenna's", "Lyons' death" in
    "Lyons ' death"."""
    parts = [(i, part) for i, w in enumerate(haystack) for part in re.findall(r"\w+", w.lower())]
    target = [part for w in needle for part in re.findall(r"\w+", w.lower())]
    if not target:
        return []
    found: set[int] = set()
    for start in range(len(parts) - len(target) + 1):
        if all(parts[start + j][1] == t for j, t in enumerate(target)):
            found.update(parts[start + j][0] for j in range(len(target)))
    return sorted(found)


def useful_words(chunk: list[str], hop: Hop, following: Hop | None) -> list[int] | None:
    """The chunk's word labels for a positive: the hop's answer, and the entity words the next hop
    needs; None when the answer is not in the chunk verbatim."""
    answer = spans(chunk, words(hop.answer))
    if not answer:
        return None
    marked = set(answer)
    if following is not None:
        entities = {
            w
            for w in words(following.question)
            if (w[:1].isupper() or w[:1].isdigit()) and w.lower() not in FUNCTION_WORDS
        }
        marked.update(i for i, w in enumerate(chunk) if w in entities)
    return [1 if i in marked else 0 for i in range(len(chunk))]


def next_query_labels(
    sentence: list[str], query_end: int, current: Hop, following: Hop, stems: _Stems
) -> tuple[list[int], dict]:
    """The Filter's keep labels over `Query: q Info: i` (words; the query part ends at
    `query_end`): the words that make up the next resolved sub-question. See the module's
    docstring for the fallback."""
    markers = {0, 1, query_end, query_end + 1}  # "Query" ":" ... "Info" ":"
    bridge = {stems(w) for w in words(current.answer) if _is_word(w)}
    in_query = [i for i in range(2, query_end) if _is_word(sentence[i])]
    in_info = [i for i in range(query_end, len(sentence)) if i not in markers and _is_word(sentence[i])]
    kept: set[int] = set()
    content, found, own_found = 0, 0, 0
    for target in (w for w in words(following.question) if _is_word(w)):
        stem = stems(target)
        is_content = target.lower() not in FUNCTION_WORDS
        order = (in_info + in_query) if stem in bridge else (in_query + in_info)
        match = next((i for i in order if i not in kept and stems(sentence[i]) == stem), None)
        content += is_content
        if match is not None:
            kept.add(match)
            found += is_content
            own_found += is_content and stem not in bridge
    fallback = not own_found
    if fallback:  # the crowd's paraphrase: keep the part of the question still unasked
        asked = {stems(w) for w in words(current.question)}
        kept.update(
            i for i in in_query if sentence[i].lower() not in FUNCTION_WORDS and stems(sentence[i]) not in asked
        )
    return [1 if i in kept else 0 for i in range(len(sentence))], {
        "content_words": content,
        "content_found": found,
        "fallback": fallback,
    }


def _decomposed(
    corpus: CorpusDir, split: str
) -> tuple[list[dict[str, Any]], str, list[tuple[dict[str, Any], list[Any]]], dict[str, str]]:
    """The questions of `split`, the split they resolved to, those with a gold decomposition (with its hops),
    and the text of every paragraph a hop names."""
    from mhindex.eval.splits import select_split

    every = [orjson.loads(line) for line in corpus.questions.read_bytes().splitlines() if line.strip()]
    questions, chosen = select_split(every, split, corpus.name, training=True)
    if split == "auto" and chosen != "train":  # asked for train, the papers' choice, and fell back
        ui.reporter().warning(
            f"training on {len(questions)} {'' if chosen == 'all' else chosen + ' '}questions of '{corpus.name}' "
            "(it has no train split): `mhindex eval` will refuse to score efficientrag on the ones trained on"
        )
    resolved = [(q, resolve_hops(q["decomposition"])) for q in questions if isinstance(q.get("decomposition"), list)]
    usable = [(q, hops) for q, hops in resolved if hops]
    if not usable:
        raise UsageError(
            f"corpus '{corpus.name}' has no questions with a gold decomposition (MuSiQue's "
            "question_decomposition, with paragraph ids):"
            " build it from MuSiQue with this version ('mhindex build musique --force')"
        )
    needed = {hop.paragraph_id for _, hops in usable for hop in hops}
    reader = corpus.paragraphs()
    try:
        paragraphs = {record["id"]: record["text"] for record in reader if record["id"] in needed}
    finally:
        reader.close()
    return questions, chosen, usable, paragraphs


def build_training_data(corpus: CorpusDir, retriever: Any, *, top: int = 10, split: str = "all") -> TrainingData:
    """Labeler and Filter examples from the corpus's questions of `split` with a gold decomposition."""
    stems = _Stems()
    questions, chosen, usable, paragraphs = _decomposed(corpus, split)
    data = TrainingData(split=chosen)
    counts = dict.fromkeys(
        (
            "questions",
            "hops",
            "answer_not_in_paragraph",
            "no_negative",
            "filter_fallbacks",
            "content_words",
            "content_found",
        ),
        0,
    )
    counts["questions_without_decomposition"] = len(questions) - len(usable)
    with ui.reporter().progress("building EfficientRAG's training data", total=len(usable)) as bar:
        for question, hops in usable:
            if any(hop.paragraph_id not in paragraphs for hop in hops):
                raise UsageError(
                    f"{corpus.questions}: question {question['id']} names a supporting paragraph that is not "
                    f"in {corpus.corpus}"
                )
            counts["questions"] += 1
            gold = set(question.get("gold_ids") or ()) | {hop.paragraph_id for hop in hops}
            query = question["question"]
            for number, hop in enumerate(hops):
                following = hops[number + 1] if number + 1 < len(hops) else None
                counts["hops"] += 1
                chunk = words(paragraphs[hop.paragraph_id])
                useful = useful_words(chunk, hop, following)
                counts["answer_not_in_paragraph"] += useful is None
                base = {"question_id": question["id"], "hop": number + 1, "query": words(query)}
                data.labeler.append(
                    {**base, "paragraph_id": hop.paragraph_id, "chunk": chunk, "useful": useful, "tag": CONTINUE}
                )
                negative = next((hit for hit in retriever.search(query, top) if hit.id not in gold), None)
                if negative is None:
                    counts["no_negative"] += 1
                else:
                    negative_words = words(negative.text)
                    data.labeler.append(
                        {
                            **base,
                            "paragraph_id": negative.id,
                            "chunk": negative_words,
                            "useful": [0] * len(negative_words),
                            "tag": TERMINATE,
                        }
                    )
                if following is None:
                    continue
                info = join_words([w for w, u in zip(chunk, useful, strict=True) if u]) if useful else hop.answer
                sentence = words(filter_input(query, [info]))
                keep, measured = next_query_labels(sentence, len(words(f"Query: {query}")), hop, following, stems)
                counts["filter_fallbacks"] += measured["fallback"]
                counts["content_words"] += measured["content_words"]
                counts["content_found"] += measured["content_found"]
                data.filter.append({"question_id": question["id"], "hop": number + 1, "words": sentence, "keep": keep})
                query = join_words([w for w, k in zip(sentence, keep, strict=True) if k])
            bar.advance()
    content = counts.pop("content_words")
    found = counts.pop("content_found")
    data.stats = {
        **counts,
        "labeler_examples": len(data.labeler),
        "filter_examples": len(data.filter),
        "filter_target_coverage": round(found / content, 4) if content else None,
    }
    return data


def held_out(question_id: str, share: float) -> bool:
    """A stable split by question id, so that a question's hops never straddle it."""
    return int(hashlib.sha1(question_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


@dataclass(frozen=True)
class TrainSettings:
    """How `mhindex train efficientrag` trains; each field a user sets is an option of the command."""

    encoder: str | None = option(
        None, "A local transformers encoder folder (e.g. DeBERTa-v3) \\[default: the packaged MiniLM].",
        metavar="FOLDER",
    )  # fmt: skip
    epochs: int = option(4, "Passes over the training examples.", min=1)
    batch_size: int = option(16, "Examples per optimiser step.", min=1)
    # A small encoder with new heads on a few hundred examples: at 5e-5 (3 epochs) the held-out
    # token F1 was 0.10 and tag accuracy 0.55 on the MuSiQue sample; at 3e-4 (4 epochs), 0.28 and 0.62.
    learning_rate: float = option(
        3e-4, "AdamW's peak learning rate (linear warm-up over a tenth of the steps, then decay).", flag="--lr", min=0.0
    )
    held_out: float = option(
        0.1, "Share of the questions kept out of training to score the models on.", min=0.0, max=0.99
    )
    seed: int = option(13370, "Seed of the new heads, dropout and the batch order.")
    split: str = option("auto", SPLIT_HELP)
    device: str = option("auto", "auto (CUDA when available), cpu or cuda.", choices=("auto", "cpu", "cuda"))
    checkpoint_every: int = option(50, "Optimiser steps between checkpoints.", min=1)
    stop_after: int | None = option(
        None, "Stop after this many optimiser steps (both models together); the same command without it resumes.",
        min=1,
    )  # fmt: skip
    threads: int | None = option(None, "CPU threads \\[default: all cores].", min=1)
    backend: str = DEFAULT_BACKEND
    negatives_from_top: int = 10


@dataclass
class TrainResult:
    folder: Path
    complete: bool
    steps: int
    resumed_from: int
    report: dict

    def record(self) -> dict:
        """What `train efficientrag --json` prints."""
        return {"folder": str(self.folder), "complete": self.complete, "steps": self.steps,
                "resumed_from": self.resumed_from, **self.report}  # fmt: skip


def train(
    home: Path, corpus: CorpusDir, settings: TrainSettings, backend: BackendSpec | None = None, restart: bool = False
) -> TrainResult:
    """Build the training data, train the Labeler & Tagger then the Filter (resuming from the
    last checkpoint of the same data and settings), score both on the held-out questions, and
    put them where `ask --method efficientrag` finds them. `backend`: the index the negatives come from
    (`settings.backend` with no options when not given)."""
    import torch

    if not 0 <= settings.held_out < 1:
        raise UsageError("--held-out must be at least 0 and below 1")
    torch.set_num_threads(settings.threads or os.cpu_count() or 1)
    device = resolve_device(settings.device)
    # New heads, dropout and loading a model draw from torch's global generator: training seeds it per model and
    # this leaves the caller's as it was (a notebook's own draws do not move, and do not move the models).
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if device.startswith("cuda") else []):
        return _train(home, corpus, settings, device, backend, restart)


def _train(
    home: Path, corpus: CorpusDir, settings: TrainSettings, device: str, backend: BackendSpec | None, restart: bool
) -> TrainResult:
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.encoders import resolve_encoder

    encoder = resolve_encoder(settings.encoder)
    target = unlinked(models_root(home) / corpus.name)
    work = unlinked(target.with_name(corpus.name + ".partial"))
    if restart:
        shutil.rmtree(work, ignore_errors=True)
    retriever = open_retriever(corpus, backend or BackendSpec.parse(settings.backend))
    try:
        data = build_training_data(corpus, retriever, top=settings.negatives_from_top, split=settings.split)
    finally:
        retriever.close()
    # What a checkpoint must share to be resumed: not where or how often it runs or stops.
    ignored = dict.fromkeys(("device", "threads", "stop_after", "checkpoint_every"))
    recorded = {
        **asdict(settings),
        **ignored,
        "encoder": encoder,
        "data_sha256": data.digest(),
        "builder": BUILDER_VERSION,
    }
    if (
        not restart
        and all(_same(target / role / "training.json", recorded) for role in ("labeler", "filter"))
        and (target / "trained.json").is_file()
    ):
        ui.reporter().info(
            f"the models in {target} are up to date with this corpus and these settings (--restart trains them again)"
        )
        return TrainResult(target, True, 0, 0, orjson.loads((target / "trained.json").read_bytes()))
    work.mkdir(parents=True, exist_ok=True)
    _write_data(work / "data", data, settings.held_out)
    log = ui.reporter()
    log.info(
        f"training data from {data.stats['questions']} questions: {len(data.labeler)} labeler and "
        f"{len(data.filter)} filter examples",
        **{k: v for k, v in data.stats.items() if v is not None},
    )
    steps_done, resumed_from, complete = 0, 0, True
    for role, examples in (("labeler", data.labeler), ("filter", data.filter)):
        train_set = [e for e in examples if not held_out(e["question_id"], settings.held_out)]
        budget = None if settings.stop_after is None else max(0, settings.stop_after - steps_done)
        outcome = _train_role(role, train_set, work, encoder, device, settings, recorded, budget)
        steps_done += outcome["steps"]
        resumed_from += outcome["resumed_from"]
        if not outcome["complete"]:
            complete = False
            break
    report: dict = {"corpus": corpus.name, "steps": steps_done}
    if complete:
        report = _finish(work, target, corpus, data, settings, recorded, device)
    return TrainResult(target if complete else work, complete, steps_done, resumed_from, report)


def _write_data(folder: Path, data: TrainingData, share: float) -> None:
    """The examples as JSONL, train and held-out apart, for users to inspect."""
    folder.mkdir(parents=True, exist_ok=True)
    for role, examples in (("labeler", data.labeler), ("filter", data.filter)):
        for split, wanted in (("train", False), ("held_out", True)):
            lines = b"".join(orjson.dumps(e) + b"\n" for e in examples if held_out(e["question_id"], share) == wanted)
            (folder / f"{role}.{split}.jsonl").write_bytes(lines)
    (folder / "stats.json").write_bytes(orjson.dumps(data.stats, option=orjson.OPT_INDENT_2))


def _batch_tensors(model: WordModel, examples: list[dict]):
    """Inputs, token labels (on each labelled word's first sub-token) and tags for one batch."""
    import torch

    if model.role == "labeler":
        batch, positions = model.encode([e["query"] for e in examples], [e["chunk"] for e in examples])
    else:
        batch, positions = model.encode([e["words"] for e in examples])
    labels = torch.full(batch["input_ids"].shape, IGNORED, dtype=torch.long)
    for row, (example, first_token) in enumerate(zip(examples, positions, strict=True)):
        targets = example["useful"] if model.role == "labeler" else example["keep"]
        if targets is None:
            continue
        for word, position in first_token.items():
            labels[row, position] = targets[word]
    tags = torch.tensor([e["tag"] for e in examples]) if model.role == "labeler" else None
    return batch, labels, tags


def _loss(model: WordModel, examples: list[dict], positive_weight: float):
    import torch
    import torch.nn.functional as F

    batch, labels, tags = _batch_tensors(model, examples)
    token_logits, sequence_logits = model.forward(batch)
    labels = labels.to(model.device)
    weights = torch.tensor([1.0, positive_weight], device=model.device)
    loss = torch.zeros((), device=model.device)
    if (labels != IGNORED).any():
        loss = loss + F.cross_entropy(
            token_logits.reshape(-1, 2), labels.reshape(-1), weight=weights, ignore_index=IGNORED
        )
    if sequence_logits is not None:
        loss = loss + F.cross_entropy(sequence_logits, tags.to(model.device))
    return loss


def _positive_weight(role: str, examples: list[dict]) -> float:
    """Useful words are a few in a hundred: weigh them by the ratio of useless to useful words
    (at most 10), or the head learns to drop every word."""
    key = "useful" if role == "labeler" else "keep"
    ones = sum(sum(e[key]) for e in examples if e[key] is not None)
    total = sum(len(e[key]) for e in examples if e[key] is not None)
    return 1.0 if not ones else float(min(10.0, max(1.0, (total - ones) / ones)))


def _train_role(
    role: str,
    examples: list[dict],
    work: Path,
    encoder: str,
    device: str,
    settings: TrainSettings,
    recorded: dict,
    budget: int | None,
) -> dict:
    import numpy as np
    import torch
    from transformers import get_linear_schedule_with_warmup

    done_dir = work / role
    if (done_dir / "model.safetensors").is_file() and _same(done_dir / "training.json", recorded):
        return {"steps": 0, "resumed_from": 0, "complete": True}
    if not examples:
        raise UsageError(f"no training examples for the {role}: the corpus has too few questions with decompositions")
    # The new heads' weights and dropout draw from torch's generator (unseeded, the models followed whatever had
    # run before in the process); a resumed training restores it from the checkpoint.
    torch.manual_seed(settings.seed + (role == "filter"))
    per_epoch = math.ceil(len(examples) / settings.batch_size)
    total = per_epoch * settings.epochs
    model = WordModel.fresh(encoder, role, device)
    optimizer = torch.optim.AdamW(model.network.parameters(), lr=settings.learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=max(1, total // 10), num_training_steps=total
    )
    checkpoint = work / f"{role}.checkpoint.pt"
    step, losses = _resume(checkpoint, role, device, recorded, (model, optimizer, schedule))
    resumed_from = step
    positive_weight = _positive_weight(role, examples)
    log_path = work / f"{role}.log.jsonl"
    model.network.train()
    stop_at = total if budget is None else min(total, step + budget)
    with ui.reporter().progress(f"training the {role}", total=total) as bar, open(log_path, "ab") as log:
        bar.update(completed=step)
        while step < stop_at:
            epoch, index = divmod(step, per_epoch)
            order = np.random.default_rng(settings.seed + epoch).permutation(len(examples))
            batch = [examples[i] for i in order[index * settings.batch_size : (index + 1) * settings.batch_size]]
            loss = _loss(model, batch, positive_weight)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.network.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            losses.append(round(loss.item(), 5))
            log.write(
                orjson.dumps(
                    {
                        "step": step,
                        "epoch": epoch + 1,
                        "loss": losses[-1],
                        "lr": schedule.get_last_lr()[0],
                        "resumed_from": resumed_from,
                    }
                )
                + b"\n"
            )
            log.flush()
            bar.update(completed=step, description=f"training the {role} (loss {losses[-1]:.3f})")
            if step % settings.checkpoint_every == 0 or step == stop_at or ui.stop_requested():
                _save_checkpoint(checkpoint, model, optimizer, schedule, step, losses, recorded)
            if ui.stop_requested():
                raise Interrupted(
                    f"training the {role} stopped at step {step} of {total}; the checkpoint is in {work}: the "
                    "same command resumes"
                )
    if step < total:
        return {"steps": step - resumed_from, "resumed_from": resumed_from, "complete": False}
    model.save(done_dir, trained_steps=step, examples=len(examples), positive_weight=positive_weight)
    (done_dir / "training.json").write_bytes(orjson.dumps({**recorded, "losses": losses}))
    checkpoint.unlink(missing_ok=True)
    return {"steps": step - resumed_from, "resumed_from": resumed_from, "complete": True}


def _same(path: Path, recorded: dict) -> bool:
    if not path.is_file():
        return False
    found = orjson.loads(path.read_bytes())
    return {k: v for k, v in found.items() if k != "losses"} == recorded


def _restore_generators(state: dict, device: str) -> None:
    """Dropout goes on from where the checkpoint left it, so that a resumed training ends where one in a go does."""
    import torch

    if "generator" in state:
        torch.set_rng_state(state["generator"].cpu())
    if "cuda_generator" in state and device.startswith("cuda"):
        torch.cuda.set_rng_state(state["cuda_generator"].cpu())


def _resume(
    checkpoint: Path, role: str, device: Any, recorded: dict, training: tuple[Any, Any, Any]
) -> tuple[int, list]:
    """The step and losses a checkpoint of the same data and settings left, its state loaded into the model, optimiser
    and schedule; (0, []) where there is none, it was made otherwise, or it is damaged (said, and trained again)."""
    import torch

    if not checkpoint.is_file():
        return 0, []
    try:
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        kept = isinstance(state, dict) and all(
            k in state for k in ("network", "optimizer", "schedule", "step", "losses")
        )
    except Exception as error:  # noqa: BLE001 - a damaged checkpoint (cut short, overwritten) is trained again
        ui.reporter().warning(f"{checkpoint} is damaged ({type(error).__name__}); training the {role} from the start")
        return 0, []
    if not kept or state.get("recorded") != recorded:
        ui.reporter().warning(f"{checkpoint}: made with other data or settings; training the {role} from the start")
        return 0, []
    model, optimizer, schedule = training
    model.network.load_state_dict(state["network"])
    _restore_generators(state, device)
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    return int(state["step"]), list(state["losses"])


def _save_checkpoint(
    path: Path, model: WordModel, optimizer, schedule, step: int, losses: list[float], recorded: dict
) -> None:
    import torch

    partial = path.with_name(path.name + ".partial")
    state = {
        "network": model.network.state_dict(),
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "step": step,
        "losses": losses,
        "recorded": recorded,
        "generator": torch.get_rng_state(),
    }
    if model.device.startswith("cuda"):
        state["cuda_generator"] = torch.cuda.get_rng_state()
    torch.save(state, partial)
    os.replace(partial, path)


def score(
    labeler: WordModel, query_filter: WordModel, labeler_examples: Iterable[dict], filter_examples: Iterable[dict]
) -> dict:
    """Held-out scores: the Labeler's useful-word F1 and tag accuracy, the Filter's kept-word F1
    and the share of next queries it rebuilds exactly."""
    labeler_examples, filter_examples = list(labeler_examples), list(filter_examples)
    scores: dict[str, Any] = {"labeler_examples": len(labeler_examples), "filter_examples": len(filter_examples)}
    if labeler_examples:
        predicted = labeler.predict([e["query"] for e in labeler_examples], [e["chunk"] for e in labeler_examples])
        tp = fp = fn = 0
        correct_tags = 0
        for example, (kept, tag, seen) in zip(labeler_examples, predicted, strict=True):
            correct_tags += tag == example["tag"]
            if example["useful"] is None:
                continue
            gold = {i for i, u in enumerate(example["useful"][:seen]) if u}  # the words that fit in 384 tokens
            tp, fp, fn = tp + len(gold & set(kept)), fp + len(set(kept) - gold), fn + len(gold - set(kept))
        scores["labeler_token_f1"] = round(_f1(tp, fp, fn), 4)
        scores["labeler_tag_accuracy"] = round(correct_tags / len(labeler_examples), 4)
    if filter_examples:
        predicted = query_filter.predict([e["words"] for e in filter_examples])
        tp = fp = fn = exact = 0
        for example, (kept, _, _) in zip(filter_examples, predicted, strict=True):
            gold = {i for i, k in enumerate(example["keep"]) if k}
            tp, fp, fn = tp + len(gold & set(kept)), fp + len(set(kept) - gold), fn + len(gold - set(kept))
            exact += gold == set(kept)
        scores["filter_token_f1"] = round(_f1(tp, fp, fn), 4)
        scores["filter_exact_query"] = round(exact / len(filter_examples), 4)
    return scores


def _f1(tp: int, fp: int, fn: int) -> float:
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def _finish(
    work: Path,
    target: Path,
    corpus: CorpusDir,
    data: TrainingData,
    settings: TrainSettings,
    recorded: dict,
    device: str,
) -> dict:
    """Score on the held-out questions, record what the models were trained on, and move them
    where the method looks, replacing earlier ones only now that these are complete."""
    labeler = WordModel.load(work / "labeler", "labeler", device)
    query_filter = WordModel.load(work / "filter", "filter", device)
    with ui.reporter().activity("scoring on the held-out questions"):
        scores = score(
            labeler,
            query_filter,
            (e for e in data.labeler if held_out(e["question_id"], settings.held_out)),
            (e for e in data.filter if held_out(e["question_id"], settings.held_out)),
        )
    questions = {e["question_id"] for e in data.labeler}
    manifest = corpus.manifest()
    report = {
        "corpus": corpus.name,
        "corpus_sha256": manifest.get("corpus_sha256"),
        "dataset": manifest.get("dataset"),
        "questions": len(questions),
        "split": data.split,
        "held_out_questions": sum(held_out(q, settings.held_out) for q in questions),
        # The questions the models learnt from (not those held out to score them): eval refuses them.
        "trained_question_ids": sorted(q for q in questions if not held_out(q, settings.held_out)),
        # ... and those held out, which `eval --questions-of` this folder asks (a corpus with no train split)
        "held_out_question_ids": sorted(q for q in questions if held_out(q, settings.held_out)),
        "encoder": recorded["encoder"],
        "settings": {k: v for k, v in recorded.items() if k not in ("data_sha256",)},
        "data_sha256": recorded["data_sha256"],
        "stats": data.stats,
        "held_out": scores,
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (work / "trained.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    for leftover in work.glob("*.checkpoint.pt*"):
        leftover.unlink()
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(work, target)
    shutil.rmtree(old, ignore_errors=True)
    return report
