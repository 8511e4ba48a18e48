"""`mhindex eval` end to end on the MuSiQue sample with SmolLM2 and Lucene: the table and
files, an interrupted run (killed mid-way) that resumes to the same metrics, and `score`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import HANG_S, SAMPLES, read_jsonl
from mhindex.cli import main
from mhindex.eval.run import read_predictions
from mhindex.lm.cache import CallCache

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
ARGS = [
    "--method",
    "nor,oner",
    "--limit",
    "3",
    "--seed",
    "7",
    "-k",
    "3",
    "--max-demos",
    "1",
    "--max-paragraph-words",
    "60",
]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    home = tmp_path_factory.mktemp("eval-home")
    assert main(["--quiet", "--home", str(home), "build", "musique", "--input", str(MUSIQUE)]) == 0
    return home


def run(root, *args, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "mhindex", "--home", str(root), "eval", "musique", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


@pytest.mark.slow
def test_eval_interrupted_resumes_to_the_same_metrics(root, tmp_path):
    clean = run(root, *ARGS, "--out", tmp_path / "clean", "--json")
    out, err = clean.communicate(timeout=HANG_S)
    assert clean.returncode == 0, err
    report = json.loads(out)
    assert report["questions"] == 3 and set(report["methods"]) == {"nor", "oner"}
    assert (tmp_path / "clean" / "metrics.json").is_file() and (tmp_path / "clean" / "chart.png").stat().st_size > 1000
    for method in ("nor", "oner"):
        assert len(read_predictions(tmp_path / "clean" / f"{method}.jsonl")) == 3
    # NoR against OneR on the same three questions: F1 and EM (NoR retrieves nothing: no recall compared).
    paired = {row["metric"]: row for row in report["paired"]}
    assert set(paired) == {"f1", "em"} and all(row["a"] == "nor" and row["b"] == "oner" for row in paired.values())
    f1 = paired["f1"]
    assert f1["questions"] == 3
    assert f1["difference"] == pytest.approx(report["methods"]["nor"]["f1"] - report["methods"]["oner"]["f1"])
    assert f1["ci95"] is None and f1["no_interval"] == "too few questions (under 10)"  # 3 questions: none stated

    # Kill a second run (its own folder) as soon as it has written one oner prediction.
    folder = tmp_path / "interrupted"
    victim = run(root, *ARGS, "--out", folder, "--json", "--no-cache")
    deadline = time.time() + 300
    while time.time() < deadline:
        path = folder / "oner.jsonl"
        if path.is_file() and path.read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.2)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    partial = read_predictions(folder / "oner.jsonl", repair=True)
    assert 1 <= len(partial) < 3 and not (folder / "metrics.json").exists()

    resumed = run(root, *ARGS, "--out", folder, "--json")
    out, err = resumed.communicate(timeout=HANG_S)
    assert resumed.returncode == 0, err
    again = json.loads(out)
    assert again["methods"]["nor"]["f1"] == report["methods"]["nor"]["f1"]
    for key in ("em", "f1", "cover_em", "first_answer_em", "recall", "retrieved_per_question", "lm_calls_per_question"):
        assert again["methods"]["oner"][key] == report["methods"]["oner"][key], key
    ids = [r["id"] for r in read_predictions(folder / "oner.jsonl")]
    assert len(ids) == len(set(ids)) == 3  # nothing asked twice


@pytest.mark.slow
def test_two_evals_into_one_folder_neither_repeat_nor_lose_each_other(root, tmp_path):
    """Side by side into one folder (each eval a process of its own, as on a machine with cores to spare, and
    from two data roots):
    one method is answered once, the second eval waiting for the first's lock and resuming from its
    answers; another method waits while its predictions are locked, says by whom, and joins run.json."""
    import shutil

    from mhindex.locks import evaluating

    folder = tmp_path / "shared"
    common = ["--limit", "2", "--seed", "23", "--max-demos", "1", "--max-paragraph-words", "40", "--out", folder]
    # The second from another data root (a copy of the first): the folder's locks live in the folder itself.
    other = shutil.copytree(root, tmp_path / "other-root", ignore=shutil.ignore_patterns(".locks", "cache"))
    both = [run(home, "--method", "nor", *common, "--no-cache") for home in (root, other)]
    for process in both:
        _, err = process.communicate(timeout=HANG_S)
        assert process.returncode == 0, err
    ids = [r["id"] for r in read_predictions(folder / "nor.jsonl")]
    assert len(ids) == len(set(ids)) == 2  # without the lock each process answers both questions

    said: list[str] = []
    with evaluating(folder, "oner", "a test holding the lock"):
        waiting = run(root, "--method", "oner", "-k", "2", *common)
        reader = threading.Thread(target=lambda: said.extend(waiting.stderr), daemon=True)
        reader.start()
        deadline = time.time() + 300
        while time.time() < deadline and not any("being written" in line for line in said):
            time.sleep(0.2)
        assert waiting.poll() is None and any(
            f"oner.jsonl is being written by process {os.getpid()} (a test holding the lock" in line for line in said
        ), said
    assert waiting.wait(timeout=HANG_S) == 0, said
    assert set(json.loads((folder / "run.json").read_text())["settings"]) == {"nor", "oner"}
    assert len(read_predictions(folder / "oner.jsonl")) == 2


def test_ctrl_c_keeps_the_answers_and_says_how_to_resume(root, tmp_path):
    # OneR runs Lucene's JVM in the process, which must leave Ctrl-C to Python.
    folder = tmp_path / "stopped"
    victim = run(
        root,
        "--method",
        "oner",
        "--limit",
        "40",
        "-k",
        "3",
        "--max-demos",
        "1",
        "--max-paragraph-words",
        "60",
        "--no-cache",
        "--out",
        folder,
    )
    path, deadline = folder / "oner.jsonl", time.time() + 300
    while time.time() < deadline and not (path.is_file() and path.read_bytes().count(b"\n")):
        time.sleep(0.1)
    victim.send_signal(signal.SIGINT)
    _, err = victim.communicate(timeout=HANG_S)
    assert victim.returncode == 130, err
    assert "the same command resumes" in err and str(folder) in err
    kept = read_predictions(path)
    assert 1 <= len(kept) < 40 and not (folder / "metrics.json").exists()


def test_table_and_score_command(root, tmp_path, capsys):
    assert main(["--home", str(root), "eval", "musique", *ARGS, "--out", str(tmp_path / "e")]) == 0
    printed = capsys.readouterr().out
    for column in (
        "Method",
        "EM",
        "F1",
        "Cover-EM",
        "First-ans. EM",
        "Recall (≤15)",
        "#Paras",
        "LM calls/q",
        "s/q",
        "nor",
        "oner",
    ):
        assert column in printed
    metrics = json.loads((tmp_path / "e" / "metrics.json").read_text())["methods"]
    questions = root / "musique" / "questions.jsonl"
    assert main(["score", str(tmp_path / "e" / "oner.jsonl"), "--questions", str(questions), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)["oner"]
    assert scored["f1"] == metrics["oner"]["f1"] and scored["recall"] == metrics["oner"]["recall"]
    assert main(["score", str(tmp_path / "e" / "oner.jsonl"), "--questions", str(tmp_path / "none.jsonl")]) == 2
    # A judge scores the same predictions again (EfficientRAG's Accuracy); it is recorded, and asks nothing anew.
    before = (tmp_path / "e" / "oner.jsonl").read_bytes()
    assert (
        main(
            [
                "--quiet",
                "--home",
                str(root),
                "eval",
                "musique",
                *ARGS,
                "--out",
                str(tmp_path / "e"),
                "--judge-lm",
                "local:smollm2-135m",
                "--json",
            ]
        )
        == 0
    )
    judged = json.loads(capsys.readouterr().out)
    assert judged["judge"] == "local:smollm2-135m" and all(
        0 <= m["accuracy_llm"] <= 1 for m in judged["methods"].values()
    )
    assert (tmp_path / "e" / "oner.jsonl").read_bytes() == before and json.loads(
        (tmp_path / "e" / "run.json").read_text()
    )["judge"] == "local:smollm2-135m"


def test_a_folder_keeps_one_configuration(root, tmp_path, capsys):
    folder = tmp_path / "e"
    assert (
        main(["--quiet", "--home", str(root), "eval", "musique", *ARGS, "--method", "oner", "--out", str(folder)]) == 0
    )
    recorded = json.loads((folder / "run.json").read_text())
    assert recorded["settings"]["oner"]["k"] == 3 and recorded["settings"]["oner"]["demos_from"] == "musique"
    assert recorded["corpus_sha256"] and recorded["lm_context"] == 8192 and recorded["index"]["k1"] == 1.2
    assert recorded["lm_threads"] in range(1, 1 + len(os.sched_getaffinity(0)))  # the cores others left free
    before = (folder / "oner.jsonl").read_bytes()
    capsys.readouterr()
    # Other settings in the same folder would mix two configurations in one table: refused, nothing asked.
    changed = [*ARGS, "--method", "oner", "--out", str(folder), "-k", "4", "--reader", "direct"]
    assert main(["--quiet", "--home", str(root), "eval", "musique", *changed]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error.count("\n") == 0
        and str(folder) in error
        and "oner.reader=auto, oner.k=3" in error
        and "oner.reader=direct, oner.k=4" in error
    )
    assert (folder / "oner.jsonl").read_bytes() == before
    # Another method joins the folder, and its settings are recorded beside the first's.
    assert (
        main(
            [
                "--quiet",
                "--home",
                str(root),
                "eval",
                "musique",
                "--method",
                "nor",
                "--limit",
                "3",
                "--seed",
                "7",
                "--max-demos",
                "1",
                "--out",
                str(folder),
                "--lm-threads",  # another thread count is recorded, not refused: it follows the machine's load
                str(recorded["lm_threads"] % 2 + 1),
            ]
        )
        == 0
    )
    joined = json.loads((folder / "run.json").read_text())
    assert set(joined["settings"]) == {"oner", "nor"} and joined["lm_threads"] == recorded["lm_threads"] % 2 + 1
    # A folder written before run.json existed is checked against its metrics.json instead.
    (folder / "run.json").unlink()
    assert main(["--quiet", "--home", str(root), "eval", "musique", *changed]) == 2
    assert "oner.k=3" in capsys.readouterr().err
    # A run made before queries were cleaned and answers cut short (its run.json has neither setting) is not
    # resumed with cleaned queries or short answers.
    del recorded["settings"]["oner"]["clean_queries"], recorded["settings"]["oner"]["short_answer"]
    (folder / "run.json").write_text(json.dumps(recorded))
    assert (
        main(["--quiet", "--home", str(root), "eval", "musique", *ARGS, "--method", "oner", "--out", str(folder)]) == 2
    )
    refused = capsys.readouterr().err
    assert "oner.clean_queries=False" in refused and "oner.short_answer=False" in refused
    assert (
        main(
            [
                "--quiet",
                "--home",
                str(root),
                "eval",
                "musique",
                *ARGS,
                "--method",
                "oner",
                "--out",
                str(folder),
                "--no-clean-queries",
                "--no-short-answer",
            ]
        )
        == 0
    )


def test_torn_last_line_is_repaired(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "a", "answer": "x"}\n{"id": "b", "ans')
    assert [r["id"] for r in read_predictions(path, repair=True)] == ["a"]
    assert path.read_bytes() == b'{"id": "a", "answer": "x"}\n'


def test_samples_are_reproducible_and_nested(root):
    from mhindex.eval.run import sample_questions
    from mhindex.home import corpus_dir

    corpus = corpus_dir(root, "musique")
    small, large = sample_questions(corpus, 20, 13370), sample_questions(corpus, 50, 13370)
    assert [q["id"] for q in small] == [q["id"] for q in sample_questions(corpus, 20, 13370)]
    assert {q["id"] for q in small} < {q["id"] for q in large}
    assert {q["id"] for q in sample_questions(corpus, 20, 1)} != {q["id"] for q in small}
    assert len(sample_questions(corpus, None, 0)) == 100


def test_claim_folder_refuses_a_changed_index_and_adds_new_methods(tmp_path):
    from mhindex.eval.run import claim_folder

    run = {
        "corpus": "c",
        "corpus_sha256": "aa",
        "lm": "m",
        "backend": "dense",
        "index": {"encoder": "minilm", "nprobe": 16},
        "settings": {"oner": {"k": 15}},
        "tool_version": "0.1.0",
    }
    claim_folder(tmp_path, run)
    other_encoder = {**run, "index": {"encoder": "dpr", "nprobe": 16}}
    with pytest.raises(Exception, match="index.encoder=minilm; this run has index.encoder=dpr"):
        claim_folder(tmp_path, other_encoder)
    with pytest.raises(Exception, match="corpus_sha256=aa"):
        claim_folder(tmp_path, {**run, "corpus_sha256": "bb"})
    merged = claim_folder(
        tmp_path, {**run, "settings": {"nor": {"reader": "direct"}}, "tool_version": "0.2.0"}
    )  # a newer mhindex may resume
    assert set(merged["settings"]) == {"oner", "nor"}
    assert set(json.loads((tmp_path / "run.json").read_text())["settings"]) == {"oner", "nor"}


def test_an_llm_judges_the_answers_with_efficientrag_s_prompt(mh, home, tmp_path):
    """EfficientRAG's Accuracy (src/evaluation/correctness.py): the packaged model judges, through the call cache."""
    assert mh("--quiet", "build", "musique").code == 0
    gold = read_jsonl(home / "musique" / "questions.jsonl")[:3]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"id": q["id"], "answer": a, "retrieved": []}) + "\n"
            for q, a in zip(gold, [q["answers"][0] for q in gold[:2]] + ["no idea"], strict=True)
        )
    )
    first = mh("score", str(answers), "--questions", "musique", "--judge-lm", "local:smollm2-135m", "--json")
    assert first.code == 0, first.err
    summary = first.json()["answers"]
    assert 0.0 <= summary["accuracy_llm"] <= 1.0 and summary["accuracy_llm"] * 3 == round(summary["accuracy_llm"] * 3)
    calls = len(CallCache(home / "cache" / "lm.sqlite"))
    assert (
        mh("score", str(answers), "--questions", "musique", "--judge-lm", "local:smollm2-135m", "--json").json()
        == first.json()
    )
    assert len(CallCache(home / "cache" / "lm.sqlite")) == calls >= 3  # judged once, then read from the cache
    assert "accuracy_llm" not in mh("score", str(answers), "--questions", "musique", "--json").json()["answers"]


