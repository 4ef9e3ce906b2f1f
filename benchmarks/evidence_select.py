"""Which evidence scorer picks the gold quote best? Interleaved comparison on one query set.

    python benchmarks/evidence_select.py --config conf/local.yaml --set kb_root=KB --dataset DEV.jsonl

For every answerable query, the first relevant chunk among the top ``--k`` hybrid hits is
given to each scorer in turn (same chunk, same query vector), and the chosen passage is
judged against the gold spans: overlap, containment, page (gold page known), length.
Scorers: ``lexical`` (query-word coverage), ``dense`` (passage cosine), ``hybrid`` (both), ``hybrid_lex2`` (coverage weighted 2),
each with the window margin of kb_ray/search/evidence.py, plus ``whole`` (the chunk: the
baseline a hit's quote gives today). ``late_lex2``: coverage weighted 2 plus the cosine of
sentence vectors pooled from one MiniLM pass over the chunk's embedded text (heading path +
text; late chunking: what ingest could store so that query time is a lookup, issue #12).
Only the dev split should drive a choice.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from kb_ray.search import evidence as ev

SCORERS = {"lexical": (1.0, 0.0), "dense": (0.0, 1.0), "hybrid": (1.0, 1.0), "hybrid_lex2": (2.0, 1.0),
           "late_lex2": (2.0, 1.0)}


class LateChunkVectors:
    """Sentence vectors pooled from the token states of one pass over a chunk's embedded text."""

    def __init__(self, model_path) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.model = AutoModel.from_pretrained(str(model_path)).eval()

    def cosines(self, chunk, passages, heading_path, query_vector):
        prefix = " > ".join(heading_path) + "\n"  # DEFAULT_TEXT_TEMPLATE: heading path, newline, text
        encoded = self.tokenizer(prefix + chunk.text, return_offsets_mapping=True, truncation=True,
                                 max_length=256, return_tensors="pt")
        offsets = encoded.pop("offset_mapping")[0].numpy() - len(prefix)
        with self.torch.no_grad():
            states = self.model(**encoded).last_hidden_state[0].numpy()
        vectors = {}
        for p in passages:
            if p.sentences == 1:
                inside = (offsets[:, 0] >= p.start) & (offsets[:, 1] <= p.end) & (offsets[:, 1] > offsets[:, 0])
                v = states[inside].mean(axis=0) if inside.any() else np.zeros(states.shape[1], np.float32)
                vectors[(p.start, p.end)] = v / max(float(np.linalg.norm(v)), 1e-9)
        rows = []
        for p in passages:
            mean = np.mean([v for (a, b), v in vectors.items() if p.start <= a and b <= p.end], axis=0)
            rows.append(float(mean @ query_vector / max(float(np.linalg.norm(mean)), 1e-9)))
        return np.array(rows)


def judge(spans, pages, gold) -> dict[str, float]:
    overlap = any(s < ge and gs < e for s, e in spans for gs, ge, _ in gold)
    contains = any(s <= gs and ge <= e for s, e in spans for gs, ge, _ in gold)
    gold_pages = {p for _, _, p in gold if p is not None}
    out = {"overlap": float(overlap), "contains": float(contains), "chars": float(sum(e - s for s, e in spans))}
    if gold_pages:
        out["page"] = float(bool(gold_pages & set(pages)))
    return out


def choose(query, chunk, passages, cosines, weights, margin):
    lexical, dense = weights
    saved = ev.WINDOW_MARGIN
    ev.WINDOW_MARGIN = margin
    try:
        index, _ = ev.best_passage(query, chunk.text, passages, cosines=cosines if dense else None,
                                   lexical_weight=lexical, dense_weight=dense)
    finally:
        ev.WINDOW_MARGIN = saved
    return ev.evidence_dict(chunk, passages[index], {})


def main() -> int:
    from kb_ray.config import load_config
    from kb_ray.eval import load_dataset
    from kb_ray.eval.resolve import CanonicalTexts, chunk_spans, relevant_chunks, resolve_queries
    from kb_ray.search.hits import Candidate, chunk_text
    from kb_ray.search.searcher import HybridSearcher

    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--margins", default="0,0.03,0.08")
    parser.add_argument("--show-misses", default=None, metavar="SCORER@MARGIN")
    args = parser.parse_args()
    from kb_ray.embedding.model_files import resolve_model_path

    config = load_config(args.config, overrides=[*args.overrides, "search.evidence=none"])
    searcher = HybridSearcher.open(config)
    embedder = searcher._get_embedder()
    late = LateChunkVectors(resolve_model_path(config.embedding.model_path))
    queries = [q for q in load_dataset(args.dataset) if q.answerable]
    resolution = resolve_queries(queries, CanonicalTexts(searcher.catalog))
    chunks = chunk_spans(searcher.catalog, [g.version_id for s in resolution.spans.values() for g in s])
    where = {cid: (n, row) for n, shard in enumerate(searcher._loaded.shards) for row, cid in enumerate(shard.chunk_ids)}
    results: dict[str, list[dict]] = {}
    seconds = {"lexical": 0.0, "embed": 0.0}
    margins = [float(m) for m in args.margins.split(",")]
    for query in queries:
        gold = resolution.spans[query.id]
        relevant = relevant_chunks(gold, chunks)
        hits = searcher.search(query.query, k=args.k).hits
        first = next((h for h in hits if h["chunk_id"] in relevant), None)
        if first is None:
            continue
        shard, row = where[first["chunk_id"]]
        chunk = chunk_text(Candidate(first["chunk_id"], shard, row), searcher._loaded.shards[shard])
        mine = [(g.start, g.end, g.page) for g in gold if g.version_id == first["version_id"]]
        passages = ev.candidate_passages(chunk.text, chunk.spans)
        started = time.perf_counter()
        vector = embedder.embed_query(query.query)
        cosines = ev.window_cosines([chunk], [passages], embedder.embed_texts, vector)[0]
        seconds["embed"] += time.perf_counter() - started
        late_cosines = late.cosines(chunk, passages, first.get("heading_path") or [], vector)
        results.setdefault("whole", []).append(judge(first["spans"], first["pages"], mine))
        for name, weights in SCORERS.items():
            for margin in margins:
                started = time.perf_counter()
                found = choose(query.query, chunk, passages, late_cosines if name.startswith("late") else cosines,
                               weights, margin)
                if name == "lexical":
                    seconds["lexical"] += time.perf_counter() - started
                verdict = judge(found["spans"], found["pages"], mine)
                results.setdefault(f"{name}@{margin}", []).append(verdict)
                if args.show_misses == f"{name}@{margin}" and not verdict["overlap"]:
                    gold_text = " | ".join(g.quote for g in query.relevant)
                    print(f"MISS {query.id}: {query.query}\n  gold: {gold_text}\n  got:  {found['quote'][:200]}")
    summary = {name: {key: round(statistics.mean(r[key] for r in rows if key in r), 3)
                      for key in ("overlap", "contains", "page", "chars") if any(key in r for r in rows)}
               | {"queries": len(rows)} for name, rows in results.items()}
    print(json.dumps({"dataset": args.dataset, "k": args.k, "seconds": {k: round(v, 2) for k, v in seconds.items()}}))
    for name, row in summary.items():
        print(f"{name:20s} " + "  ".join(f"{key} {value}" for key, value in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
