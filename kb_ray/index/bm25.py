"""BM25 with corpus-wide statistics: scores that do not depend on sharding.

:class:`CorpusStatistics` (document frequencies, document count, average length) is
computed once over the whole generation; every shard's :class:`Bm25Matrix` scores its rows
with those statistics, so a chunk gets the same BM25 score whatever shard it falls into
and however many shards there are. Scoring is Lucene's BM25:
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``,
``tf' = tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``, precomputed per (term, row) and
stored term-major (CSR over terms), so a query sums a few slices. The raw term frequencies
and row lengths are kept beside the weights (index format 4), so a shard can be re-weighted
with other statistics (:meth:`Bm25Matrix.reweighted`, used by delta segments:
kb_ray/index/segments.py) with the same arithmetic as a build, bit for bit.
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
    total_length: int = 0

    @classmethod
    def of(cls, rows: list[list[str]]) -> CorpusStatistics:
        frequency: Counter = Counter()
        for terms in rows:
            frequency.update(set(terms))
        total = sum(map(len, rows))
        return cls(dict(frequency), len(rows), float(total / len(rows) if rows else 0.0), total)

    @classmethod
    def from_counts(cls, document_frequency: dict[str, int], documents: int, total_length: int) -> CorpusStatistics:
        """The statistics :meth:`of` gives for rows with these counts (the same float average)."""
        return cls(document_frequency, documents, float(total_length / documents) if documents else 0.0, total_length)

    def idf(self, term: str) -> float:
        df = self.document_frequency.get(term, 0)
        return float(np.log1p((self.documents - df + 0.5) / (df + 0.5)))


class Bm25Matrix:
    """One channel of one shard: term → (rows, precomputed BM25 weights)."""

    def __init__(self, terms: np.ndarray, indptr: np.ndarray, rows: np.ndarray, weights: np.ndarray,
                 n_rows: int, *, tf: np.ndarray | None = None, lengths: np.ndarray | None = None) -> None:
        self.terms, self.indptr, self.rows, self.weights, self.n_rows = terms, indptr, rows, weights, n_rows
        self.tf, self.lengths = tf, lengths  # None: a generation older than index format 4
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
        indptr = np.zeros(len(vocabulary) + 1, np.int64)
        np.cumsum(np.bincount(terms_of, minlength=len(vocabulary)), out=indptr[1:])
        weights = _weights(vocabulary, terms_of, rows_of, tf, lengths, statistics, k1=k1, b=b)
        return cls(vocabulary, indptr, rows_of.astype(np.int32), weights, len(rows),
                   tf=tf.astype(np.int32), lengths=lengths.astype(np.int32))

    @property
    def reweightable(self) -> bool:
        return self.tf is not None and self.lengths is not None

    def reweighted(self, statistics: CorpusStatistics, *, k1: float = K1, b: float = B) -> Bm25Matrix:
        """The same postings weighted with other statistics (what a build with them gives)."""
        if not self.reweightable:
            raise ValueError("this BM25 matrix has no term frequencies (index format < 4): rebuild the index")
        terms_of = np.repeat(np.arange(len(self.terms), dtype=np.int64), np.diff(self.indptr))
        weights = _weights(self.terms, terms_of, self.rows.astype(np.int64), self.tf.astype(np.int64),
                           self.lengths.astype(np.int64), statistics, k1=k1, b=b)
        return Bm25Matrix(self.terms, self.indptr, self.rows, weights, self.n_rows, tf=self.tf, lengths=self.lengths)

    def live_counts(self, live: np.ndarray) -> tuple[dict[str, int], int, int]:
        """Document frequency per term, row count and total length over the rows where ``live``."""
        live = np.asarray(live, dtype=bool)
        terms_of = np.repeat(np.arange(len(self.terms), dtype=np.int64), np.diff(self.indptr))
        df = np.bincount(terms_of, weights=live[self.rows], minlength=len(self.terms)).astype(np.int64)
        present = np.flatnonzero(df)
        frequency = dict(zip(self.terms[present].tolist(), df[present].tolist()))
        return frequency, int(live.sum()), int(self.lengths.astype(np.int64)[live].sum())

    def document_frequency(self, terms: list[str], live: np.ndarray | None = None) -> dict[str, int]:
        """Per distinct term, how many rows hold it (only rows where ``live`` is set, when given)."""
        out = {}
        for term in dict.fromkeys(terms):
            index = self._ids.get(term)
            rows = self.rows[self.indptr[index]:self.indptr[index + 1]] if index is not None else self.rows[:0]
            out[term] = int(len(rows) if live is None else np.count_nonzero(live[rows]))
        return out

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
        for name in ("indptr", "rows", "weights", "tf", "lengths"):
            if getattr(self, name) is not None:
                np.save(folder / f"{prefix}.{name}.npy", getattr(self, name), allow_pickle=False)

    @classmethod
    def load(cls, folder: Path, prefix: str, n_rows: int) -> Bm25Matrix:
        text = (folder / f"{prefix}.terms.txt").read_text(encoding="utf-8")
        terms = np.array(text.split("\n") if text else [], dtype=object)
        indptr, rows, weights = (np.load(folder / f"{prefix}.{name}.npy", allow_pickle=False)
                                 for name in ("indptr", "rows", "weights"))
        raw = {name: np.load(folder / f"{prefix}.{name}.npy", allow_pickle=False)
               if (folder / f"{prefix}.{name}.npy").is_file() else None for name in ("tf", "lengths")}
        return cls(terms, indptr, rows, weights, n_rows, **raw)


def _weights(vocabulary: np.ndarray, terms_of: np.ndarray, rows_of: np.ndarray, tf: np.ndarray, lengths: np.ndarray,
             statistics: CorpusStatistics, *, k1: float, b: float) -> np.ndarray:
    """BM25 weight of every (term, row) posting; int64 ``tf``/``lengths``, float64 arithmetic."""
    norm = k1 * (1 - b + b * lengths[rows_of] / (statistics.average_length or 1.0))
    idf = np.array([statistics.idf(t) for t in vocabulary.tolist()], np.float64)
    return (idf[terms_of] * tf * (k1 + 1) / (tf + norm)).astype(np.float32)
