"""Plain-dict views of model objects, for JSON output (``kb-ray parse --json``)."""

from __future__ import annotations

from typing import Any

from kb_ray.model import DocumentVersion, Element, VersionChunk


def element_to_dict(element: Element) -> dict[str, Any]:
    return {
        "id": element.element_id,
        "kind": element.kind,
        "layer": element.layer,
        "level": element.level,
        "parent_id": element.parent_id,
        "span": list(element.span) if element.span else None,
        "text": element.text,
        "regions": [region.to_dict() for region in element.regions],
        "attrs": element.attrs,
    }


def chunk_to_dict(placed: VersionChunk) -> dict[str, Any]:
    return {
        "id": placed.chunk_id,
        "ordinal": placed.ordinal,
        "kind": placed.chunk.kind,
        "text": placed.text,
        "spans": [list(span) for span in placed.spans],
        "pages": list(placed.pages),
        "regions": [region.to_dict() for region in placed.regions],
        "heading_path": list(placed.chunk.heading_path),
        "token_count": placed.chunk.token_count,
    }


def version_to_dict(version: DocumentVersion) -> dict[str, Any]:
    return {
        "document_id": version.document_id,
        "version_id": version.version_id,
        "status": version.status,
        "error": version.error,
        "parser": version.parser,
        "mime": version.mime,
        "title": version.title,
        "raw_sha": version.raw_sha,
        "text_sha": version.text_sha,
        "pages": [{"page": p.page_no, "width": p.width, "height": p.height} for p in version.pages],
        "canonical_text": version.canonical_text,
        "elements": [element_to_dict(element) for element in version.elements],
        "chunks": [chunk_to_dict(placed) for placed in version.chunks],
        "stats": version.stats,
        "notes": list(version.notes),
        "figure_crops": {sha: len(png) for sha, png in sorted(version.images.items())},  # sha -> PNG bytes
    }
