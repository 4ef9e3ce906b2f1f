"""Reciprocal rank fusion (Cormack et al. 2009): ``score(d) = Σ w_r / (k + rank_r(d))``.

Pure and deterministic: retrievers are summed in sorted-name order (so the order of the
input mapping cannot change a float), and equal scores are ordered by id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def rrf(
    ranked_lists: Mapping[str, Sequence[str]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse best-first id lists into ``[(id, score)]``, best first, ties by id.

    Ranks are 1-based; an id repeated within one list counts at its first rank; a
    retriever missing from ``weights`` has weight 1.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    weights = weights or {}
    scores: dict[str, float] = {}
    for name in sorted(ranked_lists):
        weight = float(weights.get(name, 1.0))
        for rank, item in enumerate(dict.fromkeys(ranked_lists[name]), start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
