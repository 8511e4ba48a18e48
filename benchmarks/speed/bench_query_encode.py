"""What a dense query costs to encode on one core: mhindex's int8 encoder, each question alone (as it serves them),
against the same ONNX session given the questions in padded batches: whether batching would buy throughput back.

    .venv/bin/python benchmarks/speed/bench_query_encode.py --home /tmp/mhindex-rl/home [--batch 5] [--rounds 2]

The questions are the MuSiQue sample's (../shared/data), the encoder the data root's export of the packaged one
(`mhindex index ... --backend dense` made it). Prints milliseconds a question for each arm and round, and the
floating-point operations a question takes through the encoder's layers, to size a machine for a request rate
(docs/serving.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "musique" / "musique_ans_v1.0_dev.sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a data root whose models/ hold the ONNX export")
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from mhindex.encoders import make_encoder

    encoder = make_encoder(None, "onnx-int8", 256, 1, args.home / "models")
    questions = [json.loads(line)["question"] for line in SAMPLE.read_text().splitlines() if line.strip()]
    tokens = [encoder.tokenize(q, None)["input_ids"].shape[1] for q in questions]
    names = encoder._inputs
    for round_ in range(1, args.rounds + 1):
        start = time.perf_counter()
        encoder.encode_queries(questions)
        alone = time.perf_counter() - start
        session = encoder._sessions.get()  # the encoder's own single-thread session, for the batched arm
        start = time.perf_counter()
        for first in range(0, len(questions), args.batch):
            batch = [encoder.tokenize(q, None) for q in questions[first : first + args.batch]]
            width = max(b["input_ids"].shape[1] for b in batch)
            padded = {n: [np.pad(b[n], ((0, 0), (0, width - b[n].shape[1]))) for b in batch] for n in names}
            feed = {n: np.concatenate(rows) for n, rows in padded.items()}
            session.run(None, feed)
        batched = time.perf_counter() - start
        encoder._sessions.put(session)
        print(f"round {round_}: {len(questions)} questions, {np.mean(tokens):.1f} tokens on average; alone "
              f"{1000 * alone / len(questions):.2f} ms a question, in padded batches of {args.batch} "
              f"{1000 * batched / len(questions):.2f} ms")  # fmt: skip
    hidden, inner, layers = 384, 1536, 6  # MiniLM-L6 (the packaged encoder): attention and feed-forward weights
    flops = 2 * layers * (4 * hidden * hidden + 2 * hidden * inner) * np.mean(tokens)
    print(f"{flops / 1e6:.0f} million floating-point operations a question in the layers' weights (attention scores "
          "aside)")  # fmt: skip


if __name__ == "__main__":
    main()
