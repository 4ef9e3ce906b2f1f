"""``ChannelBm25Index``: the default lexical index, BM25 per channel with global statistics.

Channels of a chunk (one :class:`~kb_ray.index.analyzer.TextAnalyzer` for indexing and
queries):

* ``body`` — the chunk text (the heading path too when ``heading_in_body``, the old layout);
* ``heading`` — the heading path and the document title;
* ``path`` — the file name of the document URI (not its folders: the same files under
  another folder must rank the same);
* ``exact`` — compounds and numbers of the text, unstemmed (``os.path.join``, ``8.4``).

``lexical_channels(rows)`` analyzes every row of a generation once; ``channel_statistics``
gives the corpus-wide statistics every shard is built with, so a chunk's score does not
depend on its shard. A query's score is ``Σ weight[channel] · BM25_channel``; equal scores
are ordered by ``tie_keys`` (a hash of the chunk's content, given at build time).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa

from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.bm25 import Bm25Matrix, CorpusStatistics

CHANNELS = ("body", "heading", "path", "exact")
DEFAULT_WEIGHTS = {"body": 1.0, "heading": 0.0, "path": 0.0, "exact": 0.0}
_TIE_ORDER, _META = "tie_order.npy", "bm25.json"

Rows = tuple[np.ndarray, np.ndarray]


def tie_key(heading_path: list[str] | None, text: str, uri: str | None, ordinal: int | None) -> str:
    """A location-independent order for equal scores: a hash of the heading path and text,
    then (for chunks with the same content) the file name and the chunk's ordinal."""
    payload = "\x1f".join(heading_path or []) + "\x1e" + (text or "")
    digest = hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]
    return f"{digest}|{file_name(uri)}|{ordinal or 0:09d}"


def tie_keys(rows: pa.Table) -> list[str]:
    columns = [rows.column(name).to_pylist() for name in ("heading_path", "text", "uri", "ordinal")]
    return [tie_key(*values) for values in zip(*columns)]


def file_name(uri: str | None) -> str:
    return (uri or "").rstrip("/").rsplit("/", 1)[-1]


def contextual_text(context: str, text: str) -> str:
    """What the contextual generation (kb_ray/index/contextual.py) embeds and indexes in the BM25
    body channel: the chunk's context, then its text."""
    return f"{context}\n{text}".strip()


def lexical_channels(rows: pa.Table, analyzer: TextAnalyzer, *, heading_in_body: bool = False,
                     contexts: list[str] | None = None) -> dict[str, list]:
    """Terms per channel for every row of a hydration table. With ``contexts`` (the contextual
    generation, kb_ray/index/contextual.py) the body is each row's context, then its text (the
    context holds the heading path)."""
    texts = rows.column("text").to_pylist()
    headings = [" \n ".join(h or []) for h in rows.column("heading_path").to_pylist()]
    titles = rows.column("title").to_pylist()
    body = [f"{h}\n{t}" for h, t in zip(headings, texts)] if heading_in_body else texts
    if contexts is not None:
        body = [contextual_text(c, t) for c, t in zip(contexts, texts)]
    return {
        "body": [analyzer.terms(t) for t in body],
        "heading": [analyzer.terms(f"{title or ''}\n{h}") for title, h in zip(titles, headings)],
        "path": [analyzer.terms(file_name(uri)) for uri in rows.column("uri").to_pylist()],
        "exact": [analyzer.exact_terms(t) for t in texts],
    }


def channel_statistics(channels: Mapping[str, list]) -> dict[str, CorpusStatistics]:
    return {name: CorpusStatistics.of(terms) for name, terms in channels.items()}


def live_statistics(parts: list[tuple[ChannelBm25Index, np.ndarray]]) -> dict[str, CorpusStatistics]:
    """Per channel, the statistics of the rows where each index's ``live`` mask is set, summed
    over several indexes (a base generation's shards and its delta segments): what
    :func:`channel_statistics` gives over exactly those rows."""
    merged = {}
    for name in CHANNELS:
        frequency: dict[str, int] = {}
        documents = total = 0
        for index, live in parts:
            counts, rows, length = index.matrices[name].live_counts(live)
            for term, df in counts.items():
                frequency[term] = frequency.get(term, 0) + df
            documents, total = documents + rows, total + length
        merged[name] = CorpusStatistics.from_counts(frequency, documents, total)
    return merged


