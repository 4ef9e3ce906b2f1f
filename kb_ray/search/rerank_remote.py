"""``RemoteReranker``: (query, passage) scores from a rerank server (TEI, Jina, vLLM, Cohere-style).

``search.rerank_endpoint`` makes :func:`~kb_ray.search.rerank.reranker_from_settings` build
this class instead of the local cross-encoder. One query is one
``POST {rerank_endpoint}/rerank`` with ``{"model"?, "query", "documents": [...], "top_n"?}``;
the answer is ``{"results": [{"index", "relevance_score"}]}`` (vLLM, Jina, Cohere) or TEI's
bare list ``[{"index", "score"}]``. Retries with backoff on connection errors, 429 and 5xx,
the timeout and the bearer key go through :class:`~kb_ray.http_client.JsonPostClient`.

A call that still fails raises :class:`RerankError` (reason code + detail); the searcher and
the service catch it and keep the fused order with ``"reranked": false`` and the reason in
``"rerank_error"`` — a reranker outage never fails a search.

With ``rerank_top_n`` the server scores every passage but returns only the best ``top_n``;
the others get a score below the lowest returned one, all equal, so they keep their fused
order beneath the reranked head.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from kb_ray.errors import KbRayError
from kb_ray.http_client import JsonPostClient, PostFailure, RemoteCallError

if TYPE_CHECKING:
    from kb_ray.config import SearchSettings

logger = logging.getLogger(__name__)
BELOW_RETURNED = 1.0  # passages left out by top_n score this far below the lowest returned score


class RerankError(RemoteCallError):
    """The rerank server gave no scores: ``reason`` is a transport code (``timeout``, ``connect``,
    ``http_4xx``, ``http_5xx``, ``bad_json``) or ``bad_response``."""

    call = "remote rerank"


class RemoteReranker:
    """A :class:`~kb_ray.search.rerank.Reranker` over HTTP; see the module docstring."""

    def __init__(self, settings: SearchSettings) -> None:
        if not settings.rerank_endpoint:
            raise KbRayError("a remote reranker needs search.rerank_endpoint (e.g. http://tei-rerank:8080)")
        self.model = settings.rerank_model
        self.top_n = settings.rerank_top_n
        self._client = JsonPostClient(endpoint=settings.rerank_endpoint, route="/rerank",
                                      api_key_env=settings.rerank_api_key_env, timeout_s=settings.rerank_timeout_s,
                                      retries=settings.rerank_retries, max_concurrency=settings.rerank_max_concurrency,
                                      setting_prefix="search.rerank", answer_types=(dict, list))
        self.url = self._client.url
        self._pool = ThreadPoolExecutor(max_workers=settings.rerank_max_concurrency, thread_name_prefix="rerank-http")

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage (higher is better); :class:`RerankError` when the server fails."""
        if not passages:
            return []
        body: dict[str, Any] = {"query": query, "documents": list(passages)}
        if self.model:
            body["model"] = self.model
        if self.top_n:
            body["top_n"] = self.top_n
        answer = self._client.post(body)
        if isinstance(answer, PostFailure):
            raise RerankError(answer.reason, answer.detail)
        return _scores(answer, count=len(passages))

    def score_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[list[float] | RerankError]:
        """Several queries at once, up to ``rerank_max_concurrency`` requests in flight; a failed
        one is its :class:`RerankError` (the others keep their scores)."""
        return list(self._pool.map(self._score_or_error, requests))

    def _score_or_error(self, request: tuple[str, Sequence[str]]) -> list[float] | RerankError:
        try:
            return self.score(*request)
        except RerankError as exc:
            return exc

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()


def _scores(answer: Any, *, count: int) -> list[float]:
    """Scores by input position from ``{"results": [...]}`` or a bare list; see the module docstring."""
    items = answer.get("results") if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise RerankError("bad_response", f"expected `results` or a list, got {str(answer)[:200]}")
    found: dict[int, float] = {}
    try:
        for item in items:
            score = item["relevance_score"] if "relevance_score" in item else item["score"]
            found[int(item["index"])] = float(score)
    except (KeyError, TypeError, ValueError) as exc:
        raise RerankError("bad_response", f"a result without index and relevance_score/score: {exc!r}") from exc
    if not found or not all(0 <= index < count for index in found):
        raise RerankError("bad_response", f"result indexes {sorted(found)[:10]} do not fit {count} documents")
    floor = min(found.values()) - BELOW_RETURNED
    return [found.get(index, floor) for index in range(count)]
