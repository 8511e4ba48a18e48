"""The Python API, through its public names only: this module imports `mhindex` and nothing under it.
A real Lucene index of the MuSiQue sample and the fast packaged model (SmolLM2-135M, llama.cpp); the model
and retriever objects "of one's own" below wrap those real ones, as a notebook's would."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Sequence

import pytest

import mhindex

QUESTION_ID = "2hop__574419_270105"  # the county seat of Van Hook Township: Stanley


@pytest.fixture(scope="module")
def musique(tmp_path_factory):
    home = tmp_path_factory.mktemp("api-home")
    return mhindex.build("musique", home=home)


def test_every_public_name_resolves_and_importing_mhindex_loads_none_of_them():
    assert sorted(dir(mhindex)) == sorted(mhindex.__all__)
    for name in mhindex.__all__:
        assert getattr(mhindex, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'internals'"):
        _ = mhindex.internals  # type: ignore[attr-defined]
    # The CLI imports the package on every command: the API's modules load only when a name is used.
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, mhindex; print(sorted(m for m in sys.modules if m.startswith('mhindex')))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert loaded.strip() == "['mhindex', 'mhindex._lazy']"  # the package and its few lines that import on first use
    assert issubclass(mhindex.UsageError, mhindex.MhindexError) and issubclass(mhindex.LMError, mhindex.MhindexError)


def test_a_corpus_is_built_listed_read_by_id_and_searched(musique):
    home = musique.path.parent
    assert [c.name for c in mhindex.list_corpora(home=home)] == ["musique"]
    opened = mhindex.corpus("musique", home=home)
    assert opened.dataset == "musique" and len(opened) == musique.manifest["counts"]["paragraphs"] > 1000
    assert opened.indexes == ["lucene"]

    question = opened.question(QUESTION_ID)
    assert question.answers == ["Stanley"] and len(question.gold_ids) == 2
    assert question in opened.questions()
    gold = opened.paragraph(question.gold_ids[0])
    assert gold.id == question.gold_ids[0] and "Stanley" in gold.text
    assert sum(1 for _ in opened.paragraphs()) == len(opened)

    with opened.searcher("lucene", k1=0.9, b=0.4) as searcher:
        hits = searcher.search("Van Hook Township Mountrail County", k=3)
        assert len(hits) == 3 and hits[0].title.startswith("Van Hook Township") and hits[0].score >= hits[1].score
        assert isinstance(hits[0], mhindex.Hit)
        batch = searcher.batch_search(["Van Hook Township Mountrail County", "Mountrail County Courthouse"], k=3)
        assert [h.id for h in batch[0]] == [h.id for h in hits] and len(batch[1]) == 3
        # Pyserini's call, queries and their ids: each id's hits
        by_id = searcher.batch_search(
            ["Van Hook Township Mountrail County", "Mountrail County Courthouse"], ["a", "b"], 3
        )
        assert by_id == {"a": batch[0], "b": batch[1]}
        with pytest.raises(mhindex.UsageError, match=r"qids must be a list of ids, one a query \(k is k=\.\.\.\)"):
            searcher.batch_search(["Van Hook Township", "Stanley"], 3)  # type: ignore[call-overload]
        scoped = searcher.search("county seat", k=2, titles=["Mountrail County Courthouse"])
        assert {h.title for h in scoped} == {"Mountrail County Courthouse"}
        with pytest.raises(mhindex.UsageError, match="k must be at least 1, not 0"):
            searcher.search("county", k=0)

    # Bad input is the CLI's one line, raised as the documented exceptions (never SystemExit).
    with pytest.raises(mhindex.UsageError, match="no corpus named 'nope'|'nope'"):
        mhindex.corpus("nope", home=home)
    with pytest.raises(mhindex.UsageError, match="^k3 is an option of"):  # in Python's terms: a keyword, no flag
        opened.searcher("lucene", k3=1.0)
    with pytest.raises(mhindex.UsageError, match="no paragraph 'missing'"):
        opened.paragraph("missing")


def test_ask_returns_what_ask_json_prints_and_checks_settings_as_the_cli_does(musique):
    home = musique.path.parent
    question = musique.question(QUESTION_ID)
    answer = mhindex.ask(question, method="oner", corpus=musique, k=3, answer_tokens=16, max_demos=1)
    assert answer.ok and answer.method == "oner" and answer.id == QUESTION_ID and answer.lm_calls == 1
    assert len(answer.paragraph_ids) == 3 and answer.prompt_tokens > 0
    assert [step["title"] for step in answer.trace()][-1] == "Reader"
    hops = answer.hops(question)  # MuSiQue's two hops: OneR's one retrieval is step 1 for whichever it found
    assert [hop["hop"] for hop in hops] == [1, 2] and all(hop["step"] in (1, None) for hop in hops)
    assert [hop["kept"] for hop in hops] == [
        h["paragraph_ids"][0] in answer.paragraph_ids for h in question.record["gold_hops"]
    ]

    args = ["--home", str(home), "ask", question.question, "-m", "oner", "-k", "3", "--answer-tokens", "16", "--json",
            "--max-demos", "1"]  # fmt: skip
    run = subprocess.run([sys.executable, "-m", "mhindex", *args], capture_output=True, text=True, check=True)
    printed = json.loads(run.stdout)
    ours = answer.to_dict()
    for field in ("answer", "retrieved", "steps", "method", "lm_calls", "prompt_tokens", "completion_tokens"):
        assert ours[field] == printed[field], field

    # The CLI's checks, said in Python's terms: keywords, where the CLI names its flags.
    with pytest.raises(mhindex.UsageError, match="^k must be at least 1, not 0"):
        mhindex.ask("Who?", method="oner", corpus=musique, k=0)
    with pytest.raises(mhindex.UsageError, match="^k takes int, not '3'"):
        mhindex.ask("Who?", method="oner", corpus=musique, k="3")
    with pytest.raises(
        mhindex.UsageError,
        match=r"^depth is not an option of oner \(its options: answer_tokens, clean_queries, [a-z_, ]*, k\)$",
    ):
        mhindex.ask("Who?", method="oner", corpus=musique, depth=3)
    with pytest.raises(mhindex.UsageError, match="^max_steps is an option of .*ircot.*, not of oner$"):
        mhindex.ask("Who?", method="oner", corpus=musique, max_steps=2)
    flagged = [sys.executable, "-m", "mhindex", *args[:6], "--max-steps", "2"]  # ask QUESTION -m oner --max-steps 2
    said = subprocess.run(flagged, capture_output=True, text=True)
    assert said.returncode == 2 and "--max-steps is an option of" in said.stderr and "max_steps" not in said.stderr
    with pytest.raises(mhindex.UsageError, match="question 1: field 'question' is missing or empty"):
        mhindex.ask("  ", method="nor", corpus=musique)


class CountingModel(mhindex.LanguageModel):
    """A model object of one's own: it counts the calls and hands them to the packaged model."""

    def __init__(self, inner: mhindex.LanguageModel) -> None:
        self.inner, self.prompts = inner, []
        self.name, self.context_length = "counting:" + inner.name, inner.context_length

    def complete(self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0):
        self.prompts.append(prompt)
        return self.inner.complete(prompt, max_tokens, stop, temperature, logprobs, stop_when, keep)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


