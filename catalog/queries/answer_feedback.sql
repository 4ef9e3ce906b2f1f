-- Every verdict people gave on a logged answer, newest first, with the answer it judges:
-- question, generator, verification outcome, unsupported sentences and cited chunks
-- (feedback joined to answers, kb_ray/answer/log.py).
SELECT f.created_at AS feedback_at, f.rating, f.comment,
       a.answer_id, a.created_at AS answered_at, a.query, a.mode,
       a.generator_backend, a.generator_fp, a.verification, a.abstained,
       a.n_sentences, a.n_unsupported, a.cited_chunk_ids, a.answer
FROM feedback f
JOIN answers a ON a.answer_id = f.answer_id
ORDER BY f.created_at DESC, f.feedback_id
