"""Calibrate SearChain's verification threshold for the LM reader on MuSiQue's sample.

    .venv/bin/python benchmarks/studies/calibrate_searchain.py [--lm local:qwen2.5-0.5b] [--home .mhindex-eval]

MuSiQue decomposes each question into single-hop sub-questions with their answers. Each
sub-question (earlier answers put in for #k) is searched, the top-1 paragraph is read by the LM
reader exactly as SearChain reads it, and the reader's answer is right when its F1 with the gold
sub-answer is at least 0.5. For each threshold the script prints how many reads are confident and
how many of those are right: verification should act only on reads that are right more often
than not. Needs the musique corpus and its Lucene index under --home (mhindex build musique).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import orjson

from mhindex.backends import BackendSpec, open_retriever
from mhindex.eval.metrics import f1
from mhindex.home import open_corpus
from mhindex.lm import ModelOptions
from mhindex.methods.base import Meter
from mhindex.methods.prompts import paragraph_block
from mhindex.methods.searchain import LMReader

SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "src"
    / "mhindex"
    / "corpora"
    / "samples"
    / "musique"
    / "musique_ans_v1.0_dev.sample.jsonl"
)


def sub_questions(record: dict) -> list[tuple[str, str]]:
    """(question, answer) per hop; MuSiQue writes some hops as "entity >> relation"."""
    answers, hops = [], []
    for hop in record["question_decomposition"]:
        text = re.sub(
            r"#(\d+)",
            lambda m: answers[int(m.group(1)) - 1] if int(m.group(1)) <= len(answers) else m.group(0),
            hop["question"],
        )
        if ">>" in text:
            entity, _, relation = text.partition(">>")
            text = f"What is the {relation.strip()} of {entity.strip()}?"
        hops.append((text, hop["answer"]))
        answers.append(hop["answer"])
    return hops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lm", default="local:qwen2.5-0.5b")
    parser.add_argument("--home", type=Path, default=Path(".mhindex-eval"))
    parser.add_argument("--limit", type=int, default=100, help="questions of the sample")
    args = parser.parse_args()
    lm = ModelOptions(lm=args.lm).load(args.home)
    retriever = open_retriever(open_corpus(args.home, "musique"), BackendSpec.parse("lucene"))
    reader, meter = LMReader(lm), Meter(lm)
    reads = []
    for line in SAMPLE.read_bytes().splitlines()[: args.limit]:
        for question, gold in sub_questions(orjson.loads(line)):
            hit = retriever.search(question, 1)[0]
            answer, confidence = reader.read(meter, question, paragraph_block(hit.title, hit.text, 350))
            reads.append((confidence, f1(answer, gold) >= 0.5))
    right = sum(ok for _, ok in reads)
    print(f"{len(reads)} reads of single-hop sub-questions, {right} right ({right / len(reads):.0%}), {args.lm}")
    print(f"{'threshold':>9} {'confident':>10} {'right among them':>17} {'right ones kept':>16}")
    for threshold in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        confident = [ok for c, ok in reads if c > threshold]
        precision = sum(confident) / len(confident) if confident else float("nan")
        kept = sum(confident) / right if right else float("nan")
        print(f"{threshold:>9.1f} {len(confident):>10} {precision:>17.0%} {kept:>16.0%}")


if __name__ == "__main__":
    main()
