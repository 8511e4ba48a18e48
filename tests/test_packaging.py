"""What an installed wheel holds: the bundled samples and IRCoT's prompts are package data, so
`mhindex build musique` works from a plain `pip install` and not only from a checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from conftest import REPO


def test_the_wheel_carries_samples_and_prompts_and_finds_them_installed(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "wheel"),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "wheel").glob("mhindex-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "mhindex/corpora/samples/musique/musique_ans_v1.0_dev.sample.jsonl" in names
    assert "mhindex/corpora/samples/iirc/SOURCE.md" in names
    assert "mhindex/prompts/ircot/musique/gold_with_2_distractors_context_cot_qa_codex.txt" in names
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    code = (
        "import mhindex.corpora as c; from pathlib import Path; "
        "files, origin = c.default_inputs(c.DATASETS['musique'], Path('/nonexistent')); "
        "print(origin, files[0])"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(target)}, cwd=tmp_path
    )
    assert found.returncode == 0, found.stderr
    origin, path = found.stdout.split()
    assert origin == "sample" and path.startswith(str(target))


def test_help_loads_no_engine_and_no_http_client():
    """`mhindex --help` reads every backend's and method's options: it must not pay for their engines."""
    import subprocess
    import sys

    code = (
        "import sys; from mhindex.cli import main; main(['--help']); heavy = {'torch', 'httpx', 'jnius', "
        "'faiss', 'xllamacpp', 'starlette', 'uvicorn', 'transformers'} & set(sys.modules); assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
