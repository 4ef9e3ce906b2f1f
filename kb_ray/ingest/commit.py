"""The driver side of a micro-batch: commit what the workers wrote, then flip documents.

Order matters (promise 4, docs/architecture.md): data rows first (embeddings, page embeddings, enrichments, chunks,
elements, pages, version_chunks), ``versions`` after them (so a version row proves its rows are all there),
then ``documents`` — the commit point that makes the batch visible — then ``sources`` and
``ingest_log``. Every commit carries the app transaction (``ingest:{run_id}``, batch
number) and is skipped if that transaction is already in the table's log.

A crash between two of these commits can leave rows of a version that no document points
at. A rerun finds that version's rows and deletes them before committing again, so no
table ever holds a row twice. That search reads whole tables, so it runs only when such
residue can exist: when some other run that crashed (or was killed: still marked running, or
abandoned once a later run took the writer lease) has data
commits in a version-keyed table beyond its last ``versions`` commit, as the app
transactions in the Delta logs say (:class:`ResidueWatch`, checked per micro-batch).

Cost per micro-batch stays flat with catalog size: no table is read to build the commit
(``documents.created_at`` is kept by the MERGE itself), each table is opened once and
updated incrementally, and every ``compact_every_batches`` micro-batches the small files
the batches added are compacted, so lookups and MERGE scans touch a bounded number of
files (see docs/capacity.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.compaction_process import CompactionProcess
from kb_ray.catalog.datafiles import DataFile
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.key_set import TableKeys
from kb_ray.catalog.maintenance import TARGET_FILE_BYTES
from kb_ray.ingest.metadata import DocumentMetadata
from kb_ray.ingest.record import BATCH_COUNT_COLUMNS, PASSED_ROW_TABLES
from kb_ray.ingest.rows import first_of_each, from_ipc, to_ipc, to_table
from kb_ray.outcomes import render_error

logger = logging.getLogger(__name__)
DATA_TABLE_ORDER = ("chunks", "elements", "pages", "version_chunks", "concepts", "mentions", "versions")
VERSION_KEYED = ("elements", "pages", "version_chunks", "concepts", "mentions", "versions")
FINISHED_UNCLEANLY = ("crashed", "abandoned")  # ingest_runs statuses of runs that will never write again


@dataclass
class BatchOutcome:
    summary: pa.Table
    counts: dict[str, int] = field(default_factory=dict)


class MicroBatchCommitter:
    def __init__(self, catalog: DeltaCatalog, *, run_id: str, fail_after_batches: int | None = None,
                 compact_every_batches: int = 0, compact_target_bytes: int = TARGET_FILE_BYTES,
                 before_commit: Callable[[], None] | None = None) -> None:
        self.catalog = catalog
        self.before_commit = before_commit  # raises to stop committing (the writer lease was lost)
        self.run_id = run_id
        self.app_id = f"ingest:{run_id}"
        self.fail_after_batches = fail_after_batches  # tests: simulate a crash between batches
        self.compact_every_batches = compact_every_batches  # 0: never during ingest
        self.compact_target_bytes = compact_target_bytes
        self.compactor = CompactionProcess(catalog)  # a child process: the rewrite's memory is not the driver's
        self.residue = ResidueWatch(catalog, except_run=run_id)
        self.keys = TableKeys(catalog)  # which keys the tables hold: new rows are appended, not merged
        self._written: set[str] = set()  # tables this run committed to since the last compaction
        self.metadata: dict[str, DocumentMetadata] = {}  # document_id -> resolved metadata of the files to process
        self.metadata_updated = 0  # files processed whose bytes were unchanged but whose metadata changed

    def commit(self, batch: dict[str, Any], *, batch_no: int) -> BatchOutcome:
        if self.fail_after_batches is not None and batch_no >= self.fail_after_batches:
            raise RuntimeError(f"injected failure before committing micro-batch {batch_no}")
        if self.before_commit is not None:
            self.before_commit()
        summary = from_ipc(batch["summary_ipc"])
        files = [DataFile(**entry) for entry in json.loads(batch["files_json"])]
        self._commit_embeddings(from_ipc(batch["embeddings_ipc"]), batch_no)
        if batch.get("page_embeddings_ipc"):
            self._commit_page_embeddings(from_ipc(batch["page_embeddings_ipc"]), batch_no)
        if batch.get("enrichments_ipc"):
            self._commit_enrichments(from_ipc(batch["enrichments_ipc"]), batch_no)
        self._commit_data_files(files, json.loads(batch["version_ids_json"]), batch_no)
        self._flip_documents(summary, batch_no)
        self.metadata_updated += self._update_unchanged_metadata(summary, batch_no)
        self.record_sources(summary, batch_no=batch_no)
        self.log(summary, batch_no=batch_no)
        self._compact_now_and_then(batch_no)
        counts = {key: int(batch.get(key) or 0) for key in BATCH_COUNT_COLUMNS}
        return BatchOutcome(summary=summary, counts=counts)

    def close(self) -> None:
        """Stop the compaction process, if a compaction started it."""
        self.compactor.close()

    def _compact_now_and_then(self, batch_no: int) -> None:
        if self.compact_every_batches and (batch_no + 1) % self.compact_every_batches == 0 and self._written:
            self.compactor.compact(sorted(self._written), target_size=self.compact_target_bytes)
            self._written.clear()

    def _commit_embeddings(self, vectors: pa.Table, batch_no: int) -> None:
        self._append_new_vectors("embeddings", "embed_text_sha", vectors, batch_no)

    def _commit_page_embeddings(self, vectors: pa.Table, batch_no: int) -> None:
        self._append_new_vectors("page_embeddings", "image_sha", vectors, batch_no)

    def _append_new_vectors(self, table_name: str, key: str, vectors: pa.Table, batch_no: int) -> None:
        """Append the vectors whose key is not in the table yet. Content-addressed: two
        documents (in other micro-batches) may share a text or a page image. The key set
        answers which keys are new without scanning the table, and the writer lease makes
        this run the only writer, so an append cannot land a key twice."""
        if not vectors.num_rows:
            return
        fp = vectors.column("embedder_fp")[0].as_py()
        known = self.keys.of(table_name, [key], where={"embedder_fp": fp})
        fresh = vectors.filter(pc.invert(pa.array(known.contains(vectors, [key]))))
        fresh = fresh.filter(first_of_each(fresh.column(key)))
        if fresh.num_rows:
            self.catalog.append(table_name, fresh, app_id=self.app_id, app_version=batch_no)
            known.add(fresh, [key])
            self._written.add(table_name)

    def _commit_enrichments(self, rows: pa.Table, batch_no: int) -> None:
        """New captions, and successes that replace a recorded failure; a failure never
        replaces anything (another run may have captioned that crop meanwhile)."""
        if not rows.num_rows:
            return
        fp = rows.column("enricher_fp")[0].as_py()
        found = self.catalog.read("enrichments", columns=["input_sha", "status"], filter=(
            (pc.field("enricher_fp") == fp) & pc.field("input_sha").isin(rows.column("input_sha"))))
        status = dict(zip(found.column("input_sha").to_pylist(), found.column("status").to_pylist()))
        keep = [sha not in status or (status[sha] == "failed" and new == "ok")
                for sha, new in zip(rows.column("input_sha").to_pylist(), rows.column("status").to_pylist())]
        fresh = rows.filter(pa.array(keep))
        if fresh.num_rows:
            self.catalog.merge_upsert("enrichments", fresh, keys=["enricher_fp", "input_sha"],
                                      app_id=self.app_id, app_version=batch_no)

    def _commit_data_files(self, files: list[DataFile], version_ids: list[str], batch_no: int) -> None:
        check_residue = bool(files) and self.residue.possible()
        for table_name in DATA_TABLE_ORDER:
            table_files = [f for f in files if f.table_name == table_name]
            if not table_files:
                continue
            if table_name in VERSION_KEYED and check_residue \
                    and self.catalog.transaction_version(table_name, self.app_id) != batch_no:
                self._delete_residue(table_name, version_ids)
            self.catalog.commit_files(table_name, table_files, app_id=self.app_id, app_version=batch_no)
            self._written.add(table_name)

    def _delete_residue(self, table_name: str, version_ids: list[str]) -> None:
        if not version_ids:
            return
        found = self.catalog.read(table_name, columns=["version_id"], filter=pc.field("version_id").isin(version_ids))
        if found.num_rows:
            stale = sorted(set(found.column("version_id").to_pylist()))
            logger.warning("removing %d rows of %d uncommitted versions from %s (an earlier run stopped mid-batch)",
                           found.num_rows, len(stale), table_name)
            quoted = ", ".join(f"'{v}'" for v in stale)
            self.catalog.delete(table_name, f"version_id IN ({quoted})")

    def _flip_documents(self, summary: pa.Table, batch_no: int) -> None:
        rows = [row for row in summary.to_pylist() if row["status"] == "ok" and row["action"] in ("new", "changed")]
        if not rows:
            return
        now = datetime.now(timezone.utc)
        blank = DocumentMetadata()
        metas = [self.metadata.get(row["document_id"], blank) for row in rows]
        documents = to_table("documents", [{
            "document_id": row["document_id"], "collection": row["collection"], "key": row["key"], "uri": row["uri"],
            "title": meta.title or row["title"], "mime": row["mime"], **_metadata_columns(meta),
            "active_version_id": row["version_id"], "created_at": now, "updated_at": now, "deleted_at": None,
        } for row, meta in zip(rows, metas)])
        self._upsert("documents", documents, keys=["document_id"], batch_no=batch_no, keep_on_update=["created_at"])

    def _update_unchanged_metadata(self, summary: pa.Table, batch_no: int) -> int:
        """A processed file whose bytes turned out unchanged (touched, or uploaded again) keeps
        its version, but metadata resolved for it (a new sidecar, other upload fields) is applied:
        its ``sources.meta_sha`` is about to say so, and no later run would look again."""
        ids = [row["document_id"] for row in summary.select(["document_id", "action", "status"]).to_pylist()
               if row["action"] == "unchanged" and row["status"] == "ok" and row["document_id"] in self.metadata]
        if not ids:
            return 0
        current = self.catalog.read("documents", columns=["document_id", "tags", "acl", "metadata_json", "title"],
                                    filter=pc.field("document_id").isin(ids)).to_pylist()
        changed = {row["document_id"]: self.metadata[row["document_id"]] for row in current
                   if _differs(row, self.metadata[row["document_id"]])}
        return self.update_metadata(changed, batch_no=batch_no)

    def update_metadata(self, updates: dict[str, DocumentMetadata], *, batch_no: int) -> int:
        """Metadata-only change: rewrite tags, acl, metadata (and a sidecar title) of existing
        documents; no new version, nothing parsed or embedded."""
        if not updates:
            return 0
        current = self.catalog.read("documents", filter=pc.field("document_id").isin(sorted(updates))).to_pylist()
        now = datetime.now(timezone.utc)
        for row in current:
            meta = updates[row["document_id"]]
            row.update(_metadata_columns(meta), updated_at=now, title=meta.title or row["title"])
        if current:
            self.catalog.merge_upsert("documents", to_table("documents", current), keys=["document_id"],
                                      app_id=self.app_id, app_version=batch_no)
            self._written.add("documents")
        return len(current)

    def tombstone(self, vanished: pa.Table, *, batch_no: int) -> int:
        """Hide documents whose sources vanished (``--sync full``); rows stay until purge."""
        rows = [row for row in vanished.to_pylist() if row["prior_version_id"]]
        if rows:
            now = datetime.now(timezone.utc)
            current = self.catalog.read("documents", filter=pc.field("document_id").isin([r["document_id"] for r in rows]))
            updated = current.to_pylist()
            for row in updated:
                row.update(active_version_id=None, deleted_at=now, updated_at=now)
            self.catalog.merge_upsert("documents", to_table("documents", updated), keys=["document_id"],
                                      app_id=self.app_id, app_version=batch_no)
        return len(rows)

    def record_sources(self, summary: pa.Table, *, batch_no: int, status: str | None = None) -> None:
        """Upsert the sources rows of ``summary`` (a batch summary, or plan rows that carry
        ``prior_raw_sha``), column-wise in Arrow."""
        if not summary.num_rows:
            return
        n = summary.num_rows
        if status is None:
            failed = pc.fill_null(pc.equal(_column(summary, "status", pa.string()), "failed"), False)
            statuses = pc.if_else(failed, "failed", "present")
        else:
            statuses = _constant(status, n, pa.string())
        raw_sha = summary.column("raw_sha") if "raw_sha" in summary.column_names else _column(
            summary, "prior_raw_sha", pa.string())
        rows = pa.table({
            **{name: summary.column(name) for name in ("collection", "uri", "key", "document_id")},
            **{name: summary.column(name) for name in ("size", "mtime") if name in summary.column_names},
            "raw_sha": raw_sha, "last_seen_run": _constant(self.run_id, n, pa.string()), "status": statuses,
            "meta_sha": self._meta_shas(summary)})
        self._upsert("sources", rows, keys=["collection", "uri"], batch_no=batch_no)

    def _upsert(self, table_name: str, rows: pa.Table, *, keys: list[str], batch_no: int,
                keep_on_update: list[str] | None = None) -> None:
        """Rows whose key is new are appended; only the others go through a MERGE (which
        scans the table). A fresh ingest is almost all appends, so its commits stay flat."""
        known = self.keys.of(table_name, keys)
        present = pa.array(known.contains(rows, keys))
        new_rows, old_rows = rows.filter(pc.invert(present)), rows.filter(present)
        if new_rows.num_rows:
            self.catalog.append(table_name, new_rows, app_id=self.app_id, app_version=batch_no)
        if old_rows.num_rows:
            self.catalog.merge_upsert(table_name, old_rows, keys=keys, keep_on_update=keep_on_update or (),
                                      app_id=f"{self.app_id}:update", app_version=batch_no)
        known.add(new_rows, keys)
        self._written.add(table_name)

    def _meta_shas(self, summary: pa.Table) -> pa.ChunkedArray | pa.Array:
        if "meta_sha" in summary.column_names:
            return summary.column("meta_sha")
        ids = summary.column("document_id").to_pylist()
        return pa.array([self.metadata[i].meta_sha if i in self.metadata else None for i in ids], pa.string())

    def log(self, summary: pa.Table, *, batch_no: int) -> None:
        """Append one ingest_log row per row of ``summary`` (plan rows name their version
        ``prior_version_id``)."""
        if not summary.num_rows:
            return
        n = summary.num_rows
        version = summary.column("version_id") if "version_id" in summary.column_names else _column(
            summary, "prior_version_id", pa.string())
        rows = pa.table({
            "run_id": _constant(self.run_id, n, pa.string()), "batch": _constant(batch_no, n, pa.int32()),
            **{name: summary.column(name) for name in ("collection", "uri", "document_id", "action")},
            "version_id": version, "status": pc.fill_null(_column(summary, "status", pa.string()), "ok"),
            "reason": _column(summary, "reason", pa.string()), "error": pa.array(_error_texts(summary), pa.string()),
            **{name: summary.column(name) for name in ("parse_seconds", "total_seconds", "n_chunks")
               if name in summary.column_names},
            "logged_at": _constant(datetime.now(timezone.utc), n, pa.timestamp("us", tz="UTC"))})
        self.catalog.append("ingest_log", rows, app_id=self.app_id, app_version=batch_no)
        self._written.add("ingest_log")


def combine_batches(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Several micro-batch rows (BATCH_RECORD) as one, for a single commit per table: their
    data files, version ids, vectors, passed rows and summaries together, counts summed."""
    if len(batches) == 1:
        return batches[0]
    combined: dict[str, Any] = {
        "batch_id": ",".join(str(b.get("batch_id")) for b in batches),
        "files_json": json.dumps([f for b in batches for f in json.loads(b["files_json"])]),
        "version_ids_json": json.dumps([v for b in batches for v in json.loads(b["version_ids_json"])]),
        "summary_ipc": to_ipc(pa.concat_tables([from_ipc(b["summary_ipc"]) for b in batches])),
        **{key: sum(int(b.get(key) or 0) for b in batches) for key in BATCH_COUNT_COLUMNS}}
    for name in ("embeddings", *PASSED_ROW_TABLES):
        blobs = [b[f"{name}_ipc"] for b in batches if b.get(f"{name}_ipc")]
        combined[f"{name}_ipc"] = to_ipc(pa.concat_tables([from_ipc(blob) for blob in blobs])) if blobs else None
    return combined