def test_eval_samples_the_dev_split_unless_told(mh, home, tmp_path):
    from mhindex.eval.run import default_folder, sample_of_split
    from mhindex.home import open_corpus

    lines = MUSIQUE.read_text().splitlines()
    train, dev = tmp_path / "musique_ans_v1.0_train.jsonl", tmp_path / "musique_ans_v1.0_dev.jsonl"
    train.write_text("\n".join(lines[:30]) + "\n")
    dev.write_text("\n".join(lines[30:50]) + "\n")
    assert mh("corpus", "musique", "-i", train, "-i", dev).code == 0
    corpus = open_corpus(home, "musique")
    dev_ids = {json.loads(line)["id"] for line in lines[30:50]}
    questions, split = sample_of_split(corpus, None, 1, "auto")
    assert split == "dev" and {q["id"] for q in questions} == dev_ids  # what the papers evaluate on
    questions, split = sample_of_split(corpus, 5, 1, "train")
    assert split == "train" and len(questions) == 5 and not {q["id"] for q in questions} & dev_ids
    assert len(sample_of_split(corpus, None, 1, "all")[0]) == 50
    assert default_folder(corpus, "local:x", "lucene", 1, 5, "train").name == "local-x-lucene-s1-train"
    assert default_folder(corpus, "local:x", "lucene", 1, 5, "dev").name == "local-x-lucene-s1"
    result = mh("eval", "musique", "--split", "test", "--method", "nor")
    assert result.code == 2 and "has no test questions (its splits: train (30), dev (20))" in result.err


