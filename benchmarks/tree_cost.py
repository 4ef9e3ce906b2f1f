"""Index-time cost of the section tree (docs/tree.md), in seconds per 1,000 chunks.

    python benchmarks/tree_cost.py --set kb_root=/tmp/t19_gold [--repeat 3] [--queries golden/queries.jsonl]

Reads the hydration rows of the live generation's catalog versions once, loads the text
embedder once, then times, per repeat: the nodes (sections, summaries, key terms), the node
embedding and the BM25 index, and beside them the text shards of the same rows (FAISS + BM25,
no embedding: the chunk vectors come from the catalog), runs interleaved so the ratio holds on
a loaded machine; the median counts. Model load is reported apart (once per build).
With ``--queries`` it also times in-process search of each query in ``hybrid`` and ``tree``
mode, interleaved (one warm-up pass first), and prints p50 / p95 per mode.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _index_cost import interleaved_latency, live_generation, load_queries, print_medians, timed

from kb_ray.embedding.text import TextEmbedder
from kb_ray.index import build as build_module
from kb_ray.index.tree import build_tree_index, node_rows

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", default=None, help="a JSONL eval dataset: also time hybrid vs tree queries")
    args = parser.parse_args()
    config, manifest, connection, hydration, vectors = live_generation(args.overrides)
    started = time.perf_counter()
    embedder = TextEmbedder.from_settings(config.embedding)
    load_s = time.perf_counter() - started
    analyzer = build_module._analyzer(config.index)
    runs: dict[str, list[float]] = {"nodes": [], "tree": [], "shards": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as scratch:
            runs["nodes"].append(timed(lambda: node_rows(hydration, analyzer)))
            runs["tree"].append(timed(lambda: build_tree_index(Path(scratch) / "tree", hydration,
                                                                embedder=embedder, analyzer=analyzer)))
            runs["shards"].append(timed(lambda: build_module._write_shards(Path(scratch) / "s", hydration, vectors,
                                                                            config.index)))
    chunks, nodes = hydration.num_rows, node_rows(hydration, analyzer).num_rows
    print(f"{chunks} chunks, {nodes} nodes; embedder load {load_s:.2f} s (once per build)")
    print_medians(runs, chunks)
    if args.queries:
        query_latency(config, embedder, args.queries)


def query_latency(config, embedder, path: str) -> None:
    from kb_ray.search import HybridSearcher

    searcher = HybridSearcher.open(config, embedder=embedder)
    interleaved_latency({mode: (lambda query, mode=mode: searcher.search(query, mode=mode, k=10))
                         for mode in ("hybrid", "tree")}, load_queries(path))


if __name__ == "__main__":
    main()
