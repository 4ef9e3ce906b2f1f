"""What keeps catalog calls flat as tables grow: cached tables, compaction, ``maintain``."""

from __future__ import annotations

import json
import pickle
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
from catalog_rows import NOW, embedding_rows

from kb_ray.catalog import DeltaCatalog
from kb_ray.catalog.maintenance import compact_small_files
from kb_ray.cli import main
from tests.conftest import REPO_ROOT


def test_a_cached_table_sees_commits_made_through_another_catalog(catalog):
    other = DeltaCatalog.open(catalog.kb_root, create=False)
    first = catalog.delta_table("embeddings")
    other.append("embeddings", embedding_rows("a"))
    again = catalog.delta_table("embeddings")
    assert again is first and again.version() == 1  # one table object, brought up to date
    assert catalog.read("embeddings").column("embed_text_sha").to_pylist() == ["a"]
    assert catalog.delta_table("embeddings", version=0) is not first
    copy = pickle.loads(pickle.dumps(catalog))  # travels to Ray workers without its tables
    assert copy.read("embeddings").num_rows == 1


def test_compaction_bounds_the_files_a_key_lookup_opens(catalog):
    for sha in "abcdefghij":
        catalog.append("embeddings", embedding_rows(sha))
    assert len(catalog.delta_table("embeddings").file_uris()) == 10
    metrics = compact_small_files(catalog, ["embeddings"])
    assert metrics["embeddings"]["numFilesRemoved"] == 10
    assert len(catalog.delta_table("embeddings").file_uris()) == 1
    found = catalog.read("embeddings", columns=["embed_text_sha"], filter=pc.field("embed_text_sha").isin(["c", "z"]))
    assert found.column("embed_text_sha").to_pylist() == ["c"]
    merged = catalog.merge_upsert("embeddings", embedding_rows("k"), keys=["embedder_fp", "embed_text_sha"],
                                  insert_only=True)
    assert merged["num_target_files_scanned"] == 1  # a MERGE now scans one file, not one per append


def test_merge_keeps_the_columns_named_in_keep_on_update(populated_catalog):
    row = populated_catalog.read("documents", filter=pc.field("document_id") == "doc_a")
    later = NOW + timedelta(days=1)
    changed = row.set_column(row.schema.get_field_index("title"), "title", pa.array(["A2"]))
    changed = changed.set_column(changed.schema.get_field_index("created_at"), "created_at",
                                 pa.array([later], changed.schema.field("created_at").type))
    populated_catalog.merge_upsert("documents", changed, keys=["document_id"], keep_on_update=["created_at"])
    after = populated_catalog.read("documents", filter=pc.field("document_id") == "doc_a").to_pylist()[0]
    assert after["title"] == "A2" and after["created_at"] == NOW


def test_kb_ray_maintain_compacts_z_orders_checkpoints_and_reports(catalog, capsys):
    for sha in ("d", "b", "c", "a"):
        catalog.append("embeddings", embedding_rows(sha))
    before = catalog.table_versions()["embeddings"]
    args = ["--config", str(REPO_ROOT / "conf" / "local.yaml"), "--set", f"kb_root={catalog.kb_root}"]
    assert main(["maintain", "--z-order", "--no-vacuum", "--json", *args]) == 0
    report = json.loads(capsys.readouterr().out)
    embeddings = report["tables"]["embeddings"]
    assert embeddings["files_before"] == 4 and embeddings["files_after"] == 1
    assert embeddings["z_ordered_by"] == ["embedder_fp", "embed_text_sha"]
    assert embeddings["checkpoint_version"] == before + 1
    assert report["tables"]["documents"]["files_before"] == 0  # empty tables are left alone
    table = catalog.delta_table("embeddings")
    assert sorted(table.to_pyarrow_table().column("embed_text_sha").to_pylist()) == ["a", "b", "c", "d"]
    assert main(["maintain", "--retention-hours", "0", *args]) == 0
    text = capsys.readouterr().out
    assert "embeddings: 1 -> 1 files" in text and "vacuumed 4 files" in text
