-- DuckDB views over the catalog tables, created by kb_ray.catalog.sql after every table
-- is registered under its own name. Statements are separated by semicolons, so keep
-- semicolons out of comments. Views only read; nothing here writes to the catalog.

-- Documents behind the hydration gate: an active version and no tombstone.
CREATE VIEW active_documents AS
SELECT *
FROM documents
WHERE active_version_id IS NOT NULL AND deleted_at IS NULL;

-- The version each active document currently shows.
CREATE VIEW active_versions AS
SELECT v.*, d.collection, d.key
FROM active_documents AS d
JOIN versions AS v ON v.version_id = d.active_version_id;

-- Chunks a reader can see: active document -> its active version -> version_chunks -> chunks.
CREATE VIEW active_chunks AS
SELECT
    c.chunk_id, c.document_id, d.collection, vc.version_id, vc.ordinal,
    c.chunker_fp, c.text, c.content_sha, c.heading_path, c.token_count, c.kind,
    c.embed_text_sha, vc.spans, vc.element_ids, vc.pages, vc.regions
FROM active_documents AS d
JOIN version_chunks AS vc ON vc.version_id = d.active_version_id
JOIN chunks AS c ON c.chunk_id = vc.chunk_id;
