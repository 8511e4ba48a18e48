"""How each paper's released code reads real LM outputs, written as test tables (tests/readings/*.json) that
tests/test_readings.py holds mhindex's own readings to, case by case.

The outputs are what mhindex's models wrote in stored runs (benchmarks/results, and the paper tables' runs),
awkward ones included; the readings are what the released functions, loaded from the releases as released
(releases.py: a git mirror's tree at its commit, nothing of mhindex imported), return for them. Run it outside
mhindex's environment, with the releases' own few dependencies, pinned (requirements.txt beside this file):

    python3 -m venv /tmp/releases && /tmp/releases/bin/pip install -r benchmarks/readings/requirements.txt
    /tmp/releases/bin/python benchmarks/readings/make_readings.py --mirrors /work/.mirror
    /tmp/releases/bin/python benchmarks/readings/make_readings.py --mirrors /work/.mirror --check   # re-made alike?

(`--mirrors`: a folder of git mirrors named owner+name/repo, as the `fetch` tool leaves them; a plain clone's
.git folder serves too.) Each table names the release, commit, file and function it ran. FLARE's table needs
FlashRAG's tokenizer, a Hugging Face one, made by transformers from the Qwen2.5 model's GGUF file (transformers
reads GGUF only with torch and the gguf package installed):

    /tmp/releases/bin/pip install -r benchmarks/readings/requirements-flare.txt
    /tmp/releases/bin/python benchmarks/readings/make_readings.py --mirrors /work/.mirror --only flare \
        --tokenizer-gguf ~/.local/share/mhindex/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""

from __future__ import annotations

import argparse
import atexit
import json
import random
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from releases import Release, load, load_file, materialize, stand_in

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
OUT = REPO / "tests" / "readings"
EFFICIENTRAG_TABLE = "qwen2.5-1.5b-paper-tables/efficientrag"  # its run folder under benchmarks/results
PER_SOURCE = 40  # cases a table takes from one run folder, at most (seeded choice, so a rerun is the same)


def records(pattern: str) -> Iterator[dict[str, Any]]:
    """The records of every prediction file matching `pattern` under benchmarks/results, in a stable order."""
    for path in sorted(RESULTS.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                record["_file"] = str(path.relative_to(REPO))
                yield record


def sampled(cases: list[dict[str, Any]], limit: int = PER_SOURCE) -> list[dict[str, Any]]:
    """Distinct outputs, at most `limit`, seeded; every case the release reads differently from the plain text
    (an invalid reply, a fallback) is kept first, since those are the awkward ones."""
    unique = list({json.dumps(c["output"], sort_keys=True): c for c in cases}.values())
    random.Random(0).shuffle(unique)
    return unique[:limit]


def write(name: str, release: dict[str, str], cases: list[dict[str, Any]], about: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    table = {"about": about, "release": release, "cases": cases}
    (OUT / f"{name}.json").write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{name}: {len(cases)} cases", file=sys.stderr)


# -- EfficientRAG (microsoft/EfficientRAG): its baselines' JSON replies and Self-Ask's completions -------------


def efficientrag(mirror: Path) -> None:
    release = materialize(mirror, "microsoft/EfficientRAG")
    stand_in("language_models", "retrievers", "conf")
    model = load(release, "src", "utils.model")
    model.time.sleep = lambda seconds: None  # ask_model waits 1-3 s before each call, to spare an API
    parse = model.get_type_parser("json")
    _json_replies(release, parse)
    _selfask(release, model)
    _selfask_loop(release)


def _json_read(parse: Callable[[str], Any], reply: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """`ask_model`'s reading of a JSON reply and its `check_if_valid` (a dict with these keys): None where the
    release fails the call (parse error or invalid), else the parsed object."""
    try:
        parsed = parse(reply)
    except Exception as error:  # noqa: BLE001 - whatever the release's parser raises, ask_model retries then gives None
        return {"valid": False, "why": f"{type(error).__name__}"}
    if not (isinstance(parsed, dict) and all(key in parsed for key in keys)):
        return {"valid": False, "why": "check_if_valid"}
    return {"valid": True, "value": parsed}


def _json_replies(release: Release, parse: Callable[[str], Any]) -> None:
    """Each baseline's replies: (method, where the reply is kept in the record, the keys its check asks for)."""
    sources = [
        ("cot", "qwen2.5-1.5b-tables/*/cot.jsonl", lambda r: r["cot"]["reply"], ("answer",)),
        ("iterretgen", "qwen2.5-0.5b-readings/efficientrag-*/iterretgen.jsonl", lambda r: r["iterretgen"]["replies"],
         ("answer", "thought")),
        ("decompose", "qwen2.5-1.5b-tables/*/decompose.jsonl", lambda r: r["decompose"]["reply"],
         ("decomposed_questions",)),
        ("decompose-answer", "qwen2.5-1.5b-tables/*/decompose.jsonl", lambda r: r["reasoning"], ("answer",)),
        ("efficientrag", "qwen2.5-1.5b-wikipedia/*/efficientrag.jsonl", lambda r: r["reasoning"], ("answer",)),
        # EfficientRAG's table's own rows (another table's Direct rows read no JSON: SearChain's, its seeds' runs)
        ("direct", f"{EFFICIENTRAG_TABLE}/*/direct.jsonl", lambda r: r["direct"]["reply"], ("answer",)),
        ("direct-r", f"{EFFICIENTRAG_TABLE}/*/direct-r.jsonl", lambda r: r["direct"]["reply"], ("answer",)),
        # The small model's replies, the more awkward ones (qwen2.5-0.5b-readings: made for these tables).
        ("cot", "qwen2.5-0.5b-readings/efficientrag-*/cot.jsonl", lambda r: r["cot"]["reply"], ("answer",)),
        ("decompose", "qwen2.5-0.5b-readings/efficientrag-*/decompose.jsonl", lambda r: r["decompose"]["reply"],
         ("decomposed_questions",)),
        ("direct", "qwen2.5-0.5b-readings/efficientrag-*/direct.jsonl", lambda r: r["direct"]["reply"], ("answer",)),
        ("direct-r", "qwen2.5-0.5b-readings/efficientrag-*/direct-r.jsonl", lambda r: r["direct"]["reply"],
         ("answer",)),
    ]  # fmt: skip
    cases = []
    for method, pattern, reply_of, keys in sources:
        found = [{"method": method, "keys": list(keys), "output": output, "from": r["_file"]}
                 for r in records(pattern) for output in _listed(reply_of(r))]  # fmt: skip
        for case in sampled(found):
            case["release"] = _json_read(parse, case["output"], keys)
            cases.append(case)
    cite = release.cite("src/utils/model.py", "get_type_parser('json') and ask_model's check_if_valid")
    write("efficientrag_json", cite, cases, "EfficientRAG's baselines read a JSON reply: the first {...}, json.loads")


