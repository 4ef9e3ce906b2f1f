"""``Answerer``: search → evidence pack → generate → verify → (repair) → response.

Ray-free: the search and the embedder come in as callables, so the same class answers
in-process (kb_ray/answer/local.py) and inside the Serve ingress (POST /v1/answer). A mode
is a function ``(answerer, request) -> response fields`` in ``MODES``; ``qa`` is here. The
response schema, the verification outcomes and the settings are in docs/answers.md.
"""

from __future__ import annotations

import importlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from kb_ray.answer.pack import evidence_pack
from kb_ray.answer.types import AnswerMode, Generation, Generator, Passage, Sentence
from kb_ray.answer.verify import verify_text
from kb_ray.auth.scope import ReadScope
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)
Search = Callable[[dict[str, Any]], dict[str, Any]]
Embed = Callable[[list[str]], np.ndarray]
REQUEST_DEFAULTS: dict[str, Any] = {"mode": "qa", "filter": None, "k": None, "documents": None, "dimensions": None}


class AnswerRequestError(KbRayError):
    """An answer request is malformed (empty query, unknown mode); HTTP 400."""


@dataclass
class Draft:
    """A verified answer text before it becomes a response."""

    text: str
    sentences: list[Sentence] = field(default_factory=list)
    abstained: bool = False
    repaired: bool = False
    verification: str = "ok"  # "ok" | "repaired" | "flagged" | "refused"
    usage: dict[str, float] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0,
                                                             "cost_usd": 0.0})
    timings_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def add_usage(self, generation: Generation) -> None:
        self.usage["prompt_tokens"] += generation.prompt_tokens
        self.usage["completion_tokens"] += generation.completion_tokens
        self.usage["cost_usd"] = round(self.usage["cost_usd"] + generation.cost_usd, 8)


