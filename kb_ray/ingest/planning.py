"""Plan an ingest: diff the listing against the catalog with set operations in DuckDB.

The listing arrives as a stream of Arrow record batches (one per directory) that DuckDB
consumes straight into its own temporary table; no Python-side table of every file is
ever built. Out come three Arrow tables: ``todo`` (new or possibly changed files, to fetch
and hash), ``unchanged`` (same size and mtime as last time, active under the same
pipeline: never read again; its rows carry ``action`` and go to the commit as Arrow
columns) and ``vanished`` (in the catalog, gone from the listing; never an uploaded
document, ``upload://…``, which no listing holds: docs/upload.md). Ids are computed in
SQL exactly as :func:`kb_ray.ids.document_id` does, so no per-file Python runs here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.ids import ID_HEX_CHARS

DOCUMENT_ID_SQL = (
    f"'doc_' || substr(sha256(nfc_normalize(collection) || chr(31) || nfc_normalize(key)), 1, {ID_HEX_CHARS})"
)

_PLAN_SQL = f"""
CREATE TEMP TABLE plan AS
SELECT l.collection, l.uri, l.key, l.size, l.mtime, l.document_id,
       s.raw_sha AS prior_raw_sha, s.meta_sha AS prior_meta_sha, d.active_version_id AS prior_version_id,
       coalesce(s.size IS NOT DISTINCT FROM l.size AND s.mtime IS NOT DISTINCT FROM l.mtime
        AND d.active_version_id IS NOT NULL AND v.pipeline_fp IS NOT DISTINCT FROM $pipeline_fp, false) AS unchanged
FROM (SELECT * EXCLUDE (relative_path), {DOCUMENT_ID_SQL} AS document_id FROM listing_stream) l
LEFT JOIN sources s ON s.collection = l.collection AND s.uri = l.uri
LEFT JOIN documents d ON d.document_id = l.document_id
LEFT JOIN versions v ON v.version_id = d.active_version_id
"""

_VANISHED_SQL = """
SELECT s.collection, s.uri, s.key, s.document_id, d.active_version_id AS prior_version_id, 'deleted' AS action
FROM sources s
LEFT JOIN documents d ON d.document_id = s.document_id
WHERE s.collection = $collection AND s.status <> 'vanished' AND NOT starts_with(s.uri, 'upload://')
  AND EXISTS (SELECT 1 FROM listed_roots r WHERE starts_with(s.uri || '/', r.prefix))
  AND NOT EXISTS (SELECT 1 FROM plan l WHERE l.collection = s.collection AND l.uri = s.uri)
"""


def listed_roots(roots: Sequence[str]) -> pa.Table:
    """The prefix of each root: a source is under root ``/a/b`` when its URI + ``/`` starts with
    ``/a/b/`` (the file source ``/a/b`` itself, ``/a/b/x``; not ``/a/bc/x``)."""
    return pa.table({"prefix": pa.array([root.rstrip("/") + "/" for root in roots], pa.string())})


@dataclass
class IngestPlan:
    todo: pa.Table
    unchanged: pa.Table
    vanished: pa.Table

    @property
    def seen(self) -> int:
        return self.todo.num_rows + self.unchanged.num_rows


def plan_ingest(listing: pa.RecordBatchReader | pa.Table, *, catalog: DeltaCatalog, collection: str,
                pipeline_fp: str, roots: Sequence[str]) -> IngestPlan:
    """Diff ``listing`` (a record batch stream, or a table) against the catalog. ``roots``: the
    URIs the listing was taken under (:func:`kb_ray.ingest.listing.root_uri`); only sources
    under them can have vanished."""
    con = duckdb.connect()
    try:
        # as in kb_ray/catalog/sql.py: a string filter pushed into the Arrow scan of a table that a
        # MERGE rewrote (string_view columns; here ``sources`` after a sync tombstoned) fails
        con.execute("SET disabled_optimizers = 'filter_pushdown'")
        con.register("listing_stream", listing)
        con.register("listed_roots", listed_roots(roots))
        for name in ("sources", "documents", "versions"):
            columns = {"versions": ["version_id", "pipeline_fp"]}.get(name)
            dataset = catalog.dataset(name)
            con.register(name, dataset.scanner(columns=columns).to_reader() if columns else dataset)
        con.execute(_PLAN_SQL, {"pipeline_fp": pipeline_fp})
        todo = con.sql("SELECT * EXCLUDE (unchanged) FROM plan WHERE NOT unchanged ORDER BY uri").to_arrow_table()
        unchanged = con.sql("SELECT * EXCLUDE (unchanged, prior_version_id), prior_version_id AS version_id, "
                            "prior_raw_sha AS raw_sha, 'unchanged' AS action FROM plan WHERE unchanged "
                            "ORDER BY uri").to_arrow_table()
        vanished = con.sql(_VANISHED_SQL, params={"collection": collection}).to_arrow_table()
    finally:
        con.close()
    return IngestPlan(todo=todo, unchanged=unchanged, vanished=vanished)
