"""What the table scripts share (reader_table.py, searchain_table.py): their options, the stored
benchmark predictions, and eval's nested question sample of each bundled dataset."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from mhindex.methods.prompts import concludes, extract_answer

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
DATASETS = ("hotpotqa", "2wikimultihopqa", "musique")


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--limit", type=int, default=20, help="eval's nested sample of this many questions")
    parser.add_argument("--seed", type=int, default=13370)
    parser.add_argument("--model", default="qwen2.5-0.5b", help="the results folders' model name")
    return parser.parse_args()


def load(path: Path) -> dict[str, dict]:
    """A stored predictions file by question id (failed questions left out)."""
    if not path.is_file():
        return {}
    return {
        r["id"]: r
        for r in (orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip())
        if "error" not in r
    }


def direct(model: str, dataset: str, method: str) -> dict[str, dict]:
    """The Direct reader's predictions: measured runs, else the stored paragraphs read again (reread.py)."""
    return {
        **load(RESULTS / f"{model}-reread-direct" / dataset / f"{method}.jsonl"),
        **load(RESULTS / f"{model}-reader-direct" / dataset / f"{method}.jsonl"),
    }


def chain_fallback(record: dict) -> dict:
    """The CoT reader's answer, or the chain's when the reader never reached "answer is"."""
    chain, _, reader = record.get("reasoning", "").partition("[reader] ")
    generation = reader or chain
    sentences = [s["text"] for s in record.get("steps", []) if s.get("text")]
    if not concludes(generation) and sentences and "answer is" in sentences[-1].lower():
        return {**record, "answer": extract_answer(sentences[-1])}
    return record


def sample(dataset: str, limit: int, seed: int) -> dict[str, dict]:
    """eval's nested question sample of the bundled sample's questions, by id."""
    import tempfile

    from mhindex.corpora import DATASETS as REGISTRY
    from mhindex.corpora import default_inputs
    from mhindex.corpora.build import build_corpus
    from mhindex.eval.run import sample_questions

    spec = REGISTRY[dataset]
    files, _ = default_inputs(spec, Path("/nonexistent"))
    with tempfile.TemporaryDirectory() as home:
        return {q["id"]: q for q in sample_questions(build_corpus(spec, files, Path(home)).corpus, limit, seed)}
