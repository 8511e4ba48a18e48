"""SearChain: Search-in-the-Chain (Xu et al., WWW 2024, arXiv 2304.14732).

1. The LM plans the whole reasoning chain at once, a Chain-of-Query: `[Query n]` / `[Answer n]`
   pairs, `[Unsolved Query]` where it does not know, and a `[Final Content]` whose claims cite
   their query as `[n]`.
   The chain is read as the released server reads it (`Chain.parse`), its quirks kept: a query left
   unanswered is checked as one answered with nothing, and an `[Unsolved Query]` under its `[Query n]`
   (the release's prompt teaches it so) is a node of its own.
2. Retrieval walks the chain's nodes in order (the released `Server/server.py`). Each query not
   seen before gets the top-1 document, and a reader answers it from that document with a
   confidence:
   - an `[Unsolved Query]` always gets the document and the reader's answer back, whatever the
     reader's confidence and even when it read nothing (completion);
   - an answered query whose reader answer is confident (above the threshold) and not contained
     in the LM's answer gets it back too (verification);
   - otherwise the node passes, and its document becomes the reference of its claims.
   The first node that needs feedback ends the round: the feedback and its reference go back to
   the LM as the next turn of the same conversation, and the LM writes a new chain (the paper's
   Tree-of-Reasoning). Rounds stop when every node passes, or after `--rounds`.
3. Tracing (the paper's last step): the LM is given the verified chain, each query with its
   verified answer and its document as `[Reference n]`, and writes the final content, marking
   each claim with the reference that supports it as `[n]`. The answer is what that content says
   after "So the final answer is"; each `[n]` points at node n's document. Without Tracing
   (`--no-tracing`), or when it names no answer, the last chain's `[Final Content]` answers.

Deviations from the paper, each forced by what can run here and said where it happens: the
prompts are our own text in the paper's format (the authors' repository has no license; see
`mhindex/prompts/searchain/SOURCE.md`); queries count as seen when their SQuAD-normalised text
is equal (the paper's Quora cross-encoder cannot be downloaded); and unless a DPR reader is
given (`--reader-model hf:PATH`), the LM reads, its confidence being the probability it gives
its own answer (the geometric mean of the answer's token probabilities).

The record keeps everything the LM wrote for the question (`generated`: every chain and the
final content), over which the released client's accumulated text would be read; see
eval/metrics.py for the two cover-EMs.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mhindex.backends.base import Retriever
from mhindex.errors import UsageError
from mhindex.lm.base import LanguageModel, LMError
from mhindex.methods.base import (
    Answer,
    Clock,
    Meter,
    Method,
    MethodContext,
    Query,
    Step,
    TraceStep,
    text_of,
    trace_step,
)
from mhindex.methods.prompts import concludes, cut_repetition, extract_answer, paragraph_block
from mhindex.options import option
from mhindex.text import normalize_answer

# Calibrated on the bundled samples (benchmarks/studies/calibrate_searchain.py, benchmarks/README.md): the
# LM reader's answer probability above which its answer is right more often than not (Qwen2.5-0.5B:
# 51% right above 0.6, 47% above 0.5; benchmarks/results/searchain_calibration_qwen2.5-0.5b.txt).
LM_READER_THRESHOLD = 0.6
# The paper's threshold on DPR's relevance logit (Server/server.py of the released code).
DPR_READER_THRESHOLD = 1.5

VERIFY_FEEDBACK = (
    'According to the Reference, the answer for "{query}" should be "{answer}", you can change your answer and '
    "continue constructing the reasoning chain for [Question]: {question}. Reference: {reference}"
)
COMPLETE_FEEDBACK = (
    'According to the Reference, the answer for "{query}" should be "{answer}", you can give your answer and '
    "continue constructing the reasoning chain for [Question]: {question}. Reference: {reference}"
)
READ_INSTRUCTION = "Answer the question with a short phrase taken from the passage."
# Each chain is written as the continuation of an assistant turn that starts with this: small
# models otherwise answer in prose and skip the queries. A server that does not continue a
# prefilled turn (OpenAI's) writes a whole turn instead, tags included; both parse the same.
CHAIN_START = "[Query 1]:"
# The format's lines are single-spaced; a blank line means the chain is over (small models go
# on with another question otherwise).
CHAIN_STOPS = ["\n\n", "[Question]"]
# Tracing: the verified chain goes back to the LM, which writes the final content citing it.
TRACE_REQUEST = (
    "The reasoning chain for [Question]: {question} has been checked with a search engine. Each [Reference n] is the "
    "document found for [Query n], and each [Answer n] is the answer that was verified.\n\n{chain}\n\n"
    "Generate the final content for the [Question] from this chain: mark each sentence with the number of the "
    "reference "
    'that supports it, as [n], and end with "So the final answer is" and a short answer.'
)
TRACE_START = "[Final Content]:"
TRACE_REFERENCE_WORDS = 80  # each reference is cut to this many words in the Tracing prompt


@dataclass(frozen=True)
class SearChainSettings:
    rounds: int = option(5, "Most rounds of SearChain's Tree-of-Reasoning (a new chain after each feedback).", min=1)
    verify_threshold: float | None = option(
        None,
        f"Reader confidence above which a contradicting answer is fed back \\[default: {LM_READER_THRESHOLD} "
        f"for the LM reader's answer probability, {DPR_READER_THRESHOLD} for a DPR reader's relevance logit].",
    )
    reader_model: str | None = option(
        None,
        "SearChain's reader: hf:PATH of a DPR reader (e.g. facebook/dpr-reader-multiset-base) \\[default: the "
        "LM reads; its confidence comes from its token log-probabilities].",
    )
    chain_prompt: str | None = option(
        None,
        "A file with SearChain's Chain-of-Query prompt, {question} where the question goes \\[default: "
        "mhindex's, in the paper's format].",
        reads="file",
    )
    chain_tokens: int = option(300, "Most tokens for one Chain-of-Query (and for Tracing's final content).", min=16)
    max_paragraph_words: int = option(350, "Paragraphs are cut to this many words in prompts.", min=1)
    tracing: bool = option(
        True,
        "SearChain's last step: the LM writes the final content from the verified chain, citing each claim's "
        "document, and the answer comes from it (--no-tracing: from the last chain's [Final Content]).",
        before=False,
    )

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        """The settings as run.json records them, with the threshold that applies."""
        reader = DPRReader if self.reader_model else LMReader
        return {
            **asdict(self),
            "verify_threshold": self.verify_threshold
            if self.verify_threshold is not None
            else reader.default_threshold,
        }


# -- the chain --------------------------------------------------------------------------------

_CITATION = re.compile(r"\s*\[\d+\]")
_TAG = re.compile(
    r"^\s*\[(?P<tag>query|answer|unsolved query|final content)(?:\s*(?P<n>\d+))?\]\s*:?\s*(?P<text>.*)$", re.I
)


@dataclass
class ChainNode:
    number: int
    query: str
    lm_answer: str | None = None  # the answer line's text after its tag, as the trace shows it
    unsolved: bool = False
    answer_line: str | None = None  # the whole line, which the server matches the reader's answer in


def _after_tag(line: str | None) -> str | None:
    """An answer line's text after its tag ("[Answer 1]: X" -> "X")."""
    if line is None:
        return None
    match = _TAG.match(line)
    return match["text"].strip() if match else line.strip()


