"""``read_served_rows``: what a publication holds equals what a searcher of the generation serves
(base ∪ delta segments, minus versions the catalog no longer has active). No Postgres, no Ray."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kb_ray.catalog import DeltaCatalog
from kb_ray.index import build_index
from kb_ray.index.refresh import refresh_index
from kb_ray.publish.served import read_served_rows
from kb_ray.search import HybridSearcher
from tests.index_fixtures import golden_config, synthetic_docs, write_synthetic_catalog


def _upsert_document(root: str, document_id: str, **changes) -> None:
    catalog = DeltaCatalog.open(root, create=False)
    documents = catalog.read("documents")
    row = next(r for r in documents.to_pylist() if r["document_id"] == document_id)
    catalog.merge_upsert("documents", pa.Table.from_pylist([{**row, **changes}], schema=documents.schema),
                         keys=["document_id"])


def _served_by_searcher(config) -> set[str]:
    searcher = HybridSearcher.open(config, embedder=object(), gate_max_age_s=0.0)
    token, active = searcher.gate.snapshot()
    return {cid for shard in searcher._loaded.shards
            for cid, keep in zip(shard.chunk_ids, shard.gate_mask(token, active)) if keep}


def test_served_rows_are_base_minus_tombstones_plus_segments(tmp_path):
    root = str(tmp_path / "kb")
    catalog = write_synthetic_catalog(root, synthetic_docs(12))
    config = golden_config(root, "index.shards=2")
    manifest = build_index(config)
    _upsert_document(root, "doc_doc-000", active_version_id=None)  # tombstone: no rows, the gate hides it
    _upsert_document(root, "doc_doc-001", tags=["fresh"])  # metadata edit: segment 1 rewrites its rows
    assert refresh_index(config, compact=False).segment == 1

    served = read_served_rows(config, manifest.generation_id)
    assert served.segment == 1 and served.catalog_versions["documents"] > manifest.catalog_versions["documents"]
    chunk_ids = served.rows.column("chunk_id").to_pylist()
    assert len(chunk_ids) == len(set(chunk_ids)) == served.vectors.shape[0]
    assert set(chunk_ids) == _served_by_searcher(config)
    assert not any(cid.startswith("ch_doc-000_") for cid in chunk_ids) and served.gated_rows > 0
    tags = {tuple(t) for d, t in zip(served.rows.column("document_id").to_pylist(),
                                     served.rows.column("tags").to_pylist()) if d == "doc_doc-001"}
    assert tags == {("fresh",)}

    embeddings = catalog.read("embeddings").to_pylist()
    chunks = {r["chunk_id"]: r["embed_text_sha"] for r in catalog.read("chunks").to_pylist()}
    by_sha = {r["embed_text_sha"]: np.asarray(r["vector"], np.float32) for r in embeddings}
    for chunk_id, vector in zip(chunk_ids, served.vectors):
        expected = by_sha[chunks[chunk_id]]
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)

    base_only = read_served_rows(config, manifest.generation_id, segment=0)
    assert base_only.segment == 0 and base_only.rows.num_rows == served.rows.num_rows
    assert {tuple(t) for t in base_only.rows.column("tags").to_pylist()} >= {("red",), ("blue",)}
