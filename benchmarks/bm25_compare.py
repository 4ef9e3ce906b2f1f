"""bm25 (kb-ray channels) vs bm25s vs tantivy behind LexicalIndex: build time, latency, quality.

    .venv/bin/python benchmarks/bm25_compare.py [--kb-root DIR]   # DIR: an ingested golden kb
    .venv/bin/python benchmarks/bm25_compare.py --latency-docs 100000   # sharded latency only

``--latency-docs N``: N synthetic chunks in 2 shards (the default ``index.shards``), the
search step of today's searcher (bm25s per shard) against the bm25 index with all four
channels weighted (body, heading "Title doc-…", file name, exact), the two taking turns
per query; writes benchmarks/results/bm25_latency.md.

Without --kb-root the golden sources are ingested into a temporary folder first (~40 s).
Golden quality: MRR@10 over the quote-labelled queries of tests/index_fixtures.py (a chunk
is relevant when it comes from the named file and contains the quote). Synthetic: 10k
Zipf-distributed documents; each query is 3 words drawn from one document, which is the
relevant one. Both backends run side by side in one process; ratios matter more than
absolute numbers on a noisy machine. Writes benchmarks/results/bm25_compare.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kb_ray.index.lexical import Bm25sIndex, TantivyIndex  # noqa: E402


class ChannelTexts:
    """The bm25 index (kb_ray.index.channels) over plain texts: one body channel, one shard."""

    name = "bm25"

    @staticmethod
    def build(texts: list[str]):
        from kb_ray.index.analyzer import TextAnalyzer
        from kb_ray.index.channels import CHANNELS, ChannelBm25Index, channel_statistics

        analyzer = TextAnalyzer()
        channels = {name: [[] for _ in texts] for name in CHANNELS}
        channels["body"] = [analyzer.terms(t) for t in texts]
        channels["exact"] = [analyzer.exact_terms(t) for t in texts]
        return ChannelBm25Index.build(channels, channel_statistics(channels), tie_keys=[f"{i:09d}" for i in range(len(texts))],
                                      analyzer=analyzer)

    @staticmethod
    def load(path):
        from kb_ray.index.channels import ChannelBm25Index

        return ChannelBm25Index.load(path)


BACKENDS = {"bm25": ChannelTexts, "bm25s": Bm25sIndex, "tantivy": TantivyIndex}


def golden_corpus(kb_root: str | None) -> tuple[list[str], list[tuple[str, set[int]]]]:
    from kb_ray.catalog import DeltaCatalog
    from kb_ray.index.build import lexical_text
    from kb_ray.index.rows import INDEXED_TABLES, open_session, read_index_rows, resolve_embedder_fp
    from tests.index_fixtures import GOLDEN_QUERIES, ingest_golden_once

    root = kb_root or ingest_golden_once(Path(tempfile.mkdtemp()))
    catalog = DeltaCatalog.open(root, create=False)
    versions = {name: v for name, v in catalog.table_versions().items() if name in INDEXED_TABLES}
    connection = open_session(catalog, versions)
    rows, _ = read_index_rows(connection, resolve_embedder_fp(connection, None))
    records = rows.select(["uri", "heading_path", "text"]).to_pylist()
    texts = [lexical_text(r["heading_path"], r["text"]) for r in records]
    queries = [(q, {i for i, r in enumerate(records) if r["uri"].endswith(f) and quote in r["text"]})
               for q, f, quote in GOLDEN_QUERIES]
    return texts, queries


def synthetic_corpus(n_docs: int = 10_000, n_queries: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}x" for i in range(30_000)])
    weights = 1.0 / np.arange(1, len(vocabulary) + 1) ** 1.1
    weights /= weights.sum()
    lengths = rng.integers(40, 160, size=n_docs)
    texts = [" ".join(rng.choice(vocabulary, size=length, p=weights)) for length in lengths]
    targets = rng.choice(n_docs, size=n_queries, replace=False)
    queries = [(" ".join(rng.choice(texts[t].split(), size=3, replace=False)), {int(t)}) for t in targets]
    return texts, queries


def measure(cls, texts: list[str], queries, *, mask: np.ndarray | None = None, repeat: int = 3) -> dict:
    builds = []
    for _ in range(repeat):
        start = time.perf_counter()
        index = cls.build(texts)
        builds.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as folder:
        index.save(Path(folder) / "lexical")
        index = cls.load(Path(folder) / "lexical")
        latencies, reciprocal = [], []
        for query, relevant in queries:
            start = time.perf_counter()
            rows, _ = index.search(query, 10, mask)
            latencies.append((time.perf_counter() - start) * 1000)
            rank = next((i for i, row in enumerate(rows.tolist(), 1) if row in relevant), None)
            reciprocal.append(1 / rank if rank else 0.0)
    latencies.sort()
    return {"build_s": statistics.median(builds), "p50_ms": statistics.median(latencies),
            "p95_ms": latencies[int(0.95 * (len(latencies) - 1))], "mrr10": statistics.mean(reciprocal)}


def run(kb_root: str | None) -> str:
    golden_texts, golden_queries = golden_corpus(kb_root)
    synth_texts, synth_queries = synthetic_corpus()
    half = np.random.default_rng(1).random(len(synth_texts)) < 0.5
    masked_queries = [(q, {r for r in rel if half[r]}) for q, rel in synth_queries]
    cases = [("golden (%d chunks, %d queries)" % (len(golden_texts), len(golden_queries)), golden_texts, golden_queries, None),
             ("synthetic 10k docs, 200 queries", synth_texts, synth_queries, None),
             ("synthetic 10k docs, 50% row mask", synth_texts, masked_queries, half)]
    lines = ["# bm25s vs tantivy (kb-ray LexicalIndex)", "",
             "| corpus | backend | build s (median of 3) | query p50 ms | query p95 ms | MRR@10 |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for label, texts, queries, mask in cases:
        for name, cls in BACKENDS.items():
            m = measure(cls, texts, queries, mask=mask)
            lines.append(f"| {label} | {name} | {m['build_s']:.3f} | {m['p50_ms']:.2f} | {m['p95_ms']:.2f} | {m['mrr10']:.3f} |")
            print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def sharded_latency(n_docs: int, *, shards: int = 2, n_queries: int = 300) -> str:
    """bm25s per shard (today's default) vs the bm25 channel index per shard, interleaved."""
    import pyarrow as pa

    from kb_ray.index.analyzer import TextAnalyzer
    from kb_ray.index.channels import ChannelBm25Index, channel_statistics, lexical_channels

    texts, queries = synthetic_corpus(n_docs, n_queries)
    keys = [f"doc-{i // 5:06d}" for i in range(n_docs)]
    table = pa.table({"text": texts, "heading_path": [[f"Title {k}"] for k in keys], "title": [f"Title {k}" for k in keys],
                      "uri": [f"file:///corpus/{k}.txt" for k in keys]})
    assignment = np.arange(n_docs) % shards
    started = time.perf_counter()
    analyzer = TextAnalyzer()
    channels = lexical_channels(table, analyzer)
    statistics_ = channel_statistics(channels)
    new = [ChannelBm25Index.build({c: [t for t, a in zip(terms, assignment) if a == s] for c, terms in channels.items()},
                                  statistics_, tie_keys=[f"{i:09d}" for i in np.flatnonzero(assignment == s)],
                                  analyzer=analyzer) for s in range(shards)]
    new_build = time.perf_counter() - started
    started = time.perf_counter()
    old = [Bm25sIndex.build([f"Title {k}\n{t}" for k, t, a in zip(keys, texts, assignment) if a == s]) for s in range(shards)]
    old_build = time.perf_counter() - started
    weights = {"body": 1.0, "heading": 0.5, "path": 0.5, "exact": 0.5}
    steps = {"bm25s per shard (before)": lambda q: [i.search(q, 100) for i in old],
             "bm25 4 channels, global stats": lambda q: [i.search(q, 100, weights=weights) for i in new]}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for query, _ in queries:
        for name, step in steps.items():
            start = time.perf_counter()
            step(query)
            times[name].append((time.perf_counter() - start) * 1000)
    lines = [f"# Lexical search latency, {n_docs:,} synthetic chunks in {shards} shards", "",
             "| index | build s | search p50 ms | search p95 ms |", "| --- | ---: | ---: | ---: |"]
    for name, build_s in zip(steps, (old_build, new_build)):
        ordered = sorted(times[name])
        lines.append(f"| {name} | {build_s:.1f} | {statistics.median(ordered):.2f} | "
                     f"{ordered[int(0.95 * (len(ordered) - 1))]:.2f} |")
    ratio = statistics.median(times["bm25 4 channels, global stats"]) / statistics.median(times["bm25s per shard (before)"])
    lines += ["", f"p50 ratio new/before: {ratio:.2f}x. {n_queries} queries of 3 words, top 100 per shard, the two "
              f"taking turns per query; machine: {__import__('os').cpu_count()} CPUs shared with other jobs."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb-root", default=None, help="an already ingested golden knowledge base")
    parser.add_argument("--latency-docs", type=int, default=None, help="only the sharded latency run on N chunks")
    args = parser.parse_args()
    if args.latency_docs:
        table = sharded_latency(args.latency_docs)
        (REPO / "benchmarks" / "results" / "bm25_latency.md").write_text(table, encoding="utf-8")
        print(table)
        return
    table = run(args.kb_root)
    out = REPO / "benchmarks" / "results" / "bm25_compare.md"
    notes = ("\nTokenization: bm25s lowercases `\\w\\w+` tokens and drops English stopwords (no stemmer: "
             "PyStemmer is not installed); tantivy uses its `en_stem` analyzer. Masks: bm25s `weight_mask`; "
             "tantivy a zero-scored TermSetQuery over a `row` field. Machine: "
             f"{__import__('os').cpu_count()} CPUs, single process.\n")
    out.write_text(table + notes, encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
