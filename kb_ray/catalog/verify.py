"""``kb-ray verify``: prove the catalog's invariants with set queries in DuckDB.

Integrity violations (any one makes verify fail):

* an active document points at a missing or failed version;
* a body element of an active version whose span does not round-trip
  (``canonical_text[span] != text``);
* a version_chunk of an active version whose chunk row is missing, or whose chunk text
  is not the canonical text at its spans;
* an active chunk with no vector: neither its text's nor one of its passages' (a vector
  layout without chunk-text vectors, kb_ray/index/vector_layout.py);
* a page of an active version that has a rendered image (``image_sha``) but no page
  embedding. Only pages rendered with ``pages.enabled`` carry an ``image_sha`` (and the
  ingest embeds every page it renders before the document flips), so a catalog ingested
  without pages passes trivially: the check needs no config to be meaningful;
* a key that occurs twice in any table.

Residue (reported, and a failure only with ``strict``): rows nothing live points at —
versions of deleted documents, chunks of missing documents, unreferenced (page) embeddings
(a chunk's passage vectors, separately embedded or pooled late, ``index.passage_chars``, count
as referenced).
After ``purge`` these are all zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kb_ray.catalog import contract
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import open_sql_session

if TYPE_CHECKING:
    from kb_ray.index.vector_layout import VectorLayout

SPAN_TEXT = "substr(v.canonical_text, {start} + 1, {end} - {start})"

INTEGRITY_CHECKS: dict[str, str] = {
    "active_document_without_version": """
        SELECT count(*) FROM documents d LEFT JOIN versions v ON v.version_id = d.active_version_id
        WHERE d.active_version_id IS NOT NULL AND (v.version_id IS NULL OR v.status = 'failed')""",
    "element_span_mismatch": f"""
        SELECT count(*) FROM active_versions v JOIN elements e ON e.version_id = v.version_id
        WHERE e.span_start IS NOT NULL AND {SPAN_TEXT.format(start='e.span_start', end='e.span_end')} <> e.text""",
    "version_chunk_without_chunk": """
        SELECT count(*) FROM active_versions v JOIN version_chunks vc ON vc.version_id = v.version_id
        LEFT JOIN chunks c ON c.chunk_id = vc.chunk_id WHERE c.chunk_id IS NULL""",
    "chunk_span_mismatch": f"""
        SELECT count(*) FROM (
            SELECT vc.version_id, vc.chunk_id, any_value(c.text) AS text,
                   string_agg({SPAN_TEXT.format(start='s.span.start', end='s.span."end"')}, chr(10)
                              ORDER BY s.i) AS joined
            FROM active_versions v JOIN version_chunks vc ON vc.version_id = v.version_id
            JOIN chunks c ON c.chunk_id = vc.chunk_id,
            LATERAL (SELECT unnest(vc.spans) AS span, unnest(range(len(vc.spans))) AS i) s
            GROUP BY vc.version_id, vc.chunk_id) WHERE joined <> text""",
    "active_chunk_without_embedding": """
        SELECT count(*) FROM active_chunks c
        WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.embed_text_sha = c.embed_text_sha)
        AND NOT EXISTS (SELECT 1 FROM passage_refs r JOIN embeddings e ON e.embed_text_sha = r.embed_text_sha
                        WHERE r.chunk_sha = c.embed_text_sha)""",
    "active_page_without_page_embedding": """
        SELECT count(*) FROM active_versions v JOIN pages p ON p.version_id = v.version_id
        WHERE p.image_sha IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM page_embeddings pe WHERE pe.image_sha = p.image_sha)""",
}

FIGURE_CROP_SHAS = """
    SELECT DISTINCT json_extract_string(attrs_json, '$.crop_sha') AS sha FROM elements
    WHERE kind = 'figure' AND json_extract_string(attrs_json, '$.crop_sha') IS NOT NULL"""

RESIDUE_CHECKS: dict[str, str] = {
    "versions_of_missing_documents": """
        SELECT count(*) FROM versions v WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.document_id = v.document_id)
        AND v.status <> 'failed'""",
    "tombstoned_documents": "SELECT count(*) FROM documents WHERE active_version_id IS NULL",
    "chunks_of_missing_documents": """
        SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.document_id = c.document_id)""",
    "elements_of_missing_versions": """
        SELECT count(*) FROM elements e WHERE NOT EXISTS (SELECT 1 FROM versions v WHERE v.version_id = e.version_id)""",
    "unreferenced_embeddings": """
        SELECT count(*) FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embed_text_sha = e.embed_text_sha)
        AND e.embed_text_sha NOT IN (SELECT embed_text_sha FROM passage_refs)""",
    "unreferenced_page_embeddings": """
        SELECT count(*) FROM page_embeddings pe WHERE NOT EXISTS (SELECT 1 FROM pages p WHERE p.image_sha = pe.image_sha)""",
    "unreferenced_enrichments": f"""
        SELECT count(*) FROM enrichments en WHERE en.input_sha NOT IN ({FIGURE_CROP_SHAS})""",
}
BLOB_REFERENCES = {"pages": "SELECT DISTINCT image_sha FROM pages WHERE image_sha IS NOT NULL",
                   "figures": FIGURE_CROP_SHAS}


@dataclass
class VerifyReport:
    violations: dict[str, int] = field(default_factory=dict)
    residue: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def ok(self, *, strict: bool = False) -> bool:
        bad = sum(self.violations.values()) + (sum(self.residue.values()) if strict else 0)
        return bad == 0

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok(), "violations": self.violations, "residue": self.residue, "counts": self.counts}

    def render(self) -> str:
        lines = [f"catalog verify: {'OK' if self.ok() else 'VIOLATIONS FOUND'}"]
        lines += [f"  {'FAIL' if n else 'ok  '} {name}: {n}" for name, n in self.violations.items()]
        lines += [f"  residue {name}: {n}" for name, n in self.residue.items()]
        lines.append("  rows: " + ", ".join(f"{name}={n}" for name, n in self.counts.items()))
        return "\n".join(lines)


def verify_catalog(catalog: DeltaCatalog, *, layout: VectorLayout | None = None) -> VerifyReport:
    """``layout``: the vector layout (``index.passage_chars``, ``index.late_overlap_tokens``) whose
    passage vectors are referenced by their chunks (kb_ray/index/vector_lookup.py; None: the default)."""
    from kb_ray.index.vector_lookup import register_passage_refs

    connection = open_sql_session(catalog)
    try:
        register_passage_refs(connection, layout=layout)
        report = VerifyReport()
        for name, sql in INTEGRITY_CHECKS.items():
            report.violations[name] = _count(connection, sql)
        for table in contract.schemas().TABLES.values():
            if table.keys:
                keys = ", ".join(table.keys)
                report.violations[f"duplicate_keys_{table.name}"] = _count(
                    connection, f"SELECT count(*) FROM (SELECT {keys} FROM {table.name} GROUP BY {keys} HAVING count(*) > 1)")
            report.counts[table.name] = _count(connection, f"SELECT count(*) FROM {table.name}")
        for name, sql in RESIDUE_CHECKS.items():
            report.residue[name] = _count(connection, sql)
        for kind in BLOB_REFERENCES:
            _check_blobs(catalog, connection, report, kind=kind)
        return report
    finally:
        connection.close()


def _check_blobs(catalog: DeltaCatalog, connection, report: VerifyReport, *, kind: str) -> None:
    """Every page image / figure crop a row names is in the blob store; blobs no row names
    are residue (``kb-ray purge`` deletes them)."""
    from kb_ray.catalog.blobs import BlobStore

    present = set(BlobStore(catalog.kb_root, storage_options=catalog.storage_options, kind=kind).list_shas())
    used = {row[0] for row in connection.execute(BLOB_REFERENCES[kind]).fetchall()}
    singular = kind.rstrip("s")
    report.violations[f"{singular}_image_without_blob"] = len(used - present)
    report.residue[f"unreferenced_{singular}_blobs"] = len(present - used)


def _count(connection, sql: str) -> int:
    return int(connection.execute(sql).fetchall()[0][0])
