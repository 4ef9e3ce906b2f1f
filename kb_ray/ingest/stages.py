"""The ingest stages as plain classes over Arrow batches (no Ray import).

* :class:`ParseStage` — fetch bytes, hash, skip what the catalog already holds, parse,
  structure and chunk, write figure crops to the blob store; outputs one row per
  document with its catalog rows as Arrow IPC. When a GPU model parser heads a file's
  chain, :class:`~kb_ray.ingest.model_parse_stage.ModelParseStage` fetched the file and
  ran that parser first; this stage continues from its result (fallback included).
* :class:`EmbedWriteStage` — one micro-batch of documents: embed chunk texts missing from
  the ``embeddings`` cache, drop chunk rows the catalog already has, and write each
  table's rows as one Parquet data file. Outputs one row per micro-batch: the data files
  to commit, the new vectors and a summary per document. The driver commits it.

Both are built once per Ray actor (heavy set-up in ``__init__``) and called per batch.
"""

from __future__ import annotations

import json
import pickle
import time
import uuid
from datetime import datetime, timezone
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from kb_ray import ids
from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.storage import fsspec_options
from kb_ray.config import CaptionSettings, ChunkingSettings, EmbeddingSettings, ParseSettings
from kb_ray.ingest.rows import VERSION_TABLES, concat_ipc, to_ipc, to_table, version_tables
from kb_ray.processing import DocumentProcessor

SUMMARY_SCHEMA = pa.schema([
    ("collection", pa.string()), ("uri", pa.string()), ("key", pa.string()), ("document_id", pa.string()),
    ("version_id", pa.string()), ("raw_sha", pa.string()), ("size", pa.int64()),
    ("mtime", pa.timestamp("us", tz="UTC")), ("action", pa.string()), ("status", pa.string()),
    ("error", pa.string()), ("title", pa.string()), ("mime", pa.string()), ("parsed", pa.bool_()),
    ("parse_seconds", pa.float64()), ("total_seconds", pa.float64()), ("n_chunks", pa.int32()),
    ("n_pages", pa.int32()),
])
SUMMARY_COLUMNS = tuple(SUMMARY_SCHEMA.names)
PARSE_OUTPUT_SCHEMA = pa.schema(list(SUMMARY_SCHEMA) + [(f"{name}_ipc", pa.binary()) for name in VERSION_TABLES]
                                + [("raw", pa.binary())])  # raw bytes only for the page renderer
PASSED_COUNT_COLUMNS = ("pages_rendered", "page_embeddings_computed", "page_embeddings_cached", "captions_computed",
                        "captions_cached", "captions_failed", "captions_skipped")
PASSED_ROW_TABLES = ("page_embeddings", "enrichments")  # content-addressed rows the driver merges
RENDERED_MIMES = frozenset({"application/pdf"})


FETCH_COLUMNS = {"data": pa.binary(), "raw_sha": pa.string(), "version_id": pa.string(), "size": pa.int64(),
                 "error": pa.string(), "fetch_seconds": pa.float64()}


def fetch_source(row: dict[str, Any], *, storage_options: dict[str, str], pipeline_fp: str) -> dict[str, Any]:
    """The row with its bytes, their sha and the version id they make (or an error)."""
    started = time.perf_counter()
    try:
        with fsspec.open(row["uri"], "rb", **fsspec_options(row["uri"], storage_options)) as handle:
            data = handle.read()
    except (OSError, ValueError) as exc:
        return {**row, "data": None, "error": f"unreadable: {type(exc).__name__}: {exc}"[:500],
                "fetch_seconds": time.perf_counter() - started}
    raw_sha = ids.sha256_bytes(data)
    version_id = ids.version_id(document_id=row["document_id"], raw_sha=raw_sha, pipeline_fp=pipeline_fp)
    return {**row, "data": data, "raw_sha": raw_sha, "version_id": version_id, "size": len(data),
            "error": None, "fetch_seconds": time.perf_counter() - started}


