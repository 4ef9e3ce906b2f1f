"""Cost of the concept graph (docs/graph.md): extraction and graph build in s per 1,000 chunks,
and query latency of ``graph`` beside ``hybrid``.

    python benchmarks/graph_cost.py --set kb_root=/tmp/g19_rd [--repeat 3] [--queries FILE]

Reads the hydration rows of the live generation's catalog versions once (a generation built
with ``index.graph=true``), then times, per repeat and interleaved so the ratio holds on a
loaded machine: the concept extraction of every chunk (what the ingest's ConceptStage does per
micro-batch), the graph files (from the catalog's mentions) and beside them the text shards of the
same rows (FAISS + BM25, vectors from the catalog); the median counts. With ``--queries`` it also
times in-process search of each query in ``hybrid`` and ``graph`` mode, interleaved (one warm-up
pass first), and prints p50 / p95 per mode.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _index_cost import interleaved_latency, live_generation, load_queries, print_medians, timed

from kb_ray.index import build as build_module
from kb_ray.index.concepts import ConceptExtractor, version_concepts
from kb_ray.index.graph import build_graph_index

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", default=None, help="a JSONL eval dataset: also time hybrid vs graph queries")
    args = parser.parse_args()
    config, manifest, connection, hydration, vectors = live_generation(args.overrides)
    pairs = list(zip(hydration.column("chunk_id").to_pylist(), hydration.column("text").to_pylist()))
    runs: dict[str, list[float]] = {"extract": [], "graph": [], "shards": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as scratch:
            runs["extract"].append(timed(lambda: version_concepts("v", iter(pairs), ConceptExtractor())))
            runs["graph"].append(timed(lambda: build_graph_index(Path(scratch) / "graph", hydration, connection,
                                                                  extractor=ConceptExtractor())))
            runs["shards"].append(timed(lambda: build_module._write_shards(Path(scratch) / "s", hydration, vectors,
                                                                            config.index)))
    chunks = hydration.num_rows
    print(f"{chunks} chunks; graph {manifest.graph}")
    print_medians(runs, chunks)
    if args.queries:
        query_latency(config, args.queries)


def query_latency(config, path: str) -> None:
    from kb_ray.search import HybridSearcher

    searcher = HybridSearcher.open(config)
    interleaved_latency({mode: (lambda query, mode=mode: searcher.search(query, mode=mode, k=10))
                         for mode in ("hybrid", "graph")}, load_queries(path))


if __name__ == "__main__":
    main()