@dataclass
class Chain:
    text: str
    nodes: list[ChainNode]
    final_content: str | None

    @classmethod
    def parse(cls, text: str) -> Chain:
        """The chain as the released server reads it (`Server/server.py`, its `__main__` loop; tests/readings holds
        the two readings to each other): each line holding "Query" and "]:" is a node, unsolved where what comes
        before its first "]" says "Unsolved"; its query is what follows that "]" up to the next one, the ":"
        dropped; the LM's answer to it is the next line holding "Answer" (matched whole, as the server matches
        it), none where no line after it does."""
        lines, nodes = text.split("\n"), list[ChainNode]()
        for number, line in enumerate(lines):
            if "Query" not in line or "]:" not in line:
                continue
            kind, item = line.split("]")[:2]
            item = item[1:] if ":" in item else item
            said = next((later for later in lines[number + 1 :] if "Answer" in later), None)
            nodes.append(ChainNode(len(nodes) + 1, item.strip(), _after_tag(said), "Unsolved" in kind, said))
        return cls(text.strip(), nodes, _final_content(text))

    def answer(self) -> str:
        """What the final content concludes (its citation marks dropped); without one, the last
        answered node's answer."""
        answered = [n.lm_answer for n in self.nodes if n.lm_answer]
        conclusion = self.final_content or (answered[-1] if answered else "")
        return extract_answer(_CITATION.sub("", conclusion))


