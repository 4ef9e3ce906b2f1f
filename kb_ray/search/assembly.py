"""What a hydrated hit gains after ranking: evidence, confidence and (asked for) context.

:class:`HitAssembler` is called by ``HybridSearcher.search`` on the top ``max(k,
search.confidence_rerank)`` hits and never reorders them; ``resort_by_confidence`` may (off
by default: it lost on the realdocs dev and test splits). Evidence
(kb_ray/search/evidence.py) is scored by query-word coverage (``search.evidence = "lexical"``,
the default) and, with ``"hybrid"``, also by the cosine to the query of the dense vectors the
index stores for the first ``search.evidence_dense_hits`` hits (their passages', read back
from FAISS: nothing is embedded at query time; until #38 every candidate sentence was
embedded, ~20 times the cost of the rest of a search on 2 CPUs). Confidence
(kb_ray/search/confidence.py, the packaged model of the evidence mode) reads the hits' raw
dense/BM25 scores and the evidence signals; ``abstain`` is true when the best confidence is
under ``search.abstain_below``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kb_ray.config import SearchSettings
from kb_ray.search.confidence import ConfidenceModel, abstains, hit_features, packaged_model_path
from kb_ray.search.context import hit_context
from kb_ray.search.evidence import ChunkText, StoredCosines, select_evidence

logger = logging.getLogger(__name__)


class HitAssembler:
    """Adds ``evidence``, ``confidence`` and ``context`` to hits; decides ``abstain``."""

    def __init__(self, settings: SearchSettings) -> None:
        self.settings = settings
        self._models: dict[str, ConfidenceModel] = {}
        self.model = self.model_for(settings.evidence)
        fitted = (self.model.info or {}).get("evidence")
        if fitted and fitted != settings.evidence:
            logger.warning("the confidence model was fitted with search.evidence=%s but it is %s: confidences and "
                           "abstain are not calibrated (refit: python -m kb_ray.eval.calibrate)", fitted, settings.evidence)
        self.abstain_below = self.threshold(settings.evidence)

    def model_for(self, evidence: str) -> ConfidenceModel:
        """The confidence model of an evidence mode: ``search.confidence_model_path`` for every
        mode when set, else the packaged model fitted with that mode (loaded once)."""
        path = self.settings.confidence_model_path or packaged_model_path(evidence)
        if str(path) not in self._models:
            self._models[str(path)] = ConfidenceModel.load(path)
        return self._models[str(path)]

    def threshold(self, evidence: str) -> float | None:
        """``search.abstain_below``, else the threshold stored with the mode's model."""
        if self.settings.abstain_below is not None:
            return self.settings.abstain_below
        return self.model_for(evidence).abstain_below

    def evidence(self, query: str, hits: list[dict[str, Any]], chunks: list[ChunkText | None],
                 stored: Callable[[int], StoredCosines | None] | None, *, mode: str | None = None) -> None:
        """Set ``hit["evidence"]`` (``None`` for generated or page hits); ``mode``: the request's
        evidence mode (default ``search.evidence``); ``stored(i)``: hit ``i``'s stored vectors'
        cosines to the query (None without a query vector of the index's model)."""
        mode = mode or self.settings.evidence
        quotable = [i for i, chunk in enumerate(chunks) if chunk is not None and hits[i].get("quote") is not None]
        for hit in hits:
            hit["evidence"] = None
        if mode == "none" or not quotable:
            return
        dense = stored if mode == "hybrid" else None
        head, tail = quotable[:self.settings.evidence_dense_hits], quotable[self.settings.evidence_dense_hits:]
        found = select_evidence(query, [chunks[i] for i in head], stored=None if dense is None else [dense(i) for i in head])
        found += select_evidence(query, [chunks[i] for i in tail])  # coverage only
        for i, evidence in zip(head + tail, found):
            hits[i]["evidence"] = evidence

    def confidence(self, query: str, hits: list[dict[str, Any]], *, dense_floor: float | None,
                   mode: str | None = None, unknown: float = 0.0) -> bool | None:
        """Set ``hit["confidence"]`` with the model of the evidence ``mode`` (default
        ``search.evidence``); ``unknown``: the query's share of terms the generation lacks
        (kb_ray/search/confidence.py). Return ``abstain`` (None when no threshold is known, or
        when no hit has a dense score: measured on the realdocs test split, lexical mode then
        abstained on every query)."""
        mode = mode or self.settings.evidence
        features = [hit_features(hit, query=query, dense_floor=dense_floor) for hit in hits]
        for hit, value, raw in zip(hits, self.model_for(mode).predict(features, unknown=unknown), features):
            hit["confidence"] = value
            hit["confidence_features"] = {**{k: round(v, 4) for k, v in raw.items()}, "unknown": round(unknown, 4)}
        below = self.threshold(mode)
        if below is None or not any((hit.get("scores") or {}).get("dense") is not None for hit in hits):
            return None  # fitted on hybrid hits: without a dense signal (lexical mode) abstention is not calibrated
        return abstains([hit["confidence"] for hit in hits], below=below)

    def context(self, hits: list[dict[str, Any]], *, context_chars: int,
                neighbour: Callable[[str, int], dict[str, Any] | None]) -> None:
        """Set ``hit["context"]`` for chunk hits (``context_chars`` > 0 only)."""
        for hit in hits:
            if hit.get("kind") == "chunk" and hit.get("ordinal") is not None:
                hit["context"] = hit_context(version_id=hit["version_id"], ordinal=hit["ordinal"],
                                             heading_path=hit.get("heading_path") or [],
                                             context_chars=context_chars, neighbour=neighbour)


def dense_floor(candidates: list[Any]) -> float | None:
    """The lowest dense cosine among the fused candidates: an upper bound for hits dense missed."""
    values = [c.scores.get("dense") for c in candidates if c.scores.get("dense") is not None]
    return float(min(values)) if values else None


def resort_by_confidence(hits: list[dict[str, Any]], *, depth: int) -> list[dict[str, Any]]:
    """The first ``depth`` hits ordered by confidence (stable: ties keep the fused order), the rest
    as they were; each re-sorted hit records ``ranks["confidence"]``. ``score`` stays the fused score."""
    if depth <= 0:
        return hits
    head = sorted(hits[:depth], key=lambda hit: -(hit.get("confidence") or 0.0))
    for rank, hit in enumerate(head, 1):
        hit["ranks"] = {**hit.get("ranks", {}), "confidence": rank}
    return head + hits[depth:]
