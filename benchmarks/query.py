"""Query latency: in-process search components vs the Ray Serve service over loopback HTTP.

    .venv/bin/python benchmarks/query.py [--n 10000] [--queries 200] [--http-queries 100]
        [--segments 0,1,5] [--segment-docs 20] [--no-http] [--segments-only] [--set KEY=VALUE ...]

Corpus: ``--n`` synthetic chunks (5 per document) written straight to Delta (no Ray, no
ingest): texts of 80-180 words drawn Zipf-wise from 20,000 pronounceable pseudo-words,
and *random unit vectors* (dim 384) stored under the packaged all-MiniLM-L6-v2
fingerprint, so the searcher accepts real query embeddings against them. Embedding 10k
chunks for real would take ~7 minutes on 2 CPUs; FAISS cost does not depend on the
values, so dense latency is real while dense *relevance* is meaningless. Queries are 3-6
words drawn from one chunk. The reranker is a tiny random-weight cross-encoder built
locally (2 layers, hidden 32): its scores are meaningless, only the code path and a
lower bound on latency count. Writes benchmarks/results/query.md.

``--segments 0,1,5`` adds in-process search p50/p95 per mode over the base generation with
that many delta segments (docs/indexes.md): each segment rewrites ``--segment-docs`` base
documents (new versions, new texts and vectors), published with ``refresh_index``.
``--no-http`` skips the Ray Serve part (a quick check). ``--segments-only`` measures only that
table (no component or HTTP rows) and writes benchmarks/results/query_segments.md; ``--set
KEY=VALUE`` overrides conf/local.yaml, e.g. ``--set search.evidence=lexical`` to take the
query-time sentence embedding of the evidence stage (the same cost at every segment count) out.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kb_ray.catalog import DeltaCatalog  # noqa: E402
from kb_ray.catalog.contract import table_spec  # noqa: E402
from kb_ray.config import KbConfig, load_config  # noqa: E402

DIM, CHUNKS_PER_DOC = 384, 5
MODES = ("dense", "lexical", "hybrid", "hybrid+rerank")


# -- corpus --------------------------------------------------------------------------------

def synthetic_texts(n: int, rng: np.random.Generator) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = np.array(sorted({"".join(rng.choice(syllables, size=rng.integers(2, 5))) for _ in range(26_000)})[:20_000])
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.1
    rng.shuffle(words)
    p = weights / weights.sum()
    return [" ".join(rng.choice(words, size=length, p=p)) for length in rng.integers(80, 180, size=n)]


def write_catalog(kb_root: str, texts: list[str], *, embedder_fp: str, rng: np.random.Generator,
                  first_doc: int = 0, version: str = "") -> None:
    """Documents ``first_doc..`` of ``CHUNKS_PER_DOC`` texts each; ``version`` names a new
    version of documents that may exist already (their active pointer moves to it)."""
    rows: dict[str, list] = {name: [] for name in ("documents", "versions", "chunks", "version_chunks")}
    created = datetime(2025, 1, 1, tzinfo=timezone.utc)
    for d, start in enumerate(range(0, len(texts), CHUNKS_PER_DOC), first_doc):
        doc_texts, key = texts[start:start + CHUNKS_PER_DOC], f"doc-{d:06d}"
        document_id, version_id, content = f"doc_{key}", f"ver_{key}{version}", f"{key}{version}"
        rows["documents"].append({"document_id": document_id, "collection": ["alpha", "beta"][d % 2], "key": key,
                                  "uri": f"mem://{key}", "title": f"Title {key}", "mime": "text/plain", "tags": [],
                                  "metadata_json": "{}", "active_version_id": version_id, "created_at": created})
        rows["versions"].append({"version_id": version_id, "document_id": document_id, "status": "committed",
                                 "canonical_text": "\n\n".join(doc_texts), "mime": "text/plain", "title": f"Title {key}"})
        offset = 0
        for n, text in enumerate(doc_texts):
            chunk_id = f"ch_{content}_{n}"  # a new version's new texts: new chunk ids
            rows["chunks"].append({"chunk_id": chunk_id, "document_id": document_id, "text": text,
                                   "heading_path": [f"Title {key}"], "embed_text_sha": f"sha_{content}_{n}"})
            rows["version_chunks"].append({"version_id": version_id, "chunk_id": chunk_id, "ordinal": n,
                                           "spans": [{"start": offset, "end": offset + len(text)}], "pages": [1],
                                           "regions": [{"page": 1, "x0": 0.1, "y0": 0.1, "x1": 0.9, "y1": 0.2}]})
            offset += len(text) + 2
    catalog = DeltaCatalog.open(kb_root)
    for name, table_rows in rows.items():
        if name == "documents" and version:
            table = pa.Table.from_pylist(table_rows, schema=table_spec(name).schema)
            catalog.merge_upsert(name, table, keys=["document_id"])
        else:
            catalog.append(name, pa.Table.from_pylist(table_rows, schema=table_spec(name).schema))
    vectors = rng.normal(size=(len(texts), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    shas = [row["embed_text_sha"] for row in rows["chunks"]]
    catalog.append("embeddings", pa.table({
        "embedder_fp": pa.array([embedder_fp] * len(shas)), "embed_text_sha": pa.array(shas),
        "dim": pa.array([DIM] * len(shas), pa.int32()),
        "vector": pa.ListArray.from_arrays(pa.array(np.arange(0, vectors.size + 1, DIM, dtype=np.int32)),
                                           pa.array(vectors.reshape(-1)))}, schema=table_spec("embeddings").schema))


def make_queries(texts: list[str], count: int, rng: np.random.Generator) -> list[str]:
    picks = rng.choice(len(texts), size=count, replace=False)
    return [" ".join(rng.choice(texts[i].split(), size=rng.integers(3, 7), replace=False)) for i in picks]


# -- measuring -----------------------------------------------------------------------------

def pct(ms: list[float]) -> tuple[float, float]:
    ordered = sorted(ms)
    return statistics.median(ordered), ordered[int(round(0.95 * (len(ordered) - 1)))]


def interleaved(steps: dict, items) -> dict[str, list[float]]:
    """Time every step on every item, the steps taking turns per item, so load from other
    processes on a noisy machine hits all of them alike."""
    out: dict[str, list[float]] = {name: [] for name in steps}
    for item in items:
        for name, fn in steps.items():
            start = time.perf_counter()
            fn(item)
            out[name].append((time.perf_counter() - start) * 1000)
    return out


def open_searcher(config: KbConfig):
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.search.searcher import HybridSearcher

    embedder = TextEmbedder.from_settings(config.embedding, num_threads=1)
    return embedder, HybridSearcher.open(config, embedder=embedder)


def local_search(searcher, mode: str):
    return lambda q: searcher.search(q, k=10, mode=mode.split("+")[0], rerank=mode.endswith("+rerank"))


def in_process(config: KbConfig, embedder, searcher, queries: list[str]) -> dict[str, list[float]]:
    loaded, n = searcher._loaded, config.search.candidates
    masks, _page_mask = searcher._masks(loaded, None)
    for q in queries[:5]:  # warm-up
        searcher.search(q, mode="hybrid", rerank=True)
    vectors = {q: embedder.embed_query(q) for q in queries}
    passages = {q: [h["text"] for h in searcher.search(q, k=config.search.rerank_candidates, mode="hybrid",
                                                          rerank=False).hits] for q in queries}
    return interleaved({
        "embed query (1 thread)": embedder.embed_query,
        f"FAISS top-{n} ({len(loaded.shards)} shards)":
            lambda q: [s.dense(vectors[q], n, m) for s, m in zip(loaded.shards, masks)],
        f"BM25 top-{n} ({len(loaded.shards)} shards)":
            lambda q: [s.lexical(q, n, m) for s, m in zip(loaded.shards, masks)],
        f"rerank {config.search.rerank_candidates} passages (tiny CE)":
            lambda q: searcher.reranker.score(q, passages[q]),
        **{f"search {mode}": local_search(searcher, mode) for mode in MODES},
    }, queries)


def with_segments(config: KbConfig, searcher, queries: list[str], args, *, fingerprint: str,
                  rng: np.random.Generator) -> dict[int, dict[str, list[float]]]:
    """Search latency per mode over base + 0, 1, 5… delta segments (``--segments``)."""
    from kb_ray.index.refresh import refresh_index

    counts, results, published = sorted(int(c) for c in args.segments.split(",")), {}, 0
    config = config.model_copy(update={"index": config.index.model_copy(update={"compact_ratio": 1e9})})
    for count in counts:
        while published < count:
            published += 1
            texts = synthetic_texts(args.segment_docs * CHUNKS_PER_DOC, rng)
            write_catalog(config.kb_root, texts, embedder_fp=fingerprint, rng=rng,
                          first_doc=(published - 1) * args.segment_docs, version=f"-s{published}")
            result = refresh_index(config)
            assert result.action == "segment", result
        searcher.refresh()
        assert searcher.segment == count, (searcher.segment, count)
        modes = ("dense", "lexical", "hybrid")
        interleaved({mode: local_search(searcher, mode) for mode in modes}, queries[:5])
        results[count] = interleaved({mode: local_search(searcher, mode) for mode in modes}, queries)
        print(f"  {count} segments: " + ", ".join(f"{m} p50 {pct(ms)[0]:.1f} ms" for m, ms in results[count].items()),
              flush=True)
    return results


def render_segments(args, results: dict[int, dict[str, list[float]]]) -> str:
    lines = ["", f"## Delta segments (in process, {args.queries} queries, k=10; each segment rewrites "
             f"{args.segment_docs} documents = {args.segment_docs * CHUNKS_PER_DOC} chunks)", "",
             "| segments | " + " | ".join(f"{m} p50 ms | {m} p95 ms" for m in ("dense", "lexical", "hybrid")) + " |",
             "| --- |" + " ---: |" * 6]
    for count, modes in results.items():
        cells = " | ".join(f"{pct(ms)[0]:.2f} | {pct(ms)[1]:.2f}" for ms in modes.values())
        lines.append(f"| {count} | {cells} |")
    return "\n".join(lines) + "\n"


def body(query: str, mode: str) -> dict:
    return {"query": query, "k": 10, "mode": mode.split("+")[0], "rerank": mode.endswith("+rerank")}


def side_by_side(url: str, searcher, queries: list[str]) -> dict[str, list[float]]:
    """One HTTP client; per query and mode the in-process search runs right before the request."""
    import httpx

    with httpx.Client(timeout=30) as client:
        def post(mode: str):
            return lambda q: client.post(url, json=body(q, mode)).raise_for_status()
        steps = {}
        for mode in MODES:
            steps[f"local {mode}"], steps[f"http {mode}"] = local_search(searcher, mode), post(mode)
        interleaved(steps, queries[:5])
        return interleaved(steps, queries)


def concurrent(url: str, queries: list[str], mode: str, *, clients: int, max_requests: int,
               max_seconds: float) -> tuple[float, list[float]]:
    import httpx

    latencies: list[float] = []
    counter, lock, deadline = iter(range(max_requests)), threading.Lock(), time.monotonic() + max_seconds

    def worker() -> None:
        with httpx.Client(timeout=30) as client:
            while time.monotonic() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                start = time.perf_counter()
                client.post(url, json=body(queries[i % len(queries)], mode)).raise_for_status()
                with lock:
                    latencies.append((time.perf_counter() - start) * 1000)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) / (time.perf_counter() - start), latencies


def over_http(config: KbConfig, searcher, queries: list[str], *, clients: int, max_requests: int,
              max_seconds: float) -> dict:
    import httpx

    from kb_ray.serving.app import start_service, stop_service

    port = free_port()
    start_service(config, port=port)
    base = f"http://127.0.0.1:{port}"
    try:
        health = httpx.get(f"{base}/healthz", timeout=60).json()
        assert health["ok"] and health["reranker"], health
        paired = side_by_side(f"{base}/v1/search", searcher, queries)
        results = {}
        for mode in MODES:
            qps, multi = concurrent(f"{base}/v1/search", queries, mode, clients=clients,
                                    max_requests=max_requests, max_seconds=max_seconds)
            results[mode] = {"single": paired[f"http {mode}"], "local": paired[f"local {mode}"],
                             "qps": qps, "multi": multi}
            print(f"  http {mode}: 1-client p50 {pct(results[mode]['single'])[0]:.1f} ms; "
                  f"{clients} clients {qps:.1f} QPS", flush=True)
        return results
    finally:
        stop_service()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- report --------------------------------------------------------------------------------

def machine() -> str:
    import bm25s
    import faiss
    import ray
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return (f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, ray {ray.__version__}, "
            f"faiss {faiss.__version__}, bm25s {bm25s.__version__}, torch {torch.__version__}")


def render(args, corpus: str, local: dict[str, list[float]], http: dict, index_s: float) -> str:
    lines = [f"# Query latency ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)", "", f"Machine: {machine()}.", "",
             f"Corpus: {corpus}. Index build: {index_s:.1f} s.", "",
             f"## In process ({args.queries} queries, k=10, one thread, warm; steps take turns per query)", "",
             "| step | p50 ms | p95 ms |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {pct(ms)[0]:.2f} | {pct(ms)[1]:.2f} |" for name, ms in local.items()]
    lines += ["", f"## Ray Serve over HTTP on 127.0.0.1 ({args.http_queries} sequential requests per mode; "
              f"in-process search of the same query and mode right before each; then {args.clients} client "
              f"threads, at most {args.max_requests} requests or {args.max_seconds:.0f} s)",
              "", f"| mode | 1 client p50 ms | 1 client p95 ms | {args.clients} clients QPS | {args.clients} clients p50 ms "
              f"| {args.clients} clients p95 ms | in-process p50 ms, paired (no Ray) | Serve overhead: HTTP p50 / paired "
              "in-process p50 (/ no-Ray p50) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mode, r in http.items():
        paired, alone = pct(r["local"])[0], pct(local[f"search {mode}"])[0]
        lines.append(f"| {mode} | {pct(r['single'])[0]:.1f} | {pct(r['single'])[1]:.1f} | {r['qps']:.1f} | "
                     f"{pct(r['multi'])[0]:.1f} | {pct(r['multi'])[1]:.1f} | {paired:.1f} ({alone:.1f}) | "
                     f"{pct(r['single'])[0] / paired:.2f}x ({pct(r['single'])[0] / alone:.2f}x) |")
    return "\n".join(lines) + "\n"


NOTES = """
Notes: dense vectors in the corpus are random unit vectors stored under the real
all-MiniLM-L6-v2 fingerprint (query embeddings are real), so dense/hybrid *relevance* is
meaningless here while their latency is not (flat FAISS cost does not depend on values).
The reranker is a tiny random-weight cross-encoder (2 layers, hidden 32): its scores mean
nothing and a real cross-encoder (e.g. MiniLM-L6, 6 layers, hidden 384) costs far more per
passage, so the rerank rows are a lower bound. The HTTP client threads, the Serve proxy,
the ingress and the searcher/embedder/reranker replicas all share the same CPUs, so the
concurrent figures measure a saturated 2-CPU box, not the service alone. Every HTTP
request is a fresh query embedding (QueryEmbedder, batched up to 16 per call). "Paired"
in-process searches run in the driver while the service is up (idle Ray/Serve processes
and cache traffic between processes slow them); "no Ray" is the first table, measured
before Ray started. The overhead ratio is most honest against the paired figure.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="chunks in the synthetic corpus")
    parser.add_argument("--queries", type=int, default=200, help="in-process queries")
    parser.add_argument("--http-queries", type=int, default=100, help="sequential HTTP requests per mode")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-requests", type=int, default=400, help="per mode, concurrent phase")
    parser.add_argument("--max-seconds", type=float, default=20.0, help="per mode, concurrent phase")
    parser.add_argument("--work-dir", default=None, help="where the catalog goes (default: a temp folder)")
    parser.add_argument("--segments", default=None, metavar="COUNTS",
                        help="also measure search over this many delta segments, e.g. 0,1,5")
    parser.add_argument("--segment-docs", type=int, default=20, help="documents each delta segment rewrites")
    parser.add_argument("--no-http", action="store_true", help="skip the Ray Serve measurement")
    parser.add_argument("--segments-only", action="store_true",
                        help="with --segments: only the delta-segment table, written to "
                             "benchmarks/results/query_segments.md")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override on top of conf/local.yaml (repeatable), e.g. search.evidence=lexical")
    args = parser.parse_args()
    if args.segments_only and not args.segments:
        parser.error("--segments-only needs --segments, e.g. --segments 0,1,5")
    run(args)


