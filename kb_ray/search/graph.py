"""Search mode ``graph``: personalized PageRank over the chunk-concept graph (docs/graph.md).

``ConceptGraph`` is a generation's graph as loaded (kb_ray/index/graph.py): a sparse matrix
``A`` (chunks × concept nodes, weight = mentions). Per query:

1. the query's concepts (the ingest's extractor, kb_ray/index/concepts.py) that are nodes of
   the graph seed it, each weighted by its specificity ``1 / df`` (HippoRAG's node specificity:
   a concept in many chunks says little) times its count in the query; seeds sum to 1
   (``ln(1 + chunks / df)`` instead lost on the realdocs dev split: benchmarks/results/eval.md);
2. chunks the filter or the hydration gate rule out (the searcher's per-shard masks, the same
   as every mode's) are cut out of the graph: they neither score nor pass mass on;
3. power iteration of the walk with restart on the bipartite graph: from a concept to its
   allowed chunks in proportion to the edge weights, from a chunk to its concepts likewise,
   back to the seeds with probability ``restart``; ``iterations`` rounds;
4. the allowed chunks with mass, best first, are one ranked list that the searcher fuses with
   dense and lexical by RRF (``search.graph.weight``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from kb_ray.index.concepts import ConceptExtractor


class ConceptGraph:
    def __init__(self, info: dict[str, Any], chunk_ids: list[str], keys: list[str], labels: list[str],
                 df: np.ndarray, edges: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.info, self.chunk_ids, self.keys, self.labels, self.df = info, chunk_ids, keys, labels, df
        chunk, concept, weight = edges
        self.matrix = sp.csr_matrix((weight.astype(np.float64), (chunk, concept)),
                                    shape=(len(chunk_ids), len(keys)))
        self.transposed = self.matrix.T.tocsr()
        self.chunk_degree = np.asarray(self.matrix.sum(axis=1)).ravel()
        self.nodes_of: dict[str, list[int]] = {}
        for node, key in enumerate(keys):
            self.nodes_of.setdefault(key, []).append(node)
        self.row_of = {cid: row for row, cid in enumerate(chunk_ids)}
        self.extractor = ConceptExtractor()
        self._bound: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}  # id(shard) -> (shard, rows, reverse)

    @classmethod
    def load(cls, generation_dir: Path, info: dict[str, Any]) -> ConceptGraph:
        folder = generation_dir / info["dir"]
        concepts = pq.read_table(folder / info["concept_file"])
        edges = pq.read_table(folder / info["edge_file"])
        return cls(info, pq.read_table(folder / info["chunk_file"]).column("chunk_id").to_pylist(),
                   concepts.column("key").to_pylist(), concepts.column("label").to_pylist(),
                   concepts.column("df").to_numpy().astype(np.float64),
                   tuple(edges.column(c).to_numpy() for c in ("chunk", "concept", "weight")))

    def seeds(self, query: str) -> np.ndarray:
        """The restart distribution over concept nodes (all zero when no query concept is a node)."""
        seed = np.zeros(len(self.keys), np.float64)
        for key, count in self.extractor.query_keys(query).items():
            for node in self.nodes_of.get(key, ()):
                seed[node] += count / self.df[node]
        total = seed.sum()
        return seed / total if total > 0 else seed

    def rank(self, seed: np.ndarray, allowed: np.ndarray, *, restart: float, iterations: int) -> np.ndarray:
        """Personalized PageRank mass of each chunk (0 for chunks not ``allowed``)."""
        mask = allowed.astype(np.float64)
        if not seed.any() or not mask.any():
            return np.zeros(len(self.chunk_ids), np.float64)
        concept_degree = self.transposed @ mask  # edge weight to allowed chunks only
        seed = np.where(concept_degree > 0, seed, 0.0)
        chunk_degree = np.where(self.chunk_degree > 0, self.chunk_degree, 1.0)
        concept_mass, chunk_mass = seed.copy(), np.zeros(len(self.chunk_ids), np.float64)
        inverse_concept = np.divide(1.0, concept_degree, out=np.zeros_like(concept_degree), where=concept_degree > 0)
        for _ in range(iterations):
            chunk_mass = (1 - restart) * mask * (self.matrix @ (concept_mass * inverse_concept))
            concept_mass = restart * seed + (1 - restart) * (self.transposed @ (chunk_mass / chunk_degree))
        return chunk_mass

    def allowed(self, shards: list[Any], masks: list[np.ndarray]) -> np.ndarray:
        """Graph chunks allowed by the searcher's per-shard masks (filters and the hydration gate)."""
        allowed = np.zeros(len(self.chunk_ids), bool)
        for shard, mask in zip(shards, masks):
            rows = self._rows(shard)
            present = rows >= 0
            allowed[rows[present]] |= mask[present]
        return allowed

    def ranked(self, scores: np.ndarray, shards: list[Any], masks: list[np.ndarray],
               n: int) -> list[tuple[str, float, int, int]]:
        """The ``n`` best chunks with mass as ``(chunk_id, score, shard, row)``, best first (ties by
        the shard's location-independent tie key, then id, as every mode's lists), each at a shard
        row its mask allows (a chunk kept by a newer version sits in a segment too)."""
        found = np.flatnonzero(scores > 0)
        if len(found) > n:
            cut = np.partition(scores[found], len(found) - n)[len(found) - n]
            found = found[scores[found] >= cut]
        placed = []  # (tie key, chunk id, score, shard, shard row)
        for row in found.tolist():
            for shard, mask in zip(shards, masks):
                shard_row = int(self._bind(shard)[1][row])
                if shard_row >= 0 and mask[shard_row]:
                    placed.append((shard.tie_keys[shard_row], self.chunk_ids[row], float(scores[row]),
                                   shard.info.shard, shard_row))
                    break
        placed.sort(key=lambda item: (-item[2], item[0], item[1]))
        return [item[1:] for item in placed[:n]]

    def _rows(self, shard: Any) -> np.ndarray:
        return self._bind(shard)[0]

    def _bind(self, shard: Any) -> tuple[np.ndarray, np.ndarray]:
        """The graph row of each shard row (-1: not in the graph) and the shard row of each graph row."""
        bound = self._bound.get(id(shard))
        if bound is None or bound[0] is not shard:
            rows = np.array([self.row_of.get(cid, -1) for cid in shard.chunk_ids], np.int64)
            reverse = np.full(len(self.chunk_ids), -1, np.int64)
            present = np.flatnonzero(rows >= 0)
            reverse[rows[present]] = present
            bound = self._bound[id(shard)] = (shard, rows, reverse)
        return bound[1], bound[2]

    def seed_labels(self, seed: np.ndarray, top: int = 10) -> list[dict[str, Any]]:
        nodes = sorted(np.flatnonzero(seed).tolist(), key=lambda node: (-seed[node], self.keys[node]))[:top]
        return [{"concept": self.labels[node], "key": self.keys[node], "weight": round(float(seed[node]), 6)}
                for node in nodes]
