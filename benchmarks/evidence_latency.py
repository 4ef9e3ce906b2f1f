"""Search latency of config variants side by side: one process, the variants taking turns per query.

    .venv/bin/python benchmarks/evidence_latency.py [--n 10000 | --kb-root KB --dataset Q.jsonl]
        [--queries 200] --variant NAME[:KEY=VALUE,...] [--variant ...] [--set KEY=VALUE ...]

Each ``--variant`` is a ``HybridSearcher`` over the same catalog with its own config
overrides (on top of conf/local.yaml and ``--set``), all sharing one query embedder; every
query runs in hybrid mode (k=10) through every variant in turn, so load from other processes
on a shared machine hits all of them alike. Prints p50/p95 per variant and the ratio of each
to the first: of the p50s, and the median of the per-query ratios. Corpus: ``--n`` synthetic
chunks of benchmarks/query.py (random vectors under the MiniLM fingerprint), or an existing
``--kb-root`` with the queries of ``--dataset`` (e.g. benchmarks/realdocs/queries.jsonl).
Made for issue #12 (evidence cost at query time, benchmarks/results/eval.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from query import REPO, interleaved, make_queries, pct, synthetic_texts, write_catalog  # noqa: E402

from kb_ray.config import load_config  # noqa: E402


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, _, overrides = text.partition(":")
    return name, [o for o in overrides.split(",") if o]


def synthetic_catalog(n: int, queries: int) -> tuple[str, list[str]]:
    from kb_ray.config import EmbeddingSettings
    from kb_ray.embedding.fingerprint import embedder_fingerprint
    from kb_ray.index import build_index

    rng = np.random.default_rng(0)
    kb_root = str(Path(tempfile.mkdtemp(prefix="kb_evidence_latency_")) / "kb")
    texts = synthetic_texts(n, rng)
    write_catalog(kb_root, texts, embedder_fp=embedder_fingerprint(EmbeddingSettings()), rng=rng)
    build_index(load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={kb_root}"]))
    return kb_root, make_queries(texts, queries, rng)


def dataset_queries(path: str, count: int) -> list[str]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row["query"] for row in rows][:count]


def measure(kb_root: str, queries: list[str], variants: list[tuple[str, list[str]]],
            common: list[str]) -> dict[str, list[float]]:
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.search.searcher import HybridSearcher

    configs = {name: load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={kb_root}", *common, *extra])
               for name, extra in variants}
    embedder = TextEmbedder.from_settings(next(iter(configs.values())).embedding, num_threads=1)
    searchers = {name: HybridSearcher.open(config, embedder=embedder) for name, config in configs.items()}
    for q in queries[:5]:  # warm-up
        for searcher in searchers.values():
            searcher.search(q, k=10, mode="hybrid")
    return interleaved({name: (lambda q, s=s: s.search(q, k=10, mode="hybrid")) for name, s in searchers.items()},
                       queries)


def render(times: dict[str, list[float]]) -> str:
    base_name, base = next(iter(times.items()))
    lines = [f"| variant | p50 ms | p95 ms | p50 / {base_name} p50 | median per-query ratio |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, ms in times.items():
        ratio = statistics.median(a / b for a, b in zip(ms, base))
        lines.append(f"| {name} | {pct(ms)[0]:.1f} | {pct(ms)[1]:.1f} | {pct(ms)[0] / pct(base)[0]:.3f} | "
                     f"{ratio:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="chunks in the synthetic corpus (without --kb-root)")
    parser.add_argument("--kb-root", help="an existing catalog with a live index instead of the synthetic one")
    parser.add_argument("--dataset", help="with --kb-root: JSONL whose `query` fields are the queries")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--variant", dest="variants", action="append", required=True, metavar="NAME[:K=V,...]")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override for every variant")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.kb_root:
        kb_root, queries = args.kb_root, dataset_queries(args.dataset, args.queries)
    else:
        kb_root, queries = synthetic_catalog(args.n, args.queries)
    print(f"catalog ready in {time.perf_counter() - started:.0f} s; {len(queries)} queries", flush=True)
    print(render(measure(kb_root, queries, [parse_variant(v) for v in args.variants], args.overrides)))


if __name__ == "__main__":
    main()
