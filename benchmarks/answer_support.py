"""Where should ``answer.support_threshold`` sit? Support of true vs false claims on the dev split.

    python benchmarks/answer_support.py --kb-root KB --dataset benchmarks/realdocs/queries.jsonl --split dev

No index is needed: for every answerable query the chunk holding its gold quote is read
from the catalog and the retrieval's evidence selector picks the passage a hit would
carry (kb_ray/search/evidence.py, hybrid scoring with the packaged MiniLM). Claims, each
scored by ``kb_ray.answer.verify.verify_text`` against that one passage, cited ``[1]``:

* ``verbatim`` (supported): the passage's sentence holding the gold quote.
* ``paraphrase`` (supported): the dataset's hand-written ``answer`` (a person's words).
* ``other_passage`` (unsupported): the verbatim sentence of another query's passage.
* ``other_answer`` (unsupported): another query's hand-written answer.
* ``same_document`` (unsupported): this query's answer cited against another chunk of the
  same document (a near-miss citation: same topic, wrong passage).

Each claim is scored lexically and with the MiniLM cosine; the threshold reported is the
one that maximizes balanced accuracy (mean of the supported and unsupported recalls).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

import numpy as np
import pyarrow.compute as pc

from kb_ray.answer.types import Passage
from kb_ray.answer.verify import split_sentences, verify_text
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.eval.dataset import load_dataset
from kb_ray.eval.resolve import CanonicalTexts, resolve_queries
from kb_ray.eval.split import select_split
from kb_ray.search.evidence import (
    ChunkText,
    best_passage,
    candidate_passages,
    evidence_dict,
    sentence_bounds,
    window_cosines,
)

SUPPORTED = ("verbatim", "paraphrase")


def gold_chunks(catalog: DeltaCatalog, resolution) -> dict[str, tuple[dict, list[dict]]]:
    """query id -> (the chunk holding its first gold span, the other chunks of that version)."""
    versions = sorted({spans[0].version_id for spans in resolution.spans.values() if spans})
    links = catalog.read("version_chunks", columns=["version_id", "chunk_id", "spans", "ordinal"],
                         filter=pc.field("version_id").isin(versions)).to_pylist()
    ids = sorted({row["chunk_id"] for row in links})
    texts = dict(zip(*catalog.read("chunks", columns=["chunk_id", "text"],
                                   filter=pc.field("chunk_id").isin(ids)).to_pydict().values()))
    out = {}
    for qid, spans in resolution.spans.items():
        if not spans:
            continue
        gold = spans[0]
        rows = [{**r, "text": texts[r["chunk_id"]]} for r in links if r["version_id"] == gold.version_id]
        holding = [r for r in rows if any(s["start"] <= gold.start and gold.end <= s["end"] for s in r["spans"])]
        if holding:
            out[qid] = (holding[0], [r for r in rows if r["chunk_id"] != holding[0]["chunk_id"]])
    return out


def passage_of(query: str, row: dict, embed, query_vector) -> Passage:
    chunk = ChunkText(text=row["text"], spans=tuple((s["start"], s["end"]) for s in row["spans"]))
    found = candidate_passages(chunk.text, chunk.spans)  # sentence-embedded evidence, as measured before #38
    cosines = window_cosines([chunk], [found], embed, query_vector)[0] if found else None
    best, signals = best_passage(query, chunk.text, found, cosines=cosines)
    evidence = evidence_dict(chunk, found[best], signals)
    return Passage(n=1, chunk_id=row["chunk_id"], document_id="", version_id=row["version_id"], title=None,
                   uri=None, quote=evidence["quote"], spans=evidence["spans"], pages=[], regions=[])


def gold_sentence(passage: Passage, quote: str) -> str:
    folded = " ".join(quote.split())[:40]
    for start, end in sentence_bounds(passage.quote):
        if folded[:20] in " ".join(passage.quote[start:end].split()):
            return passage.quote[start:end]
    start, end = sentence_bounds(passage.quote)[0]
    return passage.quote[start:end]


def claims(cases: list[dict], rng: random.Random) -> list[tuple[str, str, Passage]]:
    """(kind, claim, passage) for every case; negatives drawn from other cases."""
    out = []
    for i, case in enumerate(cases):
        others = [c for j, c in enumerate(cases) if j != i and c["doc"] != case["doc"]]
        other = rng.choice(others)
        out += [("verbatim", case["sentence"], case["passage"]), ("paraphrase", case["answer"], case["passage"]),
                ("other_passage", other["sentence"], case["passage"]), ("other_answer", other["answer"], case["passage"])]
        if case["neighbour"] is not None:
            out.append(("same_document", case["answer"], case["neighbour"]))
    return out


def best_threshold(scores: dict[str, list[float]]) -> tuple[float, float]:
    good = [s for kind in SUPPORTED for s in scores[kind]]
    bad = [s for kind, values in scores.items() if kind not in SUPPORTED for s in values]
    best = (0.0, 0.0)
    for threshold in np.round(np.arange(0.05, 0.96, 0.01), 2):
        accuracy = (np.mean([s >= threshold for s in good]) + np.mean([s < threshold for s in bad])) / 2
        if accuracy > best[1] + 1e-9:
            best = (float(threshold), float(accuracy))
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kb-root", required=True)
    parser.add_argument("--dataset", default="benchmarks/realdocs/queries.jsonl")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args()
    from kb_ray.embedding.text import TextEmbedder

    embedder = TextEmbedder(num_threads=2)
    catalog = DeltaCatalog.open(args.kb_root, create=False)
    queries = [q for q in select_split(load_dataset(args.dataset), dataset=args.dataset, split=args.split)
               if q.answerable]
    resolution = resolve_queries(queries, CanonicalTexts(catalog))
    chunks = gold_chunks(catalog, resolution)
    rng = random.Random(args.seed)
    cases = []
    for query in queries:
        if query.id not in chunks:
            continue
        row, rest = chunks[query.id]
        vector = embedder.embed_query(query.query)
        passage = passage_of(query.query, row, embedder.embed_texts, vector)
        neighbour = passage_of(query.query, rng.choice(rest), embedder.embed_texts, vector) if rest else None
        cases.append({"doc": query.relevant[0].doc, "answer": query.answer, "passage": passage,
                      "sentence": gold_sentence(passage, query.relevant[0].quote), "neighbour": neighbour})
    report = {"dataset": args.dataset, "split": args.split, "queries": len(queries), "cases": len(cases)}
    for name, embed in (("lexical", None), ("lexical+minilm", embedder.embed_texts)):
        scores: dict[str, list[float]] = {}
        for kind, claim, passage in claims(cases, random.Random(args.seed)):
            cited = " ".join(f"{part} [1]" for part in split_sentences(claim))  # every sentence cites [1]
            sentences = verify_text(cited, [passage], threshold=0.0, embed=embed)
            scores.setdefault(kind, []).append(float(np.mean([s.support for s in sentences])) if sentences else 0.0)
        threshold, accuracy = best_threshold(scores)
        report[name] = {"threshold": threshold, "balanced_accuracy": round(accuracy, 3), "by_kind": {
            kind: {"n": len(v), "median": round(statistics.median(v), 3),
                   "share_at_or_above": round(float(np.mean([s >= threshold for s in v])), 3)}
            for kind, v in scores.items()}}
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