def known_versions(catalog: DeltaCatalog, version_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Versions the catalog already holds (a rerun, or another collection's identical file)."""
    if not version_ids:
        return {}
    found = catalog.read("versions", columns=["version_id", "status", "error", "title", "mime", "n_chunks"],
                         filter=pc.field("version_id").isin(version_ids))
    return {row["version_id"]: row for row in found.to_pylist()}


def needs_parse(row: dict[str, Any], known: dict[str, dict[str, Any]]) -> bool:
    return row.get("data") is not None and row["version_id"] != row.get("prior_version_id") \
        and row["version_id"] not in known


class ParseStage:
    def __init__(self, *, kb_root: str, storage_options: dict[str, str], parse: ParseSettings,
                 chunking: ChunkingSettings, run_id: str, keep_raw_for_pages: bool = False,
                 captions: CaptionSettings | None = None) -> None:
        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.figures = BlobStore(kb_root, kind="figures", storage_options=storage_options)
        self.storage_options = storage_options
        self.keep_raw_for_pages = keep_raw_for_pages
        self.processor = DocumentProcessor(parse=parse, chunking=chunking, captions=captions)
        self.run_id = run_id

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        fetched = [row if row.get("fetch_seconds") is not None else  # ModelParseStage fetched it already
                   fetch_source(row, storage_options=self.storage_options, pipeline_fp=self.processor.pipeline_fp)
                   for row in rows]
        known = known_versions(self.catalog, [row["version_id"] for row in fetched if row.get("version_id")])
        out = [self._process(row, known) for row in fetched]
        return pa.Table.from_pylist(out, schema=PARSE_OUTPUT_SCHEMA)

    def _process(self, row: dict[str, Any], known: dict[str, dict[str, Any]]) -> dict[str, Any]:
        started = time.perf_counter()
        summary = {key: row.get(key) for key in SUMMARY_COLUMNS}
        summary.update(parsed=False, parse_seconds=0.0, n_chunks=0, n_pages=0, title=None, mime=None)
        prior_action = "changed" if row.get("prior_version_id") else "new"
        if row.get("data") is None:
            summary.update(action="failed", status="failed", version_id=None)
        elif row["version_id"] == row.get("prior_version_id"):
            summary.update(action="unchanged", status="ok")
        elif row["version_id"] in known:
            prior = known[row["version_id"]]
            failed = prior["status"] == "failed"
            summary.update(action="failed" if failed else prior_action, status="failed" if failed else "ok",
                           error=prior["error"], title=prior["title"], mime=prior["mime"], n_chunks=prior["n_chunks"])
        else:
            summary.update(self._parse(row, prior_action))
        summary["total_seconds"] = row.get("fetch_seconds", 0.0) + time.perf_counter() - started
        return summary

    def _parse(self, row: dict[str, Any], prior_action: str) -> dict[str, Any]:
        parsed_first = pickle.loads(row["parsed_first"]) if row.get("parsed_first") else None
        version = self.processor.process(row["data"], collection=row["collection"], key=row["key"],
                                         filename=row["uri"].rsplit("/", 1)[-1], parsed_first=parsed_first)
        for sha, png in version.images.items():
            self.figures.put(sha, png)
        tables = version_tables(version, fingerprints=self.processor.fingerprints, run_id=self.run_id,
                                now=datetime.now(timezone.utc))
        failed = version.status == "failed"
        out = {f"{name}_ipc": to_ipc(table) for name, table in tables.items()}
        out.update(action="failed" if failed else prior_action, status="failed" if failed else "ok",
                   error=version.error or ("; ".join(version.notes) or None), title=version.title,
                   mime=version.mime, parsed=True, parse_seconds=version.stats.get("parse_seconds", 0.0),
                   n_chunks=len(version.chunks), n_pages=len(version.pages))
        if self.keep_raw_for_pages and not failed and version.mime in RENDERED_MIMES and version.pages:
            out["raw"] = row["data"]  # the page renderer needs the bytes; it drops them
        return out


class EmbedWriteStage:
    def __init__(self, *, kb_root: str, storage_options: dict[str, str], embedding: EmbeddingSettings) -> None:
        from kb_ray.embedding.text import TextEmbedder

        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.embedder = TextEmbedder.from_settings(embedding)
        self.embedder_fp = self.embedder.fingerprint

    def __call__(self, batch: pa.Table) -> pa.Table:
        columns = set(batch.column_names)
        tables = {name: concat_ipc(batch.column(f"{name}_ipc").to_pylist() if f"{name}_ipc" in columns else [], name)
                  for name in VERSION_TABLES}
        chunks = self._with_embed_shas(tables["chunks"])
        vectors, counts = self._embed_missing(chunks)
        new_chunks = self._drop_known_chunks(chunks)
        counts.update(chunks_new=new_chunks.num_rows, chunks_reused=chunks.num_rows - new_chunks.num_rows)
        counts.update({name: int(pc.sum(batch.column(name)).as_py() or 0) for name in PASSED_COUNT_COLUMNS
                       if name in columns})
        passed = {name: concat_ipc(batch.column(f"{name}_ipc").to_pylist() if f"{name}_ipc" in columns else [], name)
                  for name in PASSED_ROW_TABLES}
        tables["chunks"] = new_chunks.drop_columns(["embed_text"])
        files = [self.catalog.write_data_file(name, table).__dict__ for name, table in tables.items() if table.num_rows]
        summary = batch.select(list(SUMMARY_COLUMNS))
        return pa.Table.from_pylist([{
            "batch_id": uuid.uuid4().hex, "files_json": json.dumps(files),
            "version_ids_json": json.dumps(tables["versions"].column("version_id").to_pylist()),
            "embeddings_ipc": to_ipc(vectors), **{f"{name}_ipc": to_ipc(rows) for name, rows in passed.items()},
            "summary_ipc": to_ipc(summary), **counts,
        }])

    def _with_embed_shas(self, chunks: pa.Table) -> pa.Table:
        texts = [self.embedder.format_embed_text(text=text, heading_path=path or [])
                 for text, path in zip(chunks.column("text").to_pylist(), chunks.column("heading_path").to_pylist())]
        chunks = chunks.set_column(chunks.schema.get_field_index("embed_text_sha"), "embed_text_sha",
                                   pa.array([ids.sha256_text(text) for text in texts], pa.string()))
        return chunks.append_column("embed_text", pa.array(texts, pa.string()))

    def _embed_missing(self, chunks: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        wanted = dict(zip(chunks.column("embed_text_sha").to_pylist(), chunks.column("embed_text").to_pylist()))
        cached = set()
        if wanted:
            found = self.catalog.read("embeddings", columns=["embed_text_sha"], filter=(
                (pc.field("embedder_fp") == self.embedder_fp) & pc.field("embed_text_sha").isin(list(wanted))))
            cached = set(found.column("embed_text_sha").to_pylist())
        missing = [sha for sha in wanted if sha not in cached]
        vectors = self.embedder.embed_texts([wanted[sha] for sha in missing]) if missing else []
        rows = [{"embedder_fp": self.embedder_fp, "embed_text_sha": sha, "dim": self.embedder.dim,
                 "vector": vector.tolist()} for sha, vector in zip(missing, vectors)]
        return to_table("embeddings", rows), {"embeddings_computed": len(missing), "embeddings_cached": len(cached)}

    def _drop_known_chunks(self, chunks: pa.Table) -> pa.Table:
        if not chunks.num_rows:
            return chunks
        chunk_ids = chunks.column("chunk_id").to_pylist()
        found = self.catalog.read("chunks", columns=["chunk_id"], filter=pc.field("chunk_id").isin(chunk_ids))
        known = pa.array(found.column("chunk_id").to_pylist(), pa.string())
        first = pc.equal(pc.index_in(chunks.column("chunk_id"), pa.array(chunk_ids)), pa.array(range(len(chunk_ids))))
        return chunks.filter(pc.and_(pc.invert(pc.is_in(chunks.column("chunk_id"), known)), first))