class Answerer:
    def __init__(self, settings: AnswerSettings, *, generator: Generator, search: Search,
                 embed: Embed | None = None, log: Callable[[dict, dict], None] | None = None,
                 catalog: Any = None, scope: ReadScope | None = None) -> None:
        self.settings = settings
        self.catalog = catalog  # a DeltaCatalog or a function opening one: summary and compare read documents from it
        self.generator = generator
        self.scope = scope or ReadScope.unrestricted()  # every search and document lookup of every mode
        self._search = search
        self.embed = embed
        self.log = log

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one request (``AnswerRequest.model_dump()``); see docs/answers.md for the response."""
        started = time.perf_counter()
        request = normalized_request(request)
        fields = MODES[request["mode"]](self, request)
        response = {"id": uuid.uuid4().hex, "mode": request["mode"], **fields, "generator": self.generator_info()}
        response["timings_ms"]["total"] = _ms(started)
        self._log(request, response)
        return response

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        """A ``/v1/search`` body searched with the caller's scope forced into its filter: the one
        way every mode searches (docs/security.md)."""
        return self._search({**body, "filter": self.scope.filter(body.get("filter"))})

    def generator_info(self) -> dict[str, Any]:
        return {"backend": self.generator.backend, "model": self.generator.model,
                "fingerprint": self.generator.fingerprint}

    def retrieve(self, query: str, *, k: int | None, filter: dict[str, Any] | None,
                 timings: dict[str, float]) -> tuple[dict[str, Any], list[Passage]]:
        """The search result for ``query`` and its evidence pack."""
        started = time.perf_counter()
        result = self.search({"query": query, "k": k or self.settings.k, "mode": "hybrid", "filter": filter,
                              "rerank": None, "context_chars": self.settings.context_chars,
                              "evidence": self.settings.evidence})
        timings["search"] = _ms(started)
        started = time.perf_counter()
        passages = evidence_pack(hits=result.get("hits") or [], settings=self.settings)
        timings["pack"] = _ms(started)
        return result, passages

    def write(self, *, question: str, passages: list[Passage], mode: AnswerMode) -> Draft:
        """Generate, verify, repair the flagged sentences once, and apply ``fail_closed``."""
        draft = Draft(text="")
        started = time.perf_counter()
        generation = self.generator.generate(question=question, passages=passages, mode=mode)
        draft.timings_ms["generate"] = _ms(started)
        draft.add_usage(generation)
        if generation.error is not None:
            return self.refused(draft, error=generation.error)
        self._verify(draft, generation.text, passages)
        if self._flagged(draft) and self.settings.repair_rounds > 0 and not draft.abstained:
            self._repair(draft, question=question, passages=passages, mode=mode)
        if self._flagged(draft) and self.settings.fail_closed:
            draft.text, draft.abstained, draft.verification = self.settings.refusal, True, "refused"
        return draft

    def refused(self, draft: Draft | None = None, *, error: str | None = None) -> Draft:
        """The stable refusal (no evidence, the search abstained, or the generator failed)."""
        draft = draft or Draft(text="")
        draft.text, draft.sentences, draft.abstained, draft.verification = self.settings.refusal, [], True, "refused"
        draft.error = error
        return draft

    def _verify(self, draft: Draft, text: str, passages: list[Passage]) -> None:
        started = time.perf_counter()
        draft.text = text.strip()
        if not draft.text or draft.text == self.settings.refusal:
            self.refused(draft)
        else:
            draft.sentences = verify_text(draft.text, passages, threshold=self.settings.support_threshold,
                                          embed=self.embed)
            draft.verification = "flagged" if self._flagged(draft) else "ok"
        draft.timings_ms["verify"] = round(draft.timings_ms.get("verify", 0.0) + _ms(started), 3)

    def _repair(self, draft: Draft, *, question: str, passages: list[Passage], mode: AnswerMode) -> None:
        started = time.perf_counter()
        flagged = [s for s in draft.sentences if not s.supported]
        generation = self.generator.repair(question=question, passages=passages, mode=mode, answer=draft.text,
                                           flagged=flagged)
        draft.timings_ms["repair"] = _ms(started)
        draft.add_usage(generation)
        draft.repaired = True
        if generation.error is not None:  # the first answer stands, flagged
            draft.error = generation.error
            return
        self._verify(draft, generation.text, passages)
        if draft.verification == "ok":
            draft.verification = "repaired"

    @staticmethod
    def _flagged(draft: Draft) -> bool:
        return any(not s.supported for s in draft.sentences)

    def respond(self, draft: Draft, passages: list[Passage], timings: dict[str, float]) -> dict[str, Any]:
        """The response fields every mode shares (``citations``: only the given passages cited)."""
        cited = set() if draft.abstained else {n for s in draft.sentences for n in s.citations}
        out = {"answer": draft.text, "abstained": draft.abstained,
               "sentences": [asdict(s) for s in draft.sentences],
               "citations": [p.citation() for p in passages if p.n in cited],
               "timings_ms": {**timings, **draft.timings_ms}, "usage": draft.usage, "repaired": draft.repaired,
               "verification": draft.verification}
        if draft.error is not None:
            out["error"] = draft.error
        return out

    def _log(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        if self.log is None:
            return
        try:
            self.log(request, response)
        except Exception:  # an answer is never lost to its log
            logger.exception("could not log answer %s", response["id"])


def normalized_request(request: dict[str, Any]) -> dict[str, Any]:
    """The request with defaults filled in; bad input raises :class:`AnswerRequestError`."""
    request = {**REQUEST_DEFAULTS, **{key: value for key, value in request.items() if value is not None}}
    query = request.get("query")
    if not isinstance(query, str) or not query.strip():
        raise AnswerRequestError("the query is empty: pass a non-empty question")
    if request["mode"] not in MODES:
        raise AnswerRequestError(f"unknown answer mode {request['mode']!r}; use one of {', '.join(MODES)}")
    return request


def answer_qa(answerer: Answerer, request: dict[str, Any]) -> dict[str, Any]:
    """Question answering over the top hits of a hybrid search (of the named ``documents`` only,
    when given)."""
    timings: dict[str, float] = {}
    search_filter = _within_documents(answerer, request["filter"], request["documents"])
    result, passages = answerer.retrieve(request["query"], k=request["k"], filter=search_filter, timings=timings)
    if result.get("abstain") or not passages:
        draft = answerer.refused()
    else:
        draft = answerer.write(question=request["query"], passages=passages, mode="qa")
    return {**answerer.respond(draft, passages, timings), "generation": result.get("generation")}


def _within_documents(answerer: Answerer, search_filter: dict[str, Any] | None,
                      documents: list[str] | None) -> dict[str, Any] | None:
    """``search_filter`` narrowed to the documents named (ids or titles); unknown names raise
    ``DocumentReferenceError`` (HTTP 404). A filter's own ``document_ids`` are intersected."""
    if not documents:
        return search_filter
    from kb_ray.answer.sections import resolve_document_ids
    from kb_ray.answer.summary import catalog_of

    ids = resolve_document_ids(catalog_of(answerer), documents, scope=answerer.scope)
    given = (search_filter or {}).get("document_ids")
    if given is not None:
        ids = [document_id for document_id in ids if document_id in set(given)]
    return {**(search_filter or {}), "document_ids": ids}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _document_mode(name: str) -> Callable[[Answerer, dict[str, Any]], dict[str, Any]]:
    """``summary`` / ``compare`` (kb_ray/answer/summary.py, compare.py), imported on first use:
    they import this module."""

    def run(answerer: Answerer, request: dict[str, Any]) -> dict[str, Any]:
        return getattr(importlib.import_module(f"kb_ray.answer.{name}"), f"answer_{name}")(answerer, request)

    return run


MODES: dict[str, Callable[[Answerer, dict[str, Any]], dict[str, Any]]] = {
    "qa": answer_qa,
    "summary": _document_mode("summary"),
    "compare": _document_mode("compare"),
}
