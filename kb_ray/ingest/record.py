"""The typed Arrow records that flow between the ingest stages, declared once.

One schema per stage boundary (see docs/architecture.md):

* :data:`SOURCE_RECORD`   plan → fetch: one row per file to read.
* :data:`FETCHED_RECORD`  fetch → [model parse] → parse: the file's bytes and ids.
* :data:`DOCUMENT_RECORD` parse → [caption] → [render → page embed] → embed+write: one
  row per document with its outcome and its catalog rows as Arrow IPC blobs.
* :data:`SUMMARY_RECORD`  what the committer logs per document (DOCUMENT_RECORD without payload).
* :data:`BATCH_RECORD`    embed+write → driver: one row per micro-batch to commit.

Fields, by group:

Source — ``collection``, ``uri``, ``key`` (path under the source root), ``size`` (bytes),
``mtime``, ``document_id`` (``ids.document_id``), ``prior_version_id`` (the document's
active version before this run, null for a new file), ``location`` (where the bytes are
read when not at ``uri``: an upload's raw blob; null for a listed source).

Fetch — ``raw_sha`` (sha256 of the bytes), ``version_id`` (``ids.version_id`` of
document, bytes and pipeline fingerprint), ``fetch_seconds``; ``data`` (the bytes, only
until parse) and ``parsed_first`` (a pickled ParseResult of the model parser, when it ran).

Outcome — ``status`` (``ok`` | ``failed``), ``reason`` (a :class:`kb_ray.outcomes.Reason`
code, null unless failed), ``detail`` (human text of the failure), ``notes`` (non-fatal
notes, human text: a parser fallback, a page limit, failed captions), ``fallback_from``
(the parser that failed before the one that parsed it; null when none did).

Document — ``action`` (new | changed | unchanged | failed), ``title``, ``mime``,
``parsed`` (parsed in this run), ``parse_seconds``, ``total_seconds`` (fetch + parse +
structure + chunk), ``n_chunks``, ``n_pages``.

Payload — ``{table}_ipc``: this document's rows of each catalog table as one Arrow IPC
stream (``versions``, ``elements``, ``pages``, ``chunks``, ``version_chunks``, then ``concepts`` and
``mentions`` from the concept stage; and the new
content-addressed ``enrichments`` / ``page_embeddings`` rows, on the first document of a
batch that needed them); ``raw``: the bytes of a PDF whose pages the renderer draws.

Statistics never travel in these records: each stage returns a
:class:`~kb_ray.ingest.stages.base.StageStats` beside its output table.
"""

from __future__ import annotations

import pyarrow as pa

CONCEPT_TABLES = ("concepts", "mentions")  # filled by the concept stage (kb_ray/ingest/stages/concepts.py)
VERSION_TABLES = ("versions", "elements", "pages", "chunks", "version_chunks", *CONCEPT_TABLES)
PASSED_ROW_TABLES = ("page_embeddings", "enrichments")  # content-addressed rows the driver merges

SOURCE_FIELDS = [
    pa.field("collection", pa.string()), pa.field("uri", pa.string()), pa.field("key", pa.string()),
    pa.field("size", pa.int64()), pa.field("mtime", pa.timestamp("us", tz="UTC")),
    pa.field("document_id", pa.string()), pa.field("prior_version_id", pa.string()),
    pa.field("location", pa.string()),
]
FETCH_FIELDS = [pa.field("raw_sha", pa.string()), pa.field("version_id", pa.string()),
                pa.field("fetch_seconds", pa.float64())]
OUTCOME_FIELDS = [pa.field("status", pa.string()), pa.field("reason", pa.string()), pa.field("detail", pa.string()),
                  pa.field("notes", pa.list_(pa.string())), pa.field("fallback_from", pa.string())]
DOCUMENT_FIELDS = [
    pa.field("action", pa.string()), pa.field("title", pa.string()), pa.field("mime", pa.string()),
    pa.field("parsed", pa.bool_()), pa.field("parse_seconds", pa.float64()), pa.field("total_seconds", pa.float64()),
    pa.field("n_chunks", pa.int32()), pa.field("n_pages", pa.int32()),
]
PAYLOAD_FIELDS = [pa.field(f"{name}_ipc", pa.binary()) for name in VERSION_TABLES + PASSED_ROW_TABLES]

SOURCE_RECORD = pa.schema(SOURCE_FIELDS)
FETCHED_RECORD = pa.schema(SOURCE_FIELDS + FETCH_FIELDS + OUTCOME_FIELDS
                           + [pa.field("data", pa.binary()), pa.field("parsed_first", pa.binary())])
SUMMARY_RECORD = pa.schema(SOURCE_FIELDS + FETCH_FIELDS + OUTCOME_FIELDS + DOCUMENT_FIELDS)
DOCUMENT_RECORD = pa.schema(list(SUMMARY_RECORD) + PAYLOAD_FIELDS + [pa.field("raw", pa.binary())])
BATCH_RECORD = pa.schema([
    pa.field("batch_id", pa.string()), pa.field("files_json", pa.string()), pa.field("version_ids_json", pa.string()),
    pa.field("embeddings_ipc", pa.binary()), pa.field("page_embeddings_ipc", pa.binary()),
    pa.field("enrichments_ipc", pa.binary()), pa.field("summary_ipc", pa.binary()),
    pa.field("chunks_new", pa.int64()), pa.field("chunks_reused", pa.int64()),
    pa.field("embeddings_computed", pa.int64()), pa.field("embeddings_cached", pa.int64()),
])
BATCH_COUNT_COLUMNS = ("chunks_new", "chunks_reused", "embeddings_computed", "embeddings_cached")


def conform_record(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` as exactly ``schema``: its columns in order and cast, missing ones null.

    Columns that are not in ``schema`` are dropped: each boundary passes on only what it
    declares (a Ray Data batch may come with the plan's extra columns)."""
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def with_columns(table: pa.Table, values: dict[str, list], schema: pa.Schema) -> pa.Table:
    """``table`` (conformed to ``schema``) with the named columns replaced by ``values``."""
    table = conform_record(table, schema)
    for name, column in values.items():
        index = schema.get_field_index(name)
        table = table.set_column(index, schema.field(index), pa.array(column, schema.field(index).type))
    return table
