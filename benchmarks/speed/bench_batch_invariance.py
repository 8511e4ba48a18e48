"""Whether a prompt token's values depend on the micro-batch llama.cpp reads it in, and at what speed: llama.cpp's
default kernels against the batch-invariant ones mhindex runs (mhindex/lm/llamacpp.py `INVARIANT`,
mhindex/lm/slots.py), side by side in one run, each configuration in a process of its own (ggml reads
GGML_CPU_TILED_MM once a process).

For each configuration, one prompt (IRCoT's 2WikiMultihopQA demonstrations and a question) is read from nothing,
then read again after the slot was left holding all but its last N tokens (N from 1 to the whole prompt), and the
log-probabilities of the first four greedy tokens are compared: the groups of N that gave the same values are
printed. Then the speed: a 3,000-token prompt read from nothing and 48 tokens generated, twice.

    .venv/bin/python benchmarks/speed/bench_batch_invariance.py [--model PATH] [--threads 2]
    # -> benchmarks/results/bench_batch_invariance.txt
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMOS = REPO / "src" / "mhindex" / "prompts" / "ircot" / "2wikimultihopqa"
LEFT = [1, 2, 3, 5, 7, 8, 9, 16, 17, 32, 33, 64, 65, 100, 200, 355]


def measure(model: str, invariant: bool, threads: int) -> dict:
    """In this process: one configuration's groups of N alike, and its speed."""
    import httpx
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx, params.n_parallel, params.n_ubatch = 8192, 1, 512
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.cpuparams.poll = params.cpuparams_batch.poll = 0
    params.warmup, params.verbosity, params.cache_ram_mib = False, -1, 0
    if invariant:
        params.no_extra_bufts = True
        params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    server = xllamacpp.Server(params)
    client = httpx.Client(base_url=server.listening_address)
    demos = (DEMOS / "gold_with_1_distractors_context_cot_qa_codex.txt").read_text()

    def run(prompt, cache: bool, tokens: int = 4, more: dict | None = None) -> dict:
        out: list[dict] = []
        body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "cache_prompt": cache, "seed": 0,
                "n_probs": 1, "logprobs": True, **(more or {})}  # fmt: skip
        server.handle_completions(body, lambda chunk: out.append(chunk) or False)
        return out[-1]

    tokens = client.post("/tokenize", json={"content": demos[:1200] + "\nQ: Who is older?\nA:",
                                            "add_special": True}).json()["tokens"]  # fmt: skip
    groups: dict[str, list] = {}

    def values(reply: dict) -> str:
        return json.dumps([t["logprob"] for t in reply["choices"][0]["logprobs"]["content"]])

    groups.setdefault(values(run(tokens, False)), []).append("from nothing")
    for left in [*LEFT, len(tokens) - 1]:
        run([*tokens[: len(tokens) - left], 11], False, 1)  # the slot holds all but the last `left`
        groups.setdefault(values(run(tokens, True)), []).append(left)
    speed = []
    for i in range(2):
        began = time.perf_counter()
        reply = run(demos[:12000] + "\nQ: Who is older?\nA:" + " " * i, False, 48, {"ignore_eos": True})
        timings = reply["timings"]
        speed.append({"prompt_tokens": timings["prompt_n"], "prompt_per_second": round(timings["prompt_per_second"], 1),
                      "generated_per_second": round(timings["predicted_per_second"], 1),
                      "seconds": round(time.perf_counter() - began, 1)})  # fmt: skip
    return {"invariant": invariant, "threads": threads, "prompt_tokens": len(tokens),
            "groups": list(groups.values()), "speed": speed}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a GGUF file [default: the packaged Qwen2.5-0.5B]")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child's own configuration: "invariant,threads"
    args = parser.parse_args()
    if args.one:
        invariant, threads = args.one.split(",")
        print(json.dumps(measure(args.model, invariant == "1", int(threads))))
        return
    if args.model is None:
        sys.path.insert(0, str(REPO / "src"))
        from mhindex.home import resolve_home
        from mhindex.lm.packaged import packaged_model_path

        args.model = str(packaged_model_path("qwen2.5-0.5b", resolve_home(None) / "models"))
    lines = [f"model {Path(args.model).name}; groups: the numbers of last tokens read after a reused prefix that "
             "gave the same log-probabilities (one group: the values never moved)"]  # fmt: skip
    for invariant, threads in ((False, args.threads), (True, args.threads), (True, 1)):
        env = {**os.environ, **({"GGML_CPU_TILED_MM": "0"} if invariant else {})}
        done = subprocess.run([sys.executable, __file__, "--model", args.model, "--one", f"{int(invariant)},{threads}"],
                              capture_output=True, text=True, env=env, check=True)  # fmt: skip
        found = json.loads(done.stdout.strip().splitlines()[-1])
        kernels = "batch-invariant" if invariant else "llama.cpp's defaults"
        lines.append(f"{kernels}, {threads} thread(s), a {found['prompt_tokens']}-token prompt: "
                     f"{len(found['groups'])} group(s): {found['groups']}")  # fmt: skip
        for run in found["speed"]:
            lines.append(f"  {run['prompt_tokens']} prompt tokens at {run['prompt_per_second']}/s, 48 generated at "
                         f"{run['generated_per_second']}/s, {run['seconds']} s")  # fmt: skip
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (REPO / "benchmarks" / "results" / "bench_batch_invariance.txt").write_text(text)


if __name__ == "__main__":
    main()
