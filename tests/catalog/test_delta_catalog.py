"""DeltaCatalog on real Delta tables in tmp_path."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from catalog_rows import NOW, embedding_rows
from deltalake import DeltaTable

from kb_ray.catalog import DataFile, DeltaCatalog
from kb_ray.catalog.contract import SCHEMA_VERSION_KEY
from kb_ray.catalog.contract import schemas as contract_schemas
from kb_ray.errors import CatalogError
from tests.concurrency import race

schemas = contract_schemas()
EMBEDDING_KEYS = ["embedder_fp", "embed_text_sha"]


def test_open_creates_every_table_with_schema_version(tmp_path):
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    assert set(catalog.table_versions()) == set(schemas.TABLE_NAMES)
    for name in schemas.TABLE_NAMES:
        assert os.path.isdir(tmp_path / "kb" / "tables" / name / "_delta_log")
        dt = catalog.delta_table(name)
        assert dt.metadata().configuration[SCHEMA_VERSION_KEY] == str(schemas.SCHEMA_VERSION)
        assert dt.schema().to_arrow() is not None
    marker = json.loads((tmp_path / "kb" / "_kb_ray_catalog.json").read_text())
    assert marker["schema_version"] == schemas.SCHEMA_VERSION


def test_reopen_keeps_data(tmp_path):
    DeltaCatalog.open(str(tmp_path / "kb")).append("embeddings", embedding_rows("s1"))
    reopened = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    assert reopened.read("embeddings").num_rows == 1
    assert reopened.table_versions()["embeddings"] == 1


def test_open_without_create_refuses_missing_catalog(tmp_path):
    with pytest.raises(CatalogError, match="run `kb-ray ingest` first") as refused:
        DeltaCatalog.open(str(tmp_path / "nothing"), create=False)
    assert "create=True" not in str(refused.value)  # the user's words, not the API's


def test_reading_an_existing_catalog_creates_tables_added_since(tmp_path):
    DeltaCatalog.open(str(tmp_path / "kb"))
    shutil.rmtree(tmp_path / "kb" / "tables" / "page_embeddings")  # as written by an older kb-ray
    catalog = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    assert catalog.read("page_embeddings").num_rows == 0


def test_schema_version_mismatch_in_marker_is_refused(tmp_path):
    DeltaCatalog.open(str(tmp_path / "kb"))
    marker = tmp_path / "kb" / "_kb_ray_catalog.json"
    marker.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(CatalogError, match=r"found 99, this kb-ray expects 1.*migrate"):
        DeltaCatalog.open(str(tmp_path / "kb"))


def test_schema_version_mismatch_in_table_property_is_refused(tmp_path):
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    catalog.delta_table("chunks").alter.set_table_properties(
        {SCHEMA_VERSION_KEY: "2"}, raise_if_not_exists=False
    )
    with pytest.raises(CatalogError, match=r"tables/chunks: found 2, this kb-ray expects 1"):
        DeltaCatalog.open(str(tmp_path / "kb"))


def test_append_casts_large_string_and_fills_nullable_columns(catalog):
    data = pa.table(
        {
            "embedder_fp": pa.array(["fp"], pa.large_string()),
            "embed_text_sha": pa.array(["s"], pa.large_string()),
            "vector": pa.array([[1.0, 2.0]], pa.large_list(pa.float64())),
        }
    )
    assert catalog.append("embeddings", data)
    table = catalog.read("embeddings")
    assert table.schema.field("embedder_fp").type == pa.string()
    assert table.to_pylist() == [
        {"embedder_fp": "fp", "embed_text_sha": "s", "dim": None, "vector": [1.0, 2.0]}
    ]


def test_append_casts_naive_timestamps_to_utc(catalog):
    naive = pa.array([NOW.replace(tzinfo=None)], pa.timestamp("us"))
    catalog.append("ingest_runs", pa.table({"run_id": ["r"], "started_at": naive}))
    assert catalog.read("ingest_runs").column("started_at").to_pylist() == [NOW]


def test_append_rejects_unknown_columns_and_missing_keys(catalog):
    with pytest.raises(CatalogError, match="not in the catalog schema"):
        catalog.append("embeddings", embedding_rows("s").append_column("oops", pa.array([1])))
    with pytest.raises(CatalogError, match="key column 'embed_text_sha' is missing"):
        catalog.append("embeddings", pa.table({"embedder_fp": ["fp"]}))
    with pytest.raises(CatalogError, match="unknown catalog table"):
        catalog.append("nope", embedding_rows("s"))


def test_append_with_same_app_transaction_writes_nothing(catalog):
    assert catalog.append("embeddings", embedding_rows("s1"), app_id="run-1", app_version=0)
    version = catalog.table_versions()["embeddings"]
    assert not catalog.append("embeddings", embedding_rows("s1"), app_id="run-1", app_version=0)
    assert catalog.table_versions()["embeddings"] == version
    assert catalog.read("embeddings").num_rows == 1
    assert catalog.transaction_version("embeddings", "run-1") == 0
    assert catalog.append("embeddings", embedding_rows("s2"), app_id="run-1", app_version=1)
    assert catalog.read("embeddings").num_rows == 2


def test_app_id_requires_app_version(catalog):
    with pytest.raises(CatalogError, match="together"):
        catalog.append("embeddings", embedding_rows("s1"), app_id="run-1")


def test_commit_files_commits_worker_files_in_one_transaction(catalog):
    before = catalog.table_versions()["embeddings"]
    files = [
        pickle.loads(pickle.dumps(catalog.write_data_file("embeddings", embedding_rows(*shas))))
        for shas in (["s1", "s2"], ["s3"])
    ]
    assert catalog.read("embeddings").num_rows == 0  # written, not yet committed
    assert catalog.commit_files("embeddings", files, app_id="batch", app_version=7)
    assert catalog.table_versions()["embeddings"] == before + 1
    shas = catalog.read("embeddings").column("embed_text_sha").to_pylist()
    assert sorted(shas) == ["s1", "s2", "s3"]
    assert catalog.delta_table("embeddings").count() == 3


def test_commit_files_repeat_with_same_app_transaction_is_skipped(catalog):
    files = [catalog.write_data_file("embeddings", embedding_rows("s1"))]
    assert catalog.commit_files("embeddings", files, app_id="batch", app_version=1)
    version = catalog.table_versions()["embeddings"]
    assert not catalog.commit_files("embeddings", files, app_id="batch", app_version=1)
    assert catalog.table_versions()["embeddings"] == version
    assert catalog.read("embeddings").num_rows == 1


def test_commit_files_records_stats_and_rejects_other_tables_files(catalog):
    data_file = catalog.write_data_file("embeddings", embedding_rows("s1", "s2"))
    assert isinstance(data_file, DataFile) and data_file.num_records == 2
    assert json.loads(data_file.stats)["minValues"]["embed_text_sha"] == "s1"
    catalog.commit_files("embeddings", [data_file])
    add_actions = catalog.delta_table("embeddings").get_add_actions(flatten=True)
    assert add_actions.column("num_records").to_pylist() == [2]
    with pytest.raises(CatalogError, match="another table"):
        catalog.commit_files("chunks", [data_file])


def test_merge_upsert_inserts_then_updates(catalog):
    catalog.merge_upsert("embeddings", embedding_rows("s1", "s2", dim=2), keys=EMBEDDING_KEYS)
    catalog.merge_upsert("embeddings", embedding_rows("s2", "s3", dim=3), keys=EMBEDDING_KEYS)
    rows = {r["embed_text_sha"]: r["dim"] for r in catalog.read("embeddings").to_pylist()}
    assert rows == {"s1": 2, "s2": 3, "s3": 3}


def test_merge_upsert_with_app_transaction_is_skipped_when_repeated(catalog):
    kwargs = {"keys": EMBEDDING_KEYS, "app_id": "m", "app_version": 1}
    assert catalog.merge_upsert("embeddings", embedding_rows("s1"), **kwargs) is not None
    assert catalog.merge_upsert("embeddings", embedding_rows("s1"), **kwargs) is None


def test_concurrent_merge_upserts_on_different_keys_all_land(catalog):
    catalog.append("embeddings", embedding_rows("seed"))
    errors = race(lambda w: catalog.merge_upsert(
        "embeddings", embedding_rows(*(f"w{w}_{i}" for i in range(3))), keys=EMBEDDING_KEYS))
    assert errors == []
    assert catalog.read("embeddings").num_rows == 1 + 4 * 3


def test_concurrent_insert_only_merges_of_the_same_keys_land_once(catalog):
    catalog.append("embeddings", embedding_rows("seed"))
    # every writer brings the same new content-addressed rows
    errors = race(lambda w: catalog.merge_upsert(
        "embeddings", embedding_rows("x1", "x2", "seed"), keys=EMBEDDING_KEYS, insert_only=True))
    assert errors == []
    assert sorted(catalog.read("embeddings").column("embed_text_sha").to_pylist()) == ["seed", "x1", "x2"]


def test_read_as_of_older_version(catalog):
    catalog.append("embeddings", embedding_rows("s1"))
    first = catalog.table_versions()["embeddings"]
    catalog.append("embeddings", embedding_rows("s2"))
    assert catalog.read("embeddings", version=first).num_rows == 1
    assert catalog.read("embeddings").num_rows == 2
    assert catalog.dataset("embeddings", version=0).count_rows() == 0
    with pytest.raises(CatalogError, match="version 99"):
        catalog.read("embeddings", version=99)


def test_read_columns_and_filter(catalog):
    catalog.append("embeddings", embedding_rows("s1", "s2"))
    table = catalog.read(
        "embeddings", columns=["embed_text_sha"], filter=pc.field("embed_text_sha") == "s2"
    )
    assert table.to_pylist() == [{"embed_text_sha": "s2"}]


def test_delete_predicate_removes_rows_logically(catalog):
    catalog.append("embeddings", embedding_rows("s1", "s2", "s3"))
    before = catalog.table_versions()["embeddings"]
    catalog.delete("embeddings", "embed_text_sha = 's2'")
    shas = sorted(catalog.read("embeddings").column("embed_text_sha").to_pylist())
    assert shas == ["s1", "s3"]
    assert catalog.read("embeddings", version=before).num_rows == 3


def test_catalog_pickles_for_workers(catalog):
    clone = pickle.loads(pickle.dumps(catalog))
    clone.append("embeddings", embedding_rows("s1"))
    assert catalog.read("embeddings").num_rows == 1
    assert isinstance(DeltaTable(catalog.table_uri("embeddings")).version(), int)


def test_merge_upsert_over_committed_worker_files_uses_their_stats(catalog):
    files = [catalog.write_data_file("embeddings", embedding_rows(s)) for s in ("a", "m", "z")]
    catalog.commit_files("embeddings", files, metadata={"run_id": "r1"})
    assert catalog.delta_table("embeddings").history(1)[0]["run_id"] == "r1"
    metrics = catalog.merge_upsert("embeddings", embedding_rows("m", dim=5), keys=EMBEDDING_KEYS)
    assert metrics["num_target_rows_updated"] == 1
    rows = {r["embed_text_sha"]: r["dim"] for r in catalog.read("embeddings").to_pylist()}
    assert rows == {"a": 2, "m": 5, "z": 2}
