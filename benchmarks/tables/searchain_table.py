"""SearChain next to OneR and IRCoT on the same questions, from the stored benchmark predictions.

    .venv/bin/python benchmarks/tables/searchain_table.py [--limit 20] [--model qwen2.5-0.5b]

SearChain: `METHODS=searchain SUFFIX=-searchain benchmarks/tables/paper_table.sh local:qwen2.5-0.5b 20`
(benchmarks/results/<model>-searchain/). OneR and IRCoT: the stored runs on the same nested
question sample (benchmarks/results/<model>/, CoT reader; and the Direct reader that `--reader
auto` picks for this model: measured where a run exists, else the stored paragraphs read again,
benchmarks/tables/reread.py). The runs after the faithful-methods changes (benchmarks/tables/faithful_tables.sh): OneR
and IRCoT with IRCoT's cleaned queries (<model>-clean-queries/), SearChain with its Tracing step
(<model>-searchain-tracing/). Answers are scored as `mhindex eval` scores them, and SearChain's
cover-EM also over everything its LM wrote; s/q is only shown for runs timed as a whole (a re-read
has no time of its own).
"""

from __future__ import annotations

from mhindex.eval.metrics import aggregate
from tables import DATASETS, RESULTS, arguments, chain_fallback, direct, load, sample


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    print(
        "| dataset | method (reader) | EM | F1 | Cover-EM | Cover-EM (substr.) | Cover-EM (all LM text) | "
        "Recall (≤15) | LM calls/q | rounds/q | s/q |"
        f"  ({args.limit} questions, {args.model})"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for dataset in DATASETS:
        questions = sample(dataset, args.limit, args.seed)
        stored = {m: load(RESULTS / args.model / dataset / f"{m}.jsonl") for m in ("oner", "ircot")}
        clean = {m: load(RESULTS / f"{args.model}-clean-queries" / dataset / f"{m}.jsonl") for m in ("oner", "ircot")}
        rows = [
            ("OneR (CoT)", stored["oner"], True),
            ("OneR (Direct)", direct(args.model, dataset, "oner"), True),
            ("OneR (Direct, cleaned query)", clean["oner"], True),
            ("IRCoT (CoT, else the chain's answer)", {i: chain_fallback(r) for i, r in stored["ircot"].items()}, True),
            ("IRCoT (Direct, re-read)", direct(args.model, dataset, "ircot"), False),
            ("IRCoT (Direct, cleaned queries)", clean["ircot"], True),
            ("SearChain (LM reader)", load(RESULTS / f"{args.model}-searchain" / dataset / "searchain.jsonl"), True),
            (
                "SearChain (LM reader, Tracing)",
                load(RESULTS / f"{args.model}-searchain-tracing" / dataset / "searchain.jsonl"),
                True,
            ),
        ]
        for label, records, timed in rows:
            if not all(i in records for i in questions):
                continue
            s = aggregate([_with_text(records[i]) for i in questions], questions)
            rounds = f"{s['rounds_per_question']:.2f}" if "rounds_per_question" in s else ""
            recall = f"{s['recall'] * 100:.1f}" if s["recall"] is not None else "-"
            text = f"{s['cover_em_generated'] * 100:.1f}" if "cover_em_generated" in s else ""
            seconds = f"{s['seconds_per_question']:.1f}" if timed else ""
            print(
                f"| {dataset} | {label} | {s['em'] * 100:.1f} | {s['f1'] * 100:.1f} ±{s['f1_ci95'] * 100:.1f} "
                f"| {s['cover_em'] * 100:.1f} | "
                f"{s['cover_em_substring'] * 100:.1f} | {text} | {recall} | {s['lm_calls_per_question']:.1f} | "
                f"{rounds} | {seconds} |"
            )
    return 0


def _with_text(record: dict) -> dict:
    """SearChain runs stored before the record kept everything the LM wrote: its chains are in `tree`."""
    if "tree" in record and "generated" not in record:
        return {**record, "generated": "\n".join(r["chain"] for r in record["tree"])}
    return record


if __name__ == "__main__":
    raise SystemExit(main())
