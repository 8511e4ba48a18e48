"""EfficientRAG: training data from MuSiQue's gold decompositions, training with checkpoints and
resume, and `ask --method efficientrag` end to end with the trained models, a real Lucene index
and the packaged llama.cpp model. Nothing here is mocked."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import orjson
import pytest

from conftest import SAMPLES, read_jsonl
from mhindex.backends import BackendSpec, open_retriever
from mhindex.cli import main
from mhindex.home import open_corpus
from mhindex.methods.efficientrag import parse_json_object
from mhindex.methods.efficientrag_models import TAGS, words
from mhindex.training.efficientrag import build_training_data, resolve_hops

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
RECORDS = [json.loads(line) for line in MUSIQUE.read_text().splitlines()]


def run(home: Path, *args: str, capsys=None) -> tuple[int, str]:
    if capsys:
        capsys.readouterr()
    code = main(["--quiet", "--home", str(home), *map(str, args)])
    return code, capsys.readouterr().out if capsys else ""


def test_hops_resolve_references_and_relations():
    hops = resolve_hops(
        [
            {
                "question": "Van Hook Township >> located in the administrative territorial entity",
                "answer": "Mountrail County",
                "paragraph_id": "a",
            },
            {"question": "#1 >> capital", "answer": "Stanley", "paragraph_id": "b"},
            {"question": "Who founded #2 before #1 existed?", "answer": "X", "paragraph_id": "c"},
        ]
    )
    assert [h.question for h in hops] == [
        "located in the administrative territorial entity of Van Hook Township",
        "capital of Mountrail County",
        "Who founded Stanley before Mountrail County existed?",
    ]
    assert resolve_hops([{"question": "#2 >> capital", "answer": "x", "paragraph_id": "a"}]) is None  # refers ahead
    assert resolve_hops([{"question": "q", "answer": "x"}]) is None  # built before hops kept paragraph ids


def test_training_data_from_the_musique_sample(tmp_path):
    home = tmp_path / "home"
    assert run(home, "build", "musique") == (0, "")
    corpus = open_corpus(home, "musique")
    retriever = open_retriever(corpus, BackendSpec.parse("lucene"))
    try:
        data = build_training_data(corpus, retriever)
    finally:
        retriever.close()

    # Counted from the raw MuSiQue records: a positive and a hard negative per hop, a Filter
    # example per hop but the last.
    hops = sum(len(r["question_decomposition"]) for r in RECORDS)
    assert data.stats["questions"] == len(RECORDS)
    assert data.stats["hops"] == hops
    assert len(data.filter) == sum(len(r["question_decomposition"]) - 1 for r in RECORDS)
    positives = [e for e in data.labeler if e["tag"] == 0]
    negatives = [e for e in data.labeler if e["tag"] == 1]
    assert (
        len(positives) == hops and len(negatives) == hops - data.stats["no_negative"] and data.stats["no_negative"] == 0
    )

    texts = {p["id"]: p for p in read_jsonl(corpus.corpus)}
    by_id = {r["id"]: r for r in RECORDS}
    for example in positives:
        record = by_id[example["question_id"]]
        hop = record["question_decomposition"][example["hop"] - 1]
        supporting = record["paragraphs"][hop["paragraph_support_idx"]]
        assert texts[example["paragraph_id"]]["text"] == supporting["paragraph_text"]
        if example["hop"] == 1:
            assert example["query"] == words(record["question"])
        answer = re.sub(r"\W+", " ", hop["answer"]).lower().strip()
        if example["useful"] is None:  # the heuristic's miss: the answer is not in the paragraph word for word
            assert f" {answer} " not in " " + re.sub(r"\W+", " ", " ".join(example["chunk"])).lower() + " "
        else:
            useful = re.sub(
                r"\W+", " ", " ".join(w for w, u in zip(example["chunk"], example["useful"], strict=True) if u)
            ).lower()
            assert answer in useful
    missed = sum(e["useful"] is None for e in positives)
    assert missed == data.stats["answer_not_in_paragraph"] and missed < hops / 5
    for example in negatives:
        record = by_id[example["question_id"]]
        gold = {(p["title"], p["paragraph_text"]) for p in record["paragraphs"] if p["is_supporting"]}
        assert (texts[example["paragraph_id"]]["title"], texts[example["paragraph_id"]]["text"]) not in gold
        assert not any(example["useful"])
    for example in data.filter:
        assert example["words"][:2] == ["Query", ":"] and "Info" in example["words"]
        assert len(example["keep"]) == len(example["words"]) and any(example["keep"])
    assert 0.5 < data.stats["filter_target_coverage"] <= 1


def _mini(home: Path) -> Path:
    """A data root holding 24 MuSiQue questions' corpus ("mini"), indexed."""
    small = home.parent / "musique.small.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:24]))
    assert main(["--quiet", "--home", str(home), "corpus", "musique", "--input", str(small), "--name", "mini"]) == 0
    assert main(["--quiet", "--home", str(home), "index", "mini"]) == 0
    return home


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """The corpus, no models yet: the training test's own (it stops, resumes and damages its trainings)."""
    return _mini(tmp_path_factory.mktemp("efficientrag-untrained") / "home")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Models trained on the 24 questions in one go, for the tests that use them (once a module)."""
    home = _mini(tmp_path_factory.mktemp("efficientrag") / "home")
    assert run(home, *TRAIN)[0] == 0
    return home


TRAIN = (
    "train",
    "efficientrag",
    "--from",
    "mini",
    "--epochs",
    "2",  # 22 Labeler steps: its loss falls by a quarter (1.35 to 0.96 over the first and last four)
    "--batch-size",
    "8",
    "--lr",
    "3e-4",
    "--checkpoint-every",
    "4",
)


@pytest.mark.slow
def test_training_stops_resumes_and_its_loss_falls(untrained, capsys):
    code, out = run(untrained, *TRAIN, "--stop-after", "6", "--json", capsys=capsys)
    first = orjson.loads(out)
    assert code == 0 and first["complete"] is False and first["steps"] == 6
    partial = untrained / "models" / "efficientrag" / "mini.partial"
    assert (partial / "labeler.checkpoint.pt").is_file()
    assert not (untrained / "models" / "efficientrag" / "mini").exists()

    code, out = run(untrained, *TRAIN, "--json", capsys=capsys)
    done = orjson.loads(out)
    assert code == 0 and done["complete"] is True and done["resumed_from"] == 6
    folder = Path(done["folder"])
    log = read_jsonl(folder / "labeler.log.jsonl")
    assert [entry["step"] for entry in log] == list(range(1, len(log) + 1))  # no step lost or repeated
    assert {entry["resumed_from"] for entry in log if entry["step"] > 6} == {6}
    losses = orjson.loads((folder / "labeler" / "training.json").read_bytes())["losses"]
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4
    report = orjson.loads((folder / "trained.json").read_bytes())
    assert report["corpus"] == "mini" and report["questions"] == 24
    # The file names no split: every question, and the ones the models fitted on (not held out) recorded.
    assert report["split"] == "all" and report["held_out_questions"] >= 1
    assert len(report["trained_question_ids"]) == 24 - report["held_out_questions"]
    assert set(report["trained_question_ids"]) <= {r["id"] for r in RECORDS[:24]}
    assert set(report["held_out"]) >= {
        "labeler_token_f1",
        "labeler_tag_accuracy",
        "filter_token_f1",
        "filter_exact_query",
    }
    assert not list(folder.parent.glob("*.partial"))

    code, out = run(untrained, *TRAIN, "--json", capsys=capsys)  # nothing new to learn
    assert code == 0 and orjson.loads(out)["steps"] == 0

    # Stopped and resumed, the training goes where one in a go does. A step's loss is the weights, the batch and
    # the dropout of that step, so the same losses on the steps past the resume (7-10) need the weights, the
    # optimiser, the schedule and torch's generator restored; ten steps in a go test it at a quarter of the cost
    # of a second whole training. The finished models stay as they were.
    weights = {role: (folder / role / "model.safetensors").read_bytes() for role in ("labeler", "filter")}
    import torch

    assert run(untrained, *TRAIN, "--restart", "--stop-after", "10", capsys=capsys)[0] == 0
    in_a_go = torch.load(partial / "labeler.checkpoint.pt", weights_only=False)
    assert in_a_go["step"] == 10 and in_a_go["losses"] == losses[:10]
    assert {role: (folder / role / "model.safetensors").read_bytes() for role in ("labeler", "filter")} == weights
    # A checkpoint cut short (a disk that filled, a copy interrupted): said, and the role trained from the start.
    shutil.rmtree(folder)  # no finished models: the partial training is what a new run goes on from
    checkpoint = partial / "labeler.checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    capsys.readouterr()
    code = main(["--home", str(untrained), *TRAIN, "--stop-after", "2", "--json"])
    again, said = capsys.readouterr()
    assert code == 0 and orjson.loads(again)["resumed_from"] == 0 and "labeler.checkpoint.pt is damaged" in said
    shutil.rmtree(partial)


@pytest.mark.slow
def test_ask_finds_the_trained_models_and_calls_the_lm_once(trained, capsys):
    question = RECORDS[0]["question"]
    code, out = run(trained, "ask", question, "--method", "efficientrag", "--max-demos", "1", "--json", capsys=capsys)
    assert code == 0
    answer = orjson.loads(out)
    assert answer["method"] == "efficientrag" and answer["lm_calls"] == 1 and isinstance(answer["answer"], str)
    # One answer with the released QA prompt (src/efficientrag_qa.py of microsoft/EfficientRAG@6b2489f),
    # read as its JSON.
    generation = answer["efficientrag"]["generation"]
    assert (
        generation["prompt"] == "answer_musique"
        and generation["chunks"] == len(answer["retrieved"])
        and generation["left_out"] == 0
    )
    parsed = parse_json_object(answer["reasoning"])
    assert generation["json"] == (parsed is not None and "answer" in parsed)
    if generation["json"]:
        assert answer["answer"] == str(parsed["answer"]).strip()
    rounds = answer["efficientrag"]["rounds"]
    assert answer["rounds"] == len(rounds) and 1 <= len(rounds) <= 4
    assert rounds[0]["query"] == question
    corpus = {p["id"]: p for p in read_jsonl(trained / "mini" / "corpus.jsonl")}
    kept_ids = []
    for number, entry in enumerate(rounds):
        assert len(entry["chunks"]) == 10
        for chunk in entry["chunks"]:
            assert chunk["tag"] in TAGS
            assert set(words(chunk["kept"])) <= set(words(corpus[chunk["id"]]["text"]))
            if chunk["tag"] == TAGS[0] and chunk["id"] not in kept_ids:
                kept_ids.append(chunk["id"])
        if number + 1 < len(rounds):  # a later round's query is what the Filter kept of this one's input
            assert rounds[number + 1]["query"] == entry["next_query"]
            assert set(words(entry["next_query"])) <= set(words(rounds[number + 1]["filter_input"]))
    assert [r["id"] for r in answer["retrieved"]] == kept_ids

    code, out = run(
        trained,
        "ask",
        question,
        "--method",
        "efficientrag",
        "--generator",
        "ircot",
        "--max-demos",
        "1",
        "--json",
        capsys=capsys,
    )
    assert (
        code == 0 and orjson.loads(out)["lm_calls"] == 1 and "generation" not in orjson.loads(out)["efficientrag"]
    )  # IRCoT's reader instead

    code = main(
        [
            "--quiet",
            "--home",
            str(trained),
            "ask",
            question,
            "--method",
            "efficientrag",
            "--labeler",
            str(trained / "nowhere"),
        ]
    )
    assert code == 2 and "not an EfficientRAG model folder" in capsys.readouterr().err


def test_eval_refuses_the_questions_the_models_trained_on(trained, capsys):
    code = main(["--home", str(trained), "eval", "mini", "--method", "efficientrag", "--max-demos", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "questions sampled trained efficientrag's models" in err and "--split dev" in err
    assert len(err.strip().splitlines()) == 1 and "--questions-of the models' folder" in err

    # A corpus with no train split (the bundled sample's case): evaluated on the questions held out of training.
    models = trained / "models" / "efficientrag" / "mini"
    report = orjson.loads((models / "trained.json").read_bytes())
    held = report["held_out_question_ids"]
    assert held and not set(held) & set(report["trained_question_ids"])
    out = trained.parent / "held-out-eval"
    asked = ["eval", "mini", "--method", "efficientrag", "--max-demos", "1", "--questions-of", str(models)]
    assert main(["--quiet", "--home", str(trained), *asked, "--out", str(out)]) == 0
    assert orjson.loads((out / "metrics.json").read_bytes())["question_ids"] == held


def test_training_takes_the_train_split_and_says_when_there_is_none(tmp_path, capsys):
    from mhindex.training.efficientrag import build_training_data

    home = tmp_path / "home"
    train, dev = tmp_path / "musique_ans_v1.0_train.jsonl", tmp_path / "musique_ans_v1.0_dev.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:6]))
    dev.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[6:10]))
    assert main(["--quiet", "--home", str(home), "build", "musique", "-i", str(train), "-i", str(dev)]) == 0
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import open_corpus

    corpus = open_corpus(home, "musique")
    retriever = open_retriever(corpus, BackendSpec.parse("lucene"))
    try:
        data = build_training_data(corpus, retriever)  # "all": every question
        assert data.split == "all" and data.stats["questions"] == 10
        data = build_training_data(corpus, retriever, split="auto")
        assert data.split == "train" and {e["question_id"] for e in data.labeler} <= {r["id"] for r in RECORDS[:6]}
        data = build_training_data(corpus, retriever, split="dev")
        assert data.split == "dev" and data.stats["questions"] == 4
        assert "train split" not in capsys.readouterr().err  # asked for, so nothing to warn of
    finally:
        retriever.close()
    # A corpus of dev questions only: `auto` (train, the papers' choice) falls back to every question, and says so.
    assert main(["--quiet", "--home", str(home), "build", "musique", "-i", str(dev), "--name", "dev-only"]) == 0
    corpus = open_corpus(home, "dev-only")
    retriever = open_retriever(corpus, BackendSpec.parse("lucene"))
    try:
        data = build_training_data(corpus, retriever, split="auto")
        assert data.split == "all" and data.stats["questions"] == 4
        assert "training on 4 questions of 'dev-only' (it has no train split)" in capsys.readouterr().err
    finally:
        retriever.close()


def test_ask_without_trained_models_says_how_to_train(mh, home):
    assert mh("build", "musique").code == 0
    result = mh("ask", "Who?", "--method", "efficientrag")
    assert result.code == 2 and "mhindex train efficientrag --from" in result.err and "Traceback" not in result.err


def test_the_released_json_reader():
    # utils/model.py of microsoft/EfficientRAG@6b2489f: the first {...} of the reply, read as JSON.
    assert parse_json_object('<Answer>:\n```json\n{"answer": "Toronto Coach Terminal"}\n```') == {
        "answer": "Toronto Coach Terminal"
    }
    assert parse_json_object('{"response": "yes"} and {"response": "no"}') == {"response": "yes"}
    assert parse_json_object("The answer is Toronto.") is None and parse_json_object("[1, 2]") is None