class ChannelBm25Index:
    name = "bm25"

    def __init__(self, matrices: dict[str, Bm25Matrix], tie_order: np.ndarray, analyzer: TextAnalyzer) -> None:
        self.matrices = matrices
        self.tie_order = tie_order
        self.analyzer = analyzer

    @classmethod
    def build(cls, channels: Mapping[str, list], statistics: Mapping[str, CorpusStatistics], *,
              tie_keys: list[str], analyzer: TextAnalyzer) -> ChannelBm25Index:
        """One shard: ``channels`` holds this shard's rows, ``statistics`` the whole generation's."""
        matrices = {name: Bm25Matrix.build(channels[name], statistics[name]) for name in CHANNELS}
        tie_order = np.argsort(np.argsort(np.array(tie_keys, dtype=str), kind="stable"), kind="stable")
        return cls(matrices, tie_order.astype(np.int64), analyzer)

    @property
    def reweightable(self) -> bool:
        return all(matrix.reweightable for matrix in self.matrices.values())

    def reweighted(self, statistics: Mapping[str, CorpusStatistics]) -> ChannelBm25Index:
        """The same rows scored with other corpus statistics (kb_ray/index/segments.py)."""
        return ChannelBm25Index({name: matrix.reweighted(statistics[name]) for name, matrix in self.matrices.items()},
                                self.tie_order, self.analyzer)

    def save(self, path: str | Path) -> None:
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / _TIE_ORDER, self.tie_order, allow_pickle=False)
        for name, matrix in self.matrices.items():
            matrix.save(folder, name)
        (folder / _META).write_text(json.dumps({"rows": len(self.tie_order), "channels": list(self.matrices),
                                                "analyzer": self.analyzer.spec()}, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> ChannelBm25Index:
        folder = Path(path)
        meta = json.loads((folder / _META).read_text())
        matrices = {name: Bm25Matrix.load(folder, name, meta["rows"]) for name in meta["channels"]}
        tie_order = np.load(folder / _TIE_ORDER, allow_pickle=False)
        spec = meta["analyzer"]
        return cls(matrices, tie_order, TextAnalyzer(stem=spec["stem"], identifiers=spec["identifiers"]))

    def body_frequency(self, terms: list[str], live: np.ndarray | None = None) -> tuple[dict[str, int], int]:
        """How many of this shard's rows hold each term in their body, and how many rows were
        counted (only ``live`` rows, when given)."""
        rows = len(self.tie_order) if live is None else int(np.count_nonzero(live))
        return self.matrices["body"].document_frequency(terms, live), rows

    def search(self, query: str, k: int, mask: np.ndarray | None = None,
               weights: Mapping[str, float] | None = None) -> Rows:
        scores = self.scores(query, weights)
        if mask is not None:
            scores = np.where(mask, scores, 0.0).astype(np.float32)
        rows = np.flatnonzero(scores > 0)
        if k <= 0 or not len(rows):
            return np.empty(0, np.int64), np.empty(0, np.float32)
        if len(rows) > k:  # keep every row tied with the k-th so the tie order decides the cut
            rows = rows[scores[rows] >= np.partition(scores[rows], -k)[-k]]
        order = np.lexsort((self.tie_order[rows], -scores[rows]))[:k]
        return rows[order].astype(np.int64), scores[rows[order]].astype(np.float32)

    def scores(self, query: str, weights: Mapping[str, float] | None = None) -> np.ndarray:
        """The weighted channel sum for every row (channels in ``CHANNELS`` order)."""
        weights = {**DEFAULT_WEIGHTS, **(weights or {})}
        unknown = set(weights) - set(CHANNELS)
        if unknown:
            raise ValueError(f"unknown lexical channel(s) {sorted(unknown)}; use {list(CHANNELS)}")
        words, exact = self.analyzer.terms(query), self.analyzer.exact_terms(query)
        total = np.zeros(len(self.tie_order), np.float32)
        for name in CHANNELS:
            if weights[name] and name in self.matrices:
                channel_terms = exact if name == "exact" else words
                total += np.float32(weights[name]) * self.matrices[name].scores(channel_terms)
        return total
