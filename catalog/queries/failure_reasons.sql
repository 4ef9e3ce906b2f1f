-- Why documents failed: ingest-log failures grouped by reason (the error text before the
-- first colon), with a count, the runs they occurred in and one example URI.
SELECT
    collection,
    coalesce(nullif(trim(split_part(error, ':', 1)), ''), 'unknown') AS reason,
    count(*) AS n_failures,
    count(DISTINCT run_id) AS n_runs,
    min(uri) AS example_uri
FROM ingest_log
WHERE action = 'failed' OR status = 'failed'
GROUP BY ALL
ORDER BY n_failures DESC, collection, reason;