class RecordingRetriever:
    """A retriever object of one's own: anything with search, search_many and close."""

    def __init__(self, searcher: mhindex.Searcher, fail: bool = False) -> None:
        self.searcher, self.queries, self.fail = searcher, [], fail

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[mhindex.Hit]:
        if self.fail:
            raise RuntimeError("the index went away")
        self.queries.append(query)
        return self.searcher.search(query, k, titles)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[mhindex.Hit]]:
        return [self.search(q, k) for q in queries]

    def close(self) -> None:
        pass


def test_an_lm_and_a_retriever_of_ones_own_plug_into_asking_and_many_questions_keep_their_order(musique):
    questions = musique.questions()[:3]
    with mhindex.Asker("nor", musique, answer_tokens=8) as packaged, musique.searcher() as searcher:
        model, retriever = CountingModel(packaged.lm), RecordingRetriever(searcher)
        with mhindex.Asker("oner", musique, lm=model, retriever=retriever, k=2, answer_tokens=8, max_demos=1) as asker:
            answers = list(asker.ask_many([*questions[:2], {"id": "mine", "question": questions[2].question}]))
            assert [a.id for a in answers] == [questions[0].id, questions[1].id, "mine"]
            assert all(a.ok and a.lm_calls == 1 for a in answers) and len(model.prompts) == 3
            asked = [q.question for q in questions]
            assert len(retriever.queries) == 3
            # oner sends each question as its query, with question words removed (--clean-queries)
            assert all(all(w in asked[i] for w in q.rstrip("?").split()) for i, q in enumerate(retriever.queries))
            assert answers[0].paragraph_ids == [h.id for h in searcher.search(retriever.queries[0], 2)]
            with pytest.raises(mhindex.UsageError, match="question 2: field 'question' is missing"):
                list(asker.ask_many(["Who?", {"id": "x"}]))
        assert model.inner is packaged.lm  # the Asker closed neither object: they are the caller's

        # A question the method cannot answer is an Answer that says why, not a traceback.
        broken = RecordingRetriever(searcher, fail=True)
        with mhindex.Asker("oner", musique, lm=model, retriever=broken, k=2) as asker:
            failed = asker.ask("Who founded it?")
        assert not failed.ok and failed.error == "RuntimeError: the index went away" and failed.answer == ""


