"""Adaptive-RAG end to end on the MuSiQue sample with the fast packaged model: an evaluation of NoR, OneR and IRCoT,
the router trained from its answers (`mhindex train adaptive`), and `ask`/`eval --method adaptive` routing each
question to the method the router picks, which answers it exactly as that method alone does."""

from __future__ import annotations

import json

import pytest

from conftest import HANG_S, read_jsonl
from mhindex.cli import main
from mhindex.eval.metrics import best, exact_match

QUICK = ["--lm", "local:smollm2-135m", "--max-steps", "2", "--answer-tokens", "16", "--step-tokens", "32",
         "--max-demos", "2"]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The sample, an evaluation of the three routes on 4 questions, and the router trained from it."""
    home = tmp_path_factory.mktemp("adaptive-home")
    folder = home / "routes-eval"
    assert main(["--quiet", "--home", str(home), "build", "musique"]) == 0
    # Three paragraphs a retrieval, each cut to 60 words: OneR's default 15 made this fixture 7 minutes of the suite
    asked = ["--quiet", "--home", str(home), "eval", "musique", "-m", "nor,oner,ircot", "--limit", "4", "-k", "3",
             "--max-paragraph-words", "60"]  # fmt: skip
    assert main([*asked, *QUICK, "--out", str(folder)]) == 0
    assert main(["--quiet", "--home", str(home), "train", "adaptive", "--from", str(folder)]) == 0
    return home, folder


@pytest.mark.slow
def test_the_router_learns_the_simplest_method_that_answered_each_question(trained):
    home, folder = trained
    router = home / "models" / "adaptive" / "musique"
    about = json.loads((router / "trained.json").read_text())
    assert (router / "router.npz").is_file() and not list(router.parent.glob(".*.partial"))
    questions = {q["id"]: q for q in read_jsonl(home / "musique" / "questions.jsonl")}
    answers = {m: {r["id"]: r["answer"] for r in read_jsonl(folder / f"{m}.jsonl")} for m in ("nor", "oner", "ircot")}
    expected = {"A": 0, "B": 0, "C": 0}
    by_bias = 0
    for qid in answers["nor"]:
        golds = questions[qid]["answers"]
        right = [
            route for route, m in zip("ABC", ("nor", "oner", "ircot")) if best(exact_match, answers[m][qid], golds)
        ]
        if right:
            expected[right[0]] += 1
        else:  # the dataset's bias: MuSiQue's questions have two or more gold paragraphs, multi-step
            assert len(questions[qid]["gold_ids"]) >= 2
            expected["C"] += 1
            by_bias += 1
    assert about["labels"] == expected and about["by_bias"] == by_bias and about["questions"] == 4
    # a fifth held out to measure it (by each id's hash), the rest learnt from
    assert sorted(about["question_ids"] + about["held_out_question_ids"]) == sorted(answers["nor"])


@pytest.mark.slow
def test_adaptive_answers_as_the_method_it_routes_to_and_says_which(trained, capsys):
    home, _ = trained
    question = read_jsonl(home / "musique" / "questions.jsonl")[-1]["question"]  # not one the router learnt from

    def ask(method: str) -> dict:
        capsys.readouterr()
        quick = QUICK if method in ("adaptive", "ircot") else QUICK[:2] + QUICK[-4:-2]  # the options it takes
        assert main(["--home", str(home), "ask", question, "--method", method, *quick, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    record = ask("adaptive")
    routed = record["adaptive"]
    assert record["method"] == "adaptive" and routed["route"] in "ABC"
    assert routed["method"] == {"A": "nor", "B": "oner", "C": "ircot"}[routed["route"]]
    assert sum(routed["probabilities"].values()) == pytest.approx(1.0)
    assert max(routed["probabilities"], key=routed["probabilities"].get) == routed["route"]
    alone = ask(routed["method"])
    assert (record["answer"], record["steps"], record["retrieved"]) == (alone["answer"], alone["steps"],
                                                                          alone["retrieved"])  # fmt: skip
    assert main(["--home", str(home), "ask", question, "--method", "adaptive", *QUICK]) == 0
    assert f"Route {routed['route']}: {routed['method']}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_adaptive_over_llama_cpps_openai_server_routes_and_answers_as_in_process(trained, tmp_path):
    """The same GGUF in process and behind llama.cpp's OpenAI-compatible server on 127.0.0.1, greedy both ways:
    the same route, probabilities, steps and answer for a question the router did not learn from."""
    import subprocess
    import sys

    from mhindex.lm.packaged import packaged_model_path
    from servers import llama_server

    home, _ = trained
    options = ["--method", "adaptive", *QUICK[2:-2], "--max-demos", "1", "-k", "3", "--oner-k", "3",
               "--max-paragraph-words", "60", "--no-cache", "--json"]  # fmt: skip
    questions = [q["question"] for q in read_jsonl(home / "musique" / "questions.jsonl")[-1:]]  # one, for time

    def kept(record: dict) -> tuple:
        return (record["adaptive"], record["answer"], record["steps"], record["retrieved"], record["lm_calls"])

    with llama_server(packaged_model_path("smollm2-135m", tmp_path / "models"), context=8192) as url:
        for question in questions:
            asked = ["--home", str(home), "ask", question, *options]
            # In a process of its own, as tests/test_agents.py runs the agents: a llama.cpp server this process
            # already ran reuses what its cache holds, and a token near a tie may then go the other way.
            local = subprocess.run([sys.executable, "-m", "mhindex", *asked, "--lm", "local:smollm2-135m",
                                    "--lm-threads", "1"], capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
            remote = subprocess.run([sys.executable, "-m", "mhindex", *asked, "--lm", f"openai:smollm2-135m@{url}"],
                                    capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
            assert local.returncode == remote.returncode == 0, (local.stderr, remote.stderr)
            here, there = json.loads(local.stdout), json.loads(remote.stdout)
            assert there["lm"]["calls_from_cache"] == 0  # every call went over HTTP
            assert kept(there) == kept(here), question


@pytest.mark.slow
def test_eval_will_not_score_the_router_on_the_questions_it_learnt_from(trained, capsys):
    """As for EfficientRAG's models: a sample that holds questions the router learnt from is refused in one line."""
    home, _ = trained
    asked = [
        "--home",
        str(home),
        "eval",
        "musique",
        "-m",
        "adaptive",
        "--limit",
        "13",
        *QUICK,
        "--out",
        str(home / "x"),
    ]
    assert main(asked) == 2
    said = capsys.readouterr().err.strip().splitlines()
    learnt = len(json.loads((home / "models" / "adaptive" / "musique" / "trained.json").read_text())["question_ids"])
    assert len(said) == 1 and f"{learnt} of the 13 questions sampled trained adaptive's models" in said[0]
    assert not (home / "x" / "adaptive.jsonl").exists()


