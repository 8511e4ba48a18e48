"""One small table per paper, from `eval --table`, pinned to its exact answers and scores (tests/pinned.py):
IRCoT's, SearChain's, EfficientRAG's and FlashRAG's on MuSiQue sample questions, KD-CoT's on WebQSP's. The small
packaged model on one thread, the call cache off, two questions and short settings: every row is run, none of its
answers can move unnoticed, and `mhindex report` shows each row's trace as its method draws it."""

from __future__ import annotations

import pytest

from conftest import SAMPLES
from mhindex.cli import main
from pinned import check_pinned

# One thread, so that the numbers do not follow the machine's cores; no call cache, so that every answer is made.
PINNED_RUN = ["--limit", "2", "--seed", "7", "--lm-threads", "1", "--no-cache", "--quiet", "--json"]


def _eval(home, corpus, table, out, *settings) -> None:
    assert main(["--home", str(home), "eval", corpus, "--table", table, *PINNED_RUN, "--out", str(out), *settings]) == 0


def _traces_are_in_the_report(home, folder) -> None:
    """`mhindex report` carries every row's trace of every question as its method draws it (the page's script
    shows them as text: test_report.py's browser test), none of them empty."""
    import json
    import re

    from mhindex.eval.run import read_predictions
    from mhindex.methods import method_class

    assert main(["--home", str(home), "--quiet", "report", str(folder), "-o", str(folder / "report.html")]) == 0
    page = (folder / "report.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)[1])
    shown = {(q["id"], row): a["trace"] for q in data["datasets"][0]["questions"] for row, a in q["answers"].items()}
    for predictions in folder.glob("*.jsonl"):
        method = method_class(predictions.stem.partition("@")[0])
        for record in read_predictions(predictions):
            drawn = shown[record["id"], predictions.stem]
            assert drawn and drawn == json.loads(json.dumps(method.trace_steps(record))), predictions.stem


@pytest.fixture(scope="module")
def musique(tmp_path_factory):
    home = tmp_path_factory.mktemp("pinned-musique")
    sample = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
    assert main(["--quiet", "--home", str(home), "build", "musique", "--input", str(sample)]) == 0
    return home


@pytest.mark.slow
def test_ircot_s_table_is_pinned(musique, tmp_path):
    short = ["-k", "2", "--max-demos", "1", "--max-steps", "2", "--answer-tokens", "16", "--step-tokens", "40"]
    _eval(musique, "musique", "IRCoT", tmp_path, *short)
    check_pinned("ircot", tmp_path)


@pytest.mark.slow
def test_searchain_s_table_is_pinned(musique, tmp_path):
    short = ["-k", "2", "--max-demos", "1", "--max-steps", "2", "--answer-tokens", "16", "--step-tokens", "40"]
    rows = ["--rounds", "2", "--chain-tokens", "64", "--max-follow-ups", "1", "--page-paragraphs", "2", "--sc-samples",
            "2", "--sc-tokens", "32"]  # fmt: skip
    _eval(musique, "musique", "SearChain", tmp_path, *short, *rows)
    check_pinned("searchain", tmp_path)
    _traces_are_in_the_report(musique, tmp_path)


@pytest.mark.slow
def test_flashrag_s_table_is_pinned(musique, tmp_path):
    """FlashRAG's rows mhindex runs: Naive Generation, Standard RAG, FLARE, Search-R1 and R1-Searcher."""
    short = ["--answer-tokens", "16", "--max-rounds", "2", "--look-ahead", "24", "--max-turns", "1", "--step-tokens",
             "40"]  # fmt: skip
    # In the shared worker, after whatever it ran before: a call's completion is its prompt's alone (lm/slots.py).
    _eval(musique, "musique", "FlashRAG", tmp_path, *short)
    check_pinned("flashrag", tmp_path)
    _traces_are_in_the_report(musique, tmp_path)


@pytest.mark.slow
def test_kdcot_s_table_is_pinned(tmp_path):
    home = tmp_path / "home"
    assert main(["--quiet", "--home", str(home), "build", "webqsp"]) == 0
    _eval(home, "webqsp", "KD-CoT", tmp_path / "table", "--rounds", "2")
    check_pinned("kdcot", tmp_path / "table")
    _traces_are_in_the_report(home, tmp_path / "table")


@pytest.mark.slow
def test_efficientrag_s_table_is_pinned(tmp_path):
    """Its row needs trained models: trained here, in one go (a stopped and resumed training is test_efficientrag's),
    on 8 MuSiQue questions for one epoch (fast, and still a real model), and the table asks two of the others."""
    home, records = tmp_path / "home", SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    (tmp_path / "train.jsonl").write_text("".join(lines[:8]))
    (tmp_path / "asked.jsonl").write_text("".join(lines[8:]))
    for name in ("train", "asked"):
        built = ["--quiet", "--home", str(home), "build", "musique", "--input", str(tmp_path / f"{name}.jsonl")]
        assert main([*built, "--name", name]) == 0
    train = ["--epochs", "1", "--batch-size", "8", "--lr", "3e-4"]
    # Whatever ran before in this process has drawn from torch's generator (here, on purpose): the models must
    # not follow it (they did, and the table moved on another machine's test order), nor move it for the caller.
    import torch

    torch.rand(1000)
    before = torch.get_rng_state()
    assert main(["--quiet", "--home", str(home), "train", "efficientrag", "--from", "train", *train]) == 0
    assert torch.equal(torch.get_rng_state(), before)
    models = home / "models" / "efficientrag" / "train"
    short = ["-k", "2", "--max-demos", "1", "--answer-tokens", "16", "--max-follow-ups", "1", "--iterations", "2"]
    with_models = ["--labeler", str(models / "labeler"), "--filter", str(models / "filter")]
    _eval(home, "asked", "EfficientRAG", tmp_path / "table", *short, *with_models, "--max-sub-questions", "2")
    check_pinned("efficientrag", tmp_path / "table")
    _traces_are_in_the_report(home, tmp_path / "table")


def test_a_moved_table_names_the_row_question_and_metric_it_moved():
    import copy
    import json

    from pinned import PINNED, moved

    pinned = json.loads((PINNED / "ircot.json").read_text())
    now = copy.deepcopy(pinned)
    qid = pinned["questions"][0]
    now["rows"]["oner@reader=direct"]["answers"][qid] = "Paris"
    now["rows"]["oner@reader=direct"]["scores"]["f1"] = 0.5
    del now["rows"]["nor@reader=direct"]
    assert moved(pinned, pinned) == []
    was = pinned["rows"]["oner@reader=direct"]
    assert moved(pinned, now) == [
        "row nor@reader=direct: gone",
        f"row oner@reader=direct, question {qid}: answer {was['answers'][qid]!r} -> 'Paris'",
        f"row oner@reader=direct: f1 {was['scores']['f1']} -> 0.5",
    ]