def _listed(replies: str | list[str]) -> list[str]:
    return replies if isinstance(replies, list) else [replies]


def _selfask(release: Release, model: Any) -> None:
    stand_in("tqdm.rich")
    selfask = load(release, "src/baseline/retrieve", "selfask")

    class Replay:
        """The LM, as `call_model` calls it: its completion is the recorded one."""

        def __init__(self, text: str) -> None:
            self.text = text

        def complete(self, prompt: str) -> str:
            return self.text

    asker = object.__new__(selfask.SelfAsk)
    cases = []
    runs = [
        *records("qwen2.5-0.5b-readings/*/selfask*.jsonl"),
        *records("qwen2.5-1.5b-paper-tables/*/*/selfask*.jsonl"),
    ]
    for record in runs:
        completions = record["selfask"].get("completions") or []
        for number, raw in enumerate(completions):
            final = number == len(completions) - 1
            stop: Any = "\n" if final else [asker_intermediate(), "So the final answer is:"]
            cases.append({"output": raw, "stop": stop, "from": record["_file"]})
    cases = sampled(cases, 3 * PER_SOURCE)
    for case in cases:
        asker.model = Replay(case["output"])
        read = asker.call_model("PROMPT", case["stop"])
        case["release"] = {"call_model": read}
        if case["stop"] == "\n":
            case["release"]["extract_answer"] = selfask.extract_answer("Q\nSo the final answer is:" + read)
        elif read and "Follow up:" in selfask.get_last_line(read):
            case["release"]["extract_question"] = selfask.extract_question(read)
    cite = release.cite("src/baseline/retrieve/selfask.py", "SelfAsk.call_model, extract_answer, extract_question")
    write("selfask", cite, cases, "Self-Ask's completions read as the release reads them (model.complete replayed)")


def _intermediates(record: dict[str, Any]) -> list[str]:
    """A Self-Ask record's intermediate answers, in order (each step's text ends with it)."""
    return [step["text"].rpartition("Intermediate answer: ")[2] for step in record["steps"]]


