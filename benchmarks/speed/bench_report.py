"""`mhindex report` at 1,000 questions x 4 methods: the file's size, the time to write it, and the time
Chromium takes to load it and to open one question; and screenshots of each view of a real report.

    .venv/bin/python benchmarks/speed/bench_report.py [--questions 1000] [--screenshots benchmarks/report]

The 1,000 questions are MuSiQue's sample questions and the repository's real Qwen2.5-0.5B runs (OneR,
IRCoT and EfficientRAG from benchmarks/results/qwen2.5-0.5b-efficientrag, SearChain with Tracing from
...-searchain-tracing), cycled under new ids: real traces and retrieved paragraphs, at the size a user's
long evaluation has. Needs Debian's chromium (scripts/setup.sh installs it).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
SOURCES = {
    "oner": RESULTS / "qwen2.5-0.5b-efficientrag" / "musique",
    "ircot": RESULTS / "qwen2.5-0.5b-efficientrag" / "musique",
    "efficientrag": RESULTS / "qwen2.5-0.5b-efficientrag" / "musique",
    "searchain": RESULTS / "qwen2.5-0.5b-searchain-tracing" / "musique",
}
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]


def jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def mhindex(home: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "mhindex", "--home", str(home), "-q", *args], check=True, stdout=subprocess.DEVNULL
    )


def synthetic_folder(home: Path, count: int) -> Path:
    """An eval folder of `count` questions x 4 methods, and a corpus `big` whose questions they are."""
    mhindex(home, "corpus", "musique", "--name", "big")
    questions = {q["id"]: q for q in jsonl(home / "big" / "questions.jsonl")}
    records = {
        method: [r for r in jsonl(folder / f"{method}.jsonl") if r["id"] in questions]
        for method, folder in SOURCES.items()
    }
    ids = sorted(set.intersection(*(set(r["id"] for r in rs) for rs in records.values())))
    by_method = {m: {r["id"]: r for r in rs} for m, rs in records.items()}
    new_questions, folder = [], home / "eval-1000"
    folder.mkdir()
    files = {m: open(folder / f"{m}.jsonl", "wb") for m in SOURCES}
    for number, source_id in zip(range(count), itertools.cycle(ids)):
        qid = f"{source_id}#{number}"
        new_questions.append({**questions[source_id], "id": qid})
        for method, handle in files.items():
            handle.write(orjson.dumps({**by_method[method][source_id], "id": qid}) + b"\n")
    for handle in files.values():
        handle.close()
    (home / "big" / "questions.jsonl").write_bytes(b"".join(orjson.dumps(q) + b"\n" for q in new_questions))
    metrics = orjson.loads((SOURCES["oner"] / "metrics.json").read_bytes())
    run = {k: v for k, v in metrics.items() if k not in ("methods", "paired", "question_ids")}
    (folder / "run.json").write_bytes(orjson.dumps(run))
    mhindex(home, "score", str(folder / "oner.jsonl"), "--questions", "big")  # checks the records are scorable
    from mhindex.eval.metrics import aggregate, paired_differences

    gold = {q["id"]: q for q in new_questions}
    predictions = {m: jsonl(folder / f"{m}.jsonl") for m in SOURCES}
    report = {
        **run,
        "corpus": "big",
        "questions": count,
        "limit": count,
        "methods": {m: aggregate(p, gold) for m, p in predictions.items()},
        "question_ids": list(gold),
        "paired": paired_differences(predictions, gold),
    }
    (folder / "metrics.json").write_bytes(orjson.dumps(report))
    return folder


def browse(html: Path, screenshots: Path | None) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Debian's chromium is not installed: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        started = time.perf_counter()
        page.goto(html.as_uri(), wait_until="load")
        loaded = time.perf_counter() - started
        navigation = page.evaluate("performance.getEntriesByType('navigation')[0].toJSON()")
        started = time.perf_counter()
        page.locator("section.questions a.open").nth(7).click()
        page.locator("#question .method").first.wait_for()
        opened = time.perf_counter() - started
        started = time.perf_counter()
        page.locator("#question a").first.click()
        page.locator("section.questions select.show").first.select_option("all-wrong")
        filtered = time.perf_counter() - started
        if screenshots is not None:
            screenshots.mkdir(parents=True, exist_ok=True)
            page.goto(html.as_uri())
            page.screenshot(path=screenshots / "overview.png")
            page.locator("nav a").nth(1).click()
            page.screenshot(path=screenshots / "questions.png")
            page.locator("section.questions a.open").first.click()
            page.locator("#question .method").first.wait_for()
            page.screenshot(path=screenshots / "question.png")
        browser.close()
    return {
        "load_s": loaded,
        "dom_content_loaded_s": navigation["domContentLoadedEventEnd"] / 1000,
        "open_question_s": opened,
        "back_and_filter_s": filtered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--screenshots", type=Path, help="Also keep screenshots of a real report's views here.")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        home = Path(temporary)
        folder = synthetic_folder(home, arguments.questions)
        out = home / "report.html"
        started = time.perf_counter()
        mhindex(home, "report", str(folder), "-o", str(out))
        written = time.perf_counter() - started
        timings = browse(out, None)
        print(f"report of {arguments.questions} questions x {len(SOURCES)} methods (real MuSiQue runs, cycled)")
        print(f"  file size            {out.stat().st_size / 1e6:7.2f} MB")
        print(f"  mhindex report       {written:7.2f} s (process start to file written)")
        for name, seconds in timings.items():
            print(f"  chromium {name:<20} {seconds:6.2f} s")
        if arguments.screenshots is not None:  # the README's pictures: the real runs, not the cycled ones
            mhindex(home, "corpus", "musique")
            mhindex(home, "corpus", "cwq")
            real = home / "real.html"
            mhindex(
                home,
                "report",
                str(SOURCES["oner"]),
                str(SOURCES["searchain"]),
                str(RESULTS / "qwen2.5-0.5b-kdcot" / "cwq"),
                "-o",
                str(real),
            )
            browse(real, arguments.screenshots)
            print(f"  screenshots in {arguments.screenshots}")


if __name__ == "__main__":
    main()
