"""The driver's micro-batch commit on a real catalog, without Ray: what it reads and how
many files its MERGEs scan as batches accumulate (delta-rs metrics, not timings)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

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


def batch_of(catalog: DeltaCatalog, batch_no: int, docs: int = 2) -> dict:
    names = [f"{batch_no}_{i}" for i in range(docs)]
    summary = pa.Table.from_pylist([{
        "collection": "c", "uri": f"/src/{n}.txt", "key": f"/src/{n}.txt", "document_id": f"doc_{n}",
        "version_id": f"ver_{n}", "raw_sha": f"raw_{n}", "size": 1, "mtime": NOW, "action": "new", "status": "ok",
        "title": n, "mime": "text/plain", "parsed": True, "n_chunks": 1, "n_pages": 0} for n in names],
        schema=SUMMARY_RECORD)
    versions = to_table("versions", [{"version_id": f"ver_{n}", "document_id": f"doc_{n}", "status": "committed"}
                                     for n in names])
    elements = to_table("elements", [{"version_id": f"ver_{n}", "element_id": "e0"} for n in names])
    files = [catalog.write_data_file("elements", elements), catalog.write_data_file("versions", versions)]
    vectors = to_table("embeddings", [{"embedder_fp": "fp", "embed_text_sha": f"sha_{n}", "dim": 1,
                                       "vector": [1.0]} for n in names])
    return {"summary_ipc": to_ipc(summary), "files_json": json.dumps([f.__dict__ for f in files]),
            "version_ids_json": json.dumps([f"ver_{n}" for n in names]), "embeddings_ipc": to_ipc(vectors)}


def commit_batches(catalog: RecordingCatalog, n: int, *, compact_every: int) -> MicroBatchCommitter:
    committer = MicroBatchCommitter(catalog, run_id="run_a", compact_every_batches=compact_every)
    for batch_no in range(n):
        committer.commit(batch_of(catalog, batch_no), batch_no=batch_no)
    return committer


def test_merges_scan_a_bounded_number_of_files_as_batches_accumulate(tmp_path):
    catalog = open_catalog(tmp_path)
    commit_batches(catalog, 12, compact_every=4)
    scanned = [files for table, files in catalog.merges if table == "documents"]
    assert len(scanned) == 12 and max(scanned) <= 4  # at most the files added since the last compaction
    assert len(catalog.delta_table("documents").file_uris()) == 1
    assert catalog.read("documents").num_rows == 24 and catalog.read("embeddings").num_rows == 24


def test_without_compaction_the_scanned_files_grow_with_every_batch(tmp_path):
    catalog = open_catalog(tmp_path)
    commit_batches(catalog, 6, compact_every=0)
    assert [files for table, files in catalog.merges if table == "documents"] == [0, 1, 2, 3, 4, 5]


def test_a_clean_catalog_commits_without_reading_version_keyed_tables_or_documents(tmp_path):
    catalog = open_catalog(tmp_path)
    commit_batches(catalog, 3, compact_every=0)
    assert not {"documents", "elements", "versions", "version_chunks", "pages"} & set(catalog.reads)
    created = catalog.read("documents", columns=["created_at"]).column("created_at")
    assert created.null_count == 0


def crash_mid_batch(catalog: DeltaCatalog, *, run_id: str) -> None:
    """What a run that died between its elements and versions commits leaves behind."""
    catalog.append("ingest_runs", to_table("ingest_runs", [{"run_id": run_id, "status": "crashed"}]))
    residue = to_table("elements", [{"version_id": "ver_0_0", "element_id": "e0"}])
    catalog.commit_files("elements", [catalog.write_data_file("elements", residue)], app_id=f"ingest:{run_id}",
                         app_version=0)


def test_residue_of_a_crashed_run_is_found_and_removed_before_committing_again(tmp_path):
    catalog = open_catalog(tmp_path)
    assert not ResidueWatch(catalog, except_run="run_a").possible()
    crash_mid_batch(catalog, run_id="run_old")
    assert ResidueWatch(catalog, except_run="run_a").possible()
    commit_batches(catalog, 2, compact_every=0)
    assert "elements" in catalog.reads  # the residue search ran
    elements = catalog.read("elements", filter=pc.field("version_id") == "ver_0_0")
    assert elements.num_rows == 1  # the crashed run's copy was deleted, not duplicated


def test_a_crashed_run_whose_versions_landed_leaves_no_residue(tmp_path):
    catalog = open_catalog(tmp_path)
    crash_mid_batch(catalog, run_id="run_old")
    versions = to_table("versions", [{"version_id": "ver_0_0", "document_id": "doc_0_0"}])
    catalog.commit_files("versions", [catalog.write_data_file("versions", versions)], app_id="ingest:run_old",
                         app_version=0)
    assert not ResidueWatch(catalog, except_run="run_a").possible()
