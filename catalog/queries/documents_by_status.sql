-- Documents per collection and state: active (visible), deleted (tombstoned) or
-- pending (known, but no version committed yet), with the status of the version shown.
SELECT
    d.collection,
    CASE
        WHEN d.deleted_at IS NOT NULL THEN 'deleted'
        WHEN d.active_version_id IS NULL THEN 'pending'
        ELSE 'active'
    END AS state,
    v.status AS version_status,
    count(*) AS n_documents
FROM documents AS d
LEFT JOIN versions AS v ON v.version_id = d.active_version_id
GROUP BY ALL
ORDER BY d.collection, state, version_status;
