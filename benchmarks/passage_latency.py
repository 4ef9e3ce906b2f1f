"""Search latency with passage vectors (``index.passage_chars``) vs chunk vectors alone, same run.

    .venv/bin/python benchmarks/passage_latency.py [--n 100000] [--queries 200] [--passage-chars 512]

Corpus: benchmarks/query.py's synthetic chunks (80-180 Zipf pseudo-words), cut into sentences
of 8-20 words so that a chunk longer than ``--passage-chars`` has passages, with random unit
vectors for every chunk and every passage (kb_ray/index/passages.py finds them by sha). Two
generations of the same catalog versions: ``index.passage_chars=0`` (the chunk vectors alone,
the previous default) and ``--passage-chars``. Search p50/p95 per mode, both searchers taking
turns per query (5 warm-up queries each); ``search.evidence`` as configured (lexical).
Writes benchmarks/results/passage_latency.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from query import (  # noqa: E402
    DIM,
    interleaved,
    machine,
    make_queries,
    pct,
    synthetic_texts,
    write_catalog,
)

from kb_ray import ids  # noqa: E402
from kb_ray.catalog import DeltaCatalog  # noqa: E402
from kb_ray.catalog.contract import table_spec  # noqa: E402
from kb_ray.config import load_config  # noqa: E402

MODES = ("dense", "hybrid")


def sentences(text: str, rng: np.random.Generator) -> str:
    """``text``'s words as capitalized sentences of 8-20 words."""
    words, out, start = text.split(), [], 0
    while start < len(words):
        size = int(rng.integers(8, 21))
        part = words[start:start + size]
        out.append(part[0].capitalize() + (" " + " ".join(part[1:]) if len(part) > 1 else "") + ".")
        start += size
    return " ".join(out)


def write_passage_vectors(kb_root: str, *, embedder_fp: str, max_chars: int, rng: np.random.Generator) -> int:
    from kb_ray.index.passages import passage_texts

    catalog = DeltaCatalog.open(kb_root)
    chunks = catalog.read("chunks", columns=["text", "heading_path"])
    shas = sorted({ids.sha256_text(t) for text, path in zip(chunks.column("text").to_pylist(),
                                                             chunks.column("heading_path").to_pylist())
                   for t in passage_texts(text, path, max_chars=max_chars)})
    vectors = rng.normal(size=(len(shas), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    catalog.append("embeddings", pa.table({
        "embedder_fp": pa.array([embedder_fp] * len(shas)), "embed_text_sha": pa.array(shas),
        "dim": pa.array([DIM] * len(shas), pa.int32()),
        "vector": pa.ListArray.from_arrays(pa.array(np.arange(0, vectors.size + 1, DIM, dtype=np.int32)),
                                           pa.array(vectors.reshape(-1)))}, schema=table_spec("embeddings").schema))
    return len(shas)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="chunks in the synthetic corpus")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--passage-chars", type=int, default=512)
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args()
    from kb_ray.config import EmbeddingSettings
    from kb_ray.embedding.fingerprint import embedder_fingerprint
    from kb_ray.index import build_index

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kb_passage_bench_"))
    rng = np.random.default_rng(0)
    texts = [sentences(t, rng) for t in synthetic_texts(args.n, rng)]
    fingerprint = embedder_fingerprint(EmbeddingSettings())
    kb_root = str(work / "kb")
    write_catalog(kb_root, texts, embedder_fp=fingerprint, rng=rng)
    passages = write_passage_vectors(kb_root, embedder_fp=fingerprint, max_chars=args.passage_chars, rng=rng)
    print(f"catalog: {args.n} chunks, {passages} passage vectors", flush=True)
    configs, builds = {}, {}
    for name, chars in (("chunk vectors (passage_chars 0)", 0), (f"passage vectors ({args.passage_chars})",
                                                                  args.passage_chars)):
        configs[name] = load_config(REPO / "conf" / "local.yaml", overrides=[
            f"kb_root={kb_root}", f"index.passage_chars={chars}", "index.switch_after_build=false"])
        start = time.perf_counter()
        manifest = build_index(configs[name])
        builds[name] = (manifest, time.perf_counter() - start)
        print(f"{name}: {manifest.generation_id}, {[s.dense_type for s in manifest.shards]}, "
              f"{builds[name][1]:.1f} s", flush=True)
    queries = make_queries(texts, args.queries, rng)
    steps = {}
    for name, config in configs.items():
        searcher = _searcher(config, builds[name][0].generation_id)
        for q in queries[:5]:
            searcher.search(q, k=10, mode="hybrid")
        for mode in MODES:
            steps[f"{mode} | {name}"] = (lambda s, m: lambda q: s.search(q, k=10, mode=m))(searcher, mode)
    timings = interleaved(steps, queries)
    lines = [f"# Search latency: passage vectors vs chunk vectors alone ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
             "", f"Machine: {machine()}", "",
             f"Command: `python benchmarks/passage_latency.py --n {args.n} --queries {args.queries} "
             f"--passage-chars {args.passage_chars}`", "",
             f"Corpus: {args.n:,} synthetic chunks (benchmarks/query.py's words, in sentences of 8-20), "
             f"{passages:,} passage vectors; random unit vectors (latency only, no relevance).", "",
             "| generation | dense index per shard | vectors | build s |", "| --- | --- | ---: | ---: |"]
    for name, (manifest, seconds) in builds.items():
        vectors = manifest.rows + manifest.stats.get("passages", 0)
        lines.append(f"| {name} | {', '.join(s.dense_type or '-' for s in manifest.shards)} | {vectors:,} | {seconds:.1f} |")
    lines += ["", "| mode | generation | p50 ms | p95 ms |", "| --- | --- | ---: | ---: |"]
    for key, values in timings.items():
        mode, name = key.split(" | ")
        p50, p95 = pct(values)
        lines.append(f"| {mode} | {name} | {p50:.2f} | {p95:.2f} |")
    for mode in MODES:
        first, second = (pct(timings[f"{mode} | {n}"])[0] for n in configs)
        lines.append(f"| {mode} | ratio p50 (passages / chunks) | {second / first:.2f}x | |")
    text = "\n".join(lines) + "\n"
    print(text)
    (REPO / "benchmarks" / "results" / "passage_latency.md").write_text(text, encoding="utf-8")


def _searcher(config, generation_id: str):
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.search.searcher import HybridSearcher

    return HybridSearcher.open(config, generation_id=generation_id,
                               embedder=TextEmbedder.from_settings(config.embedding, num_threads=1))


if __name__ == "__main__":
    main()
