"""Cost of the contextual generation (docs/contextual.md) against the plain one.

    python benchmarks/contextual_cost.py --set kb_root=/tmp/ctx19_gold --plain gen_… --contextual gen_… \
        [--queries golden/queries.jsonl [--limit N]] [--repeat 3]

Index time: the two generations' own build records (``stats.build_seconds`` and, for the
contextual one, ``stats.contextual``: contexts written, texts embedded or found cached, seconds),
and, timed here, writing the extractive contexts of every chunk (median of ``--repeat``), all in
seconds per 1,000 chunks. Query time: in-process ``hybrid`` search of each query (k = 10) on the
plain and on the contextual generation, interleaved query by query with one shared query
embedder after a warm-up pass, so the ratio holds on a loaded machine; p50 / p95 per generation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from _index_cost import interleaved_latency, load_queries

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import load_config
from kb_ray.index import build as build_module
from kb_ray.index.chunk_context import ExtractiveContextWriter, chunk_places
from kb_ray.index.generations import load_manifest
from kb_ray.index.rows import open_session, read_index_rows

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--plain", required=True)
    parser.add_argument("--contextual", required=True)
    parser.add_argument("--queries", default=None)
    parser.add_argument("--limit", type=int, default=None, help="time only the first N queries")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = load_config(ROOT / "conf" / "local.yaml", overrides=args.overrides)
    plain, contextual = (load_manifest(config.kb_root, g) for g in (args.plain, args.contextual))
    chunks = contextual.rows
    per_k = 1000 / max(chunks, 1)
    print(f"{chunks} chunks")
    print(f"plain build      {plain.stats['build_seconds']:.2f} s = {plain.stats['build_seconds'] * per_k:.2f} s per 1,000")
    print(f"contextual build {contextual.stats['build_seconds']:.2f} s = "
          f"{contextual.stats['build_seconds'] * per_k:.2f} s per 1,000; {json.dumps(contextual.stats['contextual'])}")
    seconds = statistics.median(_context_seconds(config, contextual) for _ in range(args.repeat))
    print(f"extractive contexts alone: median {seconds:.3f} s = {seconds * per_k:.3f} s per 1,000")
    if args.queries:
        query_latency(config, args.plain, args.contextual, args.queries, limit=args.limit)


def _context_seconds(config, manifest) -> float:
    catalog = DeltaCatalog.open(config.kb_root, create=False)
    connection = open_session(catalog, manifest.catalog_versions)
    hydration, _ = read_index_rows(connection, manifest.embedder_fp)
    connection.close()
    started = time.perf_counter()
    ExtractiveContextWriter().contexts(chunk_places(hydration, build_module._analyzer(config.index)))
    return time.perf_counter() - started


def query_latency(config, plain: str, contextual: str, path: str, *, limit: int | None = None) -> None:
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.search import HybridSearcher

    embedder = TextEmbedder.from_settings(config.embedding)
    searchers = {name: HybridSearcher.open(config, generation_id=gen, embedder=embedder)
                 for name, gen in (("plain", plain), ("contextual", contextual))}
    times = interleaved_latency({name: (lambda query, s=searcher: s.search(query, k=10))
                                 for name, searcher in searchers.items()}, load_queries(path, limit))
    ratio = np.percentile(times["contextual"], 50) / np.percentile(times["plain"], 50)
    print(f"p50 contextual / plain: {ratio:.2f}x")


if __name__ == "__main__":
    main()
