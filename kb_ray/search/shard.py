"""``SearchShard``: one loaded shard (hydration rows, FAISS index, BM25 index) and its masks;
``gather_ranked`` merges per-shard results, equal scores ordered by the location-independent
``tie_keys`` (kb_ray.index.channels.tie_keys) and then by chunk id."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kb_ray.index.bm25 import CorpusStatistics
from kb_ray.index.channels import tie_keys
from kb_ray.index.dense import FaissShard, MultiVectorShard
from kb_ray.index.lexical import lexical_index_class
from kb_ray.index.manifest import ShardInfo
from kb_ray.search.confidence import common_words, unknown_share
from kb_ray.search.filters import SearchFilter, metadata_column

logger = logging.getLogger(__name__)

Rows = tuple[np.ndarray, np.ndarray]


class SearchShard:
    """Searches one shard; every search takes a row mask applied before top-k."""

    def __init__(self, info: ShardInfo, hydration: pa.Table, dense: FaissShard | MultiVectorShard | None,
                 lexical: Any, *, visible: np.ndarray | None = None) -> None:
        self.info = info
        self.hydration = hydration
        self.dense_index = dense
        self.lexical_index = lexical
        self.visible = visible  # rows a newer delta segment has not replaced (None: all)
        self.chunk_ids: list[str] = hydration.column("chunk_id").to_pylist()
        self.tie_keys: list[str] = tie_keys(hydration)
        self._metadata: dict[str, list[Any]] = {}
        self._gate: tuple[int, np.ndarray] | None = None

    def placed(self, position: int, *, lexical: Any, visible: np.ndarray | None) -> SearchShard:
        """This shard's data as shard ``position`` of a base ∪ segments set, scored by ``lexical``."""
        shard = SearchShard.__new__(SearchShard)
        shard.__dict__.update(self.__dict__)
        shard.info, shard.lexical_index, shard.visible = replace(self.info, shard=position), lexical, visible
        shard._metadata, shard._gate = self._metadata, None
        return shard

    @classmethod
    def load(cls, generation_dir: Path, info: ShardInfo, lexical_type: str) -> SearchShard:
        folder = generation_dir / info.dir
        hydration = pq.read_table(folder / info.hydration)
        if info.rows == 0:
            return cls(info, hydration, None, None)
        dense = (MultiVectorShard.load(folder / info.dense, info.dense_type, folder / info.dense_owners)
                 if info.dense_owners else FaissShard.load(folder / info.dense, info.dense_type))
        lexical = lexical_index_class(lexical_type).load(folder / info.lexical)
        return cls(info, hydration, dense, lexical)

    @property
    def rows(self) -> int:
        return self.hydration.num_rows

    def row_vectors(self, row: int) -> np.ndarray | None:
        """The dense vectors stored for ``row`` (its own first, then its passages'); None without
        a dense index."""
        return None if self.dense_index is None else self.dense_index.row_vectors(row)

    def metadata_values(self, name: str) -> list[Any]:
        if name not in self._metadata:
            self._metadata[name] = metadata_column(self.hydration.column("metadata_json").to_pylist(), name)
        return self._metadata[name]

    def mask(self, search_filter: SearchFilter, *, gate_token: int, active_versions: pa.Array) -> np.ndarray:
        """Rows allowed by the filter AND the hydration gate (document's active version)."""
        mask = self.gate_mask(gate_token, active_versions)
        if not search_filter.is_empty:
            mask = mask & search_filter.mask(self.hydration, self.metadata_values)
        return mask

    def gate_mask(self, token: int, active_versions: pa.Array) -> np.ndarray:
        """Rows whose version is still its document's active version (cached per snapshot) and
        that no newer delta segment replaced.

        A version id belongs to exactly one document, so "version_id is an active version"
        equals "the document's active pointer names this version".
        """
        if self._gate is None or self._gate[0] != token:
            active = pc.is_in(self.hydration.column("version_id"), value_set=active_versions)
            gate = pc.fill_null(active, False).to_numpy(zero_copy_only=False).astype(bool)
            self._gate = (token, gate if self.visible is None else gate & self.visible)
        return self._gate[1]

    def dense(self, query_vector: np.ndarray, k: int, mask: np.ndarray) -> Rows:
        if self.dense_index is None or not mask.any():
            return _empty()
        return self.dense_index.search(query_vector, k, None if mask.all() else mask)

    def lexical(self, query: str, k: int, mask: np.ndarray, weights: dict[str, float] | None = None) -> Rows:
        """BM25 top ``k``; ``weights``: channel weights of the bm25 index (baselines ignore them)."""
        if self.lexical_index is None or not mask.any():
            return _empty()
        return self.lexical_index.search(query, k, None if mask.all() else mask, weights=weights)


def unknown_terms_share(query: str, shards: list[SearchShard]) -> float:
    """The query's IDF-weighted share of uncommon terms no visible chunk holds in its BM25 body,
    over every shard (kb_ray/search/confidence.py ``unknown_share``); 0 without a channel index
    or without the common-word list."""
    common = common_words()
    indexes = [shard.lexical_index for shard in shards]
    if common is None or not indexes or not all(hasattr(index, "body_frequency") for index in indexes):
        return 0.0
    terms = list(dict.fromkeys(indexes[0].analyzer.terms(query)))  # one generation, one analyzer
    document_frequency: dict[str, int] = dict.fromkeys(terms, 0)
    documents = 0
    for shard in shards:
        frequency, rows = shard.lexical_index.body_frequency(terms, shard.visible)
        documents += rows
        for term, count in frequency.items():
            document_frequency[term] += count
    return unknown_share(terms, CorpusStatistics(document_frequency, documents, 0.0), common=common)


def gather_ranked(per_shard: list[tuple[SearchShard, Rows]], n: int) -> list[tuple[str, float, int, int]]:
    """The best ``n`` (chunk_id, score, shard, row) across shards; ties by tie key, then id."""
    merged = [
        (shard.tie_keys[int(row)], shard.chunk_ids[int(row)], float(score), shard.info.shard, int(row))
        for shard, (rows, scores) in per_shard
        for row, score in zip(rows, scores)
    ]
    merged.sort(key=lambda item: (-item[2], item[0], item[1]))
    return [item[1:] for item in merged[:n]]


def _empty() -> Rows:
    return np.empty(0, np.int64), np.empty(0, np.float32)
