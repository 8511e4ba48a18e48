"""The README's table of what its commands cost and answer, made by running them as a new user does: in a fresh data
root, in the README's order, each a process of its own as a shell runs them, on the default packaged model. Also
the `ask -` question asked again in a process of its own and after the Molokai question in one stream: a call's
completion depends on its prompt alone (mhindex/lm/slots.py), so its calls, tokens and answer must come out the same
(the README once said 4 calls where a fresh process made 5: measured on an earlier commit, after another question in
the same process, when a question's first call reused what the slot held of the one before).

    .venv/bin/python benchmarks/speed/readme_costs.py          # about 10 minutes on two idle cores
    # -> benchmarks/results/readme_costs.json; the README's table is made from it (benchmarks/tables/readme_tables.py)

Seconds follow the machine and its load; calls, tokens and answers do not.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "benchmarks" / "results" / "readme_costs.json"
MHINDEX = [sys.executable, "-m", "mhindex"]
QUICK = "Who is younger, Mart Van Duren or Madeleine Simms?"
MOLOKAI = "Which film was released earlier, Molokai: The Story Of Father Damien or Brahma – The Creator?"
LEO = {
    "id": "ace717d0088411ebbd6dac1f6bf848b6",
    "question": "Which film has the director who is older than the other, Colierul De Turcoaze or Leo And Loree?",
}


def run(*args: str, stdin: str | None = None) -> tuple[str, float]:
    began = time.perf_counter()
    done = subprocess.run([*MHINDEX, *args], input=stdin, capture_output=True, text=True, env=os.environ.copy())
    if done.returncode != 0:
        raise SystemExit(f"mhindex {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout, time.perf_counter() - began


def asked(record: dict, command: str, seconds: float, where: str) -> dict:
    return {"command": command, "where": where, "answer": record["answer"], "lm_calls": record["lm_calls"],
            "prompt_tokens": record["prompt_tokens"], "completion_tokens": record["completion_tokens"],
            "seconds": round(seconds, 1)}  # fmt: skip


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="readme-costs-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["MHINDEX_HOME"] = str(home)
    os.environ.pop("MHINDEX_LM", None)  # the default packaged model, as a new user has it
    rows = []
    run("--quiet", "build", "2wikimultihopqa")
    out, seconds = run("ask", QUICK, "--corpus", "2wikimultihopqa", "--method", "ircot", "--json")
    rows.append(asked(json.loads(out), "the quick start's ask (IRCoT)", seconds, "first process of a fresh data root"))
    out, seconds = run("ask", MOLOKAI, "--json")
    rows.append(asked(json.loads(out), "ask Molokai", seconds, "a new process"))
    out, seconds = run("ask", "-", stdin=json.dumps(LEO) + "\n")
    rows.append(asked(json.loads(out.splitlines()[0]), "ask - (Leo And Loree)", seconds, "a new process"))
    stream = json.dumps({"id": "molokai", "question": MOLOKAI}) + "\n" + json.dumps(LEO) + "\n"
    out, seconds = run("ask", "-", stdin=stream)
    rows.append(asked(json.loads(out.splitlines()[1]), "ask - (Leo And Loree)", seconds, "after Molokai, one stream"))
    folder = home / "eval-5"
    _, seconds = run("--quiet", "eval", "2wikimultihopqa", "--method", "nor,oner,ircot", "--limit", "5", "--out",
                     str(folder))  # fmt: skip
    metrics = json.loads((folder / "metrics.json").read_text())["methods"]
    rows.append({"command": "eval --limit 5", "seconds": round(seconds, 1), "methods": {
        name: {key: m.get(key) for key in ("em", "f1", "recall", "lm_calls_per_question", "prompt_tokens_per_question",
                                           "completion_tokens_per_question")}
        for name, m in metrics.items()}})  # fmt: skip
    leo = [row for row in rows if row["command"].startswith("ask -")]
    same = all(row[k] == leo[0][k] for row in leo for k in ("answer", "lm_calls", "prompt_tokens", "completion_tokens"))
    result = {"measured": time.strftime("%Y-%m-%d"), "commit": _commit(), "model": "local:qwen2.5-0.5b",
              "leo_alike_in_a_new_process_and_after_molokai": same, "rows": rows}  # fmt: skip
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=1, ensure_ascii=False))


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


if __name__ == "__main__":
    main()
