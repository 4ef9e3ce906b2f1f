-- Why documents failed: ingest-log failures grouped by their reason code (the closed set
-- in kb_ray/outcomes.py; 'unknown' for rows logged before codes were stored), with a
-- count, the runs they occurred in and one example URI and error text.
SELECT
    collection,
    coalesce(reason, 'unknown') AS reason,
    count(*) AS n_failures,
    count(DISTINCT run_id) AS n_runs,
    min(uri) AS example_uri,
    min(error) AS example_error
FROM ingest_log
WHERE action = 'failed' OR status = 'failed'
GROUP BY ALL
ORDER BY n_failures DESC, collection, reason;
