"""LanceDB (embedded, hybrid with RRF) vs kb-ray (in-process and over HTTP): latency, QPS
and quality on the same chunks, the same vectors and the same query embedder.

    .venv/bin/python benchmarks/peers/query_lancedb.py [--passes 2] [--concurrent-requests 160]
        [--workdir DIR]

The catalog is built from golden/sources with conf/local.yaml (run_ingest + build_index);
LanceDB gets kb-ray's active chunks and their stored vectors. Prints one table and writes its
section of benchmarks/results/peers.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("LANCEDB_LOG", "error")  # lance logs a deprecation warning on every query that selects columns

import shape  # noqa: E402,F401  (sets the offline environment before models load)
from harness import ROOT, header_lines, load_average, write_section  # noqa: E402
from query_quality import evaluate, labelled_sets  # noqa: E402

sys.path.insert(0, str(ROOT))
PACKAGES = ("kb-ray", "lancedb", "ray", "faiss-cpu", "bm25s", "torch", "sentence-transformers", "httpx")
K = 10


class LockedEmbedder:
    """One TextEmbedder (1 torch thread) shared by every client thread of every contender;
    the lock keeps the Hugging Face tokenizer from being entered by two threads at once."""

    def __init__(self) -> None:
        from kb_ray.config import EmbeddingSettings
        from kb_ray.embedding.text import TextEmbedder

        self._embedder = TextEmbedder.from_settings(EmbeddingSettings(), num_threads=1)
        self._lock = threading.Lock()
        self.fingerprint = self._embedder.fingerprint

    def embed_query(self, text: str):
        with self._lock:
            return self._embedder.embed_query(text)


def build_kb(workdir: Path):
    from kb_ray.config import load_config
    from kb_ray.index import build_index
    from kb_ray.ingest.run import run_ingest

    config = load_config(ROOT / "conf" / "local.yaml", overrides=[f"kb_root={workdir / 'kb'}"])
    report = run_ingest(config)
    assert report.status == "succeeded", report.render()
    started = time.perf_counter()
    manifest = build_index(config)
    return config, manifest, time.perf_counter() - started


def export_chunks(config, embedder_fp: str):
    """Active chunks joined with their stored vectors, as one Arrow table."""
    import pyarrow as pa

    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.sql import run_query

    catalog = DeltaCatalog.open(config.kb_root, create=False)
    table = run_query(catalog, f"""
        SELECT a.chunk_id, a.document_id, a.text, e.vector FROM active_chunks a
        JOIN embeddings e ON e.embed_text_sha = a.embed_text_sha
        WHERE e.embedder_fp = '{embedder_fp}' ORDER BY a.chunk_id""")
    dim = len(table.column("vector")[0].as_py())
    vectors = pa.FixedSizeListArray.from_arrays(pa.concat_arrays(
        [chunk.flatten() for chunk in table.column("vector").chunks]), dim)
    return table.set_column(table.column_names.index("vector"), "vector", vectors)


def build_lancedb(folder: Path, table):
    """LanceDB's documented defaults: native FTS index with the default tokenizer; no ANN
    index at this size (exhaustive vector search, as kb-ray's flat FAISS below 50k)."""
    import lancedb

    started = time.perf_counter()
    db = lancedb.connect(str(folder))
    lance_table = db.create_table("chunks", data=table, mode="overwrite")
    lance_table.create_fts_index("text")
    return lance_table, time.perf_counter() - started


def lancedb_client(lance_table, embedder: LockedEmbedder):
    from lancedb.rerankers import RRFReranker

    reranker = RRFReranker()  # default K=60

    def search(query: str) -> list[str]:
        vector = embedder.embed_query(query)
        rows = (lance_table.search(query_type="hybrid").vector(vector).text(query).rerank(reranker)
                .limit(K).select(["chunk_id", "text"]).to_list())
        return [row["text"] for row in rows]
    return search


def kb_ray_client(config, embedder: LockedEmbedder):
    from kb_ray.search.searcher import HybridSearcher

    searcher = HybridSearcher.open(config, embedder=embedder)

    def search(query: str) -> list[str]:
        return [hit["text"] for hit in searcher.search(query, k=K, mode="hybrid").hits]
    return search


def http_client(port: int):
    import httpx

    local = threading.local()

    def search(query: str) -> list[str]:
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=60)
        response = local.client.post(f"http://127.0.0.1:{port}/v1/search", json={"query": query, "k": K,
                                                                                   "mode": "hybrid"})
        response.raise_for_status()
        return [hit["text"] for hit in response.json()["hits"]]
    return search


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def latency(search, queries: list[str], *, passes: int, concurrent_requests: int) -> dict[str, float]:
    for query in queries[:5]:  # warm-up
        search(query)
    times = []
    for _ in range(passes):
        for query in queries:
            started = time.perf_counter()
            search(query)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    work = [queries[i % len(queries)] for i in range(concurrent_requests)]
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(search, work))
    qps = concurrent_requests / (time.perf_counter() - started)
    return {"p50": times[len(times) // 2], "p95": times[min(len(times) - 1, int(0.95 * len(times)))],
            "qps8": qps, "n1": len(times)}


def measure(name: str, search, sets, queries, args) -> dict:
    row = {"name": name, **latency(search, queries, passes=args.passes, concurrent_requests=args.concurrent_requests)}
    for set_name, (cases, corpus_texts) in sets.items():
        row[set_name] = evaluate(search, cases, corpus_texts)
    print(f"  {name}: {row}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=2, help="sequential passes over the queries (1 client)")
    parser.add_argument("--concurrent-requests", type=int, default=160, help="requests spread over 8 clients")
    parser.add_argument("--workdir", default=str(ROOT / "benchmarks" / "work" / "peers_query"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    load_start = load_average()
    config, manifest, kb_build_s = build_kb(workdir)
    table = export_chunks(config, manifest.embedder_fp)
    lance_table, lance_build_s = build_lancedb(workdir / "lancedb", table)
    sets = labelled_sets(table.column("text").to_pylist())
    queries = [case.query for case in sets["golden"][0]]
    embedder = LockedEmbedder()
    assert embedder.fingerprint == manifest.embedder_fp, "the query embedder differs from the catalog's"
    rows = [measure("LanceDB hybrid (RRF), embedded", lancedb_client(lance_table, embedder), sets, queries, args),
            measure("kb-ray HybridSearcher, in-process", kb_ray_client(config, embedder), sets, queries, args)]
    from kb_ray.serving.app import start_service, stop_service

    port = free_port()
    start_service(config, port=port)
    try:
        rows.append(measure("kb-ray over HTTP (Ray Serve)", http_client(port), sets, queries, args))
    finally:
        stop_service()
    load_end = load_average()
    context = {"chunks": table.num_rows, "kb_build_s": kb_build_s, "lance_build_s": lance_build_s,
               "queries": len(queries)}
    body = render(args, rows, sets, context, load_start, load_end)
    print(body)
    if not args.no_write:
        write_section("query_lancedb", body)


def render(args, rows, sets, context, load_start, load_end) -> str:
    from query_report import query_section

    command = (f".venv/bin/python benchmarks/peers/query_lancedb.py --passes {args.passes} "
               f"--concurrent-requests {args.concurrent_requests}")
    return header_lines("Query: LanceDB hybrid vs kb-ray", command, load_start, load_end, PACKAGES) + \
        query_section(rows, sets, context)


if __name__ == "__main__":
    main()
