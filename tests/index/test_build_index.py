"""build_index on the golden catalog and on synthetic catalogs (no Ray for the latter)."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.errors import CatalogError
from kb_ray.index import (
    GenerationError,
    build_index,
    drop_generation,
    load_manifest,
    read_current,
    shard_of,
    switch_generation,
)
from kb_ray.index.generations import generation_uri
from tests.index_fixtures import SYNTHETIC_FP, copy_kb, golden_config, synthetic_docs, write_synthetic_catalog


def _shard_rows(kb_root: str, manifest) -> list:
    folder = generation_uri(kb_root, manifest.generation_id)
    return [pq.read_table(f"{folder}/{s.dir}/{s.hydration}") for s in manifest.shards]


def test_golden_build_writes_shards_manifest_row_and_current(golden_kb):
    manifest = build_index(golden_config(golden_kb))
    catalog = DeltaCatalog.open(golden_kb, create=False)
    active = catalog.read("version_chunks").num_rows  # one version per golden document
    assert manifest.rows == active == sum(t.num_rows for t in _shard_rows(golden_kb, manifest))
    assert read_current(golden_kb) == manifest.generation_id
    assert set(manifest.catalog_versions) == {"documents", "versions", "chunks", "version_chunks", "embeddings"}
    row = catalog.read("index_generations", filter=pc.field("generation_id") == manifest.generation_id).to_pylist()
    assert row[0]["status"] == "ready"
    assert json.loads(row[0]["catalog_versions_json"]) == manifest.catalog_versions
    assert load_manifest(golden_kb, manifest.generation_id) == manifest


def test_rows_sit_in_their_hash_shard_sorted_by_chunk_id(golden_kb):
    manifest = build_index(golden_config(golden_kb))
    for info, table in zip(manifest.shards, _shard_rows(golden_kb, manifest)):
        ids = table.column("chunk_id").to_pylist()
        assert ids == sorted(ids)
        assert all(shard_of(cid, len(manifest.shards)) == info.shard for cid in ids)


def test_same_catalog_versions_give_same_generation_and_identical_files(golden_kb, tmp_path):
    root = copy_kb(golden_kb, tmp_path / "kb")
    first = build_index(golden_config(root))
    before = [(tmp_path / "kb" / "indexes" / first.generation_id / s.dir / s.hydration).read_bytes()
              for s in first.shards]
    switch_generation(root, build_index(golden_config(root, "index.shards=1")).generation_id)
    assert drop_generation(root, first.generation_id)
    rebuilt = build_index(golden_config(root, "index.switch_after_build=false"),
                          catalog_versions=first.catalog_versions)
    assert rebuilt.generation_id == first.generation_id
    after = [(tmp_path / "kb" / "indexes" / rebuilt.generation_id / s.dir / s.hydration).read_bytes()
             for s in rebuilt.shards]
    assert after == before


def test_drop_refuses_the_live_generation(golden_kb, tmp_path):
    root = copy_kb(golden_kb, tmp_path / "kb")
    manifest = build_index(golden_config(root))
    with pytest.raises(GenerationError, match="live generation"):
        drop_generation(root, manifest.generation_id)
    with pytest.raises(GenerationError, match="no manifest"):
        switch_generation(root, "gen_does_not_exist")


def test_time_travel_to_empty_catalog_builds_empty_shards(golden_kb, tmp_path):
    root = copy_kb(golden_kb, tmp_path / "kb")
    versions = {name: 0 for name in ("documents", "versions", "chunks", "version_chunks", "embeddings")}
    manifest = build_index(golden_config(root, "index.switch_after_build=false"), catalog_versions=versions)
    assert manifest.rows == 0 and all(s.dense_type is None for s in manifest.shards)


@pytest.mark.parametrize("overrides, dense_types", [
    (("index.shards=3",), {"flat"}),
    (("index.flat_max_vectors=5", "index.lexical=tantivy"), {"hnsw"}),
    (("index.dense=ivf",), {"ivf"}),
])
def test_synthetic_builds_choose_dense_type(tmp_path, overrides, dense_types):
    write_synthetic_catalog(tmp_path / "kb", synthetic_docs(30))
    manifest = build_index(golden_config(tmp_path / "kb", *overrides))
    assert {s.dense_type for s in manifest.shards if s.rows} == dense_types
    assert manifest.embedder_fp == SYNTHETIC_FP


def test_several_embedders_must_be_named(tmp_path):
    docs = synthetic_docs(6)
    write_synthetic_catalog(tmp_path / "kb", docs)
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    other = catalog.read("embeddings").to_pylist()
    catalog.append("embeddings", catalog.read("embeddings").from_pylist(
        [{**row, "embedder_fp": "fp_other"} for row in other], schema=catalog.read("embeddings").schema))
    with pytest.raises(CatalogError, match="several embedders"):
        build_index(golden_config(tmp_path / "kb"))
    manifest = build_index(golden_config(tmp_path / "kb"), embedder_fp="fp_other")
    assert manifest.embedder_fp == "fp_other"


def test_catalog_versions_must_name_indexed_tables(golden_kb):
    with pytest.raises(CatalogError, match="must name"):
        build_index(golden_config(golden_kb), catalog_versions={"documents": 1})
