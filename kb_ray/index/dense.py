"""``FaissShard``: the dense index of one shard (inner product on normalized vectors).

Ids are row numbers in the shard's hydration file. Filtering happens before top-k: a
boolean row mask becomes an ``IDSelectorBitmap`` passed in the search parameters. Graph
and cluster indexes (HNSW, IVF) can miss allowed rows under a selective filter, so when
they return fewer rows than the mask allows, the shard falls back to an exact search
over the allowed rows (their vectors reconstructed from the index).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import faiss
import numpy as np

logger = logging.getLogger(__name__)

EXACT_BELOW = 2048  # allowed rows under which a filtered search is exact (brute force)


def choose_dense_type(kind: str, vectors: int, *, flat_max_vectors: int) -> str:
    """``auto``: flat up to ``flat_max_vectors``, HNSW above; explicit kinds are kept."""
    if kind != "auto":
        return kind
    return "flat" if vectors <= flat_max_vectors else "hnsw"


def build_faiss_index(vectors: np.ndarray, dense_type: str, *, hnsw_m: int = 32,
                      ivf_nlist: int | None = None) -> faiss.Index:
    """An ``IndexIDMap2`` over flat/HNSW/IVF with ids ``0..n-1`` (deterministic build)."""
    vectors = normalized(vectors)
    n, dim = vectors.shape
    inner = _inner_index(dense_type, dim, n, hnsw_m=hnsw_m, ivf_nlist=ivf_nlist)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # HNSW insertion order (and k-means) must not depend on threads
    try:
        if not inner.is_trained:
            inner.train(vectors)
        index = faiss.IndexIDMap2(inner)
        index.add_with_ids(vectors, np.arange(n, dtype=np.int64))
    finally:
        faiss.omp_set_num_threads(threads)
    if dense_type == "ivf":
        faiss.extract_index_ivf(inner).make_direct_map()
    return index


def _inner_index(dense_type: str, dim: int, n: int, *, hnsw_m: int, ivf_nlist: int | None) -> faiss.Index:
    if dense_type == "flat":
        return faiss.IndexFlatIP(dim)
    if dense_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = max(40, 2 * hnsw_m)
        return index
    if dense_type == "ivf":
        nlist = max(1, min(n, ivf_nlist or int(4 * math.sqrt(max(n, 1)))))
        return faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    raise ValueError(f"unknown dense index type {dense_type!r}; use flat, hnsw or ivf")


def normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32).copy()
    if vectors.size:
        faiss.normalize_L2(vectors)
    return vectors


class FaissShard:
    """A loaded dense shard index; ``search`` takes a query vector and a row mask."""

    def __init__(self, index: faiss.Index, dense_type: str) -> None:
        self.index = index
        self.dense_type = dense_type
        self.rows = index.ntotal
        self._gpu_index = _to_gpu(index, dense_type)

    @classmethod
    def load(cls, path: str | Path, dense_type: str) -> FaissShard:
        return cls(faiss.read_index(str(path)), dense_type)

    def save(self, path: str | Path) -> None:
        faiss.write_index(self.index, str(path))

    def search(self, query: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows and scores of the top ``k`` allowed rows, best first (ties by row)."""
        query = normalized(query.reshape(1, -1))
        allowed = self.rows if mask is None else int(mask.sum())
        k = min(k, allowed)
        if k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        filtered = mask is not None and allowed < self.rows
        if filtered and self.dense_type != "flat" and allowed <= EXACT_BELOW:
            return self._exact(query, k, mask)
        rows, scores = self._selected(query, k, mask if filtered else None)
        if len(rows) < k:  # an ANN index missed allowed rows: be exact instead
            return self._exact(query, k, mask)
        return rows, scores

    def _selected(self, query: np.ndarray, k: int, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if mask is None and self._gpu_index is not None:
            scores, rows = self._gpu_index.search(query, k)
        elif mask is None:
            scores, rows = self.index.search(query, k, params=self._params(None))
        else:
            bitmap = np.packbits(mask.astype(bool), bitorder="little")
            selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))
            scores, rows = self.index.search(query, k, params=self._params(selector))
        keep = rows[0] >= 0
        return _ordered(rows[0][keep], scores[0][keep])

    def _params(self, selector: faiss.IDSelector | None) -> faiss.SearchParameters | None:
        if self.dense_type == "hnsw":
            params = faiss.SearchParametersHNSW(sel=selector) if selector else faiss.SearchParametersHNSW()
            params.efSearch = 128
            return params
        if self.dense_type == "ivf":
            params = faiss.SearchParametersIVF(sel=selector) if selector else faiss.SearchParametersIVF()
            params.nprobe = min(faiss.extract_index_ivf(self.index).nlist, 16)
            return params
        return faiss.SearchParameters(sel=selector) if selector else None

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        """The stored (normalized) vectors of ``ids``: read back, never re-embedded."""
        return np.asarray(self.index.reconstruct_batch(np.asarray(ids, np.int64)), np.float32)

    def row_vectors(self, row: int) -> np.ndarray:
        """``[1, dim]``: the one vector of ``row``."""
        return self.reconstruct(np.array([row]))

    def _exact(self, query: np.ndarray, k: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        allowed = np.flatnonzero(mask) if mask is not None else np.arange(self.rows)
        vectors = self.reconstruct(allowed)
        rows, scores = _ordered(allowed, vectors @ query[0])
        return rows[:k], scores[:k]


class MultiVectorShard:
    """A dense shard whose rows own several vectors (a chunk and its passages,
    kb_ray/index/passages.py): a row scores its best vector's cosine.

    ``owners[v]`` is the row of vector ``v``. A search asks the vector index for more vectors
    than rows wanted (a row's vectors may crowd the list) and doubles the depth until ``k``
    distinct rows are found or every allowed vector was seen; the first hit of a row in the
    best-first list is its best."""

    def __init__(self, vectors: FaissShard, owners: np.ndarray) -> None:
        self.vectors = vectors
        self.owners = np.asarray(owners, np.int64)
        self.rows = int(self.owners.max()) + 1 if len(self.owners) else 0
        self.depth_factor = max(2, math.ceil(2 * len(self.owners) / max(self.rows, 1)))
        self._by_row: tuple[np.ndarray, np.ndarray] | None = None  # (vector ids sorted by owner, each row's first)

    def row_vectors(self, row: int) -> np.ndarray:
        """``[n, dim]``: the stored vectors of ``row`` in the order the build wrote them (its own,
        then its passages' in text order)."""
        if self._by_row is None:
            order = np.argsort(self.owners, kind="stable")  # ids ascend within a row: own first, passages in order
            self._by_row = order, np.searchsorted(self.owners[order], np.arange(self.rows + 1))
        order, starts = self._by_row
        return self.vectors.reconstruct(order[starts[row]:starts[row + 1]])

    @classmethod
    def load(cls, path: str | Path, dense_type: str, owners_path: str | Path) -> MultiVectorShard:
        return cls(FaissShard.load(path, dense_type), np.load(owners_path))

    def search(self, query: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows and best-vector scores of the top ``k`` allowed rows, best first (ties by row)."""
        vector_mask = None if mask is None else mask[self.owners]
        allowed = len(self.owners) if vector_mask is None else int(vector_mask.sum())
        depth = min(allowed, k * self.depth_factor)
        while True:
            found, scores = self.vectors.search(query, depth, vector_mask)
            owners = self.owners[found]
            _, first = np.unique(owners, return_index=True)
            if len(first) >= k or depth >= allowed:
                break
            depth = min(allowed, depth * 2)
        rows, best = _ordered(owners[first], scores[first])
        return rows[:k], best[:k]


def _ordered(rows: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((rows, -scores))  # score descending, then row ascending
    return rows[order].astype(np.int64), scores[order].astype(np.float32)


def _to_gpu(index: faiss.Index, dense_type: str) -> faiss.Index | None:
    """A GPU copy for unfiltered searches when faiss sees a GPU (flat and IVF only)."""
    if dense_type == "hnsw" or faiss.get_num_gpus() == 0:
        return None
    try:
        return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    except (AttributeError, RuntimeError) as exc:
        logger.warning("faiss GPU copy failed (%s); searching on CPU", exc)
        return None
