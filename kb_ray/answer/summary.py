"""Summary mode: one named document → its sections, one short cited paragraph each.

The sections are the request's ``dimensions``, else ``answer.summary_sections``, else the
document's own top-level sections (kb_ray/answer/sections.py, at most
``answer.max_summary_sections``). A section the document has (a derived one, or a given title
equal to one of its headings at any level, numbering and case aside) takes its evidence from
its own chunks: per chunk, the opening body sentences (headings and table rules skipped; a
chunk with no prose gives its first table rows), an exact canonical span with the pages and
boxes of the elements it covers. A given title that is no heading of the document is searched
for within the document (``filter.document_ids``); when that search abstains or packs nothing,
the section says :data:`NO_EVIDENCE` and cites nothing. Each paragraph is written with
``mode="summary"`` and verified (Answerer.write); citations are numbered across the response.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kb_ray.answer.answerer import Answerer, AnswerRequestError
from kb_ray.answer.multipart import CitationBook, Part, combined_fields, search_within
from kb_ray.answer.sections import (
    DocumentOutline,
    derive_sections,
    heading_sections,
    normalize_heading,
    resolve_documents,
)
from kb_ray.answer.types import Passage
from kb_ray.errors import KbRayError
from kb_ray.search.evidence import candidate_passages

NO_EVIDENCE = "No passage of this document covers this section."
LEAD_SENTENCES = 2  # opening sentences per chunk offered to the generator
LEAD_MAX_CHARS = 600
_PROSE = re.compile(r"\w+")


@dataclass(frozen=True)
class SectionPlan:
    title: str
    ordinals: tuple[int, ...] | None  # None: not a section of the document, search for its title


def answer_summary(answerer: Answerer, request: dict[str, Any]) -> dict[str, Any]:
    """The summary response: ``sections`` plus the shared fields; ``answer`` is their Markdown."""
    timings: dict[str, float] = {}
    outlines = resolve_documents(catalog_of(answerer), request["documents"] or [], scope=answerer.scope)
    if len(outlines) != 1:
        raise AnswerRequestError(f"summary mode takes one document, got {len(outlines)}: pass one in 'documents' "
                                 "(use mode=compare for several)")
    outline = outlines[0]
    book, parts, sections = CitationBook(), [], []
    for plan in section_plans(outline, answerer.settings, request.get("dimensions")):
        passages = section_evidence(answerer, outline, plan, timings)
        part = write_part(answerer, book, question=plan.title, passages=passages, mode="summary",
                          empty=NO_EVIDENCE)
        parts.append(part)
        sections.append({"title": plan.title, "text": part.text, "sentences": [vars(s) for s in part.sentences],
                         "citations": part.citations})
    markdown = "\n\n".join(f"## {s['title']}\n\n{s['text']}" for s in sections)
    return {"answer": markdown, **combined_fields(parts, book, timings), "sections": sections,
            "documents": [_document_entry(outline)]}


def catalog_of(answerer: Answerer) -> Any:
    catalog = getattr(answerer, "catalog", None)
    if catalog is None:
        raise KbRayError("summary and compare modes read documents from the catalog: build the Answerer with "
                         "catalog= (kb_ray.answer.local.local_answerer and the service do)")
    return catalog() if callable(catalog) else catalog


def section_plans(outline: DocumentOutline, settings: Any, given: list[str] | None) -> list[SectionPlan]:
    titles = [t.strip() for t in (given or settings.summary_sections or []) if t and t.strip()]
    if not titles:
        return [SectionPlan(s.title, s.ordinals)
                for s in derive_sections(outline, max_sections=settings.max_summary_sections)]
    headings = heading_sections(outline)
    return [SectionPlan(title, headings.get(normalize_heading(title))) for title in titles]


def section_evidence(answerer: Answerer, outline: DocumentOutline, plan: SectionPlan,
                     timings: dict[str, float]) -> list[Passage]:
    """The section's lead passages, or what a search for its title within the document packs."""
    if plan.ordinals is not None:
        return lead_passages(outline, plan.ordinals, max_passages=answerer.settings.max_passages,
                             max_chars=answerer.settings.max_chars)
    return search_within(answerer, plan.title, outline.document_id, timings)


def write_part(answerer: Answerer, book: CitationBook, *, question: str, passages: list[Passage], mode: str,
               empty: str) -> Part:
    """One verified part; ``empty`` (citing nothing) when there is no evidence or the generator abstains."""
    if not passages:
        return Part(empty, [], [], None)
    draft = answerer.write(question=question, passages=passages, mode=mode)
    part = book.part(draft, passages)
    if draft.abstained:
        part.text = empty
    return part


def lead_passages(outline: DocumentOutline, ordinals: tuple[int, ...], *, max_passages: int,
                  max_chars: int) -> list[Passage]:
    """Per chunk in order, its opening window, within the evidence budget (numbered 1..n)."""
    chunks = {chunk["ordinal"]: chunk for chunk in outline.chunks}
    out: list[Passage] = []
    chars = 0
    for ordinal in ordinals:
        if len(out) >= max_passages:
            break
        window = lead_window(chunks[ordinal])
        if window is None or chars + window[1] - window[0] > max_chars:
            continue
        chars += window[1] - window[0]
        out.append(_passage(len(out) + 1, outline, chunks[ordinal], window))
    return out


def lead_window(chunk: dict[str, Any]) -> tuple[int, int, tuple[int, int]] | None:
    """(start, end) in the chunk text and the canonical span of its opening sentences."""
    text = chunk["text"]
    singles = candidate_passages(text, [tuple(s) for s in chunk["spans"]], max_sentences=1)
    prose = [p for p in singles if _is_prose(text[p.start:p.end])]
    rows = [p for p in singles if not text[p.start:p.end].startswith("#") and _PROSE.search(text[p.start:p.end])]
    picked = prose or rows
    if not picked:
        return None
    first, last = picked[0], picked[0]
    for nxt in picked[1:LEAD_SENTENCES]:
        same_piece = nxt.canonical[0] - first.canonical[0] == nxt.start - first.start
        if not same_piece or nxt.end - first.start > LEAD_MAX_CHARS:
            break
        last = nxt
    return first.start, last.end, (first.canonical[0], last.canonical[1])


def _is_prose(sentence: str) -> bool:
    return not sentence.startswith(("#", "|")) and len(_PROSE.findall(sentence)) >= 3


def _passage(n: int, outline: DocumentOutline, chunk: dict[str, Any],
             window: tuple[int, int, tuple[int, int]]) -> Passage:
    start, end, span = window
    regions = [r for e in outline.elements if e["start"] < span[1] and span[0] < e["end"] for r in e["regions"]]
    regions = [r for i, r in enumerate(regions) if r not in regions[:i]] or [dict(r) for r in chunk["regions"]]
    pages = sorted({r["page"] for r in regions}) or list(chunk["pages"])
    return Passage(n=n, chunk_id=chunk["chunk_id"], document_id=outline.document_id, version_id=outline.version_id,
                   title=outline.title, uri=outline.uri, quote=chunk["text"][start:end], spans=[span], pages=pages,
                   regions=regions, heading_path=list(chunk["heading_path"]))


def _document_entry(outline: DocumentOutline) -> dict[str, Any]:
    return {"document_id": outline.document_id, "version_id": outline.version_id, "title": outline.title,
            "uri": outline.uri}
