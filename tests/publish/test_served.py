"""``read_served_rows``: what a publication holds equals what a searcher of the generation serves
(base ∪ delta segments, minus versions the catalog no longer has active). No Postgres, no Ray."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.index import build_index
from kb_ray.index.generations import local_generation_dir
from kb_ray.index.refresh import refresh_index
from kb_ray.publish.served import read_served_rows
from kb_ray.search import HybridSearcher
from tests.index_fixtures import copy_kb, golden_config, synthetic_docs, write_synthetic_catalog
from tests.publish.searcher_passages import assert_same_passages, searcher_passages


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


def _document_ids(root: str) -> dict[str, str]:
    documents = DeltaCatalog.open(root, create=False).read("documents").to_pylist()
    return {r["uri"].rsplit("/", 1)[-1]: r["document_id"] for r in documents}


def test_served_passages_are_the_searchers_for_the_served_rows(golden_kb, tmp_path):
    root = copy_kb(golden_kb, tmp_path / "kb")
    config = golden_config(root, "index.shards=2")  # the default index.passage_chars
    manifest = build_index(config)
    names = _document_ids(root)
    _upsert_document(root, names["manual.pdf"], active_version_id=None)  # tombstone: its passages go too
    _upsert_document(root, names["long_report.pdf"], tags=["fresh"])  # segment 1 rewrites its rows and passages
    assert refresh_index(config, compact=False).segment == 1

    served = read_served_rows(config, manifest.generation_id)
    chunk_ids = served.rows.column("chunk_id").to_pylist()
    documents = served.rows.column("document_id").to_pylist()
    found: dict[str, list[np.ndarray]] = defaultdict(list)
    for row, vector in zip(served.passage_rows, served.passage_vectors):
        found[chunk_ids[row]].append(vector)
    assert_same_passages(found, searcher_passages(HybridSearcher.open(config, embedder=object(),
                                                                      gate_max_age_s=0.0)))
    with_passages = {documents[row] for row in served.passage_rows}
    assert names["long_report.pdf"] in with_passages and names["manual.pdf"] not in set(documents)


def test_a_shard_whose_owners_disagree_with_its_vectors_names_both_counts(golden_kb, tmp_path):
    root = copy_kb(golden_kb, tmp_path / "kb")
    config = golden_config(root, "index.shards=1")
    manifest = build_index(config)
    info = manifest.shards[0]
    owners_file = local_generation_dir(root, manifest.generation_id) / info.dir / info.dense_owners
    owners = np.load(owners_file)
    np.save(owners_file, owners[:-1])  # one passage vector fewer than the FAISS index holds
    passages = len(owners) - 1 - info.rows
    message = (f"holds {len(owners)} vectors but {info.dense_owners} names {len(owners) - 1} "
               f"({info.rows} hydration rows + {passages} passage vectors)")
    with pytest.raises(ValueError, match=re.escape(message)):
        read_served_rows(config, manifest.generation_id)