def _selfask_loop(release: Release) -> None:
    """EfficientRAG's whole `SelfAsk.infer_sample` replayed on each record of a run made with whole completions
    ($MHINDEX_WHOLE_COMPLETIONS=1: each as long as the release's call would have it, no early stop of mhindex's):
    its `call_model` given the recorded raw completions in order, its `get_answer` the recorded intermediate
    answers; the release's final answer and history, for mhindex's loop to be replayed on the same outputs."""
    selfask = load(release, "src/baseline/retrieve", "selfask")
    datasets = {"hotpotqa": "hotpotQA", "2wikimultihopqa": "2WikiMQA", "musique": "musique"}
    original, extract = selfask.SelfAsk.call_model, selfask.extract_answer
    read: list[str] = []
    selfask.extract_answer = lambda generated: (read.append(generated), extract(generated))[1]  # what it read
    cases = []
    for record in records("*-readings-whole/*/selfask.jsonl"):
        details = record["selfask"]
        completions, answers = iter(details["completions"]), iter(_intermediates(record))

        class Replay:
            def __init__(self, text: str) -> None:
                self.text = text

            def complete(self, prompt: str) -> str:
                return self.text

        def call_model(asker: Any, prompt: str, stop: Any, completions: Any = completions) -> str:
            asker.model = Replay(next(completions))
            return original(asker, prompt, stop)

        asker = object.__new__(selfask.SelfAsk)
        asker.max_iter, asker.topk = 5, 10
        asker.prompt_template = selfask.SELF_ASK_PROMPT_TEMPLATE_MAPPING[datasets[details["prompt"]]]
        asker.intermediate, asker.follow_up = "\nIntermediate answer:", "Follow up:"
        asker.final_ans = "So the final answer is:"
        asker.call_model = lambda prompt, stop, a=asker: call_model(a, prompt, stop)
        asker.get_answer = lambda question, answers=answers: (next(answers), [])
        sample = {"id": record["id"], "answer": "", "decomposed_questions": {}, "question": record["question"]}
        result = asker.infer_sample(sample)
        opening = asker.prompt_template.format(question=record["question"])  # its own history is cut at the template
        cases.append({"question": record["question"], "prompt": details["prompt"],
                      "completions": details["completions"], "intermediates": _intermediates(record),
                      "from": record["_file"],
                      "release": {"answer": result["model_answer"], "text": read[-1][len(opening):]}})  # fmt: skip
    cite = release.cite("src/baseline/retrieve/selfask.py", "SelfAsk.infer_sample (call_model, extract_answer)")
    write("selfask_loop", cite, cases, "EfficientRAG's Self-Ask loop replayed on whole completions: answer, history")


# -- Self-Ask as Press et al.'s notebook runs it (SearChain's row) ------------------------------------------------


def selfask_press(mirror: Path) -> None:
    """Press et al.'s `promptf` and `extract_answer` (ofirpress/self-ask, not fetchable here: a copy of the notebook's
    functions in Bloominglightray/self-ask, whose promptf adds a list of what it returned, and whose defaults we pass
    as Press's), replayed on each record of SearChain's Self-Ask row: `call_gpt` gives the recorded completions in
    order (ended by the API's stop strings, as Press's calls are), `get_answer` the recorded intermediate answers."""
    # the upload that holds the notebook (the repository's later commits delete it)
    release = materialize(mirror, "Bloominglightray/self-ask", "dbc25747e584daa7102b1739b65f3f06adf6b1d5")
    notebook = json.loads((release.root / "self-ask" / "self-ask_plus_search-engine_demo.ipynb").read_text())
    source = next("".join(cell["source"]) for cell in notebook["cells"]
                  if cell["cell_type"] == "code" and "def promptf" in "".join(cell["source"]))  # fmt: skip
    prompt = (REPO / "src" / "mhindex" / "prompts" / "selfask" / "press.txt").read_text(encoding="utf-8").strip()
    before, after = prompt.split("{question}")
    cases = []
    for record in [
        *records("*/searchain/*/selfask*.jsonl"),
        *records("*/searchain-press/*/selfask*.jsonl"),
        *records("*-readings*/selfask-press-*/selfask*.jsonl"),
    ]:
        details = record["selfask"]
        if details.get("reading") != "press":
            continue
        completions, answers = iter(details["completions"]), iter(_intermediates(record))
        namespace: dict[str, Any] = {"print": lambda *a, **k: None}
        exec(compile(source, "self-ask_plus_search-engine_demo.ipynb", "exec"), namespace)
        namespace["call_gpt"] = lambda prompt, stop, completions=completions: next(completions)
        namespace["get_answer"] = lambda question, answers=answers: next(answers)
        try:
            text, _ = namespace["promptf"](record["question"], [before, after], intermediate="\nIntermediate answer:",
                                           followup="Follow up:", finalans="\nSo the final answer is:")  # fmt: skip
        except StopIteration:  # the release asks on past mhindex's follow-up limit
            found: dict[str, Any] = {"beyond_limit": True}
        else:
            try:
                asked = len(before + record["question"] + after)
                found = {"answer": namespace["extract_answer"](text), "text": text[asked:]}
            except IndexError:
                found = {"answer": None, "error": "IndexError"}
        cases.append({"question": record["question"], "completions": details["completions"],
                      "intermediates": _intermediates(record), "from": record["_file"], "release": found})  # fmt: skip
    cite = release.cite("self-ask/self-ask_plus_search-engine_demo.ipynb", "promptf, extract_answer (Press et al.'s)")
    write("selfask_press", cite, cases, "Press et al.'s Self-Ask loop replayed on SearChain's row, its final answer")


def asker_intermediate() -> str:
    return "\nIntermediate answer:"  # SelfAsk.__init__'s self.intermediate


# -- IRCoT (StonyBrookNLP/ircot): the reader's generation to the answer written ----------------------------------


