"""``kb-ray eval export-drafts``: down-voted answers → unlabelled eval-draft rows.

An answer that got a ``down`` or ``bad_retrieval`` verdict (the ``feedback`` table,
kb_ray/answer/log.py) becomes one JSONL row in the eval dataset format
(kb_ray/eval/dataset.py) with the gold fields empty — ``relevant``, ``kind`` and ``answer``
are null, so the row cannot pass for a label — ``needs_label: true``, and a ``draft``
object for the person who labels it: the answer given, the verdicts and comments, and the
passages it cited (chunk id, document, title, pages, quote). Labelling means filling
``relevant`` with the right quotes (or ``[]`` for a question the corpus does not answer),
``kind`` and ``answer``, and deleting ``needs_label`` and ``draft``; only then does
``load_dataset`` accept the row.
"""

from __future__ import annotations

import json
from typing import Any

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import run_query

DRAFT_RATINGS = ("down", "bad_retrieval")
CITED_FIELDS = ("n", "chunk_id", "document_id", "version_id", "title", "uri", "pages", "quote")

_DOWN_VOTED = """
    SELECT a.answer_id, any_value(a.query) AS query, any_value(a.answer) AS answer,
           any_value(a.citations_json) AS citations_json, any_value(a.verification) AS verification,
           any_value(a.generator_backend) AS generator_backend, any_value(a.generator_fp) AS generator_fp,
           any_value(a.created_at) AS answered_at,
           list(struct_pack(rating := f.rating, comment := f.comment, at := f.created_at)
                ORDER BY f.created_at) AS verdicts
    FROM feedback f JOIN answers a ON a.answer_id = f.answer_id
    WHERE f.rating IN ({ratings})
    GROUP BY a.answer_id
    ORDER BY min(f.created_at), a.answer_id"""


def draft_rows(catalog: DeltaCatalog, *, ratings: tuple[str, ...] = DRAFT_RATINGS) -> list[dict[str, Any]]:
    """One draft row per answer with at least one verdict in ``ratings`` (oldest verdict first)."""
    sql = _DOWN_VOTED.format(ratings=", ".join(f"'{r}'" for r in ratings))
    return [_draft(row) for row in run_query(catalog, sql).to_pylist()]


def _draft(row: dict[str, Any]) -> dict[str, Any]:
    cited = [{key: citation.get(key) for key in CITED_FIELDS} for citation in json.loads(row["citations_json"] or "[]")]
    return {
        "id": f"draft-{row['answer_id'][:12]}", "query": row["query"], "relevant": None, "kind": None,
        "answer": None, "needs_label": True,
        "draft": {"answer_id": row["answer_id"], "answered_at": row["answered_at"].isoformat(),
                  "answer": row["answer"], "verification": row["verification"],
                  "generator": {"backend": row["generator_backend"], "fingerprint": row["generator_fp"]},
                  "verdicts": [{"rating": v["rating"], "comment": v["comment"], "at": v["at"].isoformat()}
                               for v in row["verdicts"]],
                  "cited": cited},
    }


def write_drafts(rows: list[dict[str, Any]], path: str | None) -> str:
    """The rows as JSONL (to ``path``, or returned as text when ``path`` is None)."""
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if path is not None:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    return text
