"""The driver's micro-batch commit on a real catalog, without Ray: what it reads, what it
MERGEs (only rows whose key the table already holds) and what the files look like as
batches accumulate (delta-rs metrics, not timings)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.ingest.commit import MicroBatchCommitter, ResidueWatch
from kb_ray.ingest.record import SUMMARY_RECORD
from kb_ray.ingest.rows import to_ipc, to_table

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


class RecordingCatalog(DeltaCatalog):
    """A real catalog that remembers which tables were read and what each MERGE scanned."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[str] = []
        self.merges: list[tuple[str, int]] = []

    def read(self, table_name, **kwargs):
        self.reads.append(table_name)
        return super().read(table_name, **kwargs)

    def merge_upsert(self, table_name, data, **kwargs):
        metrics = super().merge_upsert(table_name, data, **kwargs)
        if metrics:
            self.merges.append((table_name, metrics["num_target_files_scanned"]))
        return metrics


def open_catalog(tmp_path) -> RecordingCatalog:
    DeltaCatalog.open(str(tmp_path / "kb"))
    return RecordingCatalog(str(tmp_path / "kb"))


def batch_of(catalog: DeltaCatalog, batch_no: int, docs: int = 2, *, names: list[str] | None = None,
             action: str = "new", shas: list[str] | None = None) -> dict:
    names = names or [f"{batch_no}_{i}" for i in range(docs)]
    summary = pa.Table.from_pylist([{
        "collection": "c", "uri": f"/src/{n}.txt", "key": f"/src/{n}.txt", "document_id": f"doc_{n}",
        "version_id": f"ver_{n}_{batch_no}", "raw_sha": f"raw_{n}_{batch_no}", "size": 1, "mtime": NOW,
        "action": action, "status": "ok", "title": n, "mime": "text/plain", "parsed": True, "n_chunks": 1,
        "n_pages": 0} for n in names], schema=SUMMARY_RECORD)
    versions = to_table("versions", [{"version_id": f"ver_{n}_{batch_no}", "document_id": f"doc_{n}",
                                      "status": "committed"} for n in names])
    elements = to_table("elements", [{"version_id": f"ver_{n}_{batch_no}", "element_id": "e0"} for n in names])
    files = [catalog.write_data_file("elements", elements), catalog.write_data_file("versions", versions)]
    vectors = to_table("embeddings", [{"embedder_fp": "fp", "embed_text_sha": sha, "dim": 1, "vector": [1.0]}
                                      for sha in (shas or [f"sha_{n}" for n in names])])
    return {"summary_ipc": to_ipc(summary), "files_json": json.dumps([f.__dict__ for f in files]),
            "version_ids_json": json.dumps([f"ver_{n}_{batch_no}" for n in names]), "embeddings_ipc": to_ipc(vectors)}


def commit_batches(catalog: RecordingCatalog, n: int, *, compact_every: int, run_id: str = "run_a",
                   **options) -> MicroBatchCommitter:
    committer = MicroBatchCommitter(catalog, run_id=run_id, compact_every_batches=compact_every, **options)
    with committer.compactor:
        for batch_no in range(n):
            committer.commit(batch_of(catalog, batch_no), batch_no=batch_no)
    return committer


def test_new_rows_are_appended_without_a_merge_and_compaction_bounds_the_files(tmp_path):
    catalog = open_catalog(tmp_path)
    commit_batches(catalog, 12, compact_every=4)
    assert catalog.merges == []  # every key was new: appends only, nothing scanned
    assert len(catalog.delta_table("documents").file_uris()) == 1
    for table in ("documents", "sources", "embeddings"):
        assert catalog.read(table).num_rows == 24, table


def test_the_committer_compacts_to_its_configured_target(tmp_path):
    """The target bounds what a compaction rewrites in the driver's memory: files at or above
    it are never read again. With a target below one micro-batch's file nothing is rewritten;
    with the default every batch's file is packed into one."""
    catalog = open_catalog(tmp_path)
    commit_batches(catalog, 12, compact_every=4, compact_target_bytes=1024)  # each batch's file is ~4 KiB
    assert len(catalog.delta_table("documents").file_uris()) == 12
    catalog = open_catalog(tmp_path / "default")
    commit_batches(catalog, 12, compact_every=4)
    assert len(catalog.delta_table("documents").file_uris()) == 1


