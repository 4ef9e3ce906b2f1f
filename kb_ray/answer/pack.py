"""The evidence pack: the bounded, numbered passages a generator may cite.

A passage is a hit's ``evidence`` (the shortest verbatim window of the chunk that supports
the query, kb_ray/search/evidence.py), or the chunk's own quote when it has none. Either
way ``quote == canonical[spans]`` of the hit's active version, so a citation never needs
to be re-derived. Generated hits (a model's figure description: ``quote`` is None) are
skipped, as are repeats of a passage already packed (the same spans of the same version,
or the same text in another document). The pack stops at ``settings.max_passages``; a
passage whose quote would take the pack past ``settings.max_chars`` is left out (a quote is
never cut: it would no longer be the canonical text at its spans) and later, shorter ones
may still fit. With ``settings.context_chars`` > 0 the hit's section context (its chunk
and neighbouring chunks, asked of the search with ``context_chars``) rides along as
``Passage.context`` for the generator only: it is never cited and not counted in
``max_chars`` (the search bounds it per hit).
"""

from __future__ import annotations

from typing import Any

from kb_ray.answer.types import Passage
from kb_ray.config import AnswerSettings


def evidence_pack(*, hits: list[dict[str, Any]], settings: AnswerSettings) -> list[Passage]:
    """Passages numbered 1..n from ``hits`` in rank order, within the evidence budget."""
    passages: list[Passage] = []
    seen: set[Any] = set()
    chars = 0
    for hit in hits:
        if len(passages) >= settings.max_passages:
            break
        cited = _cited_part(hit)
        if cited is None:
            continue
        quote, spans = cited["quote"], [tuple(span) for span in cited["spans"]]
        keys = {(hit["version_id"], tuple(spans)), " ".join(quote.split()).lower()}
        if keys & seen or chars + len(quote) > settings.max_chars:
            continue
        seen |= keys
        chars += len(quote)
        passages.append(_passage(len(passages) + 1, hit, cited, spans, settings.context_chars))
    return passages


def _cited_part(hit: dict[str, Any]) -> dict[str, Any] | None:
    """The hit's evidence, else its own quote/spans/pages/regions; None when nothing is quotable."""
    if hit.get("generated") or hit.get("quote") is None or not hit.get("chunk_id"):
        return None
    evidence = hit.get("evidence")
    part = evidence if evidence and evidence.get("quote") else hit
    if not part["quote"].strip() or not part.get("spans"):
        return None
    return part


def _passage(n: int, hit: dict[str, Any], cited: dict[str, Any], spans: list[tuple[int, int]],
             context_chars: int) -> Passage:
    return Passage(
        n=n, chunk_id=hit["chunk_id"], document_id=hit["document_id"], version_id=hit["version_id"],
        title=hit.get("title"), uri=hit.get("uri"), quote=cited["quote"], spans=spans,
        pages=list(cited.get("pages") or hit.get("pages") or []),
        regions=[dict(region) for region in cited.get("regions") or hit.get("regions") or []],
        confidence=hit.get("confidence"), heading_path=list(hit.get("heading_path") or []),
        context=section_context(hit) if context_chars > 0 else None,
        cosine=((cited.get("signals") or {}).get("cosine") if cited is not hit else None))


def section_context(hit: dict[str, Any]) -> str | None:
    """The chunk with its neighbouring chunks (the search's ``context``), in document order."""
    context = hit.get("context") or {}
    before = [piece["text"] for piece in context.get("before") or []]
    after = [piece["text"] for piece in context.get("after") or []]
    if not before and not after:
        return None
    return "\n".join([*before, hit.get("text") or hit["quote"], *after])
