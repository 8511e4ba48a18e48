"""Search-R1 (Jin et al., 2025): the agent loop as its release evaluates a trained checkpoint (PeterGriffinJin/
Search-R1 @a14dc3a, `search_r1/llm_agent/generation.py` `run_llm_loop`, its prompt from
`scripts/data_process/qa_search_test_merge.py` `make_prefix`, its answer from `verl/utils/reward_score/qa_em.py`,
its settings from `scripts/nq_hotpotqa/evaluate.sh`).

The question (stripped, "?" added where it lacks one) goes into the release's `base` instruction, sent as one user
turn through the model's chat template (`--template chat`, as the release's data and `infer.py` do where the
tokenizer has one), and the model writes the assistant's turn. Each turn it writes at most `--step-tokens` (the
release's max_response_length, 500), greedily (validation's do_sample False), read as `_postprocess_responses`
reads it: cut after the first "</search>", else after the first "</answer>". Its action is the first
`<search>...</search>` or `<answer>...</answer>` (`postprocess_predictions`): an answer ends the loop; a search
sends the query, stripped, to the retriever for its top `-k` (3), and "\\n\\n<information>Doc 1(Title: "T") text
...</information>\\n\\n" (`_passages2string` over Search-R1's corpus format) is written into the turn, cut at
`--obs-tokens` tokens (max_obs_length, 500); anything else writes the release's "My previous action is invalid."
note. After `--max-turns` turns (4) one more turn is written without searching. The answer is `extract_solution`
over the prompt and the whole turn: the last `<answer>...</answer>` where there are two or more. The prompt itself
holds two ("inside <answer> and </answer>" and its example "<answer> Beijing </answer>"), so a turn with no answer
of the model's answers "Beijing", and one where the loop wrote its invalid-action note (which names "<answer> and
</answer>") answers "and", as the release's reward reads them (verl/utils/reward_score/qa_em.py at a14dc3a). Where
the answer so read is not the model's own (the prompt's example, the note's), the record says whose
(`answer_from`), and the trace shows it. Its EM is mhindex's EM: `em_check` normalises as SQuAD does, the best over
the gold answers.

Deviations, each forced or said: the turn is stopped once a closing tag is written (the release generates on to
500 tokens, then cuts: greedy, the text kept is the same); a query that is empty brings no passages (the
release's server is asked for ""); an endpoint that does not render its chat template is refused with
`--template chat` (LanguageModel.chat_prompt). The released checkpoints are what the loop is for; a small packaged
model runs the loop, not well.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from mhindex.backends.base import Hit, Retriever
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
    agent_summary,
    trace_step,
)
from mhindex.options import option

#: `make_prefix(template_type='base')`, byte for byte (Apache-2.0, PeterGriffinJin/Search-R1)
PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new "
    "information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> "
    "query </search> and it will return the top searched results between <information> and </information>. You can "
    "search as many times as your want. If you find no further external knowledge needed, you can directly provide "
    "the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing "
    "</answer>. Question: {question}\n"
)
#: `execute_predictions`'s observation for a turn with neither action
INVALID = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n"
)
TEMPLATES = ("chat", "plain")
_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


@dataclass(frozen=True)
class SearchR1Settings:
    k: int = option(3, "Passages a search brings (the release's retriever.topk).", flag="-k", min=1)
    max_turns: int = option(4, "Turns that may search, before one last turn that may not (the release's 4).", min=0)
    step_tokens: int = option(500, "Most tokens a turn writes (the release's max_response_length).", min=1)
    obs_tokens: int = option(500, "Most tokens of a turn's <information> (the release's max_obs_length).", min=1)
    template: str = option(
        "chat",
        "chat: the prompt as one user turn through the model's chat template (the release's); plain: as it is.",
        choices=TEMPLATES,
    )

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        return asdict(self)


def released_question(question: str) -> str:
    """`process_fn`: stripped, with "?" added where it does not end with one."""
    question = question.strip()
    return question if question.endswith("?") else question + "?"


def cut_response(response: str) -> str:
    """`_postprocess_responses`: cut after the first "</search>", else after the first "</answer>"."""
    if "</search>" in response:
        return response.split("</search>")[0] + "</search>"
    if "</answer>" in response:
        return response.split("</answer>")[0] + "</answer>"
    return response


def read_action(response: str) -> tuple[str | None, str]:
    """`postprocess_predictions`: the first <search> or <answer> element, its content stripped; (None, "")."""
    found = _ACTION.search(response)
    return (found.group(1), found.group(2).strip()) if found else (None, "")


def extract_solution(solution: str) -> str | None:
    """`qa_em.extract_solution` of the prompt and the whole turn: the last <answer>, stripped; None where there
    is at most one (Search-R1's own prompt holds two: its answer is "Beijing" where the model wrote none)."""
    found = list(_ANSWER.finditer(solution))
    return found[-1].group(1).strip() if len(found) > 1 else None


def answer_from(turn: str, answer: str | None) -> str:
    """Whose `<answer>` `extract_solution` read: the model's, or the release's own invalid-action note's (the last
    match lies inside a note the loop wrote), or none."""
    if answer is None:
        return "nobody"
    matches = list(_ANSWER.finditer(turn))
    if not matches:
        return "the prompt's example"
    last = matches[-1].start()
    notes = [m.start() for m in re.finditer(re.escape(INVALID), turn)]
    return "the invalid-action note" if any(n <= last < n + len(INVALID) for n in notes) else "the model"


def passages(hits: list[Hit]) -> str:
    """`_passages2string` over Search-R1's corpus format ('"Title"\\ntext': the title line keeps its quotes)."""
    return "".join(f'Doc {number}(Title: "{hit.title}") {hit.text}\n' for number, hit in enumerate(hits, 1))


class SearchR1(Method):
    name = "searchr1"
    title = "Search-R1"
    paper = "Search-R1 (Jin et al., 2025), its agent loop as its release evaluates it (PeterGriffinJin/Search-R1)"
    tables = {"FlashRAG": {"Search-R1": {}}}
    Settings = SearchR1Settings

    settings: SearchR1Settings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return int(settings.max_turns + 1)  # the searching turns, then one that may not search

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: SearchR1Settings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)

    def opening(self, question: str) -> str:
        """What the model continues: the prompt through its chat template (the assistant's turn opened)."""
        prompt = PROMPT.format(question=released_question(question))
        if self.settings.template == "plain":
            return prompt
        return self.lm.chat_prompt([{"role": "user", "content": prompt}]) or prompt

    def _information(self, hits: list[Hit]) -> str:
        """The observation, cut to `obs_tokens` tokens as `_process_next_obs` cuts its token ids."""
        told = f"\n\n<information>{passages(hits).strip()}</information>\n\n"
        if self.lm.count_tokens(told) <= self.settings.obs_tokens:
            return told
        low, high = 0, len(told)  # the longest prefix within the limit (a token's edge may fall inside a word)
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if self.lm.count_tokens(told[:middle]) <= self.settings.obs_tokens else (
                low, middle - 1)  # fmt: skip
        return told[:low]

    def answer(self, query: Query) -> Answer:
        s, clock, meter = self.settings, Clock(), Meter(self.lm)
        opening, turn, responses = self.opening(query.question), "", list[str]()
        steps, found, invalid, answered = list[Step](), dict[str, Hit](), 0, False
        for number in range(s.max_turns + 1):
            started, before = clock(), (meter.prompt_tokens, meter.completion_tokens)
            last = number == s.max_turns
            written = meter.complete(
                opening + turn, s.step_tokens, stop=[], label=f"turn {number + 1}" + (" (the last)" if last else ""),
                stop_when=lambda text: "</search>" in text or "</answer>" in text,
            ).text  # fmt: skip
            responses.append(written)
            response = cut_response(written)
            action, content = read_action(response)
            turn += response
            if action == "answer" or last:
                answered = action == "answer"
                break
            if action == "search":
                hits = self.retriever.search(content, s.k) if content else []
                turn += self._information(hits)
                found.update({h.id: h for h in hits if h.id not in found})
                steps.append(Step(response, content, [h.id for h in hits], [h.title for h in hits], clock() - started,
                                  meter.prompt_tokens - before[0], meter.completion_tokens - before[1]))  # fmt: skip
            else:
                invalid += 1
                turn += INVALID
        answer = extract_solution(opening + turn)
        details = {"searchr1": {"opening": opening, "turn": turn, "responses": responses, "searches": len(steps),
                                "invalid": invalid, "answered": answered, "extracted": answer is not None,
                                "answer_from": answer_from(turn, answer)},
                   "agent": agent_summary(len(steps), "it answered (<answer>)" if answered else
                                          f"the turn limit (--max-turns {s.max_turns}) with no <answer>",
                                          invalid_turns=invalid)}  # fmt: skip
        return Answer(
            query.id, query.question, answer or "", [{"id": h.id, "title": h.title} for h in found.values()], steps,
            meter.calls, meter.prompt_tokens, meter.completion_tokens, clock(), turn, self.name, details=details,
        )  # fmt: skip

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each search with the passages it brought; then how the turn ended."""
        steps = super().trace_steps({**record, "reader": None})
        details = record.get("searchr1")
        if isinstance(details, dict):
            rows = [["wrote", str(details.get("turn", ""))]]
            if details.get("invalid"):
                rows.append(["note", f"{details['invalid']} turn(s) with neither <search> nor <answer>"])
            if not details.get("extracted"):
                rows.append(["note", "no <answer> was written: the answer is empty"])
            elif details.get("answer_from", "the model") != "the model":
                rows.append(["note", f"the answer is read from {details['answer_from']}, as the release reads it"])
            steps.append(trace_step("The assistant's turn", rows))
        return steps
