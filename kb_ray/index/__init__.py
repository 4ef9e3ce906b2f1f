"""Derived indexes (promise 1, docs/architecture.md): sharded FAISS + BM25 + hydration files per generation.

* :func:`build_index` — build a generation from named catalog table versions.
* :func:`switch_generation`, :func:`read_current`, :func:`drop_generation`,
  :func:`load_manifest` — manage generations under ``{kb_root}/indexes/``.
* :class:`FaissShard`, :class:`LexicalIndex` (:class:`Bm25sIndex`, :class:`TantivyIndex`)
  — the per-shard indexes the search core loads.
"""

from kb_ray.index.build import build_index, shard_of
from kb_ray.index.dense import FaissShard
from kb_ray.index.generations import (
    GenerationError,
    drop_generation,
    load_manifest,
    read_current,
    switch_generation,
)
from kb_ray.index.lexical import Bm25sIndex, LexicalIndex, TantivyIndex, lexical_index_class
from kb_ray.index.manifest import GenerationManifest, ShardInfo

__all__ = [
    "Bm25sIndex", "FaissShard", "GenerationError", "GenerationManifest", "LexicalIndex", "ShardInfo",
    "TantivyIndex", "build_index", "drop_generation", "lexical_index_class", "load_manifest",
    "read_current", "shard_of", "switch_generation",
]
