"""Multivectors: the float16 blob codec, token pooling, pooled summaries and MaxSim.

A page's multivector is ``n x dim`` L2-normalized token vectors. Stored as one binary
blob of little-endian float16 (see ``catalog/schemas.py`` ``page_embeddings``).
MaxSim (ColBERT late interaction): ``score(q, p) = Σ_i max_j q_i · p_j``.
"""

from __future__ import annotations

import numpy as np

STORED_DTYPE = "float16"
_LE_F16 = np.dtype("<f2")


def encode(multivector: np.ndarray) -> bytes:
    return np.ascontiguousarray(multivector, dtype=_LE_F16).tobytes()


def decode(blob: bytes, n_vectors: int, dim: int) -> np.ndarray:
    return np.frombuffer(blob, dtype=_LE_F16).reshape(n_vectors, dim)


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def pooled_summary(multivector: np.ndarray) -> np.ndarray:
    """One vector per page for the first stage: the normalized mean of its token vectors."""
    return normalize_rows(np.asarray(multivector, dtype=np.float32).mean(axis=0, keepdims=True))[0]


def maxsim(query: np.ndarray, page: np.ndarray) -> float:
    """Late-interaction score of one query multivector against one page multivector."""
    sims = np.asarray(query, dtype=np.float32) @ np.asarray(page, dtype=np.float32).T
    return float(sims.max(axis=1).sum())


def maxsim_many(query: np.ndarray, vectors: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """MaxSim of ``query`` against the pages ``rows`` of a concatenated store (``offsets``):
    one matrix product over the gathered tokens, then a max per page segment."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.empty(0, np.float32)
    lengths = offsets[rows + 1] - offsets[rows]
    gathered = np.concatenate([vectors[offsets[r]:offsets[r + 1]] for r in rows]).astype(np.float32)
    sims = np.asarray(query, dtype=np.float32) @ gathered.T  # [query tokens, gathered tokens]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.maximum.reduceat(sims, starts, axis=1).sum(axis=0).astype(np.float32)


def mean_rows(tokens: np.ndarray, grid: tuple[int, int], factor: int) -> np.ndarray:
    """Pool image tokens laid out row-major on a ``grid`` (rows, cols): each run of
    ``factor`` neighbours within a row becomes their normalized mean."""
    rows, cols = grid
    grid_tokens = np.asarray(tokens, dtype=np.float32).reshape(rows, cols, -1)
    pooled = [grid_tokens[r, c:c + factor].mean(axis=0) for r in range(rows) for c in range(0, cols, factor)]
    return normalize_rows(np.stack(pooled))


def hierarchical(tokens: np.ndarray, factor: int) -> np.ndarray:
    """Ward clustering of the tokens into ``ceil(n / factor)`` clusters, one mean per cluster
    (the colpali-engine ``HierarchicalTokenPooler`` idea; needs scipy)."""
    from scipy.cluster.hierarchy import fcluster, linkage

    tokens = np.asarray(tokens, dtype=np.float32)
    clusters = max(1, -(-len(tokens) // factor))
    if len(tokens) <= clusters:
        return normalize_rows(tokens)
    labels = fcluster(linkage(tokens, method="ward"), t=clusters, criterion="maxclust")
    return normalize_rows(np.stack([tokens[labels == label].mean(axis=0) for label in np.unique(labels)]))