@pytest.mark.slow
def test_evaluate_runs_a_papers_table_with_its_figures_and_again_on_the_same_questions(musique, tmp_path):
    small = dict(limit=1, seed=7, k=2, max_demos=1, max_steps=1, answer_tokens=8)
    evaluation = mhindex.evaluate(musique, table="IRCoT", out=tmp_path / "table", **small)
    rows = {row["method"]: row for row in evaluation.table(as_frame=False)}
    assert list(rows)[:2] == ["nor@reader=direct", "nor@reader=cot"] and len(rows) == 6
    assert (
        rows["oner@reader=cot"]["paper_row"] == "OneR QA, CoT" and rows["oner@reader=cot"]["paper: F1 (GPT3)"] == 29.4
    )
    # Scores in percent, as the CLI prints them and beside the paper's; metrics.json keeps fractions.
    recorded = evaluation.report["methods"]["oner@reader=cot"]
    assert rows["oner@reader=cot"]["recall"] == pytest.approx(recorded["recall"] * 100) and recorded["recall"] > 0
    # Several prediction files scored at once, as `mhindex score a.jsonl b.jsonl` does: each by its row's name.
    files = [tmp_path / "table" / f"{name}.jsonl" for name in ("nor@reader=direct", "oner@reader=cot")]
    scored = mhindex.score(files, musique.path / "questions.jsonl", home=musique.path.parent)
    assert set(scored) == {"nor@reader=direct", "oner@reader=cot"}
    assert scored["oner@reader=cot"]["recall"] == recorded["recall"]
    assert mhindex.score(files[1], musique.path / "questions.jsonl")["recall"] == recorded["recall"]
    # A new row on exactly the questions that table reported, whatever another seed would draw.
    again = mhindex.evaluate(musique, ["nor"], questions_of=tmp_path / "table", seed=99, out=tmp_path / "again",
                             answer_tokens=8)  # fmt: skip
    assert again.report["question_ids"] == evaluation.report["question_ids"]
    with pytest.raises(mhindex.UsageError, match="is missing: is .* a folder `mhindex eval` wrote"):
        mhindex.evaluate(musique, ["nor"], questions_of=tmp_path, out=tmp_path / "none")


def test_help_of_ask_lists_each_methods_settings():
    import pydoc

    shown = pydoc.render_doc(mhindex.ask)
    assert "ircot:" in shown and "max_steps: int = " in shown and "oner:" in shown
    assert "retrieve:" in pydoc.render_doc(mhindex.Asker) and "\\[" not in shown  # rich's escapes are not shown


