"""FAISS in process against Milvus's own server, on the same synthetic vectors, side by side in one run.

    .venv/bin/python benchmarks/speed/bench_milvus.py [--paragraphs 1000000] [--dim 768] [--index flat,hnsw]
        [--queries 500] [--work /tmp/milvus-bench] [--out benchmarks/results/milvus_vs_faiss.json]

Writes --paragraphs synthetic unit vectors (near a low-dimensional subspace, as text embeddings are, as
bench_faiss_scale.py makes them), then for each index type: builds FAISS's (IndexFlatIP, IndexHNSWFlat with the
dense backend's M 32) in this process, and loads the same vectors into a Milvus server started from the `milvus`
wheel (mhindex.backends.milvus.local_server) as the milvus backend loads them (`--milvus-batch` 1,000 rows a
request, a flush a 10,000-row shard, the index built once loaded, HNSW M 32 efConstruction 100); then searches
each with the same --queries queries one at a time (k = 10; HNSW ef 128, as both backends' defaults; Milvus with
consistency "Eventually", as the backend searches a collection that no longer changes), and
reports build seconds, queries a second, p50/p99 latency, recall@10 against exact search, and memory: this
process's peak for FAISS, the Milvus server's resident memory (all its processes) after loading and after the
searches. Each result is written to --out as soon as it is measured.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

CHUNK = 10_000


def synthetic(count: int, dim: int, seed: int = 0) -> np.ndarray:
    """Unit vectors near a 64-dimensional subspace (text embeddings are far from uniform on the sphere)."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((64, dim)).astype(np.float32)
    out = np.empty((count, dim), dtype=np.float32)
    for start in range(0, count, 100_000):
        n = min(100_000, count - start)
        block = rng.standard_normal((n, 64)).astype(np.float32) @ basis + 0.3 * rng.standard_normal((n, dim))
        out[start : start + n] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def timed_queries(search, queries: np.ndarray) -> tuple[list[list[int]], dict]:
    found, took = [], []
    for query in queries:
        began = time.perf_counter()
        found.append(search(query))
        took.append(time.perf_counter() - began)
    took.sort()
    return found, {
        "queries_per_s": round(len(queries) / sum(took), 1),
        "p50_ms": round(1000 * took[len(took) // 2], 2),
        "p99_ms": round(1000 * took[int(len(took) * 0.99)], 2),
    }


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return round(sum(len(set(f) & set(e)) / len(e) for f, e in zip(found, exact, strict=True)) / len(exact), 4)


def faiss_run(vectors: np.ndarray, queries: np.ndarray, kind: str) -> tuple[list[list[int]], dict]:
    import faiss

    faiss.omp_set_num_threads(1)
    began = time.perf_counter()
    dim = vectors.shape[1]
    index = faiss.IndexFlatIP(dim) if kind == "flat" else faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    if kind == "hnsw":
        index.hnsw.efConstruction = 100
    for start in range(0, len(vectors), CHUNK):
        index.add(vectors[start : start + CHUNK])
    built = time.perf_counter() - began
    if kind == "hnsw":
        index.hnsw.efSearch = 128
    found, speed = timed_queries(lambda q: index.search(q[None, :], 10)[1][0].tolist(), queries)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return found, {"build_s": round(built, 1), **speed, "process_peak_mb": round(peak)}


def server_rss_mb(port: int) -> float:
    """The resident memory of the Milvus server listening on `port`, its child processes included."""
    for process in psutil.process_iter(["name"]):
        if "milvus" in (process.info["name"] or ""):
            try:
                if any(c.laddr.port == port for c in process.net_connections(kind="tcp")):
                    members = [process, *process.children(recursive=True)]
                    return round(sum(p.memory_info().rss for p in members) / 2**20)
            except psutil.Error:
                continue
    return float("nan")


def milvus_run(uri: str, vectors: np.ndarray, queries: np.ndarray, kind: str) -> tuple[list[list[int]], dict]:
    from pymilvus import DataType, MilvusClient

    client, name = MilvusClient(uri=uri, timeout=600), f"bench_{kind}"
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("position", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=vectors.shape[1])
    if client.has_collection(name):
        client.drop_collection(name)
    client.create_collection(name, schema=schema, consistency_level="Strong")
    began = time.perf_counter()
    for start in range(0, len(vectors), 1000):
        rows = vectors[start : start + 1000]
        client.insert(name, [{"position": start + i, "vector": row.tolist()} for i, row in enumerate(rows)])
        if (start + 1000) % CHUNK == 0 or start + 1000 >= len(vectors):
            client.flush(name)
    loaded = time.perf_counter() - began
    params = {"M": 32, "efConstruction": 100} if kind == "hnsw" else {}
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type=kind.upper(), metric_type="IP", params=params)
    client.create_index(name, index)
    client.load_collection(name, timeout=3600)
    built = time.perf_counter() - began
    port = int(uri.rsplit(":", 1)[1])
    after_load = server_rss_mb(port)
    search = {"metric_type": "IP", "params": {"ef": 128} if kind == "hnsw" else {}}
    found, speed = timed_queries(
        lambda q: [h["id"] for h in client.search(name, data=[q.tolist()], limit=10, search_params=search,
                                                  consistency_level="Eventually")[0]],
        queries,
    )  # fmt: skip
    client.drop_collection(name)
    client.close()
    return found, {"insert_s": round(loaded, 1), "build_s": round(built, 1), **speed,
                   "server_rss_mb_loaded": after_load, "server_rss_mb_after_search": server_rss_mb(port)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paragraphs", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--index", default="flat,hnsw")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/milvus_vs_faiss.json"))
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from mhindex.backends.milvus import local_server

    vectors = synthetic(args.paragraphs, args.dim)
    queries = synthetic(args.queries, args.dim, seed=1)
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    work = args.work or Path(tempfile.mkdtemp(prefix="milvus-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    exact = None
    with local_server(work) as uri:
        for kind in args.index.split(","):
            key = f"{args.paragraphs}x{args.dim}/{kind}"
            found_faiss, faiss_figures = faiss_run(vectors, queries, kind)
            exact = exact or (found_faiss if kind == "flat" else faiss_run(vectors, queries, "flat")[0])
            found_milvus, milvus_figures = milvus_run(uri, vectors, queries, kind)
            results[key] = {
                "faiss": {**faiss_figures, "recall_at_10": recall(found_faiss, exact)},
                "milvus": {**milvus_figures, "recall_at_10": recall(found_milvus, exact)},
                "vectors_gb": round(vectors.nbytes / 2**30, 2),
                "machine": f"{psutil.cpu_count()} cores, {round(psutil.virtual_memory().total / 2**30)} GiB",
            }
            args.out.write_text(json.dumps(results, indent=2) + "\n")
            print(key, json.dumps(results[key]), flush=True)


if __name__ == "__main__":
    main()