def test_a_folder_without_the_three_methods_is_one_line(tmp_path, capsys):
    home, folder = tmp_path / "home", tmp_path / "half"
    assert main(["--quiet", "--home", str(home), "build", "musique"]) == 0
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"corpus": "musique"}))
    (folder / "nor.jsonl").write_text("")
    assert main(["--home", str(home), "train", "adaptive", "--from", str(folder)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "no predictions of oner, ircot" in error[0]
    assert main(["--home", str(home), "ask", "Who?", "--method", "adaptive", "--lm", "local:smollm2-135m"]) != 0
    assert "no Adaptive-RAG router" in capsys.readouterr().err


def _routes_folder(home, folder, questions) -> None:
    """An evaluation's folder as `eval -m nor,oner,ircot` leaves it, its answers written here (no model runs):
    NoR right on the even questions, none right on the odd (labelled by MuSiQue's bias, C)."""
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"corpus": "musique"}))
    for method in ("nor", "oner", "ircot"):
        rows = [{"id": q["id"], "answer": q["answers"][0] if n % 2 == 0 and method == "nor" else "no idea"}
                for n, q in enumerate(questions)]  # fmt: skip
        (folder / f"{method}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_training_resumes_only_its_own_questions_vectors_and_holds_a_fifth_out(tmp_path, capsys, monkeypatch):
    """A training stopped after encoding keeps its questions' vectors; another evaluation trained under the same
    name, with as many questions, is encoded anew and said so (it was fitted on the first one's vectors and said
    it trained on its own); the router records the ids it learnt from and those held out to measure it, so that
    `eval --questions-of` can ask it only questions it has not seen; a damaged run.json is one line."""
    import numpy as np

    from mhindex.training import adaptive

    home = tmp_path / "home"
    assert main(["--quiet", "--home", str(home), "corpus", "musique"]) == 0
    questions = read_jsonl(home / "musique" / "questions.jsonl")
    first, second = tmp_path / "first", tmp_path / "second"
    _routes_folder(home, first, questions[:20])
    _routes_folder(home, second, questions[20:40])

    def stopped(*_):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(adaptive, "fit", stopped)
        with pytest.raises(KeyboardInterrupt):
            adaptive.train(home, first)
    assert (home / "models" / "adaptive" / ".musique.partial" / "vectors.npy").is_file()
    resumed = adaptive.train(home, second)
    assert "holds the vectors of other questions (another evaluation's): encoding these" in capsys.readouterr().err
    router = home / "models" / "adaptive" / "musique"
    about = json.loads((router / "trained.json").read_text())
    learnt, held = about["question_ids"], about["held_out_question_ids"]
    ids = [q["id"] for q in questions[20:40]]
    assert sorted(learnt + held) == sorted(ids) and held and not set(learnt) & set(held)
    assert resumed.questions == 20 and resumed.held_out_accuracy is not None
    kept = np.load(router / "router.npz")
    fresh = adaptive.train(home, second, name="fresh", restart=True)
    assert fresh.held_out_accuracy == resumed.held_out_accuracy
    again = np.load(home / "models" / "adaptive" / "fresh" / "router.npz")
    assert np.array_equal(kept["weights"], again["weights"]) and np.array_equal(kept["bias"], again["bias"])

    (second / "run.json").write_text('{"corpus": "musi')
    assert main(["--home", str(home), "train", "adaptive", "--from", str(second)]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and str(second / "run.json") in said[0] and "Traceback" not in said[0]
