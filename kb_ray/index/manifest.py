"""The manifest of one index generation: what it was built from and where its files are.

``generation_id`` is a content hash of the index spec, the catalog table versions and the
embedder fingerprint, so rebuilding from the same catalog versions with the same settings
yields the same id (promise 1 in docs/architecture.md: drop an index, rebuild it, get the same results).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

INDEX_FORMAT_VERSION = 4  # 2: the bm25 channel index (kb_ray.index.channels); 3: lineage columns in hydration;
# 4: bm25 term frequencies and row lengths beside the weights (re-weighting for delta segments)
MANIFEST_NAME = "manifest.json"
HYDRATION_FILE = "hydration.parquet"
DENSE_FILE = "dense.faiss"
DENSE_OWNERS_FILE = "dense_owners.npy"
LEXICAL_DIR = "lexical"


@dataclass(frozen=True)
class ShardInfo:
    """One shard of a generation: its folder, row count and index types."""

    shard: int
    rows: int
    dir: str
    dense_type: str | None  # flat | hnsw | ivf; None for an empty shard
    hydration: str = HYDRATION_FILE
    dense: str | None = DENSE_FILE
    lexical: str | None = LEXICAL_DIR
    dense_owners: str | None = None  # with passage vectors: the row of each dense vector (kb_ray/index/passages.py)


@dataclass(frozen=True)
class GenerationManifest:
    """Everything needed to load, audit and rebuild one index generation."""

    generation_id: str
    kind: str
    spec: dict[str, Any]
    catalog_versions: dict[str, int]
    embedder_fp: str
    dim: int
    lexical_type: str
    shards: list[ShardInfo]
    created_at: str
    stats: dict[str, Any] = field(default_factory=dict)
    pages: dict[str, Any] | None = None  # the page index (kb_ray.index.pages), when page embeddings exist
    tree: dict[str, Any] | None = None  # the section tree (kb_ray.index.tree), with index.tree
    graph: dict[str, Any] | None = None  # the chunk-concept graph (kb_ray.index.graph), with index.graph
    # the settings it was built with, which its delta segments and compactions keep
    # (kb_ray/index/build_options.py); None in a manifest written before they were recorded
    build_options: dict[str, Any] | None = None

    @property
    def rows(self) -> int:
        return sum(shard.rows for shard in self.shards)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GenerationManifest:
        data = json.loads(text)
        data["shards"] = [ShardInfo(**shard) for shard in data["shards"]]
        return cls(**data)


def spec_fingerprint(spec: dict[str, Any]) -> str:
    return _sha(spec)[:32]


def generation_id_for(spec: dict[str, Any], catalog_versions: dict[str, int], embedder_fp: str) -> str:
    """``gen_`` + 128 bits of sha256 over the spec, catalog versions and embedder fp."""
    payload = {"spec": spec, "catalog_versions": dict(sorted(catalog_versions.items())), "embedder_fp": embedder_fp}
    return f"gen_{_sha(payload)[:32]}"


def _sha(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