def ircot(mirror: Path) -> None:
    release = materialize(mirror, "StonyBrookNLP/ircot")
    # its generators (OpenAI, a server), spaCy, and the dataset readers (which open a cache in ~/.cache on import)
    stand_in("commaqa.models.gpt3generator", "commaqa.models.llm_client_generator", "spacy",
             "commaqa.inference.dataset_readers")  # fmt: skip
    qa = load(release, ".", "commaqa.execution.llm_qa_model")
    inference = load(release, ".", "commaqa.inference.ircot")

    class Generator:
        def __init__(self, text: str) -> None:
            self.text = text

        def generate_text_sequence(self, prompt: str) -> list[tuple[str, float]]:
            return [(self.text, 0.0)]

    class Data:
        def __init__(self, answer: str) -> None:
            self.answers = [answer]

        def get_last_answer(self) -> str:
            return self.answers[-1]

        def add_answer(self, step: Any) -> None:
            self.answers.append(step.answer)

    class State:
        def __init__(self, answer: str) -> None:
            self.data, self.next, self.last_output = Data(answer), None, None

        def copy(self) -> State:
            return self

    # base_configs/ircot_qa_codex_*.jsonnet: the CoT reader's "extract_answer" step (the Direct reader has none).
    extractor = inference.AnswerExtractor(".* answer is:? (.*)\\.?", match_all_on_failure=True,
                                          query_source="last_answer", remove_last_fullstop=True)  # fmt: skip
    cases = []
    for pattern, kind in [("qwen2.5-1.5b-reader/*/ircot@reader=cot.jsonl", "cot"),
                          ("qwen2.5-1.5b-reader/*/ircot@reader=direct.jsonl", "direct"),
                          ("qwen2.5-1.5b-tables/*/oner@k=10.jsonl", "direct"),
                          ("qwen2.5-1.5b-tables/*/nor.jsonl", "direct"),
                          ("qwen2.5-1.5b-tables/*/ircot@k=*.jsonl", "direct")]:  # fmt: skip
        found = [{"reader": kind, "output": r["reader"]["output"], "from": r["_file"]} for r in records(pattern)]
        cases += sampled(found)
    for case in cases:
        model = object.__new__(qa.LLMQAModel)
        model.prompt, model.generator, model.regex_extract, model.add_context, model.num_calls = (
            "", Generator(case["output"]), None, True, 0)  # fmt: skip
        answer, _ = model.ask_question("Q", [])
        stored = json.dumps(answer)  # LLMQAParticipantModel.update_state: QuestionAnsweringStep(answer=json.dumps(.))
        if case["reader"] == "cot":
            state = extractor.query(State(stored))
            stored = state.data.get_last_answer() if state != [] else stored
        final: Any = stored
        try:  # model_search.py, how the final answer is written (lines 205-210)
            loaded = json.loads(final)
            if isinstance(loaded, list | str):
                final = loaded
        except ValueError:
            pass
        case["release"] = final
    cite = release.cite(
        "commaqa/execution/llm_qa_model.py, commaqa/inference/ircot.py",
        "LLMQAModel.ask_question, AnswerExtractor.query (ircot_qa_codex_*.jsonnet), model_search's final answer",
    )
    write("ircot_reader", cite, cases, "IRCoT's reader: its one-line generation to the answer the release writes")


# -- SearChain (xsc1234/Search-in-the-Chain): its server's reading of a chain, and its cover-EM --------------------


def searchain(mirror: Path) -> None:
    import ast

    release = materialize(mirror, "xsc1234/Search-in-the-Chain")
    stand_in("retrieval", "torch", "sentence_transformers", "requests")
    sys.modules["sentence_transformers"].CrossEncoder = lambda *a, **k: types_simple(model=types_simple(eval=lambda: 0))
    source = (release.root / "Server" / "server.py").read_text(encoding="utf-8")
    server = load(release, "Server", "server")
    # The loop of the server's __main__ that reads a chain's lines into its queries (no function of its own):
    # run as released, its retrieval and reader answered by stand-ins that never make it feed anything back.
    loop = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.For) and ast.unparse(n.target) == "idx")
    body = "def read_chain(query_list, have_seen_or_not, requests, reader_model, match_or_not):\n"
    body += "    message, query_seen_list, dic_question_answer_to_reference = '', [], []\n"
    body += "    ques_idx = sum_cite = good_cite = 0\n    continue_label = False\n"
    body += "\n".join("    " + line for line in ast.unparse(loop).splitlines())
    body += "\n    return message, continue_label\n"
    namespace: dict[str, Any] = {}
    exec(compile(body, str(release.root / "Server" / "server.py"), "exec"), namespace)

    def queries(chain: str) -> list[list[str]]:
        seen: list[list[str]] = []

        def have_seen_or_not(item: str, seen_list: list[str], kind: str) -> bool:
            seen.append([kind, item])
            return False

        search = types_simple(get=lambda url: types_simple(json=lambda: {"topk": [{"text": "PASSAGE"}]}))
        reader = types_simple(get_answer=lambda **kwargs: ("READER", 0.0))  # below the 1.5 threshold: no feedback
        namespace["read_chain"](chain.split("\n"), have_seen_or_not, search, reader, server.match_or_not)
        return seen

    cases = []
    for record in records("qwen2.5-1.5b-*/*/searchain.jsonl"):
        for round_ in record.get("tree") or []:
            cases.append({"kind": "chain", "output": round_["chain"], "from": record["_file"]})
    chains = sampled(cases)
    for case in chains:
        case["release"] = queries(case["output"])
    chains += _confident(namespace["read_chain"], server.match_or_not)
    scored = []
    for record in records("qwen2.5-1.5b-*/*/searchain.jsonl"):
        for field in ("answer", "generated"):
            scored.append({"kind": field, "output": record[field], "question_id": record["id"],
                           "from": record["_file"]})  # fmt: skip
    scored = sampled(scored, 2 * PER_SOURCE)
    golds = _golds()
    for case in scored:
        gold = golds.get(case["question_id"]) or []
        case["golds"] = gold
        case["release"] = [bool(server.match_or_not(prediction=case["output"], ground_truth=g)) for g in gold]
    cite = release.cite("Server/server.py", "the __main__ loop that reads a chain's queries; match_or_not")
    write("searchain", cite, chains + scored, "SearChain's server reads a chain's lines; its client scores all text")


