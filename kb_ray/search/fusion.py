"""Fusing best-first retriever lists into one ranking (``search.fusion``).

* ``rrf`` — reciprocal rank fusion (Cormack et al. 2009): ``score(d) = Σ w_r / (k + rank_r(d))``.
* ``minmax`` / ``zscore`` — a convex combination of normalized scores:
  ``score(d) = Σ w_r · norm_r(s_r(d))`` where ``norm_r`` rescales retriever ``r``'s scores
  over its own list to [0, 1] (min-max) or to z-scores; a document missing from a list
  gets that list's lowest normalized value (0 for min-max).

Pure and deterministic: retrievers are summed in sorted-name order (so the order of the
input mapping cannot change a float), and equal scores are ordered by ``tie_keys[id]``
(a location-independent key; absent: empty) and then by id.

RRF ties are common at the top: a chunk ranked (1, 3) by two retrievers scores exactly as
one ranked (3, 1). ``tie_break`` names retrievers whose ranks order such ties before the
tie keys (``search.rrf_tie_break``; off by default: ordering ties by the lexical rank won on
the realdocs dev split and golden and lost on test, benchmarks/results/eval.md "RRF ties").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

FUSIONS = ("rrf", "minmax", "zscore")
Scored = Sequence[tuple[str, float]]


def rrf(
    ranked_lists: Mapping[str, Sequence[str]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
    tie_keys: Mapping[str, str] | None = None,
    tie_break: Sequence[str] = (),
) -> list[tuple[str, float]]:
    """Fuse best-first id lists into ``[(id, score)]``, best first.

    Ranks are 1-based; an id repeated within one list counts at its first rank; a
    retriever missing from ``weights`` has weight 1. Equal scores (to 12 decimals) are
    ordered by the rank in each ``tie_break`` retriever (absent from its list: last),
    then by ``tie_keys``; without ``tie_break`` only exactly equal scores tie.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    weights = weights or {}
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name in sorted(ranked_lists):
        weight = float(weights.get(name, 1.0))
        ranks[name] = {}
        for rank, item in enumerate(dict.fromkeys(ranked_lists[name]), start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            ranks[name][item] = rank
    if not tie_break:
        return _ordered(scores, tie_keys)
    return _ordered_by_ranks(scores, [ranks.get(name, {}) for name in tie_break], tie_keys)


def convex(
    scored_lists: Mapping[str, Scored],
    *,
    normalization: str = "minmax",
    weights: Mapping[str, float] | None = None,
    tie_keys: Mapping[str, str] | None = None,
) -> list[tuple[str, float]]:
    """Fuse best-first ``(id, score)`` lists by a weighted sum of normalized scores."""
    normalize = _NORMALIZERS.get(normalization)
    if normalize is None:
        raise ValueError(f"unknown score normalization {normalization!r}; use minmax or zscore")
    weights = weights or {}
    normalized = {}
    for name in sorted(scored_lists):
        items = dict(reversed(list(scored_lists[name])))  # an id repeated counts at its first (best) place
        values = normalize(np.array(list(items.values()), dtype=np.float64))
        normalized[name] = (dict(zip(items, values.tolist())), float(values.min()) if len(values) else 0.0)
    ids = {item for table, _ in normalized.values() for item in table}
    scores = {item: 0.0 for item in ids}
    for name in sorted(normalized):
        table, floor = normalized[name]
        weight = float(weights.get(name, 1.0))
        for item in sorted(ids):
            scores[item] += weight * table.get(item, floor)
    return _ordered(scores, tie_keys)


def fuse(scored_lists: Mapping[str, Scored], *, method: str = "rrf", rrf_k: int = 60,
         weights: Mapping[str, float] | None = None,
         tie_keys: Mapping[str, str] | None = None, tie_break: Sequence[str] = ()) -> list[tuple[str, float]]:
    """``search.fusion`` dispatch: ``rrf`` uses the ranks (``tie_break``: see :func:`rrf`),
    ``minmax``/``zscore`` the scores."""
    if method == "rrf":
        return rrf({n: [item for item, _ in items] for n, items in scored_lists.items()}, k=rrf_k,
                   weights=weights, tie_keys=tie_keys, tie_break=tie_break)
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; use one of {', '.join(FUSIONS)}")
    return convex(scored_lists, normalization=method, weights=weights, tie_keys=tie_keys)


def tie_break_retrievers(setting: str) -> tuple[str, ...]:
    """The ``tie_break`` of :func:`rrf` for ``search.rrf_tie_break`` (``content``: none)."""
    return () if setting == "content" else (setting,)


def _minmax(values: np.ndarray) -> np.ndarray:
    if not len(values):
        return values
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else np.ones_like(values)


def _zscore(values: np.ndarray) -> np.ndarray:
    if not len(values):
        return values
    std = values.std()
    return (values - values.mean()) / std if std > 0 else np.zeros_like(values)


_NORMALIZERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"minmax": _minmax, "zscore": _zscore}


def _ordered(scores: Mapping[str, float], tie_keys: Mapping[str, str] | None) -> list[tuple[str, float]]:
    keys = tie_keys or {}
    return sorted(scores.items(), key=lambda pair: (-pair[1], keys.get(pair[0], ""), pair[0]))


def _ordered_by_ranks(scores: Mapping[str, float], ranks: Sequence[Mapping[str, int]],
                      tie_keys: Mapping[str, str] | None) -> list[tuple[str, float]]:
    """Best first; scores equal to 12 decimals ordered by each ``ranks`` table (missing: last)."""
    keys, last = tie_keys or {}, float("inf")

    def key(pair: tuple[str, float]) -> tuple:
        item, score = pair
        return (-round(score, _TIE_DECIMALS), *(table.get(item, last) for table in ranks),
                keys.get(item, ""), item)

    return sorted(scores.items(), key=key)


_TIE_DECIMALS = 12  # RRF sums of the same ranks in another order can differ in the last bits
