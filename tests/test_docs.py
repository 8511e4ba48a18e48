"""The documentation site: built strictly (a broken link or API reference fails the build), every public
name in the API reference, and the walkthrough's code run as written, block after block, on the bundled
sample with the fast packaged model (SmolLM2-135M, set by conftest)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mhindex

REPO = Path(__file__).resolve().parents[1]
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]  # not --quiet: it hides the warnings strict counts


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MKDOCS, "-f", str(root / "mkdocs.yml"), "-d", str(site)], capture_output=True, text=True)


def test_the_site_builds_strictly_and_a_broken_reference_fails_it(tmp_path):
    built = _build(REPO, tmp_path / "site")
    assert built.returncode == 0, built.stderr
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    for name in set(mhindex.__all__) - {"__version__"}:
        assert f'id="mhindex.{name}"' in api, f"{name} is public but not in docs/reference/api.md"
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "mhindex ask" in cli and "--method" in cli  # generated from the Typer app
    assert "&lt;out&gt;/&lt;method&gt;.jsonl" in cli  # a placeholder in help text is shown, not taken for a tag
    assert cli.count('data-bs-level="2"') >= 19  # every command in the sidebar
    for page in (tmp_path / "site").rglob("*.html"):  # nothing fetched from a CDN: the site works offline
        assert "cdnjs" not in page.read_text(), page
    assert 'class="highlight"' in (tmp_path / "site" / "python" / "index.html").read_text()

    copy = tmp_path / "copy"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".venv", ".git", "site", "*.egg-info", "node_modules"))
    page = copy / "docs" / "python.md"
    page.write_text(page.read_text() + "\nSee [the tables](no-such-page.md).\n")
    broken = _build(copy, tmp_path / "broken")
    assert broken.returncode != 0 and "no-such-page.md" in broken.stderr
    page.write_text(page.read_text().replace("[the tables](no-such-page.md)", "the tables") + "\n::: mhindex.nothing\n")
    broken = _build(copy, tmp_path / "broken2")
    assert broken.returncode != 0 and "mhindex.nothing" in broken.stderr


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.mark.slow
def test_the_walkthrough_and_the_readme_run_as_written(home, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks((REPO / "docs" / "python.md").read_text())
    assert len(blocks) == 4
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"docs/python.md, block {number}", "exec"), namespace)
    shown = capsys.readouterr().out
    assert "-> ['Stanley']" in shown and "gold: Mountrail County Courthouse" in shown
    assert "oner: " in shown and "ircot: " in shown and "nor" in shown and (tmp_path / "report.html").is_file()
    evaluation = namespace["evaluation"]
    assert isinstance(evaluation, mhindex.Evaluation) and evaluation.methods == ["nor", "oner"]
    assert evaluation.report["questions"] == 5 and len(evaluation.paired(as_frame=False)) >= 2
    # 5 questions: no interval, in the API as on the command line ("too few questions")
    assert all(row["ci95"] is None and row["no_interval"] for row in evaluation.paired(as_frame=False))
    assert mhindex.read_evaluation(evaluation.folder).table(as_frame=False) == evaluation.table(as_frame=False)

    # The README's Python example, on the same data root (its answers come from the call cache or the model).
    (readme,) = python_blocks((REPO / "README.md").read_text())
    exec(compile(readme, "README.md", "exec"), {})
    assert "Van Hook Township" in capsys.readouterr().out


def test_every_test_the_reliability_page_names_exists():
    """docs/reliability.md holds each promise to a test: a renamed or removed test breaks the page, so fails here."""
    text = (REPO / "docs" / "reliability.md").read_text()
    named, last = [], None
    for path, name, same_file in re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`", text):
        last = path or last
        named.append((last, name or same_file))
    assert len(named) > 20
    for path, name in named:
        source = (REPO / path).read_text()
        assert not name or f"def {name}(" in source, f"{path}::{name}"


def _readme_tables():
    """benchmarks/tables/readme_tables.py, loaded as the script it is (benchmarks/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_tables", REPO / "benchmarks" / "tables" / "readme_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_tables_are_what_the_stored_results_make(tmp_path, monkeypatch):
    """The README's cost table and benchmarks/README.md's SearChain tables are made from the results files; a table
    edited by hand (or results that moved without the table) is named."""
    tables = _readme_tables()
    assert tables.differing() == []
    for file in {file for file, _ in tables.TABLES}:
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / file, tmp_path / file)
    readme = tmp_path / "benchmarks" / "README.md"
    text = readme.read_text(encoding="utf-8")
    start = text.index("<!-- made by benchmarks/tables/readme_tables.py: searchain-musique -->")
    row = text.index("| Direct Prompting", start)
    readme.write_text(text[:row] + "| Direct Prompting (typed) " + text[text.index("|", row + 2) :], encoding="utf-8")
    monkeypatch.setattr(tables, "REPO", tmp_path)
    assert tables.differing() == ["benchmarks/README.md: searchain-musique"]


def test_the_serving_page_s_first_searches_find_what_they_name_on_the_musique_sample(musique_lucene):
    """docs/serving.md's first `curl` and `search` on `serve musique`: the sample holds what they ask for (its first
    example once searched for "Lost Gravity", which the MuSiQue sample does not hold)."""
    _, retriever = musique_lucene
    block = (REPO / "docs" / "serving.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    queries = [*re.findall(r'"query": "([^"]+)"', block), *re.findall(r'mhindex search musique "([^"]+)"', block)]
    assert len(queries) == 2, block
    for query in queries:
        hits = retriever.search(query, 3)
        named = [word for word in query.split() if word[0].isupper()]
        assert any(all(word in hit.title + " " + hit.text for word in named) for hit in hits), (query, hits)