def test_a_stored_evaluation_reads_back_in_percent_as_eval_prints_it():
    """Evaluation.table() and paired(): scores, half widths, intervals and differences in percent (metrics.json
    keeps fractions), on a stored 30-question run."""
    from pathlib import Path

    folder = Path(__file__).parents[1] / "benchmarks" / "results" / "qwen2.5-1.5b-paper-tables" / "efficientrag"
    evaluation = mhindex.read_evaluation(folder / "hotpotqa")
    row = {r["method"]: r for r in evaluation.table(as_frame=False)}["direct-r"]
    recorded = evaluation.report["methods"]["direct-r"]
    assert row["f1"] == pytest.approx(recorded["f1"] * 100) and row["f1_ci95"] == pytest.approx(
        recorded["f1_ci95"] * 100
    )
    assert row["f1_interval"] == [pytest.approx(bound * 100) for bound in recorded["f1_interval"]]
    assert row["lm_calls_per_question"] == recorded["lm_calls_per_question"]  # a count, not a score
    pair, kept = evaluation.paired(as_frame=False)[0], evaluation.report["paired"][0]
    assert pair["difference"] == pytest.approx(kept["difference"] * 100)
    assert pair["ci95"] == [pytest.approx(bound * 100) for bound in kept["ci95"]]


def test_score_checks_its_values_as_mhindex_score_does(tmp_path):
    with pytest.raises(mhindex.UsageError, match="^budget must be at least 1, not -5"):
        mhindex.score(tmp_path / "any.jsonl", "musique", budget=-5, home=tmp_path)


def test_an_open_corpus_reads_a_rebuilt_corpus_afresh(tmp_path):
    """A rebuild replaces the folder (another seed, another order of lines): an open Corpus answers for what is on
    disk now, never from the table of ids it read before."""
    corpus = mhindex.build("musique", home=tmp_path, backend=None)
    first = next(iter(corpus.paragraphs()))
    assert corpus.paragraph(first.id) == first
    mhindex.build("musique", home=tmp_path, backend=None, seed=5, force=True)
    again = corpus.paragraph(first.id)
    assert again == first and corpus.manifest["seed"] == 5
    assert next(iter(corpus.paragraphs())).id != first.id  # the lines moved: the old table would have misread


class WindowlessModel(mhindex.LanguageModel):
    """Written to the interface but for its context window: said in one line before any method reads it."""

    name = "windowless"

    def complete(self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0):
        raise AssertionError("never called")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_an_lm_of_ones_own_without_its_context_window_is_one_line_before_any_call(musique):
    with pytest.raises(mhindex.UsageError, match="the lm given lacks context_length: a LanguageModel sets"):
        mhindex.ask("Who?", method="nor", corpus=musique, lm=WindowlessModel())
    model = WindowlessModel()
    model.context_length = "8k"
    with pytest.raises(mhindex.UsageError, match="the lm given has context_length '8k'"):
        mhindex.ask("Who?", method="nor", corpus=musique, lm=model)


