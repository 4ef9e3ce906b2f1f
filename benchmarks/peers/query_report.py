"""The markdown section ``query_lancedb.py`` writes: one table of figures and ratios, notes."""

from __future__ import annotations


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "—"


def query_section(rows: list[dict], sets: dict, context: dict) -> str:
    lance = rows[0]
    set_names = list(sets)
    head = ["system", "p50 ms (1 client)", "p95 ms (1 client)", "QPS (8 clients)"]
    head += [f"{m} {s}" for s in set_names for m in ("Recall@5", "nDCG@10")]
    head += ["p50 ÷ LanceDB", "QPS ÷ LanceDB"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        cells = [row["name"], f"{row['p50']:.1f}", f"{row['p95']:.1f}", f"{row['qps8']:.1f}"]
        for s in set_names:
            cells += [f"{row[s]['recall5']:.3f}", f"{row[s]['ndcg10']:.3f}"]
        cells += [_ratio(row["p50"], lance["p50"]), _ratio(row["qps8"], lance["qps8"])]
        lines.append("| " + " | ".join(cells) + " |")
    counts = "; ".join(f"{s}: {rows[0][s]['cases']} queries scored"
                       + (f", {rows[0][s]['skipped']} left out (quote in no chunk)" if rows[0][s]["skipped"] else "")
                       for s in set_names)
    return (f"Data: golden/sources ingested with conf/local.yaml (structural chunks), {context['chunks']} active "
            f"chunks with their stored all-MiniLM-L6-v2 vectors, exported from the catalog (`active_chunks` ⋈ "
            f"`embeddings`) into LanceDB. Index build: kb-ray `build_index` {context['kb_build_s']:.1f} s, LanceDB "
            f"table + FTS index {context['lance_build_s']:.1f} s. Latency: {context['queries']} golden queries; "
            f"{counts}.\n\n" + "\n".join(lines) + "\n\n" + NOTES)


NOTES = """Notes:
- Every system embeds the query with the same `TextEmbedder` (packaged all-MiniLM-L6-v2, 1 torch
  thread); in-process, one embedder instance behind a lock is shared by LanceDB and kb-ray (HF
  tokenizers are not safe to enter from two threads). Over HTTP, kb-ray's Serve `QueryEmbedder`
  (same model, 1 thread, `serve.batch` up to 16) embeds. Latency includes query embedding.
- LanceDB: embedded (`lancedb.connect(dir)`), documented defaults: `create_fts_index("text")`
  (native FTS, `base_tokenizer="simple"`, lower-case, stemming, English stop words, ASCII
  folding), no ANN index (exhaustive vector search at this size; default L2 distance, same order
  as cosine on these normalized vectors), `search(query_type="hybrid").vector(v).text(q)
  .rerank(RRFReranker())` (default `K=60`), `limit(10)`.
- kb-ray: `HybridSearcher.open(config).search(q, k=10, mode="hybrid")` — flat FAISS + bm25s over 2
  shards, 100 candidates per retriever, RRF k=60, hydration gate and citation hydration per hit;
  over HTTP the same through Ray Serve (`start_service`, loopback) with httpx, one client per thread.
- p50/p95: sequential requests after 5 warm-up queries; QPS: a fixed number of requests spread
  over 8 client threads. Ratios are system ÷ LanceDB (p50 > 1: slower than LanceDB; QPS > 1:
  more throughput than LanceDB).
- Quality differences come from ranking alone (same chunks, same vectors): LanceDB's hybrid
  fuses its vector and FTS top-`limit` lists, kb-ray fuses top-100 lists; lexical scorers differ
  (LanceDB's BM25 with stemming and stop words vs bm25s).
"""