def cited(content: str) -> list[int]:
    """The node numbers a final content cites, in order of first citation."""
    return list(dict.fromkeys(int(n) for n in re.findall(r"\[(\d+)\]", content)))


def _reference(passage: str) -> str:
    """A document as Tracing shows it: "Title: text"."""
    return passage.removeprefix("Wikipedia Title: ").replace("\n", ": ", 1)


def _words(text: str, count: int) -> str:
    split = text.split()
    return " ".join(split[:count]) + (" ..." if len(split) > count else "")


def _final_content(text: str) -> str | None:
    """The last `[Final Content]` with its continuation lines (up to the next tag)."""
    found: str | None = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = _TAG.match(line)
        if match and match["tag"].lower() == "final content":
            parts = [match["text"].strip()]
            for follow in lines[i + 1 :]:
                if _TAG.match(follow):
                    break
                if follow.strip():
                    parts.append(follow.strip())
            found = " ".join(p for p in parts if p)
    return found or None


# -- readers ----------------------------------------------------------------------------------


class LMReader:
    """The LM answers the query from the document; its confidence is the probability it gives that
    answer (the geometric mean of its token probabilities), in [0, 1]."""

    default_threshold = LM_READER_THRESHOLD

    def __init__(self, lm: LanguageModel) -> None:
        self.lm = lm

    def read(self, meter: Meter, query: str, passage: str) -> tuple[str, float]:
        prompt = f"{READ_INSTRUCTION}\n\n{passage}\n\nQ: {query}\nA:"
        completion = meter.complete(prompt, 32, stop=["\n"], label="reading the top document", logprobs=True)
        if completion.token_logprobs is None:
            raise LMError(
                f"{self.lm.name} returned no token log-probabilities; SearChain's LM reader needs them (or "
                "pass --reader-model hf:PATH)"
            )
        mean = completion.mean_logprob
        return extract_answer(completion.text), math.exp(mean) if mean is not None else 0.0


