"""Quote-labelled quality: a hit is relevant when its text contains one of the case's quotes.

* golden: ``tests/index_fixtures.py``'s ``GOLDEN_QUERIES`` (query, golden file, one quote).
* queries.jsonl: ``golden/queries.jsonl`` when it exists (``relevant[].quote``).

Recall@5: share of a case's quotes found in the top 5 hits, averaged over cases.
nDCG@10: binary gains; the ideal ranking has min(10, chunks in the corpus containing a quote)
relevant hits. A case whose quotes occur in no chunk is left out and counted.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from harness import ROOT

QUERIES_JSONL = ROOT / "golden" / "queries.jsonl"


@dataclass(frozen=True)
class Case:
    query: str
    quotes: tuple[str, ...]


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def golden_cases() -> list[Case]:
    from tests.index_fixtures import GOLDEN_QUERIES

    return [Case(query, (quote,)) for query, _file, quote in GOLDEN_QUERIES]


def jsonl_cases() -> list[Case]:
    cases = []
    for line in QUERIES_JSONL.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        quotes = tuple(r["quote"] for r in record.get("relevant") or [] if r.get("quote"))
        if record.get("query") and quotes:
            cases.append(Case(record["query"], quotes))
    return cases


def labelled_sets(corpus_texts: list[str]) -> dict[str, tuple[list[Case], list[str]]]:
    texts = [normalize(t) for t in corpus_texts]
    sets = {"golden": (golden_cases(), texts)}
    if QUERIES_JSONL.exists():
        sets["queries.jsonl"] = (jsonl_cases(), texts)
    return sets


def _found(text: str, quotes: tuple[str, ...]) -> set[str]:
    return {q for q in quotes if normalize(q) in text}


def evaluate(search: Callable[[str], list[str]], cases: list[Case], corpus: list[str]) -> dict[str, float]:
    recalls, ndcgs, skipped = [], [], 0
    for case in cases:
        relevant_in_corpus = sum(1 for text in corpus if _found(text, case.quotes))
        if not relevant_in_corpus:
            skipped += 1
            continue
        hits = [normalize(t) for t in search(case.query)]
        top5 = set().union(*(_found(t, case.quotes) for t in hits[:5])) if hits else set()
        recalls.append(len(top5) / len(case.quotes))
        dcg = sum(1 / math.log2(rank + 2) for rank, t in enumerate(hits[:10]) if _found(t, case.quotes))
        ideal = sum(1 / math.log2(rank + 2) for rank in range(min(10, relevant_in_corpus)))
        ndcgs.append(dcg / ideal)
    n = len(recalls)
    return {"recall5": sum(recalls) / n if n else float("nan"), "ndcg10": sum(ndcgs) / n if n else float("nan"),
            "cases": n, "skipped": skipped}
