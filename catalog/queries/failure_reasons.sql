-- Why documents failed: ingest-log failures grouped by their reason code (the closed set
-- in kb_ray/outcomes.py; 'unknown' for rows logged before codes were stored), with a
-- count, the runs they occurred in and one example: the URI and error text of the same
-- failure (the first by URI), never one file's name beside another file's error.
SELECT
    collection,
    reason,
    n_failures,
    n_runs,
    example.uri AS example_uri,
    example.error AS example_error
FROM (
    SELECT
        collection,
        coalesce(reason, 'unknown') AS reason,
        count(*) AS n_failures,
        count(DISTINCT run_id) AS n_runs,
        min({'uri': uri, 'error': error}) AS example
    FROM ingest_log
    WHERE action = 'failed' OR status = 'failed'
    GROUP BY ALL
)
ORDER BY n_failures DESC, collection, reason;