class DPRReader:
    """DPR's reader, as the paper uses it: `[CLS] q [SEP] title [SEP] text`, the best span by
    start/end logits, the confidence being the passage's relevance logit."""

    default_threshold = DPR_READER_THRESHOLD

    def __init__(self, source: str) -> None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            import transformers
            from transformers import DPRReader as Model
            from transformers import DPRReaderTokenizer
        except ImportError:
            raise UsageError(
                "--reader-model hf:PATH needs transformers and torch: pip install 'mhindex[transformers]'"
            ) from None
        try:
            self.tokenizer = DPRReaderTokenizer.from_pretrained(source, local_files_only=True)
            self.model = Model.from_pretrained(source, local_files_only=True).eval()
        except (OSError, ValueError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise UsageError(
                f"--reader-model: cannot load a DPR reader from {source} without the network: {first}"
            ) from None
        transformers.utils.logging.set_verbosity_error()
        self._torch = torch

    def read(self, meter: Meter, query: str, passage: str) -> tuple[str, float]:
        title, _, text = passage.partition("\n")
        encoded = self.tokenizer(
            questions=[query],
            titles=[title.removeprefix("Wikipedia Title: ")],
            texts=[text],
            return_tensors="pt",
            truncation=True,
            max_length=512,
        )
        with self._torch.inference_mode():
            outputs = self.model(**encoded)
        spans = self.tokenizer.decode_best_spans(encoded, outputs, num_spans=1, max_answer_length=16)
        return (spans[0].text if spans else ""), float(outputs.relevance_logits[0])


def make_reader(spec: str | None, lm: LanguageModel) -> LMReader | DPRReader:
    if not spec:
        return LMReader(lm)
    kind, _, path = spec.partition(":")
    if kind != "hf" or not path:
        raise UsageError(f"--reader-model {spec!r}: write hf:PATH (a DPR reader folder)")
    return DPRReader(path)


# -- the method -------------------------------------------------------------------------------


@dataclass
class NodeCheck:
    """What retrieval said about one query: the top document, the reader's answer and confidence."""

    query: str
    doc: dict[str, Any] | None
    reader_answer: str = ""
    confidence: float | None = None


@dataclass
class Round:
    chain: Chain
    nodes: list[dict[str, Any]] = field(default_factory=list)
    feedback: str | None = None

    def record(self) -> dict[str, Any]:
        return {"chain": self.chain.text, "nodes": self.nodes, "feedback": self.feedback}


@dataclass
class _Asked:
    """One question's state across its rounds: what was checked, the steps shown, the cost."""

    question: str
    meter: Meter
    clock: Clock
    seen: dict[str, NodeCheck] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    departures: list[str] = field(default_factory=list)


#: the departure (methods.base.Answer) of a node with no query
EMPTY_QUERY = (
    "a node with no query was passed over (the release searches for the empty query and feeds its top passage back)"
)


def contains(prediction: str, gold: str) -> bool:
    """The released code's match: the normalised reader answer occurs in the normalised LM answer."""
    return normalize_answer(gold) in normalize_answer(prediction)


class SearChain(Method):
    name = "searchain"
    title = "SearChain"
    paper = "Search-in-the-Chain (Xu et al., WWW 2024; xsc1234/Search-in-the-Chain)"
    tables = {"SearChain": {"SearChain": {}}}
    paper_metrics = ("cover_em_generated",)
    Settings = SearChainSettings

    settings: SearChainSettings

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: SearChainSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.reader = make_reader(settings.reader_model, lm)
        self.threshold = (
            settings.verify_threshold if settings.verify_threshold is not None else self.reader.default_threshold
        )
        self.prompt = self._prompt_template(settings.chain_prompt)

    @staticmethod
    def _prompt_template(path: str | None) -> str:
        if path is None:
            from importlib import resources

            return (
                resources.files("mhindex")
                .joinpath("prompts", "searchain", "chain_of_query.txt")
                .read_text(encoding="utf-8")
            )
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as error:
            raise UsageError(f"--chain-prompt {path}: {error.strerror or error}") from None
        if "{question}" not in text:
            raise UsageError(f"--chain-prompt {path}: the prompt has no {{question}} to put the question in")
        return text

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each round's chain and the nodes it checked (as `ask` writes them), its feedback, then Tracing:
        the final content and what each [k] points at."""
        steps: list[TraceStep] = []
        for number, round_ in enumerate(record.get("tree") or [], 1):
            rows = [["chain", text_of(round_.get("chain", ""))]]
            for node in round_.get("nodes", []):
                confidence, number_ = node.get("confidence"), node.get("n", "?")
                answered = "(unsolved)" if node.get("unsolved") else node.get("lm_answer", "")
                shown = f"{confidence:.2f}" if isinstance(confidence, int | float) else "-"
                rows.append(
                    [
                        f"node {number_}",
                        f"[Query {number_}] {node.get('query', '')} -> {answered}; "
                        f"reader: {node.get('reader_answer') or '-'} ({shown}): {node.get('verdict', '')}",
                    ]
                )
            if round_.get("feedback"):
                rows.append(["feedback", text_of(round_["feedback"])])
            ids = [n["doc"]["id"] for n in round_.get("nodes", []) if isinstance(n.get("doc"), dict)]
            steps.append(trace_step(f"Round {number}", rows, ids))
        if record.get("final_content"):
            rows = [
                ["final content", text_of(record["final_content"])],
                ["answer from", text_of(record.get("answer_from"))],
            ]
            rows += [
                ["", f"[{ref.get('n')}] {ref.get('title', '')} ({ref.get('id', '')}), for: {ref.get('query', '')}"]
                for ref in record.get("references", [])
            ]
            steps.append(trace_step("Tracing", rows))
        return steps

    def answer(self, query: Query) -> Answer:
        asked = _Asked(query.question, Meter(self.lm), Clock())
        conversation = [{"role": "user", "content": self.prompt.replace("{question}", query.question)}]
        rounds: list[Round] = []
        for number in range(1, self.settings.rounds + 1):
            prefilled = [*conversation, {"role": "assistant", "content": CHAIN_START}]
            generation = asked.meter.chat(
                prefilled,
                self.settings.chain_tokens,
                stop=CHAIN_STOPS,
                label=f"round {number}: writing the chain",
                keep=self.prompt.index("{question}"),
            ).text.strip()
            generation = cut_repetition(generation)
            chain_text = (
                generation
                if _TAG.match(generation.splitlines()[0] if generation else "")
                else f"{CHAIN_START} {generation}"
            )
            current = Round(Chain.parse(chain_text))
            rounds.append(current)
            current.feedback = self._walk(asked, current, number)
            if current.feedback is None or number == self.settings.rounds:
                break
            conversation += [
                {"role": "assistant", "content": chain_text},
                {"role": "user", "content": current.feedback},
            ]
        final = rounds[-1].chain
        generated = [r.chain.text for r in rounds]
        content, answer, source = final.final_content or "", final.answer(), "chain"
        if self.settings.tracing and final.nodes:
            conversation += [{"role": "assistant", "content": final.text}]
            traced = self._trace(asked, conversation, rounds[-1])
            generated.append(f"{TRACE_START} {traced}")
            if concludes(traced):
                content, answer, source = traced, extract_answer(_CITATION.sub("", traced)), "tracing"
        details = {
            "rounds": len(rounds),
            "final_content": content,
            "answer_from": source,
            "references": self._references(final, content, asked.seen),
            "tree": [r.record() for r in rounds],
            "generated": "\n".join(generated),
        }
        # Every document checked, in the order first checked (what recall counts).
        retrieved = list(
            {c.doc["id"]: {"id": c.doc["id"], "title": c.doc["title"]} for c in asked.seen.values() if c.doc}.values()
        )
        meter = asked.meter
        return Answer(
            query.id,
            query.question,
            answer,
            retrieved,
            asked.steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            asked.clock(),
            final.text,
            self.name,
            details=details,
            departures=list(dict.fromkeys(asked.departures)),
        )

    def _trace(self, asked: _Asked, conversation: list[dict[str, Any]], last: Round) -> str:
        """Tracing: the verified chain, each node's answer (the reader's where feedback corrected or
        completed it) and its document as [Reference n], back to the LM for the final content."""
        lines = []
        for node in last.chain.nodes:
            check = asked.seen.get(normalize_answer(node.query))
            answer = node.lm_answer or ""
            # What the check says of this node's answer now (a node seen in an earlier round keeps
            # its check, and the LM may have kept an answer that check contradicted).
            if check is not None and self._verdict(node, check) in ("completed", "corrected"):
                answer = check.reader_answer or answer
            lines += [f"[Query {node.number}]: {node.query}", f"[Answer {node.number}]: {answer or 'unknown'}"]
            if check is not None and check.doc is not None:
                lines.append(
                    f"[Reference {node.number}]: {_words(_reference(check.doc['passage']), TRACE_REFERENCE_WORDS)}"
                )
        request = TRACE_REQUEST.format(question=asked.question, chain="\n".join(lines))
        messages = [*conversation, {"role": "user", "content": request}, {"role": "assistant", "content": TRACE_START}]
        started, before = asked.clock(), (asked.meter.prompt_tokens, asked.meter.completion_tokens)
        text = asked.meter.chat(
            messages,
            self.settings.chain_tokens,
            stop=[*CHAIN_STOPS, "[Query"],
            label="tracing: writing the final content",
            keep=self.prompt.index("{question}"),
        ).text.strip()
        text = cut_repetition(text.removeprefix(TRACE_START).strip())
        step = Step(f"tracing: {text}", "", [], [], asked.clock() - started)
        step.prompt_tokens, step.completion_tokens = (
            asked.meter.prompt_tokens - before[0],
            asked.meter.completion_tokens - before[1],
        )
        asked.steps.append(step)
        return text

    def _walk(self, asked: _Asked, current: Round, number: int) -> str | None:
        """Check the chain's nodes in order; the feedback for the first that needs one, else None."""
        meter, seen = asked.meter, asked.seen
        for node in current.chain.nodes:
            if not node.query:  # "[Unsolved Query]:" and nothing: the release searches for "" and feeds back its top 1
                asked.departures.append(EMPTY_QUERY)
                continue
            key = normalize_answer(node.query)
            started, tokens_before = asked.clock(), (meter.prompt_tokens, meter.completion_tokens)
            if key in seen and not node.unsolved:  # the released code also re-checks unsolved queries
                check, verdict = seen[key], "seen"
            else:
                check = self._check(meter, node.query)
                seen[key] = check
                verdict = self._verdict(node, check)
            current.nodes.append(
                {
                    "n": node.number,
                    "query": node.query,
                    "lm_answer": node.lm_answer,
                    "unsolved": node.unsolved,
                    "verdict": verdict,
                    "reader_answer": check.reader_answer,
                    "confidence": check.confidence,
                    "doc": {"id": check.doc["id"], "title": check.doc["title"]} if check.doc else None,
                }
            )
            if verdict != "seen":
                shown = node.lm_answer if not node.unsolved else "(unsolved)"
                confidence = f"{check.confidence:.2f}" if check.confidence is not None else "-"
                text = (
                    f"round {number}, [Query {node.number}] {node.query} -> {shown}; reader: "
                    f"{check.reader_answer or '-'} ({confidence}): {verdict}"
                )
                titles = [check.doc["title"]] if check.doc else []
                step = Step(text, node.query, [check.doc["id"]] if check.doc else [], titles, asked.clock() - started)
                step.prompt_tokens, step.completion_tokens = (
                    meter.prompt_tokens - tokens_before[0],
                    meter.completion_tokens - tokens_before[1],
                )
                asked.steps.append(step)
            if verdict in ("completed", "corrected"):
                assert check.doc is not None  # a node is completed or corrected from its document
                template = COMPLETE_FEEDBACK if verdict == "completed" else VERIFY_FEEDBACK
                return template.format(
                    query=node.query,
                    answer=check.reader_answer,
                    question=asked.question,
                    reference=check.doc["passage"],
                )
        return None

    def _check(self, meter: Meter, query: str) -> NodeCheck:
        hits = self.retriever.search(query, 1)
        if not hits:
            return NodeCheck(query, None)
        hit = hits[0]
        passage = paragraph_block(hit.title, hit.text, self.settings.max_paragraph_words)
        answer, confidence = self.reader.read(meter, query, passage)
        return NodeCheck(query, {"id": hit.id, "title": hit.title, "passage": passage}, answer, confidence)

    def _verdict(self, node: ChainNode, check: NodeCheck) -> str:
        if check.doc is None:
            return "unchecked"  # nothing found: no reference to give
        if node.unsolved:
            return "completed"  # the released server feeds the document back whatever the reader read
        if not check.reader_answer:
            return "passed"  # the released match_or_not: an empty answer is contained in any
        confident = check.confidence is not None and check.confidence > self.threshold
        if confident and not contains(node.answer_line or "", check.reader_answer):
            return "corrected"
        return "verified" if confident else "passed"

    @staticmethod
    def _references(chain: Chain, content: str, seen: dict[str, NodeCheck]) -> list[dict[str, Any]]:
        """[k] of the final content -> the document checked for node k of the final chain."""
        by_number = {node.number: node for node in chain.nodes}
        references = []
        for number in cited(content):
            node = by_number.get(number)
            check = seen.get(normalize_answer(node.query)) if node else None
            if node is not None and check is not None and check.doc is not None:
                references.append(
                    {"n": number, "query": node.query, "id": check.doc["id"], "title": check.doc["title"]}
                )
        return references