def run(args) -> None:
    from kb_ray.config import EmbeddingSettings
    from kb_ray.embedding.fingerprint import embedder_fingerprint
    from kb_ray.index import build_index
    from kb_ray.search.tiny_reranker import build_tiny_cross_encoder

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kb_query_bench_"))
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    texts = synthetic_texts(args.n, rng)
    fingerprint = embedder_fingerprint(EmbeddingSettings())
    write_catalog(str(work / "kb"), texts, embedder_fp=fingerprint, rng=rng)
    print(f"catalog: {args.n} chunks written in {time.perf_counter() - started:.1f} s", flush=True)
    reranker_dir = build_tiny_cross_encoder(work / "tiny_cross_encoder")
    config = load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={work / 'kb'}",
                                                                   f"search.rerank_model_path={reranker_dir}",
                                                                   *args.overrides])
    start = time.perf_counter()
    manifest = build_index(config)
    index_s = time.perf_counter() - start
    print(f"index: {manifest.generation_id} ({manifest.rows} chunks, {len(manifest.shards)} shards, "
          f"dense={manifest.spec.get('dense')}) in {index_s:.1f} s", flush=True)
    queries = make_queries(texts, max(args.queries, args.http_queries), rng)
    embedder, searcher = open_searcher(config)
    if args.segments_only:
        segments_only(args, config, searcher, queries, fingerprint=fingerprint, rng=rng, index_s=index_s)
        return
    local = in_process(config, embedder, searcher, queries[:args.queries])
    print("in-process done", flush=True)
    http = {} if args.no_http else over_http(config, searcher, queries[:args.http_queries], clients=args.clients,
                                             max_requests=args.max_requests, max_seconds=args.max_seconds)
    segments = with_segments(config, searcher, queries[:args.queries], args, fingerprint=fingerprint,
                             rng=rng) if args.segments else {}
    corpus = (f"{args.n:,} synthetic chunks in {args.n // CHUNKS_PER_DOC:,} documents (80-180 Zipf words each), "
              f"random unit vectors dim {DIM} under the packaged MiniLM fingerprint; "
              f"{len(manifest.shards)} shards, dense={manifest.spec.get('dense')}, lexical={manifest.lexical_type}, "
              f"candidates={config.search.candidates} per retriever, rerank_candidates={config.search.rerank_candidates}")
    text = render(args, corpus, local, http, index_s) + (render_segments(args, segments) if segments else "") + NOTES
    print(text)
    if args.no_http:  # a quick check: benchmarks/results/query.md keeps the full measurement
        return
    out = REPO / "benchmarks" / "results" / "query.md"
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} (total {time.perf_counter() - started:.0f} s)")
    if not args.no_http:
        import ray

        ray.shutdown()


def segments_only(args, config: KbConfig, searcher, queries: list[str], *, fingerprint: str,
                  rng: np.random.Generator, index_s: float) -> None:
    """``--segments-only``: the delta-segment table alone, with the command and config overrides."""
    segments = with_segments(config, searcher, queries[:args.queries], args, fingerprint=fingerprint, rng=rng)
    head = [f"# Search latency over delta segments ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
            f"Machine: {machine()}", "",
            f"Command: `python benchmarks/query.py --n {args.n} --queries {args.queries} --segments {args.segments} "
            f"--segment-docs {args.segment_docs} --segments-only"
            + "".join(f" --set {o}" for o in args.overrides) + "`", "",
            f"Corpus: {args.n:,} synthetic chunks (benchmarks/query.py), base index built in {index_s:.1f} s; "
            "compaction off for the run. Each count is measured on the same searcher after refreshing "
            "onto the new segments; modes interleaved per query, 5 warm-up queries."]
    text = "\n".join(head) + "\n" + render_segments(args, segments)
    print(text)
    out = REPO / "benchmarks" / "results" / "query_segments.md"
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