def _confident(read_chain: Callable[..., tuple[str, bool]], match_or_not: Callable[..., Any]) -> list[dict[str, Any]]:
    """The server's verification path: each recorded round's chain read with a reader that is confident (relevance
    2.0, over the server's 1.5) and answers each query with the answer mhindex's reader gave it in that round, its
    retrieval the top passage "PASSAGE": the first node it feeds back (a confident answer the chain's does not
    contain, an unsolved node), as its message says, or none. Chains whose queries repeat are left out (the server's
    cross-encoder, not run here, decides whether a query was seen)."""
    cases = []
    for record in records("qwen2.5-1.5b-*/*/searchain.jsonl"):
        for round_ in record.get("tree") or []:
            nodes = round_.get("nodes") or []
            queries = [node["query"] for node in nodes]
            if not nodes or len(set(queries)) < len(queries):
                continue
            answers = {node["query"]: node.get("reader_answer") or "" for node in nodes}
            cases.append({"kind": "confident", "output": round_["chain"], "answers": answers, "from": record["_file"]})
    cases = sampled(cases)
    for case in cases:
        answers = case["answers"]
        reader = types_simple(get_answer=lambda query, texts, title, said=answers: (said.get(query.strip(), ""), 2.0))
        search = types_simple(get=lambda url: types_simple(json=lambda: {"topk": [{"text": "PASSAGE"}]}))
        message, fed_back = read_chain(case["output"].split("\n"), lambda *a: False, search, reader, match_or_not)
        case["release"] = {"message": message, "fed_back": fed_back}
    return cases


def types_simple(**attributes: Any) -> Any:
    import types

    return types.SimpleNamespace(**attributes)


