"""bm25s vs tantivy behind kb-ray's LexicalIndex: build time, query latency, quality.

    .venv/bin/python benchmarks/bm25_compare.py [--kb-root DIR]   # DIR: an ingested golden kb

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

BACKENDS = {"bm25s": Bm25sIndex, "tantivy": TantivyIndex}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb-root", default=None, help="an already ingested golden knowledge base")
    args = parser.parse_args()
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
