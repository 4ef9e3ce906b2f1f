-- Visible chunks per active document: chunk count, token total and largest chunk,
-- largest documents first.
SELECT
    d.collection,
    d.document_id,
    d.title,
    count(ac.chunk_id) AS n_chunks,
    coalesce(sum(ac.token_count), 0) AS total_tokens,
    max(ac.token_count) AS max_chunk_tokens
FROM active_documents AS d
LEFT JOIN active_chunks AS ac ON ac.document_id = d.document_id
GROUP BY ALL
ORDER BY n_chunks DESC, d.collection, d.document_id;
