"""ReAct: synergizing reasoning and acting (Yao et al., ICLR 2023), HotpotQA's agent as its release runs it
(ysymyth/ReAct @6bdb3a1, `hotpotqa.ipynb` `webthink`, `wikienv.py`), over mhindex's retriever for Wikipedia.

The prompt is the released instruction and six HotpotQA trajectories, then "Question: ...". For steps 1 to 7
the LM writes "Thought i: ... Action i: ..." (greedy, at most 100 tokens, stopped at "\\nObservation i:");
where the two cannot be split, the thought is its first line and the action is asked for alone (a "bad
call", counted). The action acts on the corpus as `WikiEnv` acts on Wikipedia:

- Search[entity]: a page whose title is the entity (compared as IRCoT compares titles) is opened: its
  paragraphs ranked by the entity (the engine's title-scoped search) make the page, and the observation is
  its first five sentences (`get_page_obs`), as Wikipedia's first paragraph; else "Could not find ENTITY.
  Similar: [...]." with the five titles that best match it (the engine's title search, where it has one).
- Lookup[keyword]: the next sentence of the open page that contains the keyword, "(Result i / n) ...".
- Finish[answer]: the answer. Anything else: "Invalid action: ...".

After 7 steps without Finish the release finishes with nothing; so does this, and the trace says so. The
paragraphs of the pages opened are what it retrieved. Deviations: a corpus is searched, not Wikipedia (its
redirects and disambiguation pages have no counterpart); an empty action, which the release cannot take
(it fails), is an invalid action here.

`--fallback cot-sc` is the paper's ReAct -> CoT-SC (its Section 3.3, which SearChain's Table 1 runs): where
ReAct gives no answer within its steps, CoT-SC answers: `--sc-samples` chains of thought (the paper's 21)
sampled at `--sc-temperature` (0.7) from ReAct's released CoT prompt (`cotqa_simple6`), each seeded from
`--sc-seed` so a rerun draws the same, and their majority answer (methods/cot.py, `self_consistent`). The
release has no code for it. `--max-demos` keeps the first trajectories (and CoT demonstrations) of the six:
SearChain's Table 8 gives 6 on HotpotQA and 4 on MuSiQue and 2WikiMQA.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from mhindex.backends.base import Hit, Retriever, search_titles, title_key
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step, TraceStep, trace_step
from mhindex.methods.cot import self_consistent
from mhindex.options import option

FALLBACKS = ("none", "cot-sc")


@dataclass(frozen=True)
class ReActSettings:
    max_steps: int = option(7, "At most this many Thought/Action/Observation steps (the release's 7).", min=1)
    step_tokens: int = option(100, "Most tokens for one Thought and Action (the release's max_tokens).", min=1)
    page_paragraphs: int = option(10, "Paragraphs of a page that Search opens (its best first), for Lookup.", min=1)
    similar: int = option(5, "Titles listed when Search finds no page of that title (the release's 5).", min=1)
    max_demos: int | None = option(None, "The first this many of the six released trajectories \\[default: all].",
                                   min=1, max=6)  # fmt: skip
    fallback: str = option(
        "none", "cot-sc: where ReAct gives no answer, CoT-SC answers (the paper's ReAct -> CoT-SC).", choices=FALLBACKS
    )
    sc_samples: int = option(21, "CoT-SC: chains of thought sampled (the paper's 21).", min=1)
    sc_temperature: float = option(0.7, "CoT-SC: their sampling temperature (the paper's 0.7).", min=0.0)
    sc_tokens: int = option(256, "CoT-SC: most tokens for one chain.", min=1)
    sc_seed: int = option(0, "CoT-SC: the first chain's seed (the next chains take the next seeds).")

    def recorded(self, dataset: str | None) -> dict[str, Any]:
        return asdict(self)


def parse_action(action: str) -> tuple[str, str]:
    """`WikiEnv.step`'s reading of an action: search, lookup, finish or think, and what its brackets hold (the
    action stripped, starting "kind[" and ending "]"); ("", "") for an invalid one."""
    found = re.fullmatch(r"(search|lookup|finish|think)\[(.*)\]", action.strip(), re.S)
    return (found.group(1), found.group(2)) if found else ("", "")


def page_observation(page: str) -> str:
    """`WikiEnv.get_page_obs`: the page's first five sentences."""
    return " ".join(_sentences(page)[:5])