def _metadata_columns(meta: DocumentMetadata) -> dict[str, Any]:
    return {"tags": list(meta.tags), "acl": list(meta.acl), "metadata_json": meta.metadata_json}


def _differs(row: dict[str, Any], meta: DocumentMetadata) -> bool:
    stored = {"tags": list(row["tags"] or []), "acl": list(row["acl"] or []), "metadata_json": row["metadata_json"]}
    return stored != _metadata_columns(meta) or bool(meta.title and meta.title != row["title"])


def _error_texts(summary: pa.Table) -> list[str | None]:
    """The ingest log's display text: ``"reason: detail"`` of a failure, else the notes."""
    if "reason" not in summary.column_names:  # plan rows (unchanged, vanished): nothing to say
        return [None] * summary.num_rows
    rows = summary.select(["reason", "detail", "notes"]).to_pylist()
    return [render_error(row["reason"], row["detail"]) if row["reason"] else "; ".join(row["notes"] or []) or None
            for row in rows]


def _constant(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    return pa.array([value], type_).take(pa.array([0] * n, pa.int32())) if n else pa.array([], type_)


def _column(table: pa.Table, name: str, type_: pa.DataType) -> pa.ChunkedArray | pa.Array:
    return table.column(name) if name in table.column_names else pa.nulls(table.num_rows, type_)


class ResidueWatch:
    """Which other runs may have left data rows without their ``versions`` rows.

    A crashed or abandoned run's app transactions never change again, so its verdict is kept;
    a run still marked running (a killed driver never updates it, until the next run holding
    the writer lease marks it abandoned) is asked again each time."""

    def __init__(self, catalog: DeltaCatalog, *, except_run: str) -> None:
        self.catalog = catalog
        self.except_run = except_run
        self._runs_version: int | None = None
        self._unfinished: dict[str, str] = {}  # run_id -> status
        self._crashed_verdicts: dict[str, bool] = {}

    def possible(self) -> bool:
        self._refresh_runs()
        for run_id, status in self._unfinished.items():
            if status in FINISHED_UNCLEANLY:
                if run_id not in self._crashed_verdicts:
                    self._crashed_verdicts[run_id] = self._left_residue(run_id)
                if self._crashed_verdicts[run_id]:
                    return True
            elif self._left_residue(run_id):
                return True
        return False

    def _refresh_runs(self) -> None:
        version = self.catalog.delta_table("ingest_runs").version()
        if version == self._runs_version:
            return
        runs = self.catalog.read("ingest_runs", columns=["run_id", "status"],
                                 filter=pc.field("status").isin(["running", *FINISHED_UNCLEANLY]))
        self._unfinished = {run_id: status for run_id, status in zip(runs.column("run_id").to_pylist(),
                                                                     runs.column("status").to_pylist())
                            if run_id != self.except_run}
        self._runs_version = version

    def _left_residue(self, run_id: str) -> bool:
        app_id = f"ingest:{run_id}"
        versions_done = self.catalog.transaction_version("versions", app_id)
        data_done = [self.catalog.transaction_version(name, app_id) for name in VERSION_KEYED if name != "versions"]
        return any(done is not None and (versions_done is None or done > versions_done) for done in data_done)
