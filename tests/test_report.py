"""`mhindex report`: the HTML page made from real evaluation folders (the benchmark runs the repository
keeps, made hostile: an answer and a paragraph holding markup), read as HTML and opened in a real browser.

The browser is Debian's chromium (`apt-get install chromium`, which scripts/setup.sh runs), driven by
Playwright's Python package with no browser download. Where chromium is not installed the browser test
skips and says how to install it; CI sets MHINDEX_REQUIRE_BROWSER=1 so that it cannot skip there.
"""

from __future__ import annotations

import json
import os
import shutil
from html.parser import HTMLParser

import orjson
import pytest

from conftest import REPO, read_jsonl

RESULTS = REPO / "benchmarks" / "results"
# Real runs (Qwen2.5-0.5B, Lucene) with every method's trace: OneR, IRCoT and EfficientRAG on MuSiQue,
# SearChain (with Tracing) on MuSiQue, NoR, OneR and KD-CoT on CWQ.
FOLDERS = {
    "musique-a": RESULTS / "qwen2.5-0.5b-efficientrag" / "musique",
    "musique-b": RESULTS / "qwen2.5-0.5b-searchain-tracing" / "musique",
    "cwq": RESULTS / "qwen2.5-0.5b-kdcot" / "cwq",
}
HOSTILE_ANSWER = '</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
HOSTILE_TEXT = "<script>window.pwned = 3</script><b>not bold</b>"
VAN_HOOK = "What is the seat of the county where Van Hook Township is located?"
BROWSER_ARGS = [  # as this machine's probe starts it: no sandbox as root, no background connections
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def report_inputs(tmp_path, mh, home):
    """Copies of the evaluation folders and the sample corpora they were run on, with IRCoT's answer to
    the Van Hook question and the text of its first retrieved paragraph replaced by markup."""
    assert mh("corpus", "musique").code == 0
    assert mh("corpus", "cwq").code == 0
    folders = {}
    for name, source in FOLDERS.items():
        folders[name] = shutil.copytree(source, tmp_path / name)
    ircot_file = folders["musique-a"] / "ircot.jsonl"
    records = read_jsonl(ircot_file)
    van_hook = next(r for r in records if r["question"] == VAN_HOOK)
    van_hook["answer"] = HOSTILE_ANSWER
    ircot_file.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    corpus_file = home / "musique" / "corpus.jsonl"
    paragraphs = read_jsonl(corpus_file)
    first = van_hook["retrieved"][0]["id"]
    for paragraph in paragraphs:
        if paragraph["id"] == first:
            paragraph["text"] = HOSTILE_TEXT + " " + paragraph["text"]
    corpus_file.write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in paragraphs))
    return folders, van_hook