@pytest.mark.slow
def test_sweep_tune_on_disjoint_questions_and_draw_the_curve(root, tmp_path, capsys):
    """OneR over K = 2 and 4 in one run, K tuned by recall on 3 questions and reported on 3 others,
    then the recall-budget curve of an untuned sweep."""
    common = ["--method", "oner", "--seed", "7", "--max-demos", "1", "--max-paragraph-words", "40", "--json"]
    code = main(["--home", str(root), "eval", "musique", *common, "--limit", "3", "--sweep", "k=2,4"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    swept = report["methods"]
    assert set(swept) == {"oner@k=2", "oner@k=4"}
    assert (swept["oner@k=2"]["retrieved_per_question"], swept["oner@k=4"]["retrieved_per_question"]) == (2, 4)
    assert swept["oner@k=4"]["recall"] >= swept["oner@k=2"]["recall"]  # Lucene's top 4 holds its top 2
    folder = root / "musique" / "eval"
    swept_folder = next(p for p in folder.iterdir() if p.name.endswith("-s7"))
    assert {p.name for p in swept_folder.glob("oner@*.jsonl")} == {"oner@k=2.jsonl", "oner@k=4.jsonl"}
    run_json = json.loads((swept_folder / "run.json").read_text())
    assert run_json["settings"]["oner@k=2"]["k"] == 2 and run_json["settings"]["oner@k=4"]["k"] == 4

    code = main(["--home", str(root), "eval", "musique", *common, "--limit", "3", "--sweep", "k=2,4", "--tune-on", "3"])
    assert code == 0
    tuned = json.loads(capsys.readouterr().out)
    choice = tuned["tuned"]["oner"]
    assert choice["metric"] == "recall" and choice["chosen_on"]["questions"] == 3
    best = max(choice["scores"].values())
    assert choice["scores"][choice["chosen"]] == best and choice["chosen"] == next(
        name for name, value in choice["scores"].items() if value == best
    )
    assert list(tuned["methods"]) == [choice["chosen"]]
    from mhindex.eval.run import sample_of_split
    from mhindex.home import open_corpus

    reported = {q["id"] for q in sample_of_split(open_corpus(root, "musique"), 3, 7, "auto", skip=3)[0]}
    assert len(reported) == 3 and reported.isdisjoint(choice["chosen_on"]["ids"])  # disjoint by id
    answered = {r["id"] for r in read_predictions(next(folder.glob("*-tuned3")) / f"{choice['chosen']}.jsonl")}
    assert answered == reported | set(choice["chosen_on"]["ids"])  # its tuning answers, then the reported ones

    assert main(["--home", str(root), "curve", str(swept_folder), "-o", str(tmp_path / "curve.png"), "--json"]) == 0
    curve = json.loads(capsys.readouterr().out)
    assert [(p["variant"], p["paragraphs"]) for p in curve["points"]] == [("oner@k=2", 2), ("oner@k=4", 4)]
    assert all(0 <= p["interval"][0] <= p["recall"] <= p["interval"][1] <= 1 for p in curve["points"])
    assert (tmp_path / "curve.png").stat().st_size > 5000
    # The tuned folder's curve: the sweep on its tuning sample (metrics.json keeps every variant's scores
    # there), the chosen setting on the reported one.
    tuned_folder = next(folder.glob("*-tuned3"))
    assert main(["--home", str(root), "curve", str(tuned_folder), "-o", str(tmp_path / "tuned.png"), "--json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert [(p["sample"], p["variant"], p["questions"]) for p in points] == [
        ("tuning", "oner@k=2", 3),
        ("tuning", "oner@k=4", 3),
        ("reported", choice["chosen"], 3),
    ]
    assert points[0]["recall"] == choice["scores"]["oner@k=2"] and points[1]["recall"] == choice["scores"]["oner@k=4"]

    # Browsed: the sweep's folder draws its curve too; the tuned one says what was chosen, on what; the list
    # holds the questions each table scored (metrics.json's question_ids), not its tuning answers.
    assert json.loads((tuned_folder / "metrics.json").read_text())["question_ids"] == sorted(
        reported, key=[q["id"] for q in read_jsonl(root / "musique" / "questions.jsonl")].index
    )
    page = tmp_path / "report.html"
    assert main(["--home", str(root), "report", str(swept_folder), str(tuned_folder), "-o", str(page)]) == 0
    html = page.read_text()
    assert html.count("<svg") == 4  # two bar charts and two recall-budget curves (the tuned one on its tuning sample)
    assert "OneR (k=2)" in html and "Settings tuned on a disjoint sample" in html
    assert f"<dd>{choice['chosen'].partition('@')[2]} chosen on 3 other dev questions by recall (k=2 " in html
    swept_ids = set(json.loads((swept_folder / "metrics.json").read_text())["question_ids"])
    assert html.count('<a class="open" href="#q/0/') == len(swept_ids | reported)
    # With no folder: the corpus's latest evaluation (the tuned one, written last), and which it is, said.
    latest = tmp_path / "latest.html"
    assert main(["--home", str(root), "report", "--corpus", "musique", "-o", str(latest)]) == 0
    assert f"report of {tuned_folder}" in capsys.readouterr().err
    assert latest.read_text().count('<a class="open" href="#q/0/') == 3

    # A method beside the sweep (nothing to choose) joins the tuned folder on the reported questions only:
    # OneR's answers are resumed, NoR answers the 3 reported questions, not the 3 tuning ones.
    beside = ["--method", "oner,nor", *common[2:], "--limit", "3", "--sweep", "oner.k=2,4", "--tune-on", "3"]
    assert main(["--home", str(root), "eval", "musique", *beside]) == 0
    joined = json.loads(capsys.readouterr().out)
    assert list(joined["tuned"]) == ["oner"] and joined["tuned"]["oner"]["chosen"] == choice["chosen"]
    assert list(joined["methods"]) == [choice["chosen"], "nor"] and set(joined["tuning_methods"]) == set(swept)
    assert {r["id"] for r in read_predictions(tuned_folder / "nor.jsonl")} == reported
    assert [(p["a"], p["b"]) for p in joined["paired"] if p["metric"] == "f1"] == [(choice["chosen"], "nor")]
    code = main(["--home", str(root), "eval", "musique", *common, "--sweep", "k=2", "--tune-on", "3"])
    assert code == 2 and "--tune-on picks the best of a --sweep: give one of two" in capsys.readouterr().err

    code = main(["--home", str(root), "eval", "musique", *common, "--sweep", "ircot.k=2"])
    assert code == 2 and "ircot is not among the methods evaluated" in capsys.readouterr().err


def test_a_larger_limit_grows_the_same_folder(root, capsys):
    common = ["--home", str(root), "eval", "musique", "--method", "nor", "--seed", "11", "--max-demos", "1", "--json"]
    assert main([*common, "--limit", "2"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main([*common, "--limit", "3"]) == 0
    grown = json.loads(capsys.readouterr().out)
    folders = [p for p in (root / "musique" / "eval").iterdir() if p.name.endswith("-s11")]
    assert len(folders) == 1 and grown["questions"] == 3 and first["questions"] == 2
    lines = read_predictions(folders[0] / "nor.jsonl")
    assert len(lines) == 3  # the two answers of the first run kept, one more asked


def test_a_papers_table_runs_its_rows_each_as_the_paper_ran_it_and_says_why_the_others_are_not_run(root, capsys):
    from mhindex.eval.tables import plan_table

    # EfficientRAG's rows in the paper's order, each the method that runs it as released (Direct-R: direct.py, K=10).
    planned = plan_table("efficientrag", "hotpotqa")
    assert [(r.label, r.variant) for r in planned.rows] == [
        ("Direct", "direct"), ("CoT", "cot"), ("Decompose", "decompose"), ("Direct-R", "direct-r"),
        ("Iter-RetGen", "iterretgen"), ("SelfAsk", "selfask"), ("EfficientRAG", "efficientrag"),
    ]  # fmt: skip
    assert planned.not_run == [] and planned.record()["rows"]["efficientrag"]["paper"]["Recall"] == 81.84
    # SearChain's: its rows' own shots (Table 8), a setting given per dataset resolved for the corpus's dataset,
    # every row of its Table 1 that nothing runs said so with its figure, and no IRCoT (not in its Table 1).
    hotpot, musique = plan_table("SearChain", "hotpotqa"), plan_table("searchain", "musique")
    assert [r.variant for r in hotpot.rows] == [
        "direct@prompt=zero-shot", "cot@style=plain,max_demos=4", "direct-r@prompt=zero-shot,k=5",
        "selfask@demos=press,step_tokens=256", "react@fallback=cot-sc,max_demos=6", "searchain",
    ]  # fmt: skip
    assert "react@fallback=cot-sc,max_demos=4" in [r.variant for r in musique.rows]
    dsp = next(row for row in hotpot.record()["not_run"] if row["row"] == "DSP")
    assert dsp == {"row": "DSP", "why": "not a method of mhindex", "paper": {"cover-EM": 51.97}}
    # KD-CoT's ablations are settings of one method; its Table 2 has no column for MuSiQue, and says so.
    kdcot = plan_table("KD-CoT", "webqsp")
    assert [r.variant for r in kdcot.rows] == [
        "direct-r@prompt=zero-shot,k=4", "kdcot@qa=none", "kdcot", "kdcot@qa=verifier", "kdcot@qa=reader",
    ]  # fmt: skip
    assert kdcot.record()["rows"]["kdcot@qa=reader"]["paper"] == {"Hit@1": 59.9, "F1": 47.6}
    assert plan_table("kd-cot", "musique").record()["note"].endswith("; no column for musique")

    assert main(["--home", str(root), "list", "tables", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    fid = next(row for row in listed if row["row"] == "Our Retrieve-then-read")
    assert fid["runs"] is None and "FiD" in fid["why_not"] and fid["paper"]["webqsp"] == {"Hit@1": 73.7, "F1": 50.2}
    assert main(["--home", str(root), "list", "methods", "--json"]) == 0
    methods = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert methods["direct-r"]["tables"][0] == "EfficientRAG: Direct-R" and not methods["cot"]["retrieves"]
    assert main(["--home", str(root), "eval", "musique", "--table", "ACL"]) == 2
    assert (
        "--table must be one of EfficientRAG, FlashRAG, IRCoT, KD-CoT, SearChain, not 'ACL'" in capsys.readouterr().err
    )


@pytest.mark.slow
def test_a_papers_table_prints_the_papers_figures_beside_ours_and_a_method_added_apart(root, tmp_path, capsys):
    small = ["--limit", "1", "--seed", "7", "-k", "2", "--max-demos", "1", "--max-steps", "1", "--answer-tokens", "8"]
    out = ["--out", str(tmp_path / "ircot-table"), "--quiet"]
    assert main(["--home", str(root), "eval", "musique", "--table", "ircot", "--method", "direct", *small, *out]) == 0
    shown = capsys.readouterr().out
    report = json.loads((tmp_path / "ircot-table" / "metrics.json").read_text())
    assert list(report["methods"]) == [
        "nor@reader=direct", "nor@reader=cot", "oner@reader=direct", "oner@reader=cot", "ircot@reader=direct",
        "ircot@reader=cot", "direct",
    ]  # fmt: skip
    rows = report["table"]["rows"]
    assert rows["oner@reader=cot"] == {"row": "OneR QA, CoT", "added": False,
                                       "paper": {"F1 (Flan-T5-XXL)": 17.6, "F1 (GPT3)": 29.4}}  # fmt: skip
    assert rows["direct"]["added"] and rows["direct"]["paper"] is None
    for text in ("IRCoT's table", "Paper: F1 (GPT3)", "OneR QA, CoT", "29.4", "added: not in the paper"):
        assert text in shown, text
    assert main(["--home", str(root), "eval", "musique", "--table", "ircot", "--method", "direct", *small, *out,
                 "--format", "md"]) == 0  # fmt: skip
    markdown = capsys.readouterr().out
    assert "| OneR (reader=cot) | OneR QA, CoT | 1 |" in markdown and "The paper's figures: Trivedi et al." in markdown


def test_out_inside_a_corpus_folder_is_refused_before_any_answer(root, capsys):
    """A rebuild (`corpus --force`) replaces a corpus's folder but its indexes and eval/: answers written
    beside them would go with it, so --out may be under eval/ or outside the corpus, nowhere else there."""
    for inside in (root / "musique", root / "musique" / "mine"):
        assert main(["--home", str(root), "eval", "musique", *ARGS, "--out", str(inside)]) == 2
        err = capsys.readouterr().err
        assert f"--out {inside} is inside corpus 'musique''s folder, which `mhindex corpus --force` replaces" in err
    assert not (root / "musique" / "mine").exists() and not (root / "musique" / "nor.jsonl").exists()
    # The data root itself, and its own folders, are mhindex's: no run's answers go there.
    for own in (root, root / "cache", root / "models" / "mine", root / ".locks"):
        assert main(["--home", str(root), "eval", "musique", *ARGS, "--out", str(own)]) == 2
        assert "which mhindex keeps for itself" in capsys.readouterr().err
    assert not (root / "cache" / "nor.jsonl").exists() and not (root / "nor.jsonl").exists()


@pytest.mark.slow
def test_an_evaluation_reruns_from_its_folder_to_the_same_answers_and_says_which_moved(root, tmp_path, capsys):
    """`mhindex rerun FOLDER`: the recorded corpus (by hash), model, threads, settings (a sweep's variants too)
    and questions, the call cache off, every answer compared with the recorded one, timings aside."""
    first = tmp_path / "first"
    shared = ["--seed", "7", "--max-demos", "1", "--max-paragraph-words", "60", "--lm-threads", "1"]  # ARGS less -k
    asked = ["--home", str(root), "--quiet", "eval", "musique", "--limit", "3", *shared, "--out", str(first)]
    # Two evaluations in one folder: NoR on 3 questions, then OneR's sweep on 2; the second's metrics.json keeps
    # what the first asked, and the rerun makes both again.
    assert main([*asked, "--method", "nor"]) == 0
    assert main([*asked, "--method", "oner", "--sweep", "oner.k=2,3", "--limit", "2"]) == 0
    metrics = json.loads((first / "metrics.json").read_text())
    assert list(metrics["methods"]) == ["oner@k=2", "oner@k=3"] and len(metrics["question_ids"]) == 2
    assert [(e["methods"], len(e["question_ids"])) for e in metrics["earlier"]] == [(["nor"], 3)]
    assert metrics["methods"]["oner@k=2"]["hops"]["questions"] == 2  # which hop was missed (eval/hops.py)
    capsys.readouterr()
    assert main(["--home", str(root), "rerun", str(first), "--out", str(tmp_path / "again"), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["compared"] == {"nor": 3, "oner@k=2": 2, "oner@k=3": 2}
    assert again["differences"] == {"nor": [], "oner@k=2": [], "oner@k=3": []}
    assert json.loads((tmp_path / "again" / "run.json").read_text())["lm_threads"] == 1
    assert json.loads((tmp_path / "again" / "metrics.json").read_text())["earlier"] == metrics["earlier"]

    # An answer that is not what the recorded settings give is named, and the exit code says so.
    predictions = first / "oner@k=2.jsonl"
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    records[1]["answer"] = "not what the model says"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["--home", str(root), "rerun", str(first), "--out", str(tmp_path / "moved")]) == 1
    shown = capsys.readouterr().out
    assert f"oner@k=2: 1 of 2 answers differ from {first}: {records[1]['id']}" in shown
    assert "nor: 3 of 3 answers as recorded" in shown

    # Another corpus under the same name is one line, before any answer.
    run_json = json.loads((first / "run.json").read_text())
    (first / "run.json").write_text(json.dumps({**run_json, "corpus_sha256": "0" * 64}))
    assert main(["--home", str(root), "rerun", str(first), "--out", str(tmp_path / "other")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "corpus 'musique' is not the one" in error[0] and "rebuild it" in error[0]
    assert not (tmp_path / "other").exists()
    # An index built with other settings: refused before any question is asked, not after all of them.
    (first / "run.json").write_text(json.dumps({**run_json, "index": {**run_json["index"], "k1": 0.5}}))
    assert main(["--home", str(root), "rerun", str(first), "--out", str(tmp_path / "index")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "index of 'musique' is not the one the record searched" in error[0]
    assert not list((tmp_path / "index").glob("*.jsonl"))


def test_each_method_s_call_bound_holds_for_every_stored_answer(tmp_path):
    """`Method.most_calls`, which eval's estimate of a run multiplies, bounds the LM calls of every answer stored
    under benchmarks/results, with the settings its run recorded (ReAct's once did not: a Thought without an Action
    takes a second call)."""
    from pathlib import Path

    from mhindex.errors import MhindexError
    from mhindex.methods import method_class, settings_recorded

    checked: dict[str, int] = {}
    for run_file in (Path(__file__).parents[1] / "benchmarks" / "results").rglob("run.json"):
        for name, recorded in (json.loads(run_file.read_text()).get("settings") or {}).items():
            method = name.partition("@")[0]
            try:
                bound = method_class(method).most_calls(settings_recorded(method, recorded, str(run_file), tmp_path))
            except MhindexError:  # a method or a setting of an earlier version, or a model not on this machine
                continue
            if bound is None or not (run_file.parent / f"{name}.jsonl").is_file():
                continue
            for record in read_predictions(run_file.parent / f"{name}.jsonl"):
                if "error" not in record:
                    assert record["lm_calls"] <= bound, (run_file.parent / f"{name}.jsonl", record["id"], bound)
                    checked[method] = checked.get(method, 0) + 1
    assert {"ircot", "react", "flare", "searchr1", "r1searcher", "iterretgen"} <= set(checked)
    assert sum(checked.values()) > 2000


def test_a_run_says_its_estimate_before_the_first_answer_and_again_as_rows_finish(root, tmp_path, capsys):
    """Before the first answer: at most how many LM calls (each row's questions times its loop's bound), and at the
    pace measured on this machine (kept from earlier runs) about how long; then the pace of the first answer where
    none was kept, and what is left as each row finishes. A row whose loop sets no bound is said to have none."""
    home = tmp_path / "home"
    shutil.copytree(root / "musique", home / "musique", ignore=shutil.ignore_patterns("eval"))
    asked = ["--home", str(home), "eval", "musique", "--method", "nor,ircot,decompose", "--limit", "2", "--seed", "5",
             "-k", "2", "--max-demos", "1", "--max-paragraph-words", "40", "--max-steps", "2",
             "--lm", "local:smollm2-135m", "--lm-threads", "1"]  # fmt: skip
    capsys.readouterr()
    assert main([*asked, "--out", str(tmp_path / "first")]) == 0
    said = [json.loads(line)["message"] for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    estimates = [line for line in said if "LM calls" in line or "estimate" in line or " done; left" in line]
    # nor: 2 questions x 1 call; ircot: 2 x (2 steps + the reader); decompose: no bound
    assert estimates[0] == (
        "estimate: at most 8 LM calls for nor, ircot; no pace measured here yet for local:smollm2-135m at 1 threads: "
        "the first answer gives one; decompose: no bound on calls (their own pace shows in their progress)"
    ), said
    assert estimates[1].startswith("estimate, from the first answer: at most 7 LM calls for nor, ircot, at most ")
    assert any(line.startswith("nor done; left: at most 6 LM calls for ircot, at most about ") for line in estimates)
    assert estimates[-1].startswith("decompose done; left: nothing left to answer")
    pace = json.loads((home / "cache" / "lm-pace.json").read_text())["local:smollm2-135m at 1 threads"]
    assert pace["seconds_per_call"] > 0 and pace["calls"] >= 3
    # The next run on this machine starts from the pace kept (a run of one row: the pace is the model's, not a row's).
    again = ["--home", str(home), "eval", "musique", "--method", "nor", "--limit", "2", "--seed", "6",
             "--lm", "local:smollm2-135m", "--lm-threads", "1", "--answer-tokens", "4"]  # fmt: skip
    assert main([*again, "--out", str(tmp_path / "second")]) == 0
    said = [json.loads(line)["message"] for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    first = next(line for line in said if line.startswith("estimate"))
    assert first.startswith("estimate: at most 2 LM calls for nor, at most about ")
    assert f"at {pace['seconds_per_call']:.1f} s a call (measured here for local:smollm2-135m at 1 threads)" in first


@pytest.mark.slow
def test_seeds_run_a_sampling_row_on_disjoint_seeds_and_print_the_spread_beside_the_intervals(root, tmp_path, capsys):
    """`eval --seeds N` (#75): a row that samples (React->CoT-SC) runs N times, each draw on chains no other draw
    shares, its own predictions file; the spread over draws and each draw's paired difference with every other row
    go into metrics.json and the printed table, and `rerun` makes the same draws again."""
    import mhindex

    folder = tmp_path / "seeds"
    react = dict(max_steps=1, step_tokens=3, fallback="cot-sc", sc_samples=2, sc_tokens=24, max_demos=1)
    asked = dict(limit=2, seed=7, answer_tokens=8, lm_threads=1, home=root, **react)
    evaluation = mhindex.evaluate("musique", ["direct", "react"], seeds=2, out=folder, **asked)
    report = evaluation.report
    assert list(report["methods"]) == ["direct", "react", "react@sc_seed=2"]  # the first draw keeps the row's name
    chains = {name: [[c["seed"] for c in r["react"]["cot_sc"]["chains"]] for r in read_jsonl(folder / f"{name}.jsonl")]
              for name in ("react", "react@sc_seed=2")}  # fmt: skip
    assert chains == {"react": [[0, 1], [0, 1]], "react@sc_seed=2": [[2, 3], [2, 3]]}  # no chain in two draws
    # ReAct's greedy steps are the same in every draw: the second's come from the call cache, its chains do not.
    for record in read_jsonl(folder / "react@sc_seed=2.jsonl"):
        assert record["lm"]["calls_from_cache"] == record["lm_calls"] - 2
    (spread,) = report["spread"]
    assert spread["row"] == "react" and spread["draws"] == ["react", "react@sc_seed=2"]
    f1s = [report["methods"][name]["f1"] for name in spread["draws"]]
    assert spread["metrics"]["f1"] == {"values": f1s, "mean": sum(f1s) / 2, "min": min(f1s), "max": max(f1s)}
    # The pairs were computed direct minus react; the spread states them as the sampled row minus the other.
    against = {(a["other"], a["metric"]): a for a in spread["against"]}
    assert set(against) == {("direct", "f1"), ("direct", "em")}
    for name in spread["draws"]:
        own = against[("direct", "f1")]["by_draw"][name]
        assert own["difference"] == pytest.approx(report["methods"][name]["f1"] - report["methods"]["direct"]["f1"])
        assert own["ci95"] is None and own["questions"] == 2  # two questions: no interval stated
    assert against[("direct", "f1")]["verdict"] in ("no difference on any seed", "the seed decides the sign",
                                                    "one sign; too few questions for an interval")  # fmt: skip
    rows = evaluation.spread(as_frame=False)  # in points, a row a draw, other row and metric
    shown_rows = [(r["draw"], r["other"], r["metric"]) for r in rows]
    assert shown_rows[:2] == [("react", "direct", "f1"), ("react@sc_seed=2", "direct", "f1")]
    assert rows[0]["difference"] == pytest.approx(against[("direct", "f1")]["by_draw"]["react"]["difference"] * 100)
    # The command line prints both spread tables; the same command resumes: nothing asked again.
    capsys.readouterr()
    cli = ["--home", str(root), "eval", "musique", "--method", "direct,react", "--seeds", "2", "--limit", "2",
           "--seed", "7", "--answer-tokens", "8", "--lm-threads", "1", "--max-steps", "1", "--step-tokens", "3",
           "--fallback", "cot-sc", "--sc-samples", "2", "--sc-tokens", "24", "--max-demos", "1",
           "--out", str(folder)]  # fmt: skip
    assert main(cli) == 0
    shown = " ".join(capsys.readouterr().out.split())
    for text in ("Spread over seeds", "Each seed's paired difference", "ReAct (sc_seed=2)", "too few"):
        assert text in shown, text
    assert len(read_jsonl(folder / "react@sc_seed=2.jsonl")) == 2
    # `mhindex report`'s page draws the same two tables.
    page = " ".join(evaluation.write_report(tmp_path / "report.html").read_text().split())
    assert "<h4>Spread over seeds" in page and "react@sc_seed=2.jsonl" in page
    assert f"<td>{against[('direct', 'f1')]['verdict']}</td>" in page
    # `rerun` makes the draws and their spread again from the record.
    assert main(["--home", str(root), "--quiet", "rerun", str(folder), "--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert again["spread"][0]["draws"] == spread["draws"] and again["spread"][0]["metrics"] == spread["metrics"]

    # Refused in one line: seeds where nothing samples, seeds chosen among by a tuning, and a damaged record.
    with pytest.raises(mhindex.UsageError, match="seeds 2: none of direct, react samples under its settings"):
        mhindex.evaluate("musique", ["direct", "react"], seeds=2, out=tmp_path / "greedy", **{**asked,
                         "sc_temperature": 0.0})  # fmt: skip
    with pytest.raises(mhindex.UsageError, match="seeds 2 with tune_on: a tuning would choose among"):
        mhindex.evaluate("musique", ["direct", "react"], seeds=2, tune_on=1, sweep=["react.sc_samples=1,2"],
                         out=tmp_path / "tuned", **asked)  # fmt: skip
    with pytest.raises(mhindex.UsageError, match="seeds 2: react@sc_seed=2 would be both a row of its own"):
        mhindex.evaluate("musique", ["direct", "react"], seeds=2, sweep=["react.sc_seed=0,2"], **asked)
    with pytest.raises(mhindex.UsageError, match="seeds must be at least 1 and at most 20, not 0"):
        mhindex.evaluate("musique", ["direct", "react"], seeds=0, **asked)
    assert not any((tmp_path / name).exists() for name in ("greedy", "tuned"))
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["spread"][0]["metrics"]["f1"]["mean"] = "high"
    (folder / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(mhindex.UsageError, match=r"field 'spread\[0\]': each measure and difference should have"):
        mhindex.read_evaluation(folder)


def test_the_spread_says_whether_a_difference_holds_whatever_the_seed():
    """eval/spread.py on pairs as `paired_differences` writes them (either order): each draw's difference stated as
    the sampled row minus the other, and what the draws say together."""
    from mhindex.eval.spread import seed_spread

    def pair(a, b, difference, low, high, questions=30):
        return {"a": a, "b": b, "metric": "f1", "difference": difference, "ci95": [low, high], "questions": questions}

    metrics = {name: {"f1": f1, "em": 0.1} for name, f1 in (("cot", 0.2), ("sc", 0.3), ("sc@s=21", 0.25),
                                                             ("direct", 0.1), ("plain", 0.28))}  # fmt: skip
    paired = [
        pair("cot", "sc", -0.10, -0.18, -0.02),
        pair("cot", "sc@s=21", -0.05, -0.09, -0.01),  # holds on both
        pair("sc", "direct", 0.20, 0.05, 0.30),
        pair("sc@s=21", "direct", 0.15, -0.01, 0.3),  # one spans 0
        pair("sc", "plain", 0.02, -0.1, 0.1),
        pair("sc@s=21", "plain", -0.03, -0.1, 0.05),  # the sign moves
        pair("sc", "sc@s=21", 0.05, -0.1, 0.2),  # two draws of one row: not a comparison with another row
    ]
    (spread,) = seed_spread({"sc": ["sc", "sc@s=21"]}, metrics, paired, ["em"])
    assert list(spread["metrics"]) == ["em", "f1"]  # the paper's measure first; recall absent from every row: left out
    assert spread["metrics"]["f1"] == {"values": [0.3, 0.25], "mean": 0.275, "min": 0.25, "max": 0.3}
    against = {a["other"]: a for a in spread["against"]}
    assert set(against) == {"cot", "direct", "plain"}
    assert against["cot"]["by_draw"]["sc"] == {"difference": 0.10, "ci95": [0.02, 0.18], "questions": 30}
    assert (against["cot"]["min"], against["cot"]["max"]) == (0.05, 0.10)
    verdicts = {other: entry["verdict"] for other, entry in against.items()}
    assert verdicts == {"cot": "holds on every seed", "direct": "one sign; an interval spans 0",
                        "plain": "the seed decides the sign"}  # fmt: skip
    few = seed_spread({"sc": ["sc", "sc@s=21"]}, metrics, [pair("sc", "direct", 0.2, 0.1, 0.3, 5),
                                                           pair("sc@s=21", "direct", 0.1, 0.0, 0.2, 5)])  # fmt: skip
    assert few[0]["against"][0]["verdict"] == "one sign; too few questions for an interval"
    assert few[0]["against"][0]["by_draw"]["sc"]["ci95"] is None
