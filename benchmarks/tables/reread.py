"""Answer again, with another reader, from the paragraphs that stored predictions collected.

IRCoT's retrieve-and-reason loop never looks at the reader: its steps use the chain-of-thought
demonstrations whatever `--reader` says, and the reader runs once, at the end, over the
paragraphs collected (in order). So IRCoT (or OneR) with a Direct reader is exactly the stored
run's paragraphs read by a Direct reader: one LM call per question instead of the whole loop.
This script does that, to compare readers on the 50-question tables without re-running them;
`mhindex eval --reader direct` gives the same answers (checked on the questions it ran).

    .venv/bin/python benchmarks/tables/reread.py benchmarks/results/qwen2.5-0.5b/hotpotqa/ircot.jsonl \
        --corpus hotpotqa --reader direct --out benchmarks/results/qwen2.5-0.5b-reread-direct/hotpotqa/ircot.jsonl

Writes the stored records with `answer` and `reasoning` replaced and `reread` saying how; the
cost columns keep the original loop's figures plus the new reader call.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from mhindex.eval.run import sample_questions
from mhindex.home import open_corpus, resolve_home
from mhindex.lm import DEFAULT_LM, load_lm
from mhindex.methods.base import Meter
from mhindex.methods.reader import Reader
from mhindex.methods.settings import ReaderSettings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--corpus", required=True, help="the corpus the predictions were made on")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reader", default="direct", choices=("direct", "cot"))
    parser.add_argument("--lm", default=DEFAULT_LM)
    parser.add_argument("--lm-threads", type=int, default=None)
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument(
        "--limit", type=int, default=None, help="only the questions of `mhindex eval --limit N` (nested samples)"
    )
    parser.add_argument("--seed", type=int, default=13370)
    args = parser.parse_args()

    corpus = open_corpus(resolve_home(args.home), args.corpus)
    paragraphs = {}
    for line in corpus.corpus.read_bytes().splitlines():
        record = orjson.loads(line)
        paragraphs[record["id"]] = (record["title"], record["text"])
    dataset = corpus.manifest()["dataset"]
    done = set()
    if args.out.is_file():
        done = {orjson.loads(line)["id"] for line in args.out.read_bytes().splitlines() if line.strip()}
    stored = [orjson.loads(line) for line in args.predictions.read_bytes().splitlines() if line.strip()]
    if args.limit is not None:
        wanted = {q["id"] for q in sample_questions(corpus, args.limit, args.seed)}
        stored = [r for r in stored if r["id"] in wanted]
    settings = ReaderSettings(reader=args.reader)
    with load_lm(args.lm, home=args.home, threads=args.lm_threads) as model:
        reader = Reader(model, settings, dataset, with_context=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "ab") as sink:
            for number, record in enumerate(stored, 1):
                if record["id"] in done or "error" in record:
                    continue
                meter = Meter(model)
                found = [paragraphs[r["id"]] for r in record["retrieved"]]
                answer, generation = reader.read(meter, record["question"], found)
                chain = " ".join(step["text"] for step in record.get("steps", []) if step.get("text"))
                record.update(
                    answer=answer,
                    reasoning=f"{chain}\n[reader] {generation}" if chain else generation,
                    lm_calls=record.get("lm_calls", 0) + meter.calls,
                    reread={"from": str(args.predictions), "reader": args.reader},
                )
                sink.write(orjson.dumps(record) + b"\n")
                sink.flush()
                print(f"{number}/{len(stored)} {record['id']}: {answer}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
