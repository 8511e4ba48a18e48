"""SearChain next to OneR and IRCoT on the same questions, from the stored benchmark predictions.

    .venv/bin/python scripts/searchain_table.py [--limit 20] [--model qwen2.5-0.5b]

SearChain: `METHODS=searchain SUFFIX=-searchain scripts/paper_table.sh local:qwen2.5-0.5b 20`
(benchmarks/results/<model>-searchain/). OneR and IRCoT: the stored runs on the same nested
question sample (benchmarks/results/<model>/, CoT reader; and the Direct reader that `--reader
auto` picks for this model: measured where a run exists, else the stored paragraphs read again,
scripts/reread.py). Answers are scored as `mhindex eval` scores them; s/q is only shown for runs
timed as a whole (a re-read has no time of its own).
"""

from __future__ import annotations

import argparse

from mhindex.eval.metrics import aggregate
from reader_table import RESULTS, _sample, chain_fallback, load

DATASETS = ("hotpotqa", "2wikimultihopqa", "musique")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=13370)
    parser.add_argument("--model", default="qwen2.5-0.5b")
    args = parser.parse_args()
    print(f"| dataset | method (reader) | EM | F1 | Cover-EM | Cover-EM (substr.) | Recall (≤15) | LM calls/q | rounds/q | s/q |  ({args.limit} questions, {args.model})")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dataset in DATASETS:
        sample = _sample(dataset, args.limit, args.seed)
        stored = {m: load(RESULTS / args.model / dataset / f"{m}.jsonl") for m in ("oner", "ircot")}
        direct = {m: {**load(RESULTS / f"{args.model}-reread-direct" / dataset / f"{m}.jsonl"), **load(RESULTS / f"{args.model}-reader-direct" / dataset / f"{m}.jsonl")} for m in ("oner", "ircot")}
        rows = [
            ("OneR (CoT)", stored["oner"], True),
            ("OneR (Direct)", direct["oner"], True),
            ("IRCoT (CoT, else the chain's answer)", {i: chain_fallback(r) for i, r in stored["ircot"].items()}, True),
            ("IRCoT (Direct, re-read)", direct["ircot"], False),
            ("SearChain (LM reader)", load(RESULTS / f"{args.model}-searchain" / dataset / "searchain.jsonl"), True),
        ]
        for label, records, timed in rows:
            if not all(i in records for i in sample):
                continue
            s = aggregate([records[i] for i in sample], sample)
            rounds = f"{s['rounds_per_question']:.2f}" if "rounds_per_question" in s else ""
            recall = f"{s['recall'] * 100:.1f}" if s["recall"] is not None else "-"
            seconds = f"{s['seconds_per_question']:.1f}" if timed else ""
            print(
                f"| {dataset} | {label} | {s['em'] * 100:.1f} | {s['f1'] * 100:.1f} ±{s['f1_ci95'] * 100:.1f} | {s['cover_em'] * 100:.1f} | "
                f"{s['cover_em_substring'] * 100:.1f} | {recall} | {s['lm_calls_per_question']:.1f} | {rounds} | {seconds} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
