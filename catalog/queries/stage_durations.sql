-- Time per run and action from the ingest log: documents, parse seconds, the rest of the
-- pipeline (total minus parse), and the 95th percentile of total seconds per document.
SELECT
    run_id,
    action,
    count(*) AS n_documents,
    round(sum(parse_seconds), 3) AS parse_seconds,
    round(sum(total_seconds - coalesce(parse_seconds, 0)), 3) AS other_seconds,
    round(sum(total_seconds), 3) AS total_seconds,
    round(quantile_cont(total_seconds, 0.95), 3) AS p95_total_seconds,
    sum(n_chunks) AS n_chunks
FROM ingest_log
GROUP BY ALL
ORDER BY run_id, action;
