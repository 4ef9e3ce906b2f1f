-- Share of active chunks whose embed_text_sha has an embedding, per embedder
-- fingerprint. With no embeddings at all, one row with embedder_fp NULL and share 0.
WITH chunk_texts AS (
    SELECT DISTINCT chunk_id, embed_text_sha FROM active_chunks
),
embedders AS (
    SELECT DISTINCT embedder_fp FROM embeddings
    UNION ALL
    SELECT NULL WHERE NOT EXISTS (SELECT 1 FROM embeddings)
),
covered AS (
    SELECT x.embedder_fp, count(DISTINCT c.chunk_id) AS n_embedded
    FROM chunk_texts AS c
    JOIN embeddings AS x ON x.embed_text_sha = c.embed_text_sha
    GROUP BY x.embedder_fp
),
total AS (
    SELECT count(*) AS n_active_chunks FROM chunk_texts
)
SELECT
    e.embedder_fp,
    total.n_active_chunks,
    coalesce(cv.n_embedded, 0) AS n_embedded,
    coalesce(cv.n_embedded / nullif(total.n_active_chunks, 0), 0.0) AS share_embedded
FROM embedders AS e
CROSS JOIN total
LEFT JOIN covered AS cv ON cv.embedder_fp IS NOT DISTINCT FROM e.embedder_fp
ORDER BY e.embedder_fp;
