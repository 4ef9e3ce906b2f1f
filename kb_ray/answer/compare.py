"""Compare mode: two or more named documents × dimensions → a table of cited statements.

The dimensions are the request's ``dimensions``, else derived from the documents' headings
(:func:`derive_dimensions`, at most ``answer.max_compare_dimensions``). A cell whose dimension
is a section of its document takes that section's opening passage; any other cell searches
its document alone (``filter.document_ids``) for the dimension (:func:`cell_evidence`). The
generator writes one short statement, verified (Answerer.write); when the search abstains,
packs nothing or the generator abstains, the cell is :data:`NOT_STATED` and cites nothing. ``cells`` holds ``{"document_id", "dimension", "text", "citations", "sentences"}``,
``answer`` the Markdown table; citations are numbered across the whole response.
"""

from __future__ import annotations

from typing import Any

from kb_ray.answer.answerer import Answerer, AnswerRequestError
from kb_ray.answer.multipart import CitationBook, combined_fields, search_within
from kb_ray.answer.sections import (
    DocumentOutline,
    display_heading,
    heading_sections,
    normalize_heading,
    outline_headings,
    resolve_documents,
)
from kb_ray.answer.summary import catalog_of, lead_passages, write_part
from kb_ray.answer.types import Passage

NOT_STATED = "not stated"
SIMILAR_JACCARD = 0.5  # headings whose word sets overlap more than this name the same dimension
CELL_K = 4  # hits searched per cell: one short statement needs few passages


def answer_compare(answerer: Answerer, request: dict[str, Any]) -> dict[str, Any]:
    """The compare response: ``cells`` plus the shared fields; ``answer`` is the Markdown table."""
    timings: dict[str, float] = {}
    outlines = resolve_documents(catalog_of(answerer), request["documents"] or [], scope=answerer.scope)
    if len(outlines) < 2:
        raise AnswerRequestError(f"compare mode needs two or more documents, got {len(outlines)}: name them in "
                                 "'documents' (use mode=summary for one)")
    given = [d.strip() for d in request.get("dimensions") or [] if d and d.strip()]
    dimensions = given or derive_dimensions(outlines, max_dimensions=answerer.settings.max_compare_dimensions)
    if not dimensions:
        raise AnswerRequestError("these documents have no headings to compare them on: pass 'dimensions'")
    book, parts, cells = CitationBook(), [], []
    for dimension in dimensions:
        for outline in outlines:
            passages, mode = cell_evidence(answerer, outline, dimension, timings)
            part = write_part(answerer, book, question=dimension, passages=passages, mode=mode, empty=NOT_STATED)
            parts.append(part)
            cells.append({"document_id": outline.document_id, "dimension": dimension, "text": part.text,
                          "citations": part.citations, "sentences": [vars(s) for s in part.sentences]})
    return {"answer": markdown_table(outlines, dimensions, cells), **combined_fields(parts, book, timings),
            "cells": cells, "dimensions": dimensions,
            "documents": [{"document_id": o.document_id, "version_id": o.version_id, "title": o.title,
                           "uri": o.uri} for o in outlines]}


def cell_evidence(answerer: Answerer, outline: DocumentOutline, dimension: str,
                  timings: dict[str, float]) -> tuple[list[Passage], str]:
    """A dimension that is a section of the document (a heading with the same words, overlapping
    ones, or all of the dimension's words and more): that section's opening passage, summarized (``mode="summary"``). Otherwise the
    pack of a search for it within the document (at most CELL_K hits), ``mode="compare"``."""
    sections = heading_sections(outline)
    wanted = normalize_heading(dimension)
    key = next((k for k in sections if k == wanted), None) or next((k for k in sections if _similar(k, wanted)), None) \
        or next((k for k in sections if wanted and set(wanted.split()) <= set(k.split())), None)
    if key is not None:
        lead = lead_passages(outline, sections[key], max_passages=1, max_chars=answerer.settings.max_chars)
        if lead:
            return lead, "summary"
    k = min(CELL_K, answerer.settings.k)
    return search_within(answerer, dimension, outline.document_id, timings, k=k), "compare"


def derive_dimensions(outlines: list[DocumentOutline], *, max_dimensions: int) -> list[str]:
    """Headings the documents share (same words, numbering aside, or overlapping by more than
    SIMILAR_JACCARD), first (a document's own title is no dimension); then the documents' top-level headings in turn; at most
    ``max_dimensions``."""
    per_document = [[(depth, h) for depth, h in outline_headings(outline)
                     if normalize_heading(h) != normalize_heading(outline.title or "")] for outline in outlines]
    shared: list[str] = []
    for i, headings in enumerate(per_document):
        for _, heading in headings:
            others = sum(any(_similar(heading, h) for _, h in per_document[j]) for j in range(len(outlines)) if j != i)
            if others and not any(_similar(heading, d) for d in shared):
                shared.append(display_heading(heading))
    tops = [[display_heading(h) for depth, h in headings if depth == 0] for headings in per_document]
    out = shared[:max_dimensions]
    for turn in range(max((len(t) for t in tops), default=0)):
        for top in tops:
            if len(out) < max_dimensions and turn < len(top) and not any(_similar(top[turn], d) for d in out):
                out.append(top[turn])
    return out


def _similar(a: str, b: str) -> bool:
    left, right = set(normalize_heading(a).split()), set(normalize_heading(b).split())
    return bool(left | right) and len(left & right) / len(left | right) > SIMILAR_JACCARD


def markdown_table(outlines: list[DocumentOutline], dimensions: list[str], cells: list[dict[str, Any]]) -> str:
    """Dimensions as rows, documents as columns; each cell its cited text or "not stated"."""
    text = {(c["dimension"], c["document_id"]): c["text"] for c in cells}
    rows = ["| Dimension | " + " | ".join(_cell(o.name) for o in outlines) + " |",
            "| --- |" + " --- |" * len(outlines)]
    rows += ["| " + _cell(d) + " | " + " | ".join(_cell(text[(d, o.document_id)]) for o in outlines) + " |"
             for d in dimensions]
    return "\n".join(rows)


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())
