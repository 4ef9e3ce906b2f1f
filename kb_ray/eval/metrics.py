"""Eval metrics. Ranking metrics come from ``ir-measures`` (trec_eval's implementation via
pytrec_eval); span, citation and score-distribution metrics are small and local.

Relevance is binary (grade 1): a chunk is relevant to a query if one of its spans overlaps
a gold quote span. Recall@k is the fraction of a query's relevant chunks in the top k
(a multi-part question with quotes in two chunks needs both for recall 1), so a question
whose second quote sits in a chunk that also holds the first looks complete with one hit,
and one whose first quote spans two chunks looks half-found although one passage was never
reached. ``all@k`` (:func:`all_quotes_found`) asks the question per *quote*: 1 when every
gold quote of the query overlaps a hit in the top k, else 0 — what a multi-hop question needs.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence

Span = tuple[int, int]
# our name -> ir-measures name (trec_eval: recall_k, recip_rank, ndcg_cut_10)
RANKING_MEASURES = {"recall@1": "R@1", "recall@5": "R@5", "recall@10": "R@10", "recall@20": "R@20",
                    "mrr": "RR", "ndcg@10": "nDCG@10"}
ALL_QUOTES_K = {"all@5": 5, "all@10": 10, "all@20": 20}
_TOKEN = re.compile(r"\w+")


def ranking_metrics(qrels: Mapping[str, set[str]], run: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Per query with at least one relevant chunk: Recall@1/5/10/20, MRR, nDCG@10.

    ``run`` lists chunk ids best first; a query without hits (or missing from ``run``)
    scores 0 on everything instead of silently dropping out of the average."""
    ir_measures = _ir_measures()
    judged = {qid: docs for qid, docs in qrels.items() if docs}
    per_query = {qid: dict.fromkeys(RANKING_MEASURES, 0.0) for qid in judged}
    qrel_rows = [ir_measures.Qrel(qid, doc, 1) for qid, docs in judged.items() for doc in sorted(docs)]
    run_rows = [ir_measures.ScoredDoc(qid, doc, float(len(ranked) - rank))
                for qid, ranked in run.items() if qid in judged for rank, doc in enumerate(_unique(ranked))]
    measures = {name: ir_measures.parse_measure(spec) for name, spec in RANKING_MEASURES.items()}
    names = {str(measure): name for name, measure in measures.items()}
    for metric in ir_measures.iter_calc(list(measures.values()), qrel_rows, run_rows):
        per_query[metric.query_id][names[str(metric.measure)]] = float(metric.value)
    return per_query


def all_quotes_found(hits: Sequence[Mapping], quotes: Mapping[int, Sequence[tuple[str, int, int]]],
                     ks: Mapping[str, int] = ALL_QUOTES_K) -> dict[str, float]:
    """``all@k``: 1.0 when every gold quote overlaps the spans of at least one of the top k hits.

    ``quotes`` maps a quote's index to its occurrences ``(version_id, start, end)`` (one, unless
    the quote is ambiguous: any occurrence counts); a hit is ``{"version_id", "spans"}``. Hits
    are taken in order, duplicates included, as the searcher returned them."""
    if not quotes:
        return {}
    first: dict[int, int] = {}  # quote index -> rank (0-based) of the first hit that overlaps it
    for rank, hit in enumerate(hits):
        spans = [tuple(s) for s in hit.get("spans") or []]
        for index, occurrences in quotes.items():
            if index not in first and any(vid == hit.get("version_id") and s < end and start < e
                                          for vid, start, end in occurrences for s, e in spans):
                first[index] = rank
    return {name: float(len(first) == len(quotes) and max(first.values()) < k) for name, k in ks.items()}


def _ir_measures():
    try:
        import ir_measures
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("ranking metrics need ir-measures: pip install 'kb-ray[eval]' "
                          "(or pip install ir-measures)") from exc
    return ir_measures


