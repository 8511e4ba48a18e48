"""SearChain's rounds on a real Lucene index of the MuSiQue sample.

The loop's rules (completion, verification, seen queries, the round limit, references) are tested
with a scripted stand-in for the LM, said so here: no real model writes a given chain on demand.
Retrieval is real, and so are the prompts and feedback the method builds. The last test runs the
whole method with the packaged model through `mhindex eval`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

import pytest

from conftest import SAMPLES, read_jsonl
from mhindex.backends import BackendSpec, build_index, open_retriever
from mhindex.cli import main
from mhindex.corpora import DATASETS
from mhindex.corpora.build import build_corpus
from mhindex.errors import UsageError
from mhindex.eval.metrics import normalize_answer
from mhindex.lm.base import Completion, LanguageModel
from mhindex.methods import MethodContext, Query, make_method
from mhindex.methods.searchain import Chain, SearChainSettings, cited

QUESTION = "Who is the employer of the person Mach's principle was named after?"
WHO = "Who was Mach's principle named after?"
WHERE = "Who employed Ernst Mach?"


class ScriptedLM(LanguageModel):
    """Stand-in LM: `chat` returns the scripted chains in turn; `complete` is SearChain's reader and
    answers each query with its scripted answer, at the scripted probability."""

    name = "scripted"
    context_length = 100_000

    def __init__(self, chains: Sequence[str], reads: dict[str, tuple[str, float]], trace: str = "") -> None:
        self.chains = list(chains)
        self.reads = reads
        self.trace = trace  # what Tracing writes
        self.conversations: list[list[dict]] = []
        self.traced: list[list[dict]] = []  # the Tracing calls' conversations
        self.read_queries: list[str] = []

    def chat(
        self, messages, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0
    ) -> Completion:
        if messages[-1]["content"] == "[Final Content]:":
            self.traced.append([dict(m) for m in messages])
            return Completion(self.trace, 1, 1, 0.0)
        self.conversations.append([dict(m) for m in messages])
        text = self.chains.pop(0) if self.chains else "[Final Content]: I do not know. So the final answer is unknown."
        return Completion(text, 1, 1, 0.0)

    def complete(
        self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0
    ) -> Completion:
        query = prompt.rsplit("\nQ: ", 1)[1].removesuffix("\nA:")
        self.read_queries.append(query)
        answer, probability = self.reads.get(query, ("unknown", 0.05))
        return Completion(answer, 1, 1, 0.0, token_logprobs=[(answer, math.log(probability))] if logprobs else None)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    corpus = build_corpus(
        DATASETS["musique"],
        [SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"],
        tmp_path_factory.mktemp("searchain"),
    ).corpus
    build_index(corpus, BackendSpec.parse("lucene"))
    opened = open_retriever(corpus, BackendSpec.parse("lucene"))
    yield opened
    opened.close()


def searchain(retriever, chains, reads, trace="", **settings):
    lm = ScriptedLM(chains, reads, trace)
    return make_method("searchain", retriever, lm, SearChainSettings(**settings), MethodContext(dataset="musique")), lm


SOLVED = (
    f"[Query 1]: {WHO}\n[Answer 1]: Ernst Mach.\n[Query 2]: {WHERE}\n[Answer 2]: Charles University.\n"
    "[Final Content]: Mach's principle is named after Ernst Mach [1]. Ernst Mach worked at Charles University [2]. "
    "So the final answer is Charles University."
)


def test_an_unsolved_query_is_completed_and_the_feedback_has_the_papers_shape(retriever):
    method, lm = searchain(
        retriever,
        [f"[Unsolved Query]: {WHO}", SOLVED],
        {WHO: ("Ernst Mach", 0.9), WHERE: ("Charles University", 0.9)},
    )
    answer = method.answer(Query("q", QUESTION))
    first, second = lm.conversations
    # Round 1: the Chain-of-Query prompt with the question, and the assistant's turn opened with [Query 1]:
    assert f"[Question]: {QUESTION}" in first[0]["content"] and "[Unsolved Query]" in first[0]["content"]
    assert first[-1] == {"role": "assistant", "content": "[Query 1]:"}
    # Round 2 continues the same conversation: the chain, then the feedback with the top-1 document.
    assert [m["role"] for m in second] == ["user", "assistant", "user", "assistant"]
    top = retriever.search(WHO, 1)[0]
    feedback = second[2]["content"]
    assert feedback.startswith(
        f'According to the Reference, the answer for "{WHO}" should be "Ernst Mach", you can give your answer and '
        f"continue constructing the reasoning chain for [Question]: {QUESTION}. Reference: Wikipedia Title: "
        f"{top.title}\n"
    )
    assert "[Query]:" not in feedback and "[Answer]:" not in feedback  # the released code's leak
    # The node seen in round 1 is not read again in round 2.
    assert lm.read_queries == [WHO, WHERE]
    assert [n["verdict"] for n in answer.record()["tree"][1]["nodes"]] == ["seen", "verified"]
    record = answer.record()
    assert answer.answer == "Charles University" and record["rounds"] == 2 and answer.lm_calls == 2 + 2 + 1
    assert record["answer_from"] == "chain"  # Tracing wrote nothing here: the last chain's [Final Content] answers
    # [k] of the final content points at the document checked for query k, which counts as retrieved.
    assert [(r["n"], r["id"]) for r in record["references"]] == [(1, top.id), (2, retriever.search(WHERE, 1)[0].id)]
    assert {r["id"] for r in record["references"]} <= {r["id"] for r in answer.retrieved}
    # The terminal trace shows each checked node, the final content and what each [k] points at.
    from rich.console import Console

    from mhindex import render

    console = Console(width=400, record=True)
    for part in render.trace(answer):
        console.print(part)
    shown = console.export_text()
    assert f"node 1: [Query 1] {WHO} -> (unsolved); reader: Ernst Mach (0.90): completed" in shown
    assert (
        "final content: Mach's principle is named after Ernst Mach [1]." in shown
        and f"[1] {top.title} ({top.id})" in shown
    )


def test_tracing_writes_the_final_content_from_the_verified_chain(retriever):
    trace = (
        "Mach's principle is named after Ernst Mach [1]. Mach taught at Charles University [2]. So the "
        "final answer is Charles University."
    )
    wrong = (
        f"[Query 1]: {WHO}\n[Answer 1]: Ernst Mach.\n[Query 2]: {WHERE}\n[Answer 2]: Harvard.\n[Final "
        "Content]: So the final answer is Harvard [2]."
    )
    reads = {WHO: ("Ernst Mach", 0.9), WHERE: ("Charles University", 0.9)}
    method, lm = searchain(retriever, [wrong, wrong], reads, trace=trace, rounds=2)
    answer = method.answer(Query("q", QUESTION))
    record = answer.record()
    # The last round still contradicts the reader; Tracing gets the verified answer, not the LM's.
    (conversation,) = lm.traced
    request = conversation[-2]["content"]
    first, second = retriever.search(WHO, 1)[0], retriever.search(WHERE, 1)[0]
    assert conversation[:-2] == [
        *lm.conversations[-1][:-1],
        {"role": "assistant", "content": wrong},
    ]  # the same conversation, one turn on
    assert f"[Query 2]: {WHERE}\n[Answer 2]: Charles University\n[Reference 2]: {second.title}: " in request
    assert f"[Answer 1]: Ernst Mach.\n[Reference 1]: {first.title}: " in request and "Harvard" not in request
    assert (
        answer.answer == "Charles University"
        and record["answer_from"] == "tracing"
        and record["final_content"] == trace
    )
    assert [(r["n"], r["id"]) for r in record["references"]] == [(1, first.id), (2, second.id)]
    assert record["generated"] == f"{wrong}\n{wrong}\n[Final Content]: {trace}"  # everything the LM wrote
    assert answer.steps[-1].text == f"tracing: {trace}" and answer.lm_calls == 2 + 2 + 1
    # --no-tracing: the last chain's [Final Content] answers, as before the paper's last step was built.
    method, lm = searchain(retriever, [wrong, wrong], reads, trace=trace, rounds=2, tracing=False)
    answer = method.answer(Query("q", QUESTION))
    assert answer.answer == "Harvard" and not lm.traced and answer.record()["answer_from"] == "chain"


def test_an_unsolved_query_is_completed_even_when_the_reader_reads_nothing(retriever):
    # Server/server.py of the release feeds an [Unsolved Query]'s document back whatever its reader said.
    method, lm = searchain(
        retriever,
        [f"[Unsolved Query]: {WHO}", SOLVED],
        {WHO: ("", 0.01), WHERE: ("Charles University", 0.9)},
    )
    record = method.answer(Query("q", QUESTION)).record()
    assert record["tree"][0]["nodes"][0]["verdict"] == "completed" and record["rounds"] == 2
    feedback = lm.conversations[1][2]["content"]
    assert feedback.startswith(
        f'According to the Reference, the answer for "{WHO}" should be "", you can give your answer'
    )
    assert f"Reference: Wikipedia Title: {retriever.search(WHO, 1)[0].title}" in feedback


def test_a_confident_contradiction_is_corrected_a_weak_one_passes(retriever):
    wrong = (
        f"[Query 1]: {WHERE}\n[Answer 1]: Harvard.\n[Final Content]: Ernst Mach worked at Harvard [1]. So "
        "the final answer is Harvard."
    )
    method, lm = searchain(
        retriever, [wrong, SOLVED], {WHERE: ("Charles University", 0.9), WHO: ("Ernst Mach", 0.9)}, rounds=2
    )
    record = method.answer(Query("q", QUESTION)).record()
    assert record["tree"][0]["nodes"][0]["verdict"] == "corrected"
    assert (
        "you can change your answer" in lm.conversations[1][2]["content"]
        and '"Charles University"' in lm.conversations[1][2]["content"]
    )
    assert record["answer"] == "Charles University"
    # Below the threshold the reader's disagreement is not fed back: one round, the LM's answer stands.
    method, lm = searchain(retriever, [wrong], {WHERE: ("Charles University", 0.3)})
    answer = method.answer(Query("q", QUESTION))
    assert (
        answer.record()["tree"][0]["nodes"][0]["verdict"] == "passed"
        and answer.answer == "Harvard"
        and len(lm.conversations) == 1
    )
    # A confident reader that agrees (its answer inside the LM's, after normalisation) verifies the node.
    agreeing = (
        f"[Query 1]: {WHERE}\n[Answer 1]: He taught at the Charles University in Prague.\n[Final "
        "Content]: So the final answer is Charles University."
    )
    method, _ = searchain(retriever, [agreeing], {WHERE: ("charles university", 0.9)})
    assert method.answer(Query("q", QUESTION)).record()["tree"][0]["nodes"][0]["verdict"] == "verified"


def test_the_round_limit_holds(retriever):
    unsolved = f"[Unsolved Query]: {WHO}"
    method, lm = searchain(retriever, [unsolved] * 10, {WHO: ("Ernst Mach", 0.9)}, rounds=3)
    record = method.answer(Query("q", QUESTION)).record()
    assert len(lm.conversations) == 3 and record["rounds"] == 3
    assert lm.read_queries == [WHO] * 3  # an unsolved query is always checked, as in the released code
    assert record["answer"] == "" and record["references"] == [] and len(lm.traced) == 1


def test_chains_are_read_as_the_released_server_reads_them(retriever):
    """Server/server.py's reading (tests/readings/searchain.json holds it to the release on real chains): a line
    with "Query" and "]:" is a node, unsolved where its tag says so, its answer the next line that holds "Answer"."""
    chain = Chain.parse(
        "Some preamble.\n[answer 1] : an answer to no query\n[Query2]: Where did he work?\n"
        "[Query 3]: When?\n[Unsolved Query]: When did Ernst Mach die?\nnoise\n"
        "[Final Content]: Mach's principle is named after Ernst Mach [1].\nHe worked in Prague [2]. So the "
        "final answer is Prague [2]."
    )
    assert [(n.number, n.query, n.lm_answer, n.unsolved) for n in chain.nodes] == [
        (1, "Where did he work?", None, False),
        (2, "When?", None, False),
        (3, "When did Ernst Mach die?", None, True),
    ]
    # The release's prompt has the model write an unsolved query under its [Query n]: that query is then a node
    # answered by the next line holding "Answer" (a later node's, here), and the unsolved line a node of its own.
    quirk = Chain.parse(f"[Query 1]: {WHO}\n[Unsolved Query]: {WHO}\n[Query 2]: {WHERE}\n[Answer 2]: Prague.")
    assert [(n.query, n.answer_line, n.unsolved) for n in quirk.nodes] == [
        (WHO, "[Answer 2]: Prague.", False), (WHO, "[Answer 2]: Prague.", True), (WHERE, "[Answer 2]: Prague.", False)
    ]  # fmt: skip
    assert (
        chain.final_content
        == "Mach's principle is named after Ernst Mach [1]. He worked in Prague [2]. So the final answer is Prague [2]."
    )
    assert chain.answer() == "Prague" and cited(chain.final_content) == [1, 2]
    # A local model continues the prefilled "[Query 1]:", so its reply starts with the query itself.
    method, lm = searchain(
        retriever,
        [f" {WHO}\n[Answer 1]: Ernst Mach.\n[Final Content]: So the final answer is Ernst Mach [1]."],
        {WHO: ("Ernst Mach", 0.9)},
    )
    record = method.answer(Query("q", QUESTION)).record()
    assert (
        record["tree"][0]["chain"].startswith(f"[Query 1]: {WHO}")
        and lm.read_queries == [WHO]
        and record["answer"] == "Ernst Mach"
    )


def test_a_prompt_file_needs_a_place_for_the_question(retriever, tmp_path):
    own = tmp_path / "prompt.txt"
    own.write_text("Write a chain.\n[Question]: {question}\n")
    method, lm = searchain(retriever, [SOLVED], {}, chain_prompt=str(own))
    method.answer(Query("q", QUESTION))
    assert lm.conversations[0][0]["content"] == f"Write a chain.\n[Question]: {QUESTION}\n"
    own.write_text("Write a chain.\n")
    with pytest.raises(UsageError, match="no \\{question\\}"):
        searchain(retriever, [], {}, chain_prompt=str(own))


@pytest.mark.slow
def test_searchain_end_to_end_with_the_packaged_model(tmp_path):
    home = tmp_path / "home"
    sample = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
    assert main(["--quiet", "--home", str(home), "build", "musique", "--input", str(sample)]) == 0
    out = tmp_path / "run"
    assert (
        main(
            [
                "--quiet",
                "--home",
                str(home),
                "eval",
                "musique",
                "-m",
                "searchain",
                "--limit",
                "2",
                "--rounds",
                "2",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    predictions = read_jsonl(out / "searchain.jsonl")
    assert len(predictions) == 2
    for record in predictions:
        assert 1 <= record["rounds"] == len(record["tree"]) <= 2 and record["lm_calls"] >= record["rounds"]
        retrieved = {r["id"] for r in record["retrieved"]}
        checked = {n["doc"]["id"] for round_ in record["tree"] for n in round_["nodes"] if n["doc"]}
        assert checked == retrieved and {r["id"] for r in record["references"]} <= retrieved
        assert all(round_["chain"] for round_ in record["tree"])
        assert record["answer_from"] in ("tracing", "chain") and record["steps"][-1]["text"].startswith("tracing: ")
        assert all(round_["chain"] in record["generated"] for round_ in record["tree"])
    summary = json.loads((out / "metrics.json").read_text())["methods"]["searchain"]
    assert {"cover_em", "cover_em_substring", "cover_em_generated", "recall"} <= set(summary)


def test_a_dpr_reader_from_a_local_folder(retriever, tmp_path):
    """The paper's reader is DPR's, which cannot be downloaded here: a DPR reader with random
    weights and a vocabulary of the sample's words is saved as `save_pretrained` saves the real
    one, and loaded through --reader-model hf:PATH. The loading and span-reading code is the real
    one; only the weights are untrained, so the test checks the shape of what it reads."""
    transformers = pytest.importorskip(
        "transformers", reason="DPR readers need transformers (installed by scripts/setup.sh)"
    )
    torch = pytest.importorskip("torch")
    texts = [
        p["paragraph_text"].lower()
        for line in read_jsonl(SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl")[:20]
        for p in line["paragraphs"]
    ]
    words = sorted({w for text in texts for w in re.findall(r"[^\W\d_]+", text)})
    folder = tmp_path / "dpr-reader"
    folder.mkdir()
    punctuation = list(".,;:-()'\"0123456789")
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *punctuation, *words]) + "\n"
    )
    torch.manual_seed(0)
    config = transformers.DPRConfig(
        vocab_size=5 + len(punctuation) + len(words),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    transformers.DPRReader(config).save_pretrained(folder)
    transformers.DPRReaderTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)

    chain = (
        f"[Query 1]: {WHERE}\n[Answer 1]: Charles University.\n[Final Content]: So the final answer is "
        "Charles University [1]."
    )
    method, lm = searchain(retriever, [chain], {}, reader_model=f"hf:{folder}", rounds=1)
    record = method.answer(Query("q", QUESTION)).record()
    node = record["tree"][0]["nodes"][0]
    top = retriever.search(WHERE, 1)[0]
    assert node["doc"]["id"] == top.id and isinstance(node["confidence"], float)
    assert node["reader_answer"] and "[unk]" not in node["reader_answer"].lower()
    assert normalize_answer(node["reader_answer"]).replace(" ", "") in normalize_answer(top.text).replace(
        " ", ""
    )  # a span of the passage
    assert lm.read_queries == []  # the LM did not read
    assert (
        SearChainSettings(reader_model=f"hf:{folder}").recorded("musique")["verify_threshold"] == 1.5
    )  # the paper's, for DPR
    for spec, message in (("dpr", "write hf:PATH"), (f"hf:{tmp_path / 'missing'}", "cannot load a DPR reader")):
        with pytest.raises(UsageError, match=message):
            searchain(retriever, [], {}, reader_model=spec)
