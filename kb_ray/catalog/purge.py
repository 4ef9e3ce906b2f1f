"""``kb-ray purge``: remove tombstoned documents and everything only they referenced.

A tombstone (``active_version_id`` null, ``deleted_at`` set) hides a document at once;
purge then deletes its rows from every table, embeddings no remaining chunk uses, page
embeddings no remaining page uses, captions (``enrichments``) of figure crops no remaining
element names, and page PNG and figure-crop blobs no remaining row names.
With ``superseded=True`` it also removes versions no document points at any more
(and their chunks when no remaining version uses them). Deletes go per table, children
first, so a crash mid-purge leaves only more residue for the next purge, never a
dangling pointer. Old Delta versions still hold the rows until ``vacuum``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import open_sql_session
from kb_ray.catalog.verify import BLOB_REFERENCES, FIGURE_CROP_SHAS
from kb_ray.errors import CatalogError

if TYPE_CHECKING:
    from kb_ray.index.vector_layout import VectorLayout

logger = logging.getLogger(__name__)

_DOOMED_SQL = {
    "documents": "SELECT document_id FROM documents WHERE active_version_id IS NULL AND deleted_at IS NOT NULL",
    "versions_of_doomed": "SELECT version_id FROM versions WHERE document_id IN (SELECT document_id FROM doomed_docs)",
    "superseded_versions": """
        SELECT v.version_id FROM versions v JOIN documents d ON d.document_id = v.document_id
        WHERE d.active_version_id IS NOT NULL AND v.version_id <> d.active_version_id""",
}


@dataclass
class PurgeReport:
    documents: int = 0
    versions: int = 0
    deleted_rows: dict[str, int] = field(default_factory=dict)

    def render(self) -> str:
        rows = ", ".join(f"{name}={n}" for name, n in self.deleted_rows.items() if n) or "none"
        return f"purged {self.documents} documents, {self.versions} versions; rows deleted: {rows}"


def purge(catalog: DeltaCatalog, *, superseded: bool = False, drop_embedder: str | None = None,
          live_embedder: str | None = None, layout: VectorLayout | None = None) -> PurgeReport:
    """Delete tombstoned documents and unreferenced rows; with ``drop_embedder``, also every
    vector of that embedder fingerprint (an old model after a switch) — never the one the live
    generation (``live_embedder``) was built with. The passage vectors of the remaining chunks
    (``layout``: ``index.passage_chars`` and ``late_overlap_tokens``, None: the default; separately
    embedded and late-pooled ones alike, kb_ray/index/vector_lookup.py) are kept."""
    if drop_embedder is not None and drop_embedder == live_embedder:
        raise CatalogError(f"embedder {drop_embedder} built the live index generation: switch to another "
                           "generation (kb-ray index switch) before dropping its vectors")
    document_ids, version_ids = _doomed(catalog, superseded=superseded)
    report = PurgeReport(documents=len(document_ids), versions=len(version_ids))
    if drop_embedder is not None:
        report.deleted_rows["embeddings_dropped_embedder"] = _delete_in(catalog, "embeddings", "embedder_fp",
                                                                        [drop_embedder])
    if version_ids:
        for table in ("elements", "pages", "version_chunks", "concepts", "mentions", "versions"):
            report.deleted_rows[table] = _delete_in(catalog, table, "version_id", version_ids)
    orphan_chunks = _ids(catalog, """SELECT chunk_id FROM chunks c WHERE NOT EXISTS
        (SELECT 1 FROM version_chunks vc WHERE vc.chunk_id = c.chunk_id)""")
    report.deleted_rows["chunks"] = _delete_in(catalog, "chunks", "chunk_id", orphan_chunks)
    if document_ids:
        report.deleted_rows["sources"] = _delete_in(catalog, "sources", "document_id", document_ids)
        report.deleted_rows["documents"] = _delete_in(catalog, "documents", "document_id", document_ids)
    unused = _unused_embeddings(catalog, layout=layout)
    report.deleted_rows["embeddings"] = _delete_in(catalog, "embeddings", "embed_text_sha", unused)
    unused_pages = _ids(catalog, """SELECT DISTINCT image_sha FROM page_embeddings pe WHERE NOT EXISTS
        (SELECT 1 FROM pages p WHERE p.image_sha = pe.image_sha)""")
    report.deleted_rows["page_embeddings"] = _delete_in(catalog, "page_embeddings", "image_sha", unused_pages)
    crops = set(_ids(catalog, FIGURE_CROP_SHAS))
    unused_inputs = [sha for sha in _ids(catalog, "SELECT DISTINCT input_sha FROM enrichments") if sha not in crops]
    report.deleted_rows["enrichments"] = _delete_in(catalog, "enrichments", "input_sha", unused_inputs)
    for kind, sql in BLOB_REFERENCES.items():
        report.deleted_rows[f"{kind.rstrip('s')}_blobs"] = _purge_blobs(catalog, kind=kind, used=set(_ids(catalog, sql)))
    logger.info(report.render())
    return report


def _purge_blobs(catalog: DeltaCatalog, *, kind: str, used: set[str]) -> int:
    """Delete blobs no row names (after the rows above are gone)."""
    from kb_ray.catalog.blobs import BlobStore

    store = BlobStore(catalog.kb_root, storage_options=catalog.storage_options, kind=kind)
    return store.delete([sha for sha in store.list_shas() if sha not in used])


def _doomed(catalog: DeltaCatalog, *, superseded: bool) -> tuple[list[str], list[str]]:
    connection = open_sql_session(catalog)
    try:
        connection.execute(f"CREATE TEMP TABLE doomed_docs AS {_DOOMED_SQL['documents']}")
        documents = [row[0] for row in connection.execute("SELECT * FROM doomed_docs").fetchall()]
        versions = [row[0] for row in connection.execute(_DOOMED_SQL["versions_of_doomed"]).fetchall()]
        if superseded:
            versions += [row[0] for row in connection.execute(_DOOMED_SQL["superseded_versions"]).fetchall()]
        return documents, sorted(set(versions))
    finally:
        connection.close()


def _ids(catalog: DeltaCatalog, sql: str) -> list[str]:
    """``sql``'s first column."""
    connection = open_sql_session(catalog)
    try:
        return [row[0] for row in connection.execute(sql).fetchall()]
    finally:
        connection.close()


def _unused_embeddings(catalog: DeltaCatalog, *, layout: VectorLayout | None) -> list[str]:
    """The vectors no chunk embeds, neither as its text nor as one of its passages
    (``passage_refs``, kb_ray/index/vector_lookup.py)."""
    from kb_ray.index.vector_lookup import register_passage_refs

    connection = open_sql_session(catalog)
    try:
        register_passage_refs(connection, layout=layout)
        return [row[0] for row in connection.execute("""SELECT embed_text_sha FROM embeddings e WHERE NOT EXISTS
            (SELECT 1 FROM chunks c WHERE c.embed_text_sha = e.embed_text_sha)
            AND e.embed_text_sha NOT IN (SELECT embed_text_sha FROM passage_refs)""").fetchall()]
    finally:
        connection.close()


def _delete_in(catalog: DeltaCatalog, table: str, column: str, values: list[str], *, chunk: int = 500) -> int:
    deleted = 0
    for start in range(0, len(values), chunk):
        quoted = ", ".join("'" + value.replace("'", "''") + "'" for value in values[start:start + chunk])
        metrics = catalog.delete(table, f"{column} IN ({quoted})")
        deleted += int(metrics.get("num_deleted_rows", 0) or 0)
    return deleted
