"""Filter conformance on synthetic catalogs (no Ray): no leak, exactly k when >= k match,
the same behaviour in dense, lexical and hybrid mode, for every index backend."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.index import build_index
from kb_ray.search import HybridSearcher
from tests.index_fixtures import golden_config, synthetic_docs, write_synthetic_catalog

DOCS = synthetic_docs(48)
DOCS[5].active = False  # tombstoned before the build
FILTERS = {
    "collection": ({"collection": "beta"}, lambda d: d.collection == "beta"),
    "collection_list": ({"collection": ["alpha", "gamma"]}, lambda d: d.collection in ("alpha", "gamma")),
    "document_ids": ({"document_ids": ["doc_doc-001", "doc_doc-007", "doc_doc-005"]},
                     lambda d: d.key in ("doc-001", "doc-007", "doc-005")),
    "tags_any": ({"tags_any": ["green", "blue"]}, lambda d: bool({"green", "blue"} & set(d.tags))),
    "tags_all": ({"tags_all": ["red", "blue"]}, lambda d: {"red", "blue"} <= set(d.tags)),
    "mime": ({"mime": "text/html"}, lambda d: d.mime == "text/html"),
    "created_range": ({"created_after": "2024-03-01", "created_before": "2024-09-01T00:00:00Z"},
                      lambda d: datetime(2024, 3, 1, tzinfo=timezone.utc) < d.created_at
                      < datetime(2024, 9, 1, tzinfo=timezone.utc)),
    "metadata": ({"metadata": {"team": "ingest", "year": [2025]}},
                 lambda d: d.metadata["team"] == "ingest" and d.metadata["year"] == 2025),
    "combined": ({"collection": "alpha", "tags_any": ["red"]}, lambda d: d.collection == "alpha" and "red" in d.tags),
    "nothing": ({"collection": "nope"}, lambda d: False),
}
BACKENDS = {
    "flat-bm25s": ("index.shards=3",),
    "hnsw-tantivy": ("index.shards=2", "index.flat_max_vectors=4", "index.lexical=tantivy"),
    "ivf-bm25s": ("index.shards=1", "index.dense=ivf"),
}


def _expected(predicate) -> set[str]:
    return {f"ch_{d.key}_{n}" for d in DOCS if d.active and predicate(d) for n in range(d.chunks)}


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def searcher(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param) / "kb"
    write_synthetic_catalog(root, DOCS)
    config = golden_config(root, *BACKENDS[request.param], "index.filterable_metadata=[team, year]")
    build_index(config)
    return HybridSearcher.open(config, gate_max_age_s=0.0)


@pytest.mark.parametrize("name", sorted(FILTERS))
@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_no_leak_and_exactly_k(searcher, name, mode):
    filters, predicate = FILTERS[name]
    expected = _expected(predicate)
    vector = np.random.default_rng(7).normal(size=16).astype(np.float32)
    for k in (1, 3, 10, 100):
        hits = searcher.search("common term", k=k, mode=mode, filters=filters, query_vector=vector).hits
        ids = [hit["chunk_id"] for hit in hits]
        assert set(ids) <= expected, f"{name}/{mode}: leaked {set(ids) - expected}"
        assert len(ids) == len(set(ids)) == min(k, len(expected))
        if k >= len(expected):
            assert set(ids) == expected


def test_tombstone_and_supersede_after_build_are_gated(searcher):
    catalog: DeltaCatalog = searcher.catalog
    documents = catalog.read("documents").to_pylist()
    by_key = {row["key"]: row for row in documents}
    changed = [{**by_key["doc-002"], "active_version_id": None},
               {**by_key["doc-003"], "active_version_id": "ver_doc-003-v2"}]
    catalog.merge_upsert("documents", pa.Table.from_pylist(changed, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    try:
        vector = np.ones(16, np.float32)
        for mode in ("dense", "lexical", "hybrid"):
            hits = searcher.search("common term", k=100, mode=mode, query_vector=vector).hits
            docs = {hit["document_id"] for hit in hits}
            assert not docs & {"doc_doc-002", "doc_doc-003", "doc_doc-005"}
            assert len(hits) == len(_expected(lambda d: d.key not in ("doc-002", "doc-003")))
    finally:
        catalog.merge_upsert("documents", pa.Table.from_pylist(
            [by_key["doc-002"], by_key["doc-003"]], schema=catalog.read("documents").schema), keys=["document_id"])
