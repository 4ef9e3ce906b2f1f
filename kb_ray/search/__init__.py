"""The search core (docs/architecture.md), pure and in-process: Serve deployments wrap it.

* :class:`HybridSearcher` — dense + lexical per shard, RRF, hydration gate, rerank.
* :func:`rrf` — reciprocal rank fusion.
* :func:`parse_filters` / :class:`SearchFilter` — the closed filter vocabulary.
* :class:`Reranker`, :class:`CrossEncoderReranker` — optional reranking.
"""

from kb_ray.search.errors import SearchRequestError
from kb_ray.search.filters import FILTER_KEYS, SearchFilter, parse_filters
from kb_ray.search.fusion import rrf
from kb_ray.search.rerank import CrossEncoderReranker, Reranker
from kb_ray.search.searcher import MODES, HybridSearcher, SearchResult

__all__ = [
    "FILTER_KEYS", "MODES", "CrossEncoderReranker", "HybridSearcher", "Reranker", "SearchFilter",
    "SearchRequestError", "SearchResult", "parse_filters", "rrf",
]
