-- Answers per day and generator: how many, how many sentences, the share of sentences that
-- verification flagged unsupported, the share of answers that abstained (the stable refusal),
-- how many were repaired, latency, tokens and cost (the answers table, kb_ray/answer/log.py).
SELECT CAST(a.created_at AS DATE) AS day,
       a.generator_backend, a.generator_model, a.generator_fp,
       count(*) AS answers,
       CAST(sum(a.n_sentences) AS BIGINT) AS sentences,
       CAST(sum(a.n_unsupported) AS BIGINT) AS unsupported,
       round(sum(a.n_unsupported) / nullif(sum(a.n_sentences), 0), 4) AS unsupported_share,
       round(avg(CAST(a.abstained AS INTEGER)), 4) AS abstained_share,
       CAST(sum(CAST(a.repaired AS INTEGER)) AS BIGINT) AS repaired,
       round(median(a.latency_ms), 1) AS p50_latency_ms,
       round(quantile_cont(a.latency_ms, 0.95), 1) AS p95_latency_ms,
       CAST(sum(a.prompt_tokens) AS BIGINT) AS prompt_tokens,
       CAST(sum(a.completion_tokens) AS BIGINT) AS completion_tokens,
       round(sum(a.cost_usd), 6) AS cost_usd
FROM answers a
GROUP BY ALL
ORDER BY day DESC, a.generator_backend, a.generator_fp