def _sentences(page: str) -> list[str]:
    paragraphs = [p.strip() for p in page.split("\n") if p.strip()]
    return [s.strip() + "." for p in paragraphs for s in p.split(". ") if s.strip()]


@dataclass
class _Env:
    """What `WikiEnv` keeps between actions: the open page, the lookup under way, the paragraphs read."""

    page: str | None = None
    keyword: str | None = None
    found: list[str] | None = None
    shown: int = 0
    answer: str | None = None


class ReAct(Method):
    name = "react"
    title = "ReAct"
    paper = "ReAct (Yao et al., ICLR 2023; ysymyth/ReAct), its HotpotQA agent over the corpus"
    uses_titles = "Search[entity] opens the page whose title is the entity, Lookup reads within it"
    # SearChain's Table 8: six demonstrations on HotpotQA, four on the other datasets.
    tables = {"SearChain": {"React→CoT-SC": {"fallback": "cot-sc", "max_demos": {"hotpotqa": 6, "*": 4}}}}
    Settings = ReActSettings

    settings: ReActSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        # a Thought and, where it wrote no Action, a call for one; then CoT-SC's chains where it did not finish
        return int(2 * settings.max_steps + (settings.sc_samples if settings.fallback == "cot-sc" else 0))

    @classmethod
    def reseeded(cls, settings: Any, draw: int) -> dict[str, Any] | None:
        """CoT-SC's chains take the seeds sc_seed, sc_seed + 1, ...: a draw starts after the chains of those before
        it (sc_samples apart), so no two draws share a chain. ReAct alone, or CoT-SC at temperature 0, is greedy."""
        if settings.fallback != "cot-sc" or settings.sc_temperature == 0:
            return None
        return {"sc_seed": settings.sc_seed + draw * settings.sc_samples}

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: ReActSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        folder = resources.files("mhindex").joinpath("prompts", "react")
        head, *trajectories = folder.joinpath("webthink_simple6.txt").read_text("utf-8").split("Question:")
        kept = head + "".join("Question:" + t for t in trajectories[: settings.max_demos])
        self.prompt = folder.joinpath("instruction.txt").read_text("utf-8") + kept

    def answer(self, query: Query) -> Answer:
        clock, meter, env = Clock(), Meter(self.lm), _Env()
        prompt = self.prompt + f"Question: {query.question}\n"
        steps: list[Step] = []
        trajectory: list[dict[str, Any]] = []
        read: dict[str, Hit] = {}
        bad_calls = 0
        for i in range(1, self.settings.max_steps + 1):
            started, before = clock(), (meter.prompt_tokens, meter.completion_tokens)
            written = self._call(meter, prompt + f"Thought {i}:", [f"\nObservation {i}:"], f"thought {i}")
            thought, separator, action = written.strip().partition(f"\nAction {i}: ")
            bad = not separator or f"\nAction {i}: " in action  # the release's split into exactly two fails
            if bad:
                bad_calls += 1
                thought = written.strip().split("\n")[0]
                action = self._call(meter, prompt + f"Thought {i}: {thought}\nAction {i}:", ["\n"], f"action {i}")
                action = action.strip()
            observation, hits = self._act(env, action[:1].lower() + action[1:])
            observation = observation.replace("\\n", "")
            read.update({h.id: h for h in hits if h.id not in read})
            trajectory.append({"thought": thought, "action": action, "observation": observation,
                               "bad_call": not separator, "written": written})  # fmt: skip
            prompt += f"Thought {i}: {thought}\nAction {i}: {action}\nObservation {i}: {observation}\n"
            steps.append(
                Step(
                    f"Thought {i}: {thought}\nAction {i}: {action}\nObservation {i}: {observation}",
                    action,
                    [h.id for h in hits],
                    [h.title for h in hits],
                    clock() - started,
                    meter.prompt_tokens - before[0],
                    meter.completion_tokens - before[1],
                )
            )
            if env.answer is not None:
                break
        finished = env.answer is not None
        details: dict[str, Any] = {"finished": finished, "bad_calls": bad_calls, "trajectory": trajectory}
        answer = env.answer or ""
        if not finished and self.settings.fallback == "cot-sc":
            s = self.settings
            answer, chains = self_consistent(meter, query.question, s.max_demos, s.sc_tokens, s.sc_samples,
                                             s.sc_temperature, s.sc_seed)  # fmt: skip
            details["cot_sc"] = {"answer": answer, "chains": chains}
        return Answer(
            query.id,
            query.question,
            answer,
            [{"id": h.id, "title": h.title} for h in read.values()],
            steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            prompt[len(self.prompt) :],
            self.name,
            details={"react": details},
        )

    def _call(self, meter: Meter, prompt: str, stop: list[str], label: str) -> str:
        return meter.complete(prompt, self.settings.step_tokens, stop=stop, label=label).text

    def _act(self, env: _Env, action: str) -> tuple[str, list[Hit]]:
        """`WikiEnv.step` on the corpus: the observation, and the paragraphs a Search opened."""
        kind, value = parse_action(action)
        action = action.strip()
        if kind == "search":
            return self._search(env, value)
        if kind == "lookup":
            if env.keyword != value:  # a new keyword starts the lookup again
                env.keyword, env.shown = value, 0
                env.found = [s for s in _sentences(env.page or "") if value.lower() in s.lower()]
            found = env.found or []
            if env.shown >= len(found):
                return "No more results.\n", []
            env.shown += 1
            return f"(Result {env.shown} / {len(found)}) {found[env.shown - 1]}", []
        if kind == "finish":
            env.answer = value
            return "Episode finished, reward = 0\n", []
        if kind == "think":
            return "Nice thought.", []
        return f"Invalid action: {action}", []

    def _search(self, env: _Env, entity: str) -> tuple[str, list[Hit]]:
        similar = search_titles(self.retriever, entity, self.settings.similar) if entity.strip() else []
        exact = next((h.title for h in similar if title_key(h.title) == title_key(entity)), None)
        if exact is None:
            return f"Could not find {entity}. Similar: {[h.title for h in similar]}.", []
        paragraphs = self.retriever.search(entity, self.settings.page_paragraphs, titles=[exact])
        env.page = "".join(p.text + ("" if p.text.endswith("\n") else "\n") for p in paragraphs)
        env.keyword = env.found = None
        return page_observation(env.page), paragraphs

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Each step's thought, action and observation, with the paragraphs a Search opened; how it ended."""
        details = record.get("react")
        if not isinstance(details, dict):
            return super().trace_steps(record)
        titles = {r.get("id"): r.get("title", "") for r in record.get("retrieved", []) if isinstance(r, dict)}
        steps = []
        for number, (taken, step) in enumerate(zip(details.get("trajectory", []), record.get("steps", [])), 1):
            rows = [[key, str(taken.get(key, ""))] for key in ("thought", "action", "observation")]
            if taken.get("bad_call"):
                rows.insert(1, ["", "the thought and action did not split: the action was asked for alone"])
            ids = list(step.get("retrieved_ids", []))
            if ids:
                rows.append(["opened", " · ".join(dict.fromkeys(titles.get(i, i) for i in ids))])
            steps.append(trace_step(f"step {number}", rows, ids))
        if not details.get("finished"):
            fallback = details.get("cot_sc")
            said = "CoT-SC answers" if isinstance(fallback, dict) else "no answer"
            steps.append(trace_step("Not finished", [["", f"no Finish[] in {len(steps)} steps: {said}"]]))
            if isinstance(fallback, dict):
                chains = [c for c in fallback.get("chains", []) if isinstance(c, dict)]
                rows = [[f"seed {c.get('seed')}", str(c.get("answer") or "(no answer)")] for c in chains]
                steps.append(trace_step(f"CoT-SC: {len(chains)} chains, the majority answers", [
                    *rows, ["answer", str(fallback.get("answer") or "(none)")]]))  # fmt: skip
        return steps