class _Page(HTMLParser):
    """What a browser with scripts off would show: the text outside <script>, the tags met, the rows."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.script_depth = 0
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "script":
            self.script_depth += 1
            self.scripts.append(dict(attrs).get("type", "text/javascript"))

    def handle_endtag(self, tag):
        if tag == "script":
            self.script_depth -= 1

    def handle_data(self, data):
        if not self.script_depth:
            self.text.append(data)


def test_report_writes_one_page_with_tables_and_questions_and_escapes_markup(report_inputs, mh, tmp_path):
    folders, _ = report_inputs
    out = tmp_path / "report.html"
    result = mh("report", *folders.values(), "-o", out)
    assert result.code == 0, result.err
    assert f"report: {out}" in result.out
    html = out.read_text()
    page = _Page()
    page.feed(html)
    text = " ".join(page.text)
    # Exactly the two scripts the page ships (its data and its code): the hostile markup made none.
    assert page.scripts == ["application/json", "text/javascript"]
    assert "img" not in page.tags and "b" not in page.tags
    assert HOSTILE_ANSWER in text  # shown as text in the question list
    assert "<script>window.pwned" not in html and "<img src=x" not in html  # escaped in the data block too
    # The overview: each folder's table, in the papers' names, and the paired differences.
    for method in ("OneR", "IRCoT", "EfficientRAG", "SearChain", "KD-CoT", "NoR"):
        assert method in text
    assert "Paired differences" in text and "MuSiQue: 20 questions" in text
    assert html.count("<svg") >= 3  # a chart per folder, inline
    # The question list holds the table's sample (20 MuSiQue questions from two folders, 20 CWQ), not
    # every line the predictions files hold (IRCoT's has 50).
    assert "Questions: MuSiQue (20)" in text and "Questions: CWQ (20)" in text
    assert html.count('<a class="open" href="#q/0/') == 20
    assert html.count('<div class="gold-answer">gold: ') == 40  # each listed question with its gold answers
    # Each MuSiQue answer with its hops (kept or missed, and at which step); CWQ's questions have none.
    assert html.count('title="each gold hop') >= 40 and "hops 1✓@1 2" in text


def test_report_names_what_is_missing(mh, tmp_path, home):
    assert "no such file" in mh("report", tmp_path / "nowhere").err
    folder = shutil.copytree(FOLDERS["cwq"], tmp_path / "cwq")
    result = mh("report", folder, "-o", tmp_path / "r.html")  # the corpus was never built in this home
    assert result.code != 0
    assert "no corpus named 'cwq'" in result.err and "--questions" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()
    # Given the questions file, the same folder makes a report (paragraph texts absent, titles from the run).
    assert mh("corpus", "cwq", "--name", "other").code == 0
    questions = home / "other" / "questions.jsonl"
    assert mh("report", folder, "--questions", questions, "-o", tmp_path / "r.html").code == 0
    assert "Questions: CWQ (20)" in (tmp_path / "r.html").read_text()
    assert (tmp_path / "r.html").stat().st_mode & 0o777 == 0o666 & ~current_umask()  # readable by a web server

    # A folder as -o, a file that is no evaluation, and a metrics.json a hand edited: one line each, naming it.
    said = mh("report", folder, "--questions", questions, "-o", tmp_path)
    assert said.code == 2 and f"-o {tmp_path} is a folder; give the HTML file to write" in said.err
    said = mh("report", questions)
    assert said.code == 2 and f"{questions} is not an `mhindex eval` folder, nor its metrics.json" in said.err
    metrics = json.loads((folder / "metrics.json").read_text())
    name = next(iter(metrics["methods"]))
    for change, field in (
        ({"methods": {name: {**metrics["methods"][name], "f1": "high"}}}, f"methods.{name}.f1"),
        ({"methods": {}}, "methods"),
        ({"paired": "x"}, "paired"),
        ({"questions": "many"}, "questions"),
    ):
        (folder / "metrics.json").write_text(json.dumps({**metrics, **change}))
        said = mh("report", folder, "--questions", questions, "-o", tmp_path / "bad.html")
        assert said.code == 2 and f"field '{field}'" in said.err and len(said.err.strip().splitlines()) == 1, said.err
        assert "Traceback" not in said.err and not (tmp_path / "bad.html").exists()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "Debian's chromium is not installed: `apt-get install chromium` (scripts/setup.sh does it as root)"
        if os.environ.get("MHINDEX_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def test_report_in_headless_chromium(report_inputs, mh, tmp_path):
    """Opened from a file URL: the overview and list with scripts on and off, the filters, a click to one
    question, and what that view shows for each method; a screenshot of each view."""
    chromium = _chromium()
    from playwright.sync_api import expect, sync_playwright

    folders, van_hook = report_inputs
    out = tmp_path / "report.html"
    assert mh("report", *folders.values(), "-o", out).code == 0
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.goto(out.as_uri())
            assert page.locator("table.metrics").first.is_visible()
            page.screenshot(path=tmp_path / "overview.png")

            musique = page.locator("section#questions-musique")
            assert musique.locator(".count").inner_text() == "20 of 20 shown"
            musique.locator("input.search").fill("van hook")
            assert musique.locator(".count").inner_text() == "1 of 20 shown"
            musique.locator("input.search").fill("")
            musique.locator("select.show").select_option("all-wrong")
            every_wrong = int(musique.locator(".count").inner_text().split()[0])
            musique.locator("select.show").select_option("any-wrong")
            some_wrong = int(musique.locator(".count").inner_text().split()[0])
            assert 0 < every_wrong <= some_wrong <= 20
            musique.locator("select.show").select_option("all")
            musique.locator("select.facet[data-key=hops]").select_option("2")
            hops = [row.get_attribute("data-facet-hops") for row in musique.locator("tbody tr:visible").all()]
            assert hops and set(hops) == {"2"}
            musique.locator("select.facet[data-key=hops]").select_option("")
            # Sorting by IRCoT's (second column's) F1, best first.
            musique.locator("th button[data-sort=f1][data-method='1']").click()
            f1s = [float(row.get_attribute("data-f1").split(",")[1] or -1) for row in musique.locator("tbody tr").all()]
            assert f1s == sorted(f1s, reverse=True)
            page.locator("a[href='#questions-musique']").click()
            page.screenshot(path=tmp_path / "questions.png")

            musique.get_by_role("link", name=VAN_HOOK).click()
            view = page.locator("#question")
            view.locator(".method").first.wait_for()
            assert not page.locator("#overview").is_visible()
            shown = view.inner_text()
            assert VAN_HOOK in shown and "gold answer: Stanley" in shown
            titles = [h.inner_text() for h in view.locator(".method h3").all()]
            assert titles == ["OneR", "IRCoT", "EfficientRAG", "SearChain"]
            ircot = view.locator(".method").nth(1)
            assert HOSTILE_ANSWER in ircot.inner_text()  # the markup is text on the page
            assert f"query\n{van_hook['steps'][1]['query']}" in ircot.inner_text()
            searchain = view.locator(".method").nth(3)
            assert "Tracing" in searchain.inner_text() and "): corrected" in searchain.inner_text()
            efficientrag = view.locator(".method").nth(2)
            assert "[<Continue>]" in efficientrag.inner_text()
            # Paragraphs in order, gold marked, their text a click away; and the gold paragraph never retrieved.
            first = ircot.locator("ol.paragraphs > li").first
            assert first.locator("summary").inner_text().startswith("★ gold:")
            first.locator("summary").click()
            assert HOSTILE_TEXT in first.locator(".paragraph-text").inner_text()
            oner = view.locator(".method").first
            assert "Gold paragraphs never retrieved (1)" in oner.inner_text()
            assert page.evaluate("window.pwned") is None
            page.screenshot(path=tmp_path / "question.png")
            page.go_back()  # to #questions-musique: the list again, the question view hidden
            expect(page.locator("#question")).to_be_hidden()
            assert page.locator("#overview").is_visible() and page.url.endswith("#questions-musique")

            cwq = page.locator("section#questions-cwq")
            first_cwq = cwq.get_by_role("link").first
            asked = first_cwq.inner_text()
            first_cwq.click()
            expect(page.locator("#question h2")).to_have_text(asked)  # drawn on hashchange: waited for
            kdcot = page.locator("#question .method").nth(2)
            assert page.locator("#question .method h3").nth(2).inner_text() == "KD-CoT"
            assert "action\nQuestion[" in kdcot.inner_text() and "verifier" in kdcot.inner_text()

            # Scripts off: the overview and the tables read the same; the controls (which need them) are hidden.
            static = browser.new_context(java_script_enabled=False).new_page()
            static.goto(out.as_uri())
            assert static.locator("table.metrics").first.is_visible()
            assert static.locator("section#questions-musique tbody tr:visible").count() == 20
            assert not static.locator("section#questions-musique .controls").is_visible()
            assert HOSTILE_ANSWER in static.locator("section#questions-musique").inner_text()
        finally:
            browser.close()
    assert errors == []
    for name in ("overview", "questions", "question"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paragraph_texts_are_found_by_id_in_one_scan_even_for_ids_with_escapes(tmp_path):
    from mhindex.eval.browse import read_paragraphs

    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"id": 'own "quoted" id', "title": "Q", "text": "an id from the user's own corpus"},
        {"id": "plain", "title": "P", "text": "x"},
        {"id": "other", "title": "O", "text": "not asked for"},
    ]
    corpus.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    found = read_paragraphs(corpus, {'own "quoted" id', "plain", "missing"})
    assert found == {'own "quoted" id': ("Q", "an id from the user's own corpus"), "plain": ("P", "x")}
