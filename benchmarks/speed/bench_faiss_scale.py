"""Dense retrieval past memory: the IVF-PQ path of the dense backend on synthetic vectors.

    .venv/bin/python benchmarks/speed/bench_faiss_scale.py [--paragraphs 500000] [--dim 384] [--pq-m 16]
        [--work /tmp/faiss-scale] [--raw]

With --raw the vectors are also written as one raw float32 file, as FlashRAG's --save_embedding
writes them, and the index is built from that file as `mhindex index --vectors FILE --vectors-dim D`
builds it (memory-mapped, a chunk at a time), not from the encoding shards.

Writes --paragraphs synthetic unit vectors (near a low-dimensional subspace, as text embeddings are) as the
dense backend's encoding shards, then in separate processes, each reporting its own peak memory:
builds the index with the backend's `build_faiss_index` (trained on a sample, added shard by shard),
and searches it memory-mapped and read into memory (1,000 queries, k=10, nprobe 16), with recall@10
against exact search. Prints the measured figures and what the same path needs for HotpotQA's
5.2M abstracts (MiniLM's 384 dimensions and DPR's 768), from the sizes the measurement confirms.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SHARD = 10_000
QUERIES = 1000


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def embedded(rng, count: int, dim: int, basis) -> np.ndarray:
    """Unit vectors near a 48-dimensional subspace: text embeddings have a low intrinsic dimension,
    which is what makes quantised search work on them (on isotropic noise nothing finds neighbours)."""
    vectors = (
        rng.standard_normal((count, len(basis)), dtype=np.float32) @ basis
        + rng.standard_normal((count, dim), dtype=np.float32) * 0.02
    )
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def write_shards(work: Path, count: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    basis = rng.standard_normal((48, dim), dtype=np.float32) / math.sqrt(dim)
    for number, start in enumerate(range(0, count, SHARD)):
        np.save(work / f"shard-{number:05d}.npy", embedded(rng, min(SHARD, count - start), dim, basis))
    np.save(work / "queries.npy", embedded(rng, QUERIES, dim, basis))


def build(work: Path, pq_m: int) -> None:
    import faiss

    from mhindex.backends.dense import DenseOptions, Vectors, build_faiss_index

    faiss.omp_set_num_threads(2)
    shards = sorted(work.glob("shard-*.npy"))
    dim = np.load(shards[0], mmap_mode="r").shape[1]
    raw = work / "vectors.f32"
    if raw.is_file():
        vectors = Vectors.of_array(np.memmap(raw, dtype=np.float32, mode="r").reshape(-1, dim), None, SHARD)
    else:
        vectors = Vectors.of_shards(shards, dim)
    started = time.perf_counter()
    index = build_faiss_index(faiss, vectors, DenseOptions(faiss_index="ivfpq", pq_m=pq_m))
    faiss.write_index(index, str(work / "faiss.index"))
    print(f"build {time.perf_counter() - started:.1f} {peak_mb():.0f} {index.nlist}")


def search(work: Path, memory_map: bool) -> None:
    import faiss

    from mhindex.backends.dense import read_faiss_index

    faiss.omp_set_num_threads(1)
    queries = np.load(work / "queries.npy")
    before = rss_mb()
    started = time.perf_counter()
    index = read_faiss_index(faiss, work / "faiss.index", memory_map)
    opened = time.perf_counter() - started
    after_open = rss_mb() - before
    index.nprobe = 16
    latencies, found = [], []
    for query in queries:
        began = time.perf_counter()
        _, ids = index.search(query[None, :], 10)
        latencies.append(time.perf_counter() - began)
        found.append(ids[0])
    np.save(work / f"found-{int(memory_map)}.npy", np.array(found))
    print(
        f"search {opened:.2f} {after_open:.0f} {rss_mb() - before:.0f} {np.median(latencies) * 1000:.2f} "
        f"{np.percentile(latencies, 99) * 1000:.2f}"
    )


def exact_top10(work: Path) -> np.ndarray:
    queries = np.load(work / "queries.npy")
    scores = np.full((len(queries), 10), -np.inf, dtype=np.float32)
    ids = np.zeros((len(queries), 10), dtype=np.int64)
    start = 0
    for shard in sorted(work.glob("shard-*.npy")):
        block = np.load(shard) @ queries.T  # (shard, queries)
        both = np.concatenate([scores, block.T], axis=1)
        both_ids = np.concatenate(
            [ids, np.arange(start, start + block.shape[0])[None, :].repeat(len(queries), 0)], axis=1
        )
        top = np.argsort(-both, axis=1)[:, :10]
        scores, ids = np.take_along_axis(both, top, 1), np.take_along_axis(both_ids, top, 1)
        start += block.shape[0]
    return ids


def child(*args: str) -> list[str]:
    result = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return result.stdout.split()[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paragraphs", type=int, default=500_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--pq-m", type=int, default=16)
    parser.add_argument("--work", type=Path, default=Path("/tmp/faiss-scale"))
    parser.add_argument("--phase", choices=["build", "search-mmap", "search-memory"])
    parser.add_argument("--raw", action="store_true", help="build from one raw float32 file (--vectors)")
    args = parser.parse_args()
    if args.phase == "build":
        return build(args.work, args.pq_m)
    if args.phase:
        return search(args.work, args.phase == "search-mmap")

    args.work.mkdir(parents=True, exist_ok=True)
    for old in args.work.glob("*"):
        old.unlink()
    n, dim = args.paragraphs, args.dim
    write_shards(args.work, n, dim)
    if args.raw:
        with open(args.work / "vectors.f32", "wb") as out:
            for shard in sorted(args.work.glob("shard-*.npy")):
                out.write(np.load(shard).astype(np.float32).tobytes())
    seconds, build_peak, lists = child("--work", str(args.work), "--phase", "build", "--pq-m", str(args.pq_m))
    rows = {mode: child("--work", str(args.work), "--phase", f"search-{mode}") for mode in ("mmap", "memory")}
    truth = exact_top10(args.work)
    disk = (args.work / "faiss.index").stat().st_size / 2**20
    vectors_mb = n * dim * 4 / 2**20
    print(
        f"IVF-PQ on {n:,} synthetic unit vectors of {dim} dimensions ({vectors_mb:,.0f} MB as float32): "
        f"{lists} lists, {args.pq_m} bytes a code"
    )
    print(
        f"build from {'one raw float32 file (--vectors)' if args.raw else 'the encoding shards'} (train on a "
        f"sample, add chunk by chunk): {float(seconds):.0f} s, peak memory "
        f"{float(build_peak):,.0f} MB"
    )
    print(f"index on disk: {disk:,.1f} MB ({disk * 2**20 / n:.1f} bytes a paragraph)")
    print(
        f"{'search (1 thread)':<22} {'open s':>7} {'MB open':>8} {'MB after':>9} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'recall@10':>10}  (synthetic vectors: compare the rows, not the recall)"
    )
    for mode, (opened, after_open, after_search, p50, p99) in rows.items():
        found = np.load(args.work / f"found-{int(mode == 'mmap')}.npy")
        recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)])
        label = "memory-mapped" if mode == "mmap" else "read into memory"
        print(
            f"{label:<22} {float(opened):>7.2f} {float(after_open):>8.0f} {float(after_search):>9.0f} "
            f"{float(p50):>7.2f} {float(p99):>7.2f} {recall:>10.3f}"
        )
    overhead = float(build_peak) - build_estimate(n, dim, args.pq_m, int(lists))
    print(
        "\nfor HotpotQA's 5,233,329 abstracts and DPR's 21,015,324 passages, by the same sizes (codes and "
        "8-byte ids, centroids, a 64-per-list training sample,"
        f" one shard, plus the {overhead:,.0f} MB this run needed beyond them):"
    )
    for label, d, m, total in (
        ("5.2M, MiniLM, 384 dims, --pq-m 16", 384, 16, 5_233_329),
        ("5.2M, DPR, 768 dims, --pq-m 64", 768, 64, 5_233_329),
        ("21M, DPR, 768 dims, --pq-m 64", 768, 64, 21_015_324),
    ):
        nlist = round(4 * math.sqrt(total))
        index_mb = (total * (m + 8) + nlist * d * 4) / 2**20
        shards = total * d * 4 / 2**30
        print(
            f"  {label}: index {index_mb:,.0f} MB on disk and in memory (or memory-mapped with --mmap); build "
            "peak about"
            f" {build_estimate(total, d, m, nlist) + overhead:,.0f} MB; encoding shards {shards:,.1f} GB on "
            "disk while building"
            f" (a flat index would hold all {shards:,.1f} GB in memory)"
        )


def build_estimate(count: int, dim: int, pq_m: int, lists: int) -> float:
    """MB the IVF-PQ build holds: training sample, codes and ids, centroids, one shard."""
    return (min(count, 64 * lists) * dim * 4 + count * (pq_m + 8) + lists * dim * 4 + SHARD * dim * 4) / 2**20


if __name__ == "__main__":
    main()
