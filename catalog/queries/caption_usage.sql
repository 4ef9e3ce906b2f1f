-- Figure captions by enricher: how many succeeded or failed, tokens, time and cost, and how
-- many active figure-description chunks they feed.
SELECT en.enricher_fp, en.model, en.status,
       count(*) AS captions,
       sum(en.prompt_tokens) AS prompt_tokens,
       sum(en.completion_tokens) AS completion_tokens,
       round(avg(en.seconds), 3) AS mean_seconds,
       round(sum(en.cost_usd), 6) AS cost_usd,
       any_value(en.error) AS an_error,
       (SELECT count(*) FROM active_chunks c WHERE c.kind = 'figure_description') AS active_descriptions
FROM enrichments en
GROUP BY ALL
ORDER BY en.enricher_fp, en.status
