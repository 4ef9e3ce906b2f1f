"""Run an eval dataset through the in-process search core, once per retrieval mode."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kb_ray.config import KbConfig
from kb_ray.eval.dataset import EvalQuery
from kb_ray.eval.metrics import (
    RANKING_MEASURES,
    all_quotes_found,
    evidence_scores,
    quote_matches,
    ranking_metrics,
    span_scores,
    token_offsets,
)
from kb_ray.eval.naive import NaiveRetriever, label_by_gold
from kb_ray.eval.resolve import (
    CanonicalTexts,
    GoldSpan,
    QuoteResolutionError,
    Resolution,
    chunk_spans,
    relevant_chunks,
    resolve_queries,
)

logger = logging.getLogger(__name__)

EVAL_MODES = ("dense", "lexical", "hybrid", "hybrid+rerank", "page", "hybrid+page", "tree", "graph")
DEFAULT_MODES = ("dense", "lexical", "hybrid", "hybrid+rerank")
PAGE_MODES = ("page", "hybrid+page")
SPAN_K = 5  # top hits whose spans are scored against the gold spans


@dataclass
class QueryOutcome:
    id: str
    kind: str
    answerable: bool
    chunk_ids: list[str]
    relevant: list[str]
    metrics: dict[str, float] = field(default_factory=dict)
    top_scores: dict[str, float | None] = field(default_factory=dict)  # see _top_scores
    top_relevant: bool | None = None
    page_ok: bool | None = None  # top hit's pages contain a gold page (gold page known)
    quotes_checked: int = 0
    quotes_bad: int = 0
    latency_ms: float = 0.0
    confidence: float | None = None  # best hit confidence (kb_ray/search/confidence.py)
    abstain: bool | None = None  # the searcher's abstain flag


@dataclass
class ModeResult:
    mode: str
    available: bool
    note: str = ""
    queries: list[QueryOutcome] = field(default_factory=list)


@dataclass
class EvalResult:
    dataset: str
    k: int
    generation: str
    modes: list[ModeResult]
    quotes: dict[str, Any]
    split: str = "all"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Labels:
    gold: dict[str, list[GoldSpan]]
    qrels: dict[str, set[str]]


def run_eval(config: KbConfig, queries: list[EvalQuery], *, modes: tuple[str, ...] = DEFAULT_MODES, k: int = 20,
             searcher: Any = None, dataset: str = "", naive: bool = True, split: str = "all",
             naive_cache: str | None = None, contextual: Any = None) -> EvalResult:
    """Evaluate ``queries`` in each mode; quotes that do not resolve raise before any search.

    With ``naive``, the naive reference (:mod:`kb_ray.eval.naive`) runs after the kb-ray
    modes on the same catalog, as ``naive-<mode>`` for each of dense, lexical and hybrid
    that an available requested mode uses (``hybrid+rerank`` counts as hybrid). ``contextual``, a
    searcher over a contextual generation of the same catalog (docs/contextual.md), adds its
    ``hybrid`` mode as mode ``contextual``, labelled with the same chunks."""
    if searcher is None:
        from kb_ray.search.searcher import HybridSearcher

        searcher = HybridSearcher.open(config)
    texts = CanonicalTexts(searcher.catalog)
    resolution = resolve_queries(queries, texts)
    if resolution.unresolved:
        raise QuoteResolutionError("gold quotes that do not resolve:\n  " + "\n  ".join(resolution.unresolved))
    labels = _labels(searcher, resolution)
    results = [_run_mode(searcher, mode, queries, labels, texts, k=k) for mode in modes]
    if naive:  # only next to kb-ray modes that ran
        results += _run_naive(searcher, tuple(r.mode for r in results if r.available), queries, labels, texts, k=k,
                              cache_dir=naive_cache)
    if contextual is not None:
        scored = _run_mode(contextual, "hybrid", queries, labels, texts, k=k)
        results.append(ModeResult(mode="contextual", available=scored.available, note=scored.note,
                                  queries=scored.queries))
    uncovered = [q.id for q in queries if q.answerable and not labels.qrels.get(q.id)]
    return EvalResult(dataset=dataset, k=k, generation=searcher.generation, modes=results,
                      quotes={**_quote_summary(resolution), "no_chunk_covers": uncovered}, split=split)


def _labels(searcher: Any, resolution: Resolution) -> _Labels:
    versions = [g.version_id for spans in resolution.spans.values() for g in spans]
    chunks = chunk_spans(searcher.catalog, versions)
    qrels = {qid: relevant_chunks(spans, chunks) for qid, spans in resolution.spans.items()}
    return _Labels(gold=resolution.spans, qrels=qrels)


def _quote_summary(resolution: Resolution) -> dict[str, Any]:
    return {"resolved": sum(len(spans) for spans in resolution.spans.values()),
            "ambiguous": resolution.ambiguous, "whitespace_normalized": resolution.normalized}


def unavailable_reason(mode: str, searcher: Any) -> str | None:
    """Why ``mode`` cannot run with this searcher, or None when it can."""
    if mode not in EVAL_MODES:
        return f"unknown mode {mode!r}; use {', '.join(EVAL_MODES)}"
    if mode in PAGE_MODES and not getattr(searcher, "has_page_index", False):
        return "not available: the generation has no page index (ingest with pages.enabled=true, then build-index)"
    if mode == "tree" and not getattr(searcher, "has_tree_index", False):
        return "not available: the generation has no section tree (build-index with --set index.tree=true)"
    if mode == "graph" and not getattr(searcher, "has_graph_index", False):
        return "not available: the generation has no concept graph (build-index with --set index.graph=true)"
    if mode == "hybrid+rerank" and getattr(searcher, "reranker", None) is None:
        return "not available: no reranker configured (set search.rerank_model_path or search.rerank_endpoint)"
    return None


def _run_mode(searcher: Any, mode: str, queries: list[EvalQuery], labels: _Labels, texts: CanonicalTexts,
              *, k: int) -> ModeResult:
    reason = unavailable_reason(mode, searcher)
    if reason:
        logger.warning("eval: skipping mode %s: %s", mode, reason)
        return ModeResult(mode=mode, available=False, note=reason)
    base, rerank = ("hybrid", True) if mode == "hybrid+rerank" else (mode, False)

    def search(query: EvalQuery) -> tuple[list[dict], float, bool | None]:
        result = searcher.search(query.query, k=k, mode=base, rerank=rerank)
        return result.hits, result.timing_ms.get("total", 0.0), getattr(result, "abstain", None)

    return _score_mode(mode, search, queries, labels, texts)


def naive_modes_for(modes: tuple[str, ...]) -> tuple[str, ...]:
    """The naive reference modes that mirror ``modes`` (in dense, lexical, hybrid order)."""
    bases = {"hybrid" if m == "hybrid+rerank" else m for m in modes}
    return tuple(f"naive-{base}" for base in ("dense", "lexical", "hybrid") if base in bases)


def _run_naive(searcher: Any, modes: tuple[str, ...], queries: list[EvalQuery], labels: _Labels,
               texts: CanonicalTexts, *, k: int, cache_dir: str | None = None) -> list[ModeResult]:
    naive_modes = naive_modes_for(modes)
    if not naive_modes:
        return []
    started = time.perf_counter()
    # the searcher's own query embedder: the naive windows are embedded with the same model
    naive = NaiveRetriever.from_catalog(searcher.catalog, searcher._get_embedder(), cache_dir=cache_dir)
    logger.info("eval: naive reference built in %.1f s", time.perf_counter() - started)
    naive_labels = _Labels(gold=labels.gold, qrels={qid: naive.qrels(g) for qid, g in labels.gold.items()})

    def searcher_for(mode: str):
        def search(query: EvalQuery) -> tuple[list[dict], float, None]:
            t0 = time.perf_counter()
            hits = naive.search(query.query, k=k, mode=mode)
            elapsed = (time.perf_counter() - t0) * 1000.0
            return label_by_gold(hits, labels.gold.get(query.id, [])), elapsed, None
        return search

    return [_score_mode(mode, searcher_for(mode), queries, naive_labels, texts) for mode in naive_modes]


def _score_mode(mode: str, search, queries: list[EvalQuery], labels: _Labels, texts: CanonicalTexts) -> ModeResult:
    outcomes = []
    for n, query in enumerate(queries, 1):
        hits, latency, abstain = search(query)
        outcomes.append(_outcome(query, hits, labels, texts, latency=latency))
        outcomes[-1].abstain = abstain
        if n % 25 == 0:
            logger.info("eval %s: %d/%d queries", mode, n, len(queries))
    _add_ranking_metrics(outcomes, labels.qrels)
    return ModeResult(mode=mode, available=True, queries=outcomes)


def _outcome(query: EvalQuery, hits: list[dict], labels: _Labels, texts: CanonicalTexts, *,
             latency: float) -> QueryOutcome:
    relevant = labels.qrels.get(query.id, set())
    outcome = QueryOutcome(id=query.id, kind=query.kind, answerable=query.answerable,
                           chunk_ids=[h["chunk_id"] for h in hits], relevant=sorted(relevant), latency_ms=latency)
    quoted = [h for h in hits if h.get("quote") is not None]  # generated figure descriptions quote nothing
    outcome.quotes_checked = len(quoted)
    outcome.quotes_bad = sum(not quote_matches(h, texts.text(h["version_id"])) for h in quoted)
    if hits:
        outcome.top_scores = _top_scores(hits)
        outcome.top_relevant = hits[0]["chunk_id"] in relevant if query.answerable else None
        confidences = [h["confidence"] for h in hits if h.get("confidence") is not None]
        outcome.confidence = max(confidences) if confidences else None
    gold = labels.gold.get(query.id, [])
    if query.answerable:
        outcome.metrics.update(_span_metrics(hits[:SPAN_K], gold, texts))
        outcome.metrics.update(evidence_scores(hits, [(g.version_id, g.start, g.end, g.page) for g in gold], relevant))
        outcome.metrics.update(all_quotes_found(hits, _quotes(gold)))
        outcome.page_ok = _page_ok(hits, gold)
    return outcome


def _quotes(gold: list[GoldSpan]) -> dict[int, list[tuple[str, int, int]]]:
    """Gold spans grouped by the quote they come from (an ambiguous quote has several)."""
    quotes: dict[int, list[tuple[str, int, int]]] = {}
    for g in gold:
        quotes.setdefault(g.quote, []).append((g.version_id, g.start, g.end))
    return quotes


def _top_scores(hits: list[dict]) -> dict[str, float | None]:
    """Abstain signals: the returned score of hit 1, and the best raw dense (cosine) and
    lexical (BM25) score among the hits (the fused RRF score only reflects ranks)."""
    def best(name: str) -> float | None:
        values = [h["scores"][name] for h in hits if (h.get("scores") or {}).get(name) is not None]
        return float(max(values)) if values else None

    return {"score": float(hits[0]["score"]), "dense": best("dense"), "lexical": best("lexical")}


def _span_metrics(hits: list[dict], gold: list[GoldSpan], texts: CanonicalTexts) -> dict[str, float]:
    retrieved: dict[str, list] = {}
    for hit in hits:
        retrieved.setdefault(hit["version_id"], []).extend(tuple(s) for s in hit["spans"])
    wanted: dict[str, list] = {}
    for g in gold:
        wanted.setdefault(g.version_id, []).append((g.start, g.end))
    offsets = {vid: token_offsets(texts.text(vid)) for vid in set(retrieved) | set(wanted)}
    return span_scores(retrieved, wanted, offsets)


def _page_ok(hits: list[dict], gold: list[GoldSpan]) -> bool | None:
    pages = {g.page for g in gold if g.page is not None}
    if not pages:
        return None
    return bool(hits) and bool(pages & set(hits[0].get("pages") or []))


def _add_ranking_metrics(outcomes: list[QueryOutcome], qrels: dict[str, set[str]]) -> None:
    answerable = {o.id: qrels.get(o.id, set()) for o in outcomes if o.answerable}
    per_query = ranking_metrics(answerable, {o.id: o.chunk_ids for o in outcomes if o.answerable})
    for outcome in outcomes:
        if outcome.answerable:  # no chunk overlaps the gold spans: counts as a miss
            outcome.metrics.update(per_query.get(outcome.id, dict.fromkeys(RANKING_MEASURES, 0.0)))
