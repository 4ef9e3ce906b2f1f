"""The HTTP surface of the query service: request model, errors, rerank merge (Ray-free)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kb_ray.config import EvidenceMode
from kb_ray.errors import RequestBodyError
from kb_ray.serving.http_guards import deeper_than, lone_surrogate_path, too_deep

Mode = Literal["hybrid", "dense", "lexical", "page", "hybrid+page", "tree", "graph"]
MAX_REQUEST_DOCUMENTS = 16  # /v1/answer: named documents per request
MAX_REQUEST_DIMENSIONS = 24  # /v1/answer: given compare rows / summary sections (each one is a search)


class RequestBody(BaseModel):
    """A JSON request body: unknown fields are refused (422), and so is any string or key that
    is not valid Unicode (a lone ``\\ud800`` escape), which nothing downstream could encode; a
    body nested deeper than ``MAX_JSON_DEPTH`` is a 400 (``RequestBodyError``)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _valid_body(cls, data: Any) -> Any:
        if deeper_than(data):  # not a ValueError: pydantic lets it through, and the app answers 400
            raise RequestBodyError(too_deep())
        where = lone_surrogate_path(data)
        if where is not None:
            raise ValueError(f"{where} holds a lone UTF-16 surrogate escape (e.g. \\ud800), which is not "
                             "valid Unicode text; send the text UTF-8 encoded")
        return data


class AsOfPoint(RequestBody):
    """``as_of`` of ``/v1/search`` and ``/v1/answer``: search the catalog as it was (docs/search.md).
    Exactly one key; both or neither is refused (HTTP 422)."""

    catalog_version: int | None = Field(None, strict=True, ge=0, description="a Delta version of the documents table")
    timestamp: str | None = Field(None, description="ISO-8601 (no offset: UTC); each table is read at its "
                                  "version at that time")

    @model_validator(mode="after")
    def _exactly_one(self) -> AsOfPoint:
        if (self.catalog_version is None) == (self.timestamp is None):
            raise ValueError('as_of takes exactly one of {"catalog_version": N} or {"timestamp": "ISO-8601"}')
        if self.timestamp is not None:
            from kb_ray.catalog.time_travel import parse_timestamp
            from kb_ray.errors import CatalogError

            try:
                self.timestamp = parse_timestamp(self.timestamp).isoformat()
            except CatalogError as exc:
                raise ValueError(str(exc)) from exc
        return self


class SearchRequest(RequestBody):
    """``POST /v1/search`` body. Unknown fields and wrongly typed values (``"k": true``) are refused (HTTP 422)."""

    query: str = Field(..., description="the user's question or keywords")
    k: int = Field(10, strict=True, description="number of hits, 1..search.max_k")
    mode: Mode = "hybrid"
    filter: dict[str, Any] | None = Field(None, description="closed vocabulary: collection, document_ids, "
                                          "tags_any, tags_all, mime, created_after, created_before, metadata, "
                                          "acl_any (rows with no acl or sharing a principal)")
    rerank: bool | None = Field(None, description="None: rerank when a reranker is configured")
    context_chars: int = Field(0, ge=0, strict=True, description="0: no context; else each chunk hit gets up to this many "
                               "characters of neighbouring chunks of its section as `context` (ranking unchanged)")
    as_of: AsOfPoint | None = Field(None, description="search the catalog as it was at a documents version or a "
                                    "time (HTTP 409 when no retained generation covers it)")
    evidence: EvidenceMode | None = Field(None, description="None: search.evidence (default lexical); hybrid also "
                                          "scores the passages of the first hits by MiniLM cosine (better passages, "
                                          "~20x slower on CPU; docs/search.md)")


class AnswerRequest(RequestBody):
    """``POST /v1/answer`` body (docs/answers.md). Unknown fields are refused (HTTP 422); an
    empty query or an unknown mode is HTTP 400."""

    query: str = Field(..., description="the question (qa), or what to focus on (summary, compare)")
    mode: str = Field("qa", description="qa | summary | compare")
    filter: dict[str, Any] | None = Field(None, description="the /v1/search filter vocabulary")
    k: int | None = Field(None, strict=True, description="hits searched, 1..search.max_k (default: answer.k)")
    documents: list[str] | None = Field(None, max_length=MAX_REQUEST_DOCUMENTS, description="document ids or titles (summary: one, compare: two+)")
    dimensions: list[str] | None = Field(None, max_length=MAX_REQUEST_DIMENSIONS, description="compare: the rows of the table (default: from "
                                         "the documents' headings)")
    as_of: AsOfPoint | None = Field(None, description="answer from the catalog as it was (see /v1/search)")


class FeedbackRequest(RequestBody):
    """``POST /v1/answers/{id}/feedback`` body: a verdict on a logged answer (docs/answers.md).
    Unknown fields are refused (HTTP 422); an unknown answer id is HTTP 404."""

    rating: Literal["up", "down", "bad_retrieval"] = Field(..., description="bad_retrieval: the cited passages "
                                                           "were the wrong ones")
    comment: str | None = Field(None, max_length=4000, description="optional free text")


def merge_rerank(hits: list[dict[str, Any]], scores: list[float], *, k: int) -> list[dict[str, Any]]:
    """Order hits by cross-encoder score (ties: fused order), record the rerank rank, keep ``k``."""
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
    reranked = []
    for rank, index in enumerate(order[:k], start=1):
        hit = dict(hits[index])
        hit["ranks"] = {**hit.get("ranks", {}), "rerank": rank}
        hit["scores"] = {**hit.get("scores", {}), "rerank": scores[index]}
        hit["score"] = scores[index]
        reranked.append(hit)
    return reranked


def citation_line(hit: dict[str, Any]) -> str:
    """``title, page N, box [..] (confidence 0.87): "evidence"`` — how the CLI prints a hit: the
    evidence passage and its place when there is one, else the chunk's quote and first region."""
    where = hit.get("title") or hit.get("uri") or hit["document_id"]
    evidence = hit.get("evidence")
    regions = (evidence or hit).get("regions") or []
    if regions:
        box = ", ".join(f"{v:.2f}" for v in regions[0]["bbox"])
        where += f", page {regions[0]['page']}, box [{box}]"
    if hit.get("confidence") is not None:
        where += f" (confidence {hit['confidence']:.2f})"
    if hit.get("quote") is None:  # a generated figure description: say so, never pass it off as a quote
        text = " ".join((hit.get("text") or "").split())
        return f"{where}: [figure, described by a model] {text[:240]}{'…' if len(text) > 240 else ''}"
    quote = " ".join((evidence["quote"] if evidence else hit["quote"]).split())
    return f'{where}: "{quote[:240]}{"…" if len(quote) > 240 else ""}"'


def abstain_line(result: dict[str, Any]) -> str:
    """One line on whether the corpus seems to answer the query (the response's ``abstain``)."""
    best = max((h["confidence"] for h in result.get("hits") or [] if h.get("confidence") is not None), default=None)
    shown = "–" if best is None else f"{best:.2f}"
    if result.get("abstain"):
        return f"ABSTAIN: no hit is confident enough (best confidence {shown}); the corpus may not answer this"
    return f"best confidence {shown}"


def context_pieces(hit: dict[str, Any], *, width: int = 160) -> list[str]:
    """The hit's context chunks (before, then after), each on one shortened line."""
    context = hit.get("context") or {}
    pieces = []
    for side in ("before", "after"):
        for chunk in context.get(side) or []:
            text = " ".join(chunk["text"].split())
            pieces.append(f"({side}) {text[:width]}{'…' if len(text) > width else ''}")
    return pieces