def test_a_changed_document_is_merged_alone_and_keeps_its_created_at(tmp_path):
    catalog = open_catalog(tmp_path)
    commit_batches(catalog, 1, compact_every=0)
    first = catalog.read("documents", filter=pc.field("document_id") == "doc_0_0").to_pylist()[0]
    later = MicroBatchCommitter(catalog, run_id="run_b")  # a later run: its key sets load what run_a wrote
    later.commit(batch_of(catalog, 1, names=["0_0"], action="changed"), batch_no=0)
    later.commit(batch_of(catalog, 2, names=["new_one"]), batch_no=1)
    assert [table for table, _ in catalog.merges] == ["documents", "sources"]  # the changed document only
    documents = {row["document_id"]: row for row in catalog.read("documents").to_pylist()}
    assert len(documents) == 3 and catalog.read("sources").num_rows == 3
    changed = documents["doc_0_0"]
    assert changed["active_version_id"] == "ver_0_0_1" and changed["created_at"] == first["created_at"]


def test_a_vector_already_stored_is_not_appended_again(tmp_path):
    catalog = open_catalog(tmp_path)
    MicroBatchCommitter(catalog, run_id="run_a").commit(batch_of(catalog, 0, names=["a"], shas=["x"]), batch_no=0)
    later = MicroBatchCommitter(catalog, run_id="run_b")
    later.commit(batch_of(catalog, 1, names=["b"], shas=["x", "y", "y"]), batch_no=0)
    later.commit(batch_of(catalog, 2, names=["c"], shas=["y", "z"]), batch_no=1)
    shas = sorted(catalog.read("embeddings").column("embed_text_sha").to_pylist())
    assert shas == ["x", "y", "z"] and catalog.merges == []


def test_a_clean_catalog_commits_without_reading_version_keyed_tables_or_documents(tmp_path):
    catalog = open_catalog(tmp_path)
    commit_batches(catalog, 3, compact_every=0)
    assert not {"documents", "elements", "versions", "version_chunks", "pages"} & set(catalog.reads)
    created = catalog.read("documents", columns=["created_at"]).column("created_at")
    assert created.null_count == 0


def crash_mid_batch(catalog: DeltaCatalog, *, run_id: str, status: str = "crashed") -> None:
    """What a run that died between its elements and versions commits leaves behind
    (``abandoned``: killed, and marked so by the next run that took the writer lease)."""
    catalog.append("ingest_runs", to_table("ingest_runs", [{"run_id": run_id, "status": status}]))
    residue = to_table("elements", [{"version_id": "ver_0_0_0", "element_id": "e0"}])
    catalog.commit_files("elements", [catalog.write_data_file("elements", residue)], app_id=f"ingest:{run_id}",
                         app_version=0)


@pytest.mark.parametrize("status", ["crashed", "abandoned", "running"])
def test_residue_of_a_crashed_run_is_found_and_removed_before_committing_again(tmp_path, status):
    catalog = open_catalog(tmp_path)
    assert not ResidueWatch(catalog, except_run="run_a").possible()
    crash_mid_batch(catalog, run_id="run_old", status=status)
    assert ResidueWatch(catalog, except_run="run_a").possible()
    commit_batches(catalog, 2, compact_every=0)
    assert "elements" in catalog.reads  # the residue search ran
    elements = catalog.read("elements", filter=pc.field("version_id") == "ver_0_0_0")
    assert elements.num_rows == 1  # the crashed run's copy was deleted, not duplicated


def test_a_crashed_run_whose_versions_landed_leaves_no_residue(tmp_path):
    catalog = open_catalog(tmp_path)
    crash_mid_batch(catalog, run_id="run_old")
    versions = to_table("versions", [{"version_id": "ver_0_0_0", "document_id": "doc_0_0"}])
    catalog.commit_files("versions", [catalog.write_data_file("versions", versions)], app_id="ingest:run_old",
                         app_version=0)
    assert not ResidueWatch(catalog, except_run="run_a").possible()