@pytest.mark.parametrize(
    "call, said",
    [
        (lambda m: mhindex.evaluate(5, ["nor"], limit=1, home=m.path.parent), "corpus must be a Corpus or a corpus"),
        (lambda m: mhindex.evaluate(m, [1], limit=1), "methods must be a list of methods' names, not \\[1\\]"),
        (lambda m: mhindex.ask("Who?", method=None, corpus=m), "method must be a method's name, not None"),
        (lambda m: mhindex.ask("Who?", method="nor", corpus=3), "corpus must be a Corpus or a corpus's name, not 3"),
        (lambda m: mhindex.build(None, home=m.path.parent), "dataset must be a dataset's name"),
        (lambda m: mhindex.build("jsonl", inputs="x.jsonl", home=m.path.parent), "inputs must be a list of paths"),
        # every public function's arguments, checked against its own annotations where they enter (round three)
        (lambda m: mhindex.build(5), "dataset must be a dataset's name"),
        (lambda m: mhindex.build("musique", seed="x", home=m.path.parent), "seed must be a whole number, not 'x'"),
        (lambda m: mhindex.read_evaluation(5), "folder must be a path \\(str or Path\\), not 5"),
        (lambda m: mhindex.score(5, 5), "predictions must be a path"),
        (lambda m: mhindex.evaluate(m, ["nor"], limit=1, workers=0), "workers must be at least 1, not 0"),
        (lambda m: mhindex.evaluate(m, ["nor"], limit=0), "limit must be at least 1, not 0"),
        (
            lambda m: mhindex.ask("Who?", method="nor", corpus=m, lm=5),
            "lm must be a model's spec .* or a LanguageModel",
        ),
        (lambda m: list(mhindex.ask_many("abc", method="nor", corpus=m)), "questions must be a list of .*, not 'abc'"),
        (lambda m: m.searcher("lucene").search(None), "query must be a query's text, not None"),
        (lambda m: m.searcher("lucene").search(5), "query must be a query's text, not 5"),
        (lambda m: m.searcher("lucene").search("x", titles="abc"), "titles must be a list of strings"),
        (lambda m: m.searcher("lucene").batch_search("abc"), "queries must be a list of queries' texts, not 'abc'"),
        (lambda m: m.searcher("lucene", k1="x"), "^k1 takes float, not 'x'"),
        (lambda m: m.searcher("lucene", k1=float("nan")), "^k1 must be a finite number"),
    ],
)
def test_a_wrong_type_given_to_the_api_is_one_line(musique, call, said):
    """Never a TypeError from deep inside, a string iterated as its characters, a default silently taken for a
    wrong value, nor a wrong value blamed on a damaged index ("rebuild it")."""
    with pytest.raises(mhindex.UsageError, match=said) as raised:
        call(musique)
    assert "rebuild" not in str(raised.value) and "\n" not in str(raised.value)


def test_a_closed_or_moved_object_says_so(musique, tmp_path):
    searcher = musique.searcher("lucene")
    assert searcher.search("county seat", k=1)
    searcher.close()
    with pytest.raises(mhindex.UsageError, match="this lucene Searcher is closed: open another"):
        searcher.search("county seat")
    asker = mhindex.Asker("retrieve", musique)
    # A key nothing reads is a warning (the Asker's method answers, not the record's); a corpus's own question
    # record, with its gold and its other fields, is read for its question without a word.
    with pytest.warns(UserWarning, match="question 1: 'method' not read"):
        assert asker.ask({"id": "x", "question": "county seat?", "method": "nor"}).method == "retrieve"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asker.ask(musique.questions()[0])
    asker.close()
    with pytest.raises(mhindex.UsageError, match="this retrieve Asker is closed"):
        asker.ask("Who?")
    # A corpus moved away after it was opened: one line saying where it was, not a FileNotFoundError.
    home = tmp_path / "home"
    built = mhindex.build("musique", home=home, backend=None)
    (home / "musique").rename(tmp_path / "elsewhere")
    for read in (lambda: built.paragraph("x"), lambda: list(built.paragraphs()), lambda: built.questions()):
        with pytest.raises(mhindex.UsageError, match=f"corpus 'musique' is no longer at {home / 'musique'}"):
            read()


def test_an_evaluation_s_missing_answers_and_a_file_for_a_folder_are_one_line(musique, tmp_path):
    evaluation = mhindex.evaluate(musique, ["retrieve"], limit=2, out=tmp_path / "eval")
    (tmp_path / "eval" / "retrieve.jsonl").unlink()
    with pytest.raises(mhindex.UsageError, match="reports 'retrieve', but its answers retrieve.jsonl are gone"):
        evaluation.answers("retrieve")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(mhindex.UsageError, match="out must be a folder"):
        mhindex.evaluate(musique, ["retrieve"], limit=1, out=tmp_path / "a-file")