def _golds() -> dict[str, list[str]]:
    """Each sample question's gold answers, read from the bundled samples' release files as mhindex's converters read
    them (HotpotQA's and 2WikiMultihopQA's answer; MuSiQue's answer and its aliases), not from a data root that the
    generator's machine may lack."""
    samples = REPO / "src" / "mhindex" / "corpora" / "samples"
    found: dict[str, list[str]] = {}
    for name in ("hotpotqa/hotpot_dev_distractor_v1.sample.json", "2wikimultihopqa/dev.sample.json"):
        for record in json.loads((samples / name).read_text(encoding="utf-8")):
            found[record["_id"]] = [record["answer"]] if record.get("answer") is not None else []
    for line in (samples / "musique" / "musique_ans_v1.0_dev.sample.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        answer = record.get("answer")
        aliases = [a for a in record.get("answer_aliases") or [] if a != answer]
        found[record["id"]] = ([answer] if answer else []) + aliases
    return found


# -- ReAct (ysymyth/ReAct): WikiEnv's reading of an action --------------------------------------------------------


def react(mirror: Path) -> None:
    release = materialize(mirror, "ysymyth/ReAct")
    stand_in("gym", "bs4", "requests")
    wikienv = load(release, ".", "wikienv")
    cases = []
    for record in [*records("qwen2.5-1.5b-*/*/react*.jsonl"), *records("qwen2.5-0.5b-readings/*/react*.jsonl")]:
        for step in record["react"]["trajectory"]:
            cases.append({"output": step["action"], "written": step.get("written"), "from": record["_file"]})
    cases = sampled(cases, 3 * PER_SOURCE)
    for case in cases:
        action = case["output"]
        if not action:  # hotpotqa.ipynb's webthink lower-cases action[0]: an empty action is an IndexError there
            case["release"] = {"fails": "IndexError"}
            continue
        env = object.__new__(wikienv.WikiEnv)
        env.answer, env.obs, env.steps, env.lookup_keyword, env.lookup_list, env.lookup_cnt = None, "", 0, None, [], 0
        env.page, env.search_time, env.num_searches, env.question, env.fever_id = None, 0, 0, None, None
        env.search_step = lambda entity, env=env: setattr(env, "obs", f"SEARCHED {entity}")
        env.construct_lookup_list = lambda keyword: [f"LOOKED UP {keyword}"]
        env.step(action[0].lower() + action[1:])
        case["release"] = {"observation": env.obs, "answer": env.answer}
    cite = release.cite("wikienv.py, hotpotqa.ipynb", "WikiEnv.step (after webthink's action[0].lower())")
    write("react", cite, cases, "ReAct's actions as the released environment reads them")


# -- KD-CoT (AdelWang/KD-CoT): a round's output, and the verifier's reply ------------------------------------------


def kdcot(mirror: Path) -> None:
    release = materialize(mirror, "AdelWang/KD-CoT")
    stand_in("prompts")  # the prompts module: its texts are not what is read here
    steps = load(release, "pipeline", "GPT_inference_steps")
    justify = load(release, "pipeline", "GPT_justify")
    cases = []
    for record in records("qwen2.5-0.5b-readings/kdcot-*/kdcot*.jsonl"):
        limit = 3  # KDCoTSettings.rounds, the release's max_iteration
        for round_ in record.get("trace") or []:
            if round_.get("written", "").strip():  # an empty output comes back from the release's CSV as "nan"
                cases.append({"output": round_["written"], "round": round_["number"], "last": False,
                              "from": record["_file"]})  # fmt: skip
        number = len(record.get("trace") or []) + 1
        wrote = (record.get("finish") or {}).get("wrote", "")
        if wrote.strip() and "no QA system" not in record["finish"].get("ended", ""):
            cases.append({"output": wrote, "round": number, "last": number > limit, "from": record["_file"]})
    cases = sampled(cases, 3 * PER_SOURCE)
    for case in cases:
        case["release"] = _kdcot_round(steps, case["output"], case["round"])
    cite = release.cite("pipeline/GPT_inference_steps.py", "GPT_Infenrence.process_webqsp_response")
    write("kdcot_rounds", cite, cases, "KD-CoT's rounds read as the release reads GPT's outputs (its CSV files)")
    replies = []
    for record in records("qwen2.5-0.5b-readings/kdcot-*/kdcot*.jsonl"):
        for round_ in record.get("trace") or []:
            if round_.get("verifier_reply") is not None:
                kind = "match" if not round_.get("passages") else "justify"
                replies.append({"kind": kind, "output": round_["verifier_reply"], "lm_answer": round_["lm_answer"],
                                "reader_answer": round_["reader_answer"], "question": round_["argument"],
                                "from": record["_file"]})  # fmt: skip
    replies = sampled(replies, 3 * PER_SOURCE)
    for case in replies:
        case["release"] = _kdcot_verdict(justify, case)
    cite = release.cite("pipeline/GPT_justify.py", "process_justify_results, process_match_results")
    write("kdcot_verifier", cite, replies, "KD-CoT's verifier replies mapped to an answer as the release maps them")


def _kdcot_round(steps: Any, output: str, number: int) -> dict[str, Any]:
    """`process_webqsp_response` at iteration number - 1, on one question whose GPT output is `output`."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kdcot-") as folder:
        return _kdcot_read(steps, output, number, folder)


def _kdcot_read(steps: Any, output: str, number: int, folder: str) -> dict[str, Any]:
    """The release's files for that question in `folder`, its reading run, and what it wrote back."""
    import os

    import pandas as pd

    reader = object.__new__(steps.GPT_Infenrence)
    reader.temp_dir_path, reader.iteration, reader.max_iteration = folder, number - 1, 3
    reader.webqsp_temp_file = os.path.join(folder, "webqsp_temp.json")
    question = {"question": "q", "answers": ["x"], "PredictedAnswer": -1, "IntermediateThought": [],
                "IntermediateAction": [], "IntermediateGPTAnswer": []}  # fmt: skip
    Path(reader.webqsp_temp_file).write_text(json.dumps([question]))
    os.makedirs(os.path.join(folder, "webqsp_outputs0"))
    frame = pd.DataFrame({"origin_question": ["PROMPT\nQuestion q\nThought 1"], "origin_answer": [output]})
    frame.to_csv(os.path.join(folder, "webqsp_outputs0", f"webqsp_output{number - 1}_1.csv"), encoding="gb18030",
                 index=False)  # fmt: skip
    reader.process_webqsp_response(version_num=0)
    read = json.loads(Path(reader.webqsp_temp_file).read_text())[0]
    if read["PredictedAnswer"] != -1:
        return {"final": read["PredictedAnswer"]}
    if not read["IntermediateAction"]:  # its `return answer` on an empty Finish: nothing written back
        return {"final": None}
    return {"action": read["IntermediateAction"][-1], "answer": read["IntermediateGPTAnswer"][-1],
            "thought": read["IntermediateThought"][-1]}  # fmt: skip


def _kdcot_verdict(justify: Any, case: dict[str, Any]) -> str:
    """The answer `process_justify_results` (or `process_match_results`) writes for one question's reply."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kdcot-verify-") as folder:
        temp, results = os.path.join(folder, "temp.json"), os.path.join(folder, "results.json")
        data = {"id": "q", "PredictedAnswer": -1, "IntermediateAction": [["Question", case["question"]]],
                "IntermediateGPTAnswer": [case["lm_answer"]], "IntermediateFiDAnswer": [case["reader_answer"]],
                "IntermediateAnswer": []}  # fmt: skip
        Path(temp).write_text(json.dumps([data]))
        if case["kind"] == "match":
            prompt = justify.match_prompt.replace("{question}", case["question"]).replace("{choice}", case["lm_answer"])
            Path(results).write_text(json.dumps([{"input": prompt, "output": case["output"]}]))
            justify.process_match_results(temp, results)
        else:
            prompt = (justify.original_prompt.replace("{question}", case["question"])
                      .replace("{choice_1}", case["lm_answer"])
                      .replace("{choice_2}", case["reader_answer"]))  # fmt: skip
            Path(results).write_text(json.dumps([{"input": prompt, "output": case["output"]}]))
            justify.process_justify_results(temp, results)
        return str(json.loads(Path(temp).read_text())[0]["IntermediateAnswer"][-1])


# -- Search-R1 (PeterGriffinJin/Search-R1): a turn's response, its action, and the answer of the whole turn -------


def searchr1(mirror: Path) -> None:
    release = materialize(mirror, "PeterGriffinJin/Search-R1")
    stand_in("torch", "verl", "verl.utils", "verl.utils.tracking", "requests")
    generation = load(release, ".", "search_r1.llm_agent.generation")
    qa_em = load_file(release, "verl/utils/reward_score/qa_em.py", "search_r1_qa_em")
    manager = object.__new__(generation.LLMGenerationManager)
    manager.tokenizer = types_simple(batch_decode=lambda texts, skip_special_tokens: list(texts))
    manager.config = types_simple(no_think_rl=False)
    manager._batch_tokenize = lambda texts: texts
    cases = []
    runs = ("qwen2.5-1.5b-agents/*", "qwen2.5-0.5b-readings/searchr1-*", "smollm2-135m-readings/searchr1-*")
    for record in (record for run in runs for record in records(f"{run}/searchr1.jsonl")):
        details = record["searchr1"]
        cases += [{"output": written, "from": record["_file"]} for written in details["responses"]]
        cases.append({"output": details["opening"] + details["turn"], "whole": True, "from": record["_file"]})
    cases = sampled(cases, 3 * PER_SOURCE)
    for case in cases:
        if case.get("whole"):
            case["release"] = {"extract_solution": qa_em.extract_solution(case["output"])}
            continue
        _, [response] = manager._postprocess_responses([case["output"]])
        actions, contents = manager.postprocess_predictions([response])
        case["release"] = {"response": response, "action": actions[0], "content": contents[0]}
    cite = release.cite(
        "search_r1/llm_agent/generation.py, verl/utils/reward_score/qa_em.py",
        "LLMGenerationManager._postprocess_responses, .postprocess_predictions; extract_solution",
    )
    write("searchr1", cite, cases, "Search-R1's reading of a turn's response, and of the answer over the whole turn")


# -- R1-Searcher (RUCAIBox/R1-Searcher): the answer of a finished search, as its own evaluation recorded it ---------


def r1searcher(mirror: Path) -> None:
    """The release's evaluation (`eval_search_loacl.py` `main`, inline: no function to call) stored its own
    models' outputs with its readings: `gen_text_store` (every round, the last ending with the "</answer>" it
    appends) and `pred_ans`. A case is the last round as vLLM returned it (the stop string left out) and the
    answer the release read from it. (bamboogle_qwen.jsonl is left out: one of its records holds a pred_ans its
    gen_text_store does not, July 27 against 27 July 1953: two runs' records, not a reading.)"""
    release = materialize(mirror, "RUCAIBox/R1-Searcher")
    cases = []
    for name in ("hotpotqa_qwen", "2wiki_qwen", "hotpotqa_llama", "2wiki_llama", "musique_llama"):
        path = release.root / "data" / "eval_results" / f"{name}.jsonl"
        if not path.exists():
            continue
        found = []
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("stop_reason_final") == "finished" and record.get("gen_text_store"):
                last = record["gen_text_store"].split("<|end_of_documents|>\n\n")[-1]
                found.append(
                    {
                        "output": last.removesuffix("</answer>"),
                        "stop": "</answer>",
                        "from": f"data/eval_results/{name}.jsonl",
                        "release": {"pred_ans": record["pred_ans"]},
                    }
                )
        cases += sampled(found)
    cite = release.cite("evaluation/eval_search_loacl.py, data/eval_results/*.jsonl", "main (its stored pred_ans)")
    write("r1searcher", cite, cases, "R1-Searcher's answer of a finished search, as its evaluation stored it")


# -- FLARE as FlashRAG runs it (RUC-NLPIR/FlashRAG): a look-ahead's first sentence and the judgement of it --------


def flare(mirror: Path, tokenizer_gguf: Path | None = None) -> None:
    """`FLAREPipeline.get_next_sentence` and `.judge_sent_confidence` on each look-ahead the Qwen2.5 models wrote
    (the whole look-ahead and its tokens' probabilities, as FlashRAG's vLLM generator returns them: exp of each
    token's log-probability). Both re-encode text with the model's Hugging Face tokenizer, here the one
    transformers makes from the model's own GGUF file (`--tokenizer-gguf`: it needs torch and the gguf package).
    A case says whether re-encoding the sentence gives back the tokens the model generated (`same_tokens`): where
    it does not, FlashRAG pairs the re-encoded ids with the generated tokens' probabilities (mhindex's deviation
    note)."""
    import math

    from transformers import AutoTokenizer

    if tokenizer_gguf is None:
        raise SystemExit("flare: --tokenizer-gguf names a Qwen2.5 GGUF file (its tokenizer is FlashRAG's)")
    release = materialize(mirror, "RUC-NLPIR/FlashRAG")
    stand_in("flashrag", "flashrag.utils", "flashrag.pipeline", "flashrag.dataset", "flashrag.dataset.utils",
             "flashrag.prompt")  # fmt: skip
    active = load_file(release, "flashrag/pipeline/active_pipeline.py", "flashrag_active_pipeline")
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_gguf.parent), gguf_file=tokenizer_gguf.name)
    pipeline = object.__new__(active.FLAREPipeline)
    pipeline.generator, pipeline.threshold = types_simple(tokenizer=tokenizer), 0.2  # the table's threshold
    cases = []
    for model in ("qwen2.5-0.5b", "qwen2.5-1.5b"):
        found = []
        for record in records(f"{model}-readings/flare-*/flare.jsonl"):
            for taken in record["flare"]["rounds"]:
                if taken.get("output"):
                    found.append({"output": taken["output"], "tokens": taken["tokens"], "from": record["_file"]})
        cases += sampled(found, 2 * PER_SOURCE)
    for case in cases:
        scores = [math.exp(logprob) for _, logprob in case["tokens"]]
        sentence, sentence_scores = pipeline.get_next_sentence(case["output"], scores)
        kept, query = pipeline.judge_sent_confidence(sentence, sentence_scores)
        ids = tokenizer.encode(sentence, add_special_tokens=False)
        same = [tokenizer.decode([i]) for i in ids] == [token for token, _ in case["tokens"][: len(ids)]]
        case["release"] = {"sentence": sentence, "sentence_tokens": len(sentence_scores), "kept": kept,
                           "query": query}  # fmt: skip
        case["same_tokens"] = same
    cite = release.cite("flashrag/pipeline/active_pipeline.py",
                        "FLAREPipeline.get_next_sentence, .judge_sent_confidence")  # fmt: skip
    write("flare", cite, cases, "FlashRAG's FLARE: a look-ahead's first sentence, its tokens, kept or the query")


