"""A local model's threads on an idle and a busy machine: why the default takes the free cores.

    .venv/bin/python benchmarks/speed/bench_threads.py [--lm local:qwen2.5-0.5b] [--home .mhindex-eval]

Side by side in one run, each arm in fresh processes: prompt reading (about 1,100 tokens) and greedy
generation (32 tokens), in tokens a second, with 1 thread and with every core, on an idle machine, with
one core kept busy by a spinning process, and with two models answering at once (each with those
threads); with llama.cpp's threads spinning while they wait (its default, poll 50) and sleeping
(poll 0, what mhindex sets). Then the default's choice with nothing else running and with one core busy.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_arm(lm: str, threads: int, poll: int, home: Path) -> None:
    """One model, in this process: prints `prompt_tps gen_tps`."""
    from mhindex.lm import llamacpp, load_lm

    llamacpp.POLL = poll
    model = load_lm(lm, home=home, threads=threads, cache=False)
    words = (ROOT / "docs" / "methods.md").read_text().split()
    prompt = " ".join(words[:600])
    count = model.count_tokens(prompt)
    started = time.perf_counter()
    model.complete(prompt, max_tokens=1)
    prompt_tps = count / (time.perf_counter() - started)
    started = time.perf_counter()
    made_tokens = model.complete(prompt + " Summary:", max_tokens=32).completion_tokens
    print(f"{prompt_tps:.1f} {made_tokens / (time.perf_counter() - started):.1f}", flush=True)


@contextmanager
def spinning(count: int):
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(1)
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def arms(args, threads: int, poll: int, together: int) -> list[tuple[float, float]]:
    command = [sys.executable, __file__, "--arm", "--lm", args.lm, "--home", str(args.home)]
    command += ["--threads", str(threads), "--poll", str(poll)]
    running = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(together)]
    results = []
    for process in running:
        out, _ = process.communicate()
        if process.returncode:
            raise SystemExit(f"an arm failed with exit status {process.returncode}")
        prompt_tps, gen_tps = out.split()
        results.append((float(prompt_tps), float(gen_tps)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm", default="local:qwen2.5-0.5b")
    parser.add_argument("--home", type=Path, default=ROOT / ".mhindex-eval")
    parser.add_argument("--arm", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--poll", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        return run_arm(args.lm, args.threads, args.poll, args.home)
    from mhindex.lm.llamacpp import default_threads

    cores = len(os.sched_getaffinity(0))
    print(f"{args.lm}, {cores} cores; load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'machine':32} {'threads':>7} {'poll':>4} {'prompt tok/s':>12} {'generated tok/s':>15}")
    for machine in ("idle", "one core spinning", "two models at once"):
        for threads in sorted({1, cores}):
            for poll in (50, 0):
                if machine == "one core spinning":
                    with spinning(1):
                        results = arms(args, threads, poll, 1)
                else:
                    results = arms(args, threads, poll, 2 if machine == "two models at once" else 1)
                prompt_tps = sum(r[0] for r in results) / len(results)
                gen_tps = sum(r[1] for r in results) / len(results)
                print(f"{machine:32} {threads:>7} {poll:>4} {prompt_tps:>12.1f} {gen_tps:>15.1f}", flush=True)
    print(f"default threads: idle {default_threads()}", end="")
    with spinning(1):
        print(f", one core spinning {default_threads()}")


if __name__ == "__main__":
    main()
