"""KD-CoT: Knowledge-Driven Chain-of-Thought (Wang et al., 2023, arXiv 2308.13259).

The LM reasons in rounds of `Thought i` / `Action i` / `Answer i` lines after one demonstration,
the one of a collection whose question is most like the asked one. Each `Question[...]` or
`Multi_Answer_Question[...]` goes to an external QA system that checks the LM's own `Answer i`:

1. retrieve the top passages for the sub-question (any backend);
2. read them: the reader answers the sub-question from them;
3. verify: when the reader and the LM disagree, the verifier is asked which is right, with the
   released code's prompt ("Which is the correct answer for the question {q}\\n{lm} or {reader}"),
   and its reply is mapped to an answer as `GPT_justify.process_justify_results` maps it: "Neither,
   the correct answer should be X" gives X; a reply contained in both gives the shorter; one
   contained in the reader's gives the reader's; otherwise the LM's stands.
The verified answer replaces the LM's in the next round's prompt. `Finish[...]` is never
verified. After `--rounds` rounds (3, as in the released code) the LM must finish.

How the released code's loop is followed (`pipeline/GPT_inference_steps.py` @cbec794): a round generates until
it has written the next round's "Thought n+1", which is kept, since the release reads it; each round's output
is then read as `process_webqsp_response` reads it (`read_round`, held to the release on real outputs by
tests/test_readings.py), quirks kept: action names matched to the three by edit distance, a sub-question cut at
its first `?`, `!` or line break, and a round whose parts its patterns do not find ending the question with
what the output says after its last `Finish[` (`get_answer`).

Deviations, each forced by what runs here and said where it happens:
- the instruction is mhindex's own wording of the paper's format (the authors' repository has
  no license; `--instruction FILE` takes theirs), and so is the shipped demonstration collection
  (`mhindex/prompts/kdcot/`, on questions outside the evaluated splits; `--demos FILE` takes
  KD-CoT's own `CoT_collection` files);
- demonstrations are chosen with the packaged MiniLM (KD-CoT embeds with roberta-large-nli-stsb,
  which cannot be downloaded here), or `--demo-encoder PATH`;
- the reader is the LM prompted with the passages (KD-CoT's FiD T5-large reader cannot be
  obtained here), or `--reader-lm SPEC`; the verifier is the LM zero-shot with the released
  prompt (KD-CoT fine-tunes LLaMA for it), or `--verifier-lm SPEC`;
- when reader and LM agree after SQuAD normalisation, the verifier is not asked: any reply maps
  to that same answer.

`--qa` runs the paper's Table 2 ablations, each as the released `pipeline/GPT_justify.py` (@cbec794) makes
it: `reader` ("KD-CoT w/o Verifier") keeps the reader's answer every round (`add_fid_answer`); `verifier`
("w/o Retrieve-then-read") retrieves nothing and asks the verifier of the LM's answer alone, "For the question
Q, is the answer A correct? Response: ", a reply "No, the answer should be X" giving X (`get_match_input`,
`process_match_results`); `none` ("LLM QA-CoT selected", the vanilla CoT with the selected demonstration)
has no QA system: the LM writes its whole chain in one completion.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
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
    text_of,
    trace_step,
)
from mhindex.methods.prompts import prompt_set_for, prompt_sets
from mhindex.options import option
from mhindex.text import normalize_answer

ACTIONS = ("Question", "Multi_Answer_Question", "Finish")
DEMO_SETS = prompt_sets("kdcot", suffix=".json")  # the released demonstrations, one file per dataset
# The released verifier prompt (pipeline/GPT_justify.py of AdelWang/KD-CoT).
VERIFY_PROMPT = "Which is the correct answer for the question {question}\n{choice_1} or {choice_2}\nAssistant:"
NEITHER = "Neither, the correct answer should be"
# The released prompt of the verifier without retrieve-then-read (pipeline/GPT_justify.py, `match_prompt`).
MATCH_PROMPT = "For the question {question}, is the answer {choice} correct? Response: "
NOT_SO = "No, the answer should be"
QA_SYSTEMS = ("verified", "reader", "verifier", "none")
READ_INSTRUCTION = {
    "Question": "Answer the question with a short phrase, using the passages.",
    "Multi_Answer_Question": "Answer the question with every answer the passages give, separated by commas.",
}


@dataclass(frozen=True)
class KDCoTSettings:
    rounds: int = option(3, "Most Question rounds of KD-CoT before the LM must finish (the released code's 3).", min=1)
    k: int = option(
        5,
        "Passages retrieved for each sub-question, which the reader reads (the paper's QA system reads 100; 5 "
        "keeps a local model's prompt within seconds).",
        flag="-k",
        min=1,
    )
    demos: str | None = option(
        None,
        "KD-CoT demonstration collection: a JSON list of {question, gpt_out} (KD-CoT's CoT_collection files) "
        "\\[default: mhindex's, of the corpus's dataset: webqsp or cwq].",
        reads="file",
    )
    demo_encoder: str | None = option(
        None,
        "Sentence encoder (a local folder) that picks each question's demonstration \\[default: the packaged MiniLM].",
    )
    instruction: str | None = option(
        None,
        "A file with KD-CoT's instruction, put before the demonstration \\[default: mhindex's wording of the "
        "paper's format].",
        reads="file",
    )
    reader_lm: str | None = option(
        None, "KD-CoT's reader: an LM spec (as --lm) \\[default: the LM reads the passages]."
    )
    verifier_lm: str | None = option(
        None, "KD-CoT's verifier: an LM spec (as --lm) \\[default: the LM, zero-shot with the released prompt]."
    )
    qa: str = option(
        "verified",
        "The QA system that checks each sub-answer: verified (retrieve, read, verify: KD-CoT), reader (the reader's "
        "answer always), verifier (the verifier alone, no retrieval) or none (the LM's own chain).",
        choices=QA_SYSTEMS,
    )
    step_tokens: int = option(96, "Most tokens for one Thought/Action/Answer round.", min=16)
    max_paragraph_words: int = option(350, "Paragraphs are cut to this many words in prompts.", min=1)

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        return {**asdict(self), "demos": self.demos or f"mhindex:{demo_set(dataset)}"}


def demo_set(dataset: str | None) -> str:
    return prompt_set_for(dataset, DEMO_SETS, "webqsp")


# -- demonstrations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Demo:
    question: str
    text: str  # "Question ...\nThought 1 ...\n...Action n Finish[...]"


def read_demos(path: str | None, dataset: str | None) -> list[Demo]:
    """A collection as KD-CoT releases it: a JSON list of {question, gpt_out}, or JSON lines of
    {input, target} (its fine-tuning files, the question after "Question:" in `input`)."""
    if path is None:
        source = resources.files("mhindex").joinpath("prompts", "kdcot", f"{demo_set(dataset)}.json")
        data, where = source.read_bytes(), f"mhindex/prompts/kdcot/{demo_set(dataset)}.json"
    else:
        where = path
        try:
            data = Path(path).expanduser().read_bytes()
        except OSError as error:
            raise UsageError(f"--demos {path}: {error.strerror or error}") from None
    try:
        records = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            records = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        except orjson.JSONDecodeError as error:
            raise UsageError(f"--demos {where}: neither a JSON list nor JSON lines ({error})") from None
    demos = []
    for i, record in enumerate(
        records if isinstance(records, list) else [records]
    ):  # one JSON line parses as one object
        if (
            isinstance(record, dict)
            and isinstance(record.get("question"), str)
            and isinstance(record.get("gpt_out"), str)
        ):
            question, chain = record["question"], record["gpt_out"]
        elif (
            isinstance(record, dict) and isinstance(record.get("input"), str) and isinstance(record.get("target"), str)
        ):
            found = re.search(r"Question:?\s*(.*?)(?:\s*Let's think step by step:.*)?$", record["input"], re.S)
            question, chain = (found.group(1).strip() if found else ""), record["target"]
        else:
            raise UsageError(f"--demos {where} record {i}: expected {{question, gpt_out}} or {{input, target}}")
        chain = chain.strip()
        if not chain.startswith("Thought 1"):
            chain = f"Thought 1 {chain}"
        demos.append(Demo(question.strip(), f"Question {question.strip()}\n{chain}"))
    if not demos:
        raise UsageError(f"--demos {where}: no demonstrations in it")
    return demos


class DemoPicker:
    """The demonstration whose question is closest (cosine) to the asked one."""

    def __init__(self, demos: list[Demo], encoder: str | None) -> None:
        self.demos = demos
        self.encoder_name = encoder

    @cached_property
    def _encoder(self) -> Any:
        from mhindex.encoders import Encoder, resolve_encoder

        return Encoder(resolve_encoder(self.encoder_name), max_length=64, threads=1)

    @cached_property
    def _matrix(self) -> Any:
        return self._unit(self._encoder.encode([d.question for d in self.demos]))

    @staticmethod
    def _unit(vectors: Any) -> Any:
        import numpy as np

        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)

    def pick(self, question: str) -> Demo:
        if len(self.demos) == 1:
            return self.demos[0]
        scores = self._matrix @ self._unit(self._encoder.encode([question]))[0]
        same = normalize_answer(question)
        for i in scores.argsort()[::-1]:
            if normalize_answer(self.demos[i].question) != same:  # never the question itself
                return self.demos[int(i)]
        return self.demos[0]


# -- one round's output ------------------------------------------------------------------------


def action_name(text: str) -> str:
    """The action nearest to what was written, by edit distance, the first of equals (the released
    `action_normalization`)."""
    return min(ACTIONS, key=lambda action: _edit_distance(action, text))


def _edit_distance(a: str, b: str) -> int:
    # Levenshtein over two short strings (an action name); no library needed for this.
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def finish_answer(text: str) -> str:
    """The released `get_answer`: what follows the last `Finish[`, stripped, a last `]` and then a last `.`
    dropped (the whole text where there is no Finish)."""
    answer = text.split("Finish[")[-1].strip()
    answer = answer[:-1] if answer.endswith("]") else answer
    return answer[:-1] if answer.endswith(".") else answer


def sub_question(text: str) -> str:
    """The released `question_normalization`: cut at the first line break, tab, ? or !, and before a "Thought n"
    left in it; "" where nothing is left (the release's "unk", which ends the question)."""
    for stop in ("\n", "\t", "?", "!"):
        text = text.split(stop)[0]
    if marker := re.search(r"Thought( |\n)*[0-9]", text):
        text = re.search(r".*Thought( |\n)*[0-9]", text).group().replace(marker.group(), "")  # type: ignore[union-attr]
    return text


@dataclass
class Turn:
    thought: str
    action: str
    argument: str
    lm_answer: str = ""


def read_round(output: str, number: int) -> Turn | str:
    """Round `number`'s output as the released `process_webqsp_response` reads it (GPT_inference_steps.py): its
    Thought, Action and the LM's own Answer; or, where the round ends the question, the final answer (a string):
    no "Thought n+1" after it, an action that does not split in two, a Finish, an empty sub-question, or a part
    its patterns do not find. `output` is what the LM wrote after "Thought n", up to "Thought n+1" where it
    wrote that."""
    if f"Thought {number + 1}" not in output:
        return finish_answer(output)
    try:
        thought = re.search(rf"(.|\n)*?(Action|Event) {number}", output).group()  # type: ignore[union-attr]
        thought = re.sub(rf"(Action|Event) {number}", "", thought).strip()
        output = output.replace(f"Action {number}\n", f"Action {number}")
        action = _action(output, number)
        if len(action) < 3:  # the name on a line of its own: read again from "Action n" on
            start = output.find(f"Action {number}")
            output = f"Action {number} " + output[start:].replace(f"Action {number}", "").strip()
            action = _action(output, number)
        parts = action.split("[") if "[" in action else action.split(" ")
        if len(parts) != 2:
            return finish_answer(output)
        name, argument = action_name(parts[0]), parts[1]
        if name != "Finish" and not (argument := sub_question(argument)):
            return finish_answer(output)
        said = re.search(rf"Answer {number}(.|\n)*?(Thought|Action|Answer)", output).group()  # type: ignore[union-attr]
        said = said.replace(f"Answer {number}", "").replace("Thought", "").strip()
        said = said[:-6] if said[-6:] == "Action" else said
        said = said[:-6] if said[-6:] == "Answer" else said
        said = said.replace("\n", ",")
        said = said[:-1] if said[-1] == "." else said
        if len(said) > 300:  # the release's shortening raises (its pattern is invalid): the question ends
            raise ValueError(said)
    except (AttributeError, IndexError, ValueError):
        return finish_answer(output)
    return argument if name == "Finish" else Turn(thought, name, argument, said)


def _until(marker: str) -> Callable[[str], bool]:
    """A round's generation ends once it has written the next round's marker."""
    return lambda text: marker in text


def _action(output: str, number: int) -> str:
    found = re.search(rf"(Action|Event) {number}\n*.*?(]|\n)", output).group()  # type: ignore[union-attr]
    return re.sub(rf"(Action|Event) {number}", "", found).replace("]", "").strip()


def matched_answer(reply: str, lm_answer: str) -> str:
    """The released `process_match_results.get_answer`: the verifier's reply on the LM's answer alone."""
    if "No" in reply:
        if reply in NOT_SO + " ":
            return lm_answer
        return reply.replace(NOT_SO, "").strip()
    return lm_answer


def verified_answer(reply: str, lm_answer: str, reader_answer: str) -> str:
    """The released `process_justify_results.get_answer`, reply to answer."""
    if "Neither" in reply:
        if reply in NEITHER + " ":
            return lm_answer
        return reply.replace(NEITHER, "").strip()
    if reply in lm_answer and reply in reader_answer:
        return reader_answer if len(reader_answer) < len(lm_answer) else lm_answer
    if reply in reader_answer:
        return reader_answer
    return lm_answer


# -- the method -------------------------------------------------------------------------------


@dataclass
class Round:
    number: int
    thought: str
    action: str
    argument: str
    lm_answer: str = ""
    reader_answer: str = ""
    verifier_reply: str | None = None
    verdict: str = ""
    answer: str = ""
    passages: list[dict[str, Any]] = field(default_factory=list)
    written: str = ""  # the LM's output for the round, as it wrote it (read again by tests/test_readings.py)


class KDCoT(Method):
    name = "kdcot"
    title = "KD-CoT"
    paper = "Knowledge-Driven CoT (Wang et al., 2023; AdelWang/KD-CoT)"
    tables = {
        "KD-CoT": {
            "LLM QA-CoT selected": {"qa": "none"},
            "KD-CoT": {},
            "KD-CoT w/o Retrieve-then-read": {"qa": "verifier"},
            "KD-CoT w/o Verifier": {"qa": "reader"},
        }
    }
    Settings = KDCoTSettings

    settings: KDCoTSettings

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: KDCoTSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.picker = DemoPicker(read_demos(settings.demos, context.dataset), settings.demo_encoder)
        self.instruction = self._instruction(settings.instruction)
        self.reader_lm = context.load_lm(settings.reader_lm) if settings.reader_lm else lm
        self.verifier_lm = context.load_lm(settings.verifier_lm) if settings.verifier_lm else lm

    @staticmethod
    def _instruction(path: str | None) -> str:
        if path is None:
            return (
                resources.files("mhindex").joinpath("prompts", "kdcot", "instruction.txt").read_text(encoding="utf-8")
            )
        try:
            return Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as error:
            raise UsageError(f"--instruction {path}: {error.strerror or error}") from None

    def prompt(self, demo: Demo, question: str, rounds: list[Round]) -> str:
        return "\n".join(
            [
                f"{self.instruction.rstrip()}\n\n{demo.text.strip()}\n",
                f"Question {question}",
                *transcript(rounds),
                f"Thought {len(rounds) + 1}",
            ]
        )

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each step's thought, action, what the LM and the reader answered, the verifier and the answer kept."""
        steps: list[TraceStep] = []
        for entry in record.get("trace") or []:
            rows = [
                [label, text_of(entry[key])]
                for key, label in (
                    ("thought", "thought"),
                    ("lm_answer", "LM answer"),
                    ("reader_answer", "reader"),
                    ("verifier_reply", "verifier"),
                    ("verdict", "verdict"),
                    ("answer", "kept answer"),
                )
                if entry.get(key) not in (None, "")
            ]
            rows.insert(1, ["action", f"{entry.get('action', '')}[{entry.get('argument', '')}]"])
            ids = [p["id"] for p in entry.get("passages", []) if isinstance(p, dict) and "id" in p]
            steps.append(trace_step(f"Step {entry.get('number', len(steps) + 1)}", rows, ids))
        finish = record.get("finish")
        if isinstance(finish, dict):  # a record from before it was kept has its rounds alone
            rows = [["wrote", str(finish.get("wrote", ""))], ["ended", str(finish.get("ended", ""))]]
            steps.append(trace_step("Finish", [*rows, ["answer", str(record.get("answer", ""))]]))
        return steps

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        demo = self.picker.pick(query.question)
        rounds: list[Round] = []
        steps: list[Step] = []
        while True:
            number = len(rounds) + 1
            alone = self.settings.qa == "none"  # no QA system: the LM's chain in one completion
            last = alone or number > self.settings.rounds
            # A round ends where the next one begins ("Thought n+1", kept: the release reads it); the last runs on.
            marker = f"Thought {number + 1}"
            tokens = self.settings.step_tokens * ((self.settings.rounds + 1) if alone else (2 if last else 1))
            output = meter.complete(
                self.prompt(demo, query.question, rounds),
                tokens,
                stop=["\nQuestion "],
                label=f"round {number}: thought and action",
                stop_when=None if last else _until(marker),
            ).text
            read = output.replace("\t", "\n")  # as the release reads its outputs back (`process_text`)
            turn = finish_answer(read) if last else read_round(read, number)
            if isinstance(turn, str):
                final = turn
                ended = (
                    "no QA system: the answer read from the LM's chain"
                    if alone
                    else "at the round limit: the answer read from its last reply"
                    if last
                    else "Finish"
                    if "Finish[" in output
                    else "no Thought and Action could be read from the reply (as the release reads it): the answer "
                    "read from its text"
                )
                break
            started, before = clock(), (meter.prompt_tokens, meter.completion_tokens)
            current = self._check(meter, Round(number, turn.thought, turn.action, turn.argument, turn.lm_answer,
                                               written=output))  # fmt: skip
            rounds.append(current)
            text = (
                f"{current.action}[{current.argument}] -> LM: {current.lm_answer or '-'}; reader: "
                f"{current.reader_answer or '-'}; {current.verdict}: {current.answer}"
            )
            step = Step(
                text,
                current.argument,
                [p["id"] for p in current.passages],
                [p["title"] for p in current.passages],
                clock() - started,
            )
            step.prompt_tokens, step.completion_tokens = (
                meter.prompt_tokens - before[0],
                meter.completion_tokens - before[1],
            )
            steps.append(step)
        retrieved = list({p["id"]: p for r in rounds for p in r.passages}.values())
        reasoning = "\n".join([*transcript(rounds), f"Thought {len(rounds) + 1} {output.strip()}"])
        details = {
            "rounds": len(rounds),
            "demonstration": demo.question,
            "trace": [asdict(r) for r in rounds],
            "finish": {"wrote": output.strip(), "ended": ended},  # how it ended, read or not
        }
        return Answer(
            query.id,
            query.question,
            final,
            retrieved,
            steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            reasoning,
            self.name,
            details=details,
        )

    def _check(self, meter: Meter, current: Round) -> Round:
        """Retrieve, read, verify: the answer that goes into the next round."""
        if self.settings.qa == "verifier":
            prompt = MATCH_PROMPT.format(question=current.argument, choice=current.lm_answer)
            current.verifier_reply = _ask(meter, self.verifier_lm, prompt, 32, "verifying the answer")
            current.answer = matched_answer(current.verifier_reply, current.lm_answer)
            current.verdict = "kept" if current.answer == current.lm_answer else "replaced"
            return current
        hits = self.retriever.search(current.argument, self.settings.k)
        current.passages = [{"id": h.id, "title": h.title} for h in hits]
        if hits:
            blocks = "\n\n".join(f"Title: {h.title}\n{_cut(h.text, self.settings.max_paragraph_words)}" for h in hits)
            prompt = f"{READ_INSTRUCTION[current.action]}\n\n{blocks}\n\nQ: {current.argument}?\nA:"
            current.reader_answer = _ask(meter, self.reader_lm, prompt, 48, "reading the passages")
        if not current.reader_answer:
            current.verdict, current.answer = "unchecked", current.lm_answer
        elif self.settings.qa == "reader":
            current.verdict, current.answer = "the reader's", current.reader_answer
        elif not current.lm_answer or normalize_answer(current.lm_answer) == normalize_answer(current.reader_answer):
            current.verdict, current.answer = ("agreed" if current.lm_answer else "completed"), current.reader_answer
        else:
            prompt = VERIFY_PROMPT.format(
                question=current.argument, choice_1=current.lm_answer, choice_2=current.reader_answer
            )
            current.verifier_reply = _ask(meter, self.verifier_lm, prompt, 32, "verifying the answer")
            current.answer = verified_answer(current.verifier_reply, current.lm_answer, current.reader_answer)
            current.verdict = "kept" if current.answer == current.lm_answer else "replaced"
        return current


def transcript(rounds: list[Round]) -> list[str]:
    """The rounds so far as the prompt shows them, each with its verified answer."""
    lines = []
    for r in rounds:
        lines += [
            f"Thought {r.number} {r.thought}",
            f"Action {r.number} {r.action}[{r.argument}]",
            f"Answer {r.number} {r.answer}",
        ]
    return lines


def _cut(text: str, words: int) -> str:
    split = text.split()
    return " ".join(split[:words]) if len(split) > words else text


def _ask(meter: Meter, lm: LanguageModel, prompt: str, max_tokens: int, label: str) -> str:
    """One line from the main LM or a separate reader or verifier; either way it counts in the
    question's cost."""
    if lm is meter.lm:
        return meter.complete(prompt, max_tokens, stop=["\n"], label=label).text.strip()
    other = Meter(lm)
    text = other.complete(prompt, max_tokens, stop=["\n"], label=label).text.strip()
    meter.calls += other.calls
    meter.prompt_tokens += other.prompt_tokens
    meter.completion_tokens += other.completion_tokens
    return text