READERS = {
    "efficientrag": ("microsoft+EfficientRAG", efficientrag),
    "ircot": ("StonyBrookNLP+ircot", ircot),
    "searchain": ("xsc1234+Search-in-the-Chain", searchain),
    "react": ("ysymyth+ReAct", react),
    "kdcot": ("AdelWang+KD-CoT", kdcot),
    "searchr1": ("PeterGriffinJin+Search-R1", searchr1),
    "r1searcher": ("RUCAIBox+R1-Searcher", r1searcher),
    "flare": ("RUC-NLPIR+FlashRAG", flare),
    "selfask-press": ("Bloominglightray+self-ask", selfask_press),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, required=True, help="a folder of git mirrors, owner+name/repo")
    parser.add_argument("--only", nargs="*", choices=list(READERS), help="these releases alone")
    parser.add_argument("--tokenizer-gguf", type=Path, help="flare: a Qwen2.5 GGUF file, its tokenizer FlashRAG's")
    parser.add_argument("--check", action="store_true",
                        help="make the tables in a temporary folder and say whether each is byte-identical to the "
                             "committed one (exit 1 if one is not)")  # fmt: skip
    args = parser.parse_args()
    global OUT
    if args.check:
        import tempfile

        OUT = Path(tempfile.mkdtemp(prefix="readings-"))
        atexit.register(shutil.rmtree, OUT, ignore_errors=True)
    for name in args.only or READERS:
        folder, make = READERS[name]
        if name == "flare":
            flare(args.mirrors / folder / "repo", args.tokenizer_gguf)
        else:
            make(args.mirrors / folder / "repo")
    if args.check:
        committed = REPO / "tests" / "readings"
        moved = [
            made.name
            for made in sorted(OUT.glob("*.json"))
            if not (committed / made.name).is_file() or (committed / made.name).read_bytes() != made.read_bytes()
        ]
        for made in sorted(OUT.glob("*.json")):
            print(f"{made.name}: {'differs' if made.name in moved else 'byte-identical'}")
        sys.exit(1 if moved else 0)


if __name__ == "__main__":
    main()
