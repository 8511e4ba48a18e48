"""Local LM speed, and what prefix reuse saves on IRCoT-shaped prompts.

For each model: prompt-evaluation and generation tokens per second, then IRCoT run on a few
questions of the bundled MuSiQue sample twice, with llama.cpp's prompt cache (prefix reuse)
on and off, printing prompt tokens sent, prompt tokens actually evaluated, and seconds.

    .venv/bin/python benchmarks/speed/bench_lm.py [--lm local:smollm2-135m --lm local:qwen2.5-0.5b] [--questions 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from mhindex.backends import BackendSpec, build_index, open_retriever  # noqa: E402
from mhindex.corpora import DATASETS  # noqa: E402
from mhindex.corpora.build import build_corpus  # noqa: E402
from mhindex.lm.llamacpp import LlamaCppModel, default_threads  # noqa: E402
from mhindex.lm.packaged import packaged_model_path  # noqa: E402
from mhindex.methods import MethodContext, Query, make_method  # noqa: E402
from mhindex.methods.ircot import IRCoTSettings  # noqa: E402

SAMPLE = REPO / "corpora" / "samples" / "musique" / "musique_ans_v1.0_dev.sample.jsonl"


class Counting:
    """Adds up what each call reports, around a real model."""

    def __init__(self, model: LlamaCppModel) -> None:
        self.model = model
        self.name, self.context_length = model.name, model.context_length
        self.sent = self.evaluated = 0

    def complete(self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0):
        completion = self.model.complete(prompt, max_tokens, stop, temperature, logprobs, stop_when, keep)
        self.sent += completion.prompt_tokens
        self.evaluated += completion.prompt_tokens_evaluated or 0
        return completion

    def count_tokens(self, text):
        return self.model.count_tokens(text)


def speed(model: LlamaCppModel) -> tuple[float, float]:
    prompt = "Wikipedia Title: Paris\nParis is the capital and most populous city of France. " * 40
    evaluated = model.complete(prompt + "\nQ: What is Paris?\nA:", max_tokens=1)
    generated = model.complete("Write a long story about a cat.\n", max_tokens=128)
    prompt_tps = (evaluated.prompt_tokens_evaluated or evaluated.prompt_tokens) / (
        evaluated.prompt_seconds or evaluated.seconds
    )
    generation_tps = generated.completion_tokens / (generated.seconds - (generated.prompt_seconds or 0))
    return prompt_tps, generation_tps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm", action="append", help="local:NAME or gguf:PATH (repeatable)")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--max-demos", type=int, default=4)
    args = parser.parse_args()
    specs = args.lm or ["local:smollm2-135m", "local:qwen2.5-0.5b"]

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        corpus = build_corpus(DATASETS["musique"], [SAMPLE], home).corpus
        build_index(corpus, BackendSpec.parse("lucene"))
        retriever = open_retriever(corpus, BackendSpec.parse("lucene"))
        import orjson

        questions = [orjson.loads(line) for line in corpus.questions.read_bytes().splitlines()[: args.questions]]
        print(
            f"{args.questions} MuSiQue questions, IRCoT K=4, {args.max_demos} demonstrations, {args.threads} thread(s)"
        )
        print(
            f"{'model':22}{'prompt tok/s':>13}{'gen tok/s':>11}{'reuse':>7}{'sent':>9}{'evaluated':>11}{'seconds':>9}"
        )
        for spec in specs:
            kind, name = spec.split(":", 1)
            path = packaged_model_path(name, home / "models") if kind == "local" else Path(name)
            for reuse in (True, False):
                model = LlamaCppModel(path, name=spec, threads=args.threads, reuse_prefix=reuse)
                prompt_tps, generation_tps = speed(model) if reuse else (float("nan"), float("nan"))
                counting = Counting(model)
                method = make_method(
                    "ircot",
                    retriever,
                    counting,
                    IRCoTSettings(max_demos=args.max_demos),
                    MethodContext(dataset="musique"),
                )
                started = time.perf_counter()
                for q in questions:
                    method.answer(Query(q["id"], q["question"]))
                seconds = time.perf_counter() - started
                rates = f"{prompt_tps:>13.0f}{generation_tps:>11.1f}" if reuse else f"{'':>13}{'':>11}"
                print(
                    f"{spec:22}{rates}{'on' if reuse else 'off':>7}"
                    f"{counting.sent:>9,}{counting.evaluated:>11,}{seconds:>9.1f}"
                )
                model.close()
        retriever.close()


if __name__ == "__main__":
    main()