def _unique(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def token_offsets(text: str) -> tuple[list[int], list[int]]:
    """Start and end offsets of the word tokens (``\\w+``, Unicode-aware) of ``text``."""
    matches = list(_TOKEN.finditer(text))
    return [m.start() for m in matches], [m.end() for m in matches]


def tokens_in(offsets: tuple[list[int], list[int]], spans: Iterable[Span]) -> set[int]:
    """Indexes of the tokens that overlap any of ``spans``."""
    starts, ends = offsets
    found: set[int] = set()
    for start, end in spans:
        i = bisect.bisect_right(ends, start)
        while i < len(starts) and starts[i] < end:
            found.add(i)
            i += 1
    return found


def span_scores(retrieved: Mapping[str, list[Span]], gold: Mapping[str, list[Span]],
                offsets: Mapping[str, tuple[list[int], list[int]]]) -> dict[str, float]:
    """Token-level precision, recall and IoU of retrieved spans against gold spans.

    Both sides map version id -> spans; tokens are counted once even if spans overlap."""
    got = {(vid, t) for vid, spans in retrieved.items() for t in tokens_in(offsets[vid], spans)}
    want = {(vid, t) for vid, spans in gold.items() for t in tokens_in(offsets[vid], spans)}
    both = len(got & want)
    return {"span_precision": both / len(got) if got else 0.0,
            "span_recall": both / len(want) if want else 0.0,
            "span_iou": both / len(got | want) if got | want else 0.0}


def quote_matches(hit: Mapping, canonical: str) -> bool:
    """A hit's quote is exactly the canonical text at its spans (joined by newlines)."""
    return hit.get("quote") == "\n".join(canonical[s:e] for s, e in hit.get("spans") or [])


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def distribution(values: Iterable[float]) -> dict[str, float | int | None]:
    values = sorted(values)
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(values), "min": values[0], "median": statistics.median(values), "max": values[-1]}


def best_threshold(answerable: Sequence[float], unanswerable: Sequence[float]) -> dict[str, float | None]:
    """The top-hit score threshold (answer if score >= t) that best separates the two sets."""
    if not answerable or not unanswerable:
        return {"threshold": None, "accuracy": None}
    total = len(answerable) + len(unanswerable)
    best = (-1.0, None)
    for t in sorted(set(answerable) | set(unanswerable) | {float("inf")}):
        correct = sum(s >= t for s in answerable) + sum(s < t for s in unanswerable)
        if correct / total > best[0]:
            best = (correct / total, t)
    return {"threshold": None if best[1] == float("inf") else best[1], "accuracy": best[0]}


def evidence_scores(hits: Sequence[Mapping], gold: Sequence[tuple[str, int, int, int | None]],
                    relevant: set[str]) -> dict[str, float]:
    """Does the evidence passage point at the gold quote? ``gold`` is (version_id, start, end, page).

    ``evidence_overlap`` / ``evidence_contains`` / ``evidence_page`` judge the evidence of the
    first relevant hit (selection inside a chunk, apart from ranking; absent when no relevant
    hit came back, ``evidence_page`` also when no gold page is known); ``evidence@1`` judges
    hit 1's evidence, ranking errors included."""
    def judge(hit: Mapping) -> tuple[bool, bool, bool | None]:
        evidence = hit.get("evidence") or {}
        spans = [tuple(s) for s in evidence.get("spans") or []]
        mine = [g for g in gold if g[0] == hit.get("version_id")]
        overlap = any(s < ge and gs < e for s, e in spans for _, gs, ge, _ in mine)
        contains = any(s <= gs and ge <= e for s, e in spans for _, gs, ge, _ in mine)
        pages = {g[3] for g in gold if g[3] is not None}
        page = bool(pages & set(evidence.get("pages") or [])) if pages else None
        return overlap, contains, page

    out: dict[str, float] = {}
    if hits:
        out["evidence@1"] = float(judge(hits[0])[0])
    first = next((h for h in hits if h.get("chunk_id") in relevant), None)
    if first is not None:
        overlap, contains, page = judge(first)
        out.update({"evidence_overlap": float(overlap), "evidence_contains": float(contains)})
        if page is not None:
            out["evidence_page"] = float(page)
    return out


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """Probability that a positive scores above a negative (ties count half)."""
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def abstain_scores(abstained: Sequence[bool], answerable: Sequence[bool]) -> dict[str, float | int | None]:
    """Precision and recall of ``abstain`` as a detector of no-answer questions."""
    flagged = list(abstained)
    true_pos = sum(a and not ok for a, ok in zip(abstained, answerable))
    no_answer = sum(not ok for ok in answerable)
    return {"abstained": sum(flagged), "no_answer": no_answer,
            "precision": true_pos / sum(flagged) if sum(flagged) else None,
            "recall": true_pos / no_answer if no_answer else None,
            "answerable_abstained": sum(a and ok for a, ok in zip(abstained, answerable))}
