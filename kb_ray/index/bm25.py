"""BM25 with corpus-wide statistics: scores that do not depend on sharding.

:class:`CorpusStatistics` (document frequencies, document count, average length) is
computed once over the whole generation; every shard's :class:`Bm25Matrix` scores its rows
with those statistics, so a chunk gets the same BM25 score whatever shard it falls into
and however many shards there are. Scoring is Lucene's BM25:
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``,
``tf' = tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``, precomputed per (term, row) and
stored term-major (CSR over terms), so a query sums a few slices.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

K1, B = 1.2, 0.75


@dataclass(frozen=True)
class CorpusStatistics:
    """Statistics of one channel over every row of a generation."""

    document_frequency: dict[str, int]
    documents: int
    average_length: float

    @classmethod
    def of(cls, rows: list[list[str]]) -> CorpusStatistics:
        frequency: Counter = Counter()
        for terms in rows:
            frequency.update(set(terms))
        average = sum(map(len, rows)) / len(rows) if rows else 0.0
        return cls(dict(frequency), len(rows), float(average))

    def idf(self, term: str) -> float:
        df = self.document_frequency.get(term, 0)
        return float(np.log1p((self.documents - df + 0.5) / (df + 0.5)))


class Bm25Matrix:
    """One channel of one shard: term → (rows, precomputed BM25 weights)."""

    def __init__(self, terms: np.ndarray, indptr: np.ndarray, rows: np.ndarray, weights: np.ndarray,
                 n_rows: int) -> None:
        self.terms, self.indptr, self.rows, self.weights, self.n_rows = terms, indptr, rows, weights, n_rows
        self._ids = {term: i for i, term in enumerate(terms.tolist())}

    @classmethod
    def build(cls, rows: list[list[str]], statistics: CorpusStatistics, *, k1: float = K1, b: float = B) -> Bm25Matrix:
        ids: dict[str, int] = {}
        term_ids = np.fromiter((ids.setdefault(t, len(ids)) for terms in rows for t in terms), np.int64)
        lengths = np.fromiter(map(len, rows), np.int64, count=len(rows))
        row_ids = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
        vocabulary = np.array(sorted(ids), dtype=object)
        rank = np.empty(len(ids), np.int64)
        rank[[ids[t] for t in vocabulary.tolist()]] = np.arange(len(ids))  # first-seen id -> sorted position
        pairs, tf = np.unique(rank[term_ids] * max(len(rows), 1) + row_ids, return_counts=True)
        terms_of, rows_of = np.divmod(pairs, max(len(rows), 1))
        norm = k1 * (1 - b + b * lengths[rows_of] / (statistics.average_length or 1.0))
        idf = np.array([statistics.idf(t) for t in vocabulary.tolist()], np.float64)
        weights = idf[terms_of] * tf * (k1 + 1) / (tf + norm)
        indptr = np.zeros(len(vocabulary) + 1, np.int64)
        np.cumsum(np.bincount(terms_of, minlength=len(vocabulary)), out=indptr[1:])
        return cls(vocabulary, indptr, rows_of.astype(np.int32), weights.astype(np.float32), len(rows))

    def scores(self, terms: list[str]) -> np.ndarray:
        """BM25 of every row for these (distinct) query terms; 0 where none occurs."""
        ids = [self._ids[t] for t in dict.fromkeys(terms) if t in self._ids]
        if not ids:
            return np.zeros(self.n_rows, np.float32)
        slices = [slice(self.indptr[i], self.indptr[i + 1]) for i in ids]
        rows = np.concatenate([self.rows[s] for s in slices])
        weights = np.concatenate([self.weights[s] for s in slices])
        return np.bincount(rows, weights=weights, minlength=self.n_rows).astype(np.float32)

    def save(self, folder: Path, prefix: str) -> None:
        """Plain files (byte-identical for the same input): terms one per line, then .npy arrays."""
        (folder / f"{prefix}.terms.txt").write_text("\n".join(self.terms.tolist()), encoding="utf-8")
        for name in ("indptr", "rows", "weights"):
            np.save(folder / f"{prefix}.{name}.npy", getattr(self, name), allow_pickle=False)

    @classmethod
    def load(cls, folder: Path, prefix: str, n_rows: int) -> Bm25Matrix:
        text = (folder / f"{prefix}.terms.txt").read_text(encoding="utf-8")
        terms = np.array(text.split("\n") if text else [], dtype=object)
        indptr, rows, weights = (np.load(folder / f"{prefix}.{name}.npy", allow_pickle=False)
                                 for name in ("indptr", "rows", "weights"))
        return cls(terms, indptr, rows, weights, n_rows)
