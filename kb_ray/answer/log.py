"""The answer log: every answer as a row of the Delta table ``answers``, and people's verdicts on
them in ``feedback`` (both declared in catalog/schemas.py; docs/answers.md).

``AnswerLog(catalog).append(request, response)`` is the Answerer's ``log`` callable. With
``max_pending=1`` (``kb-ray ask``, the eval) each answer is one Delta append, written before
``append`` returns. A service passes ``max_pending > 1``: rows wait in memory and a daemon
thread appends them in one commit when ``max_pending`` rows are waiting or the oldest has
waited ``max_delay_s``, so a busy ingress does not pay one commit (and one small file) per
answer. Rows still waiting when a process dies are lost (at most ``max_delay_s`` of answers);
``flush()`` / ``close()`` write them. Feedback is rare and written at once; an answer that is
still waiting counts as known, so feedback on a fresh answer never gets a 404.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.auth.scope import ReadScope
from kb_ray.catalog.commits import retry_on_conflict
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)
Rating = Literal["up", "down", "bad_retrieval"]
RATINGS: tuple[str, ...] = Rating.__args__


class UnknownAnswerError(KbRayError):
    """Feedback names an answer id the log does not hold (HTTP 404)."""


class AnswerLog:
    def __init__(self, catalog: DeltaCatalog, *, max_pending: int = 1, max_delay_s: float = 1.0) -> None:
        self.catalog = catalog
        self.max_pending, self.max_delay_s = max(1, max_pending), max_delay_s
        self._pending: list[dict[str, Any]] = []
        self._oldest: float | None = None
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._flusher: threading.Thread | None = None
        self._closed = threading.Event()

    @classmethod
    def for_config(cls, config: Any, *, batched: bool = False) -> AnswerLog:
        """The log of ``config.kb_root``; ``batched``: the service's pending rows and flush delay
        (``answer.log_batch_rows``, ``answer.log_flush_s``)."""
        catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
        if not batched:
            return cls(catalog)
        return cls(catalog, max_pending=config.answer.log_batch_rows, max_delay_s=config.answer.log_flush_s)

    # -- answers -------------------------------------------------------------------------

    def append(self, request: dict[str, Any], response: dict[str, Any], *, tenant: str | None = None) -> None:
        """Log one answer (the Answerer's ``log(request, response)``); ``tenant``: the key's tenant
        the service answered (None with auth off or in-process), the only one whose feedback it takes."""
        row = {**answer_row(request, response), "tenant": tenant}
        with self._lock:
            self._pending.append(row)
            self._oldest = self._oldest or time.monotonic()
            full = len(self._pending) >= self.max_pending
        if full:
            self.flush()
        else:
            self._start_flusher()

    def flush(self) -> int:
        """Append every waiting row in one commit; the number of rows written."""
        with self._write_lock:
            with self._lock:
                rows, self._pending, self._oldest = self._pending, [], None
            if rows:
                table = pa.Table.from_pylist(rows)
                retry_on_conflict(lambda: self.catalog.append("answers", table), what="append to answers")
            return len(rows)

    def close(self) -> None:
        self._closed.set()
        self.flush()

    def _start_flusher(self) -> None:
        with self._lock:
            if self._flusher is not None:
                return
            self._flusher = threading.Thread(target=self._flush_loop, name="answer-log-flush", daemon=True)
        self._flusher.start()

    def _flush_loop(self) -> None:
        while not self._closed.wait(min(0.1, self.max_delay_s)):
            with self._lock:
                due = self._oldest is not None and time.monotonic() - self._oldest >= self.max_delay_s
            if due:
                try:
                    self.flush()
                except Exception:  # keep the rows' loss visible, keep the thread alive
                    logger.exception("could not flush the answer log")

    def knows(self, answer_id: str, *, scope: ReadScope | None = None) -> bool:
        """Whether ``answer_id`` was logged and is the scope's: with a tenant scope, only that
        tenant's answers count (another tenant's answer is as unknown as a missing one)."""
        scope = scope or ReadScope.unrestricted()
        with self._lock:
            pending = [row["tenant"] for row in self._pending if row["answer_id"] == answer_id]
        if pending:
            return scope.owns_tenant_row(pending[0])
        found = self.catalog.read("answers", columns=["answer_id", "tenant"],
                                  filter=pc.field("answer_id") == answer_id).to_pylist()
        return bool(found) and scope.owns_tenant_row(found[0]["tenant"])

    # -- feedback ------------------------------------------------------------------------

    def add_feedback(self, *, answer_id: str, rating: str, comment: str | None = None,
                     scope: ReadScope | None = None) -> dict[str, Any]:
        """Append one verdict; :class:`UnknownAnswerError` when the answer was never logged or
        (with a tenant ``scope``) is another tenant's."""
        if rating not in RATINGS:
            raise KbRayError(f"unknown rating {rating!r}; use one of {', '.join(RATINGS)}")
        if not self.knows(answer_id, scope=scope):
            raise UnknownAnswerError(f"no logged answer {answer_id!r} (answers are logged when answer.log is true)")
        row = {"feedback_id": uuid.uuid4().hex, "answer_id": answer_id, "created_at": _now(), "rating": rating,
               "comment": comment}
        retry_on_conflict(lambda: self.catalog.append("feedback", pa.Table.from_pylist([row])),
                          what="append to feedback")
        return {**row, "created_at": row["created_at"].isoformat()}


def answer_row(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The ``answers`` row of one response (the request as the Answerer normalized it)."""
    sentences = response.get("sentences") or []
    citations = response.get("citations") or []
    usage = response.get("usage") or {}
    generator = response.get("generator") or {}
    timings = response.get("timings_ms") or {}
    return {
        "answer_id": response["id"], "created_at": _now(), "query": request.get("query"),
        "mode": response.get("mode") or request.get("mode"), "filter_json": _json(request.get("filter")),
        "request_json": _json(request), "generator_backend": generator.get("backend"),
        "generator_model": generator.get("model"), "generator_fp": generator.get("fingerprint"),
        "generation_id": response.get("generation"),
        "cited_chunk_ids": [c["chunk_id"] for c in citations],
        "cited_document_ids": sorted({c["document_id"] for c in citations}),
        "citations_json": _json(citations), "n_sentences": len(sentences),
        "n_unsupported": sum(not s.get("supported") for s in sentences), "sentences_json": _json(sentences),
        "verification": response.get("verification"), "abstained": bool(response.get("abstained")),
        "repaired": bool(response.get("repaired")), "error": response.get("error"),
        "latency_ms": timings.get("total"), "timings_json": _json(timings),
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
        "cost_usd": float(usage.get("cost_usd") or 0.0), "answer": response.get("answer"),
    }


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _now() -> datetime:
    return datetime.now(timezone.utc)
