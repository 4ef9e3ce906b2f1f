"""Captions of figures → chunks of their own, placed at the figure (pure, no I/O).

A VLM caption is not text of the document, so it never enters the canonical text and
never replaces an element's text. It becomes a ``figure_description`` chunk: its text is
the caption, its ``spans`` are empty (there is nothing in the canonical text to quote),
its element is the figure and its regions are the figure's page and box, so a hit on it
cites the figure. Its heading path is that of the chunk holding the figure, so the
embedder sees the same section context as for the figure's own chunk.

The chunk id is content-addressed like every chunk (document, enricher fingerprint,
heading path + caption, occurrence): the same caption of the same figure in the next
version keeps its id and its embedding.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from kb_ray import ids
from kb_ray.chunking.base import content_sha
from kb_ray.chunking.tokens import count_tokens

FIGURE_DESCRIPTION = "figure_description"


def figure_crops(elements: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """(element row, crop sha) of every body figure that has a crop, in reading order."""
    out = []
    for element in sorted(elements, key=lambda row: row["ordinal"]):
        if element["kind"] != "figure" or element["layer"] != "body":
            continue
        sha = json.loads(element["attrs_json"] or "{}").get("crop_sha")
        if sha:
            out.append((element, sha))
    return out


def description_rows(
    *, version: dict[str, Any], elements: list[dict[str, Any]], chunks: list[dict[str, Any]],
    version_chunks: list[dict[str, Any]], captions: dict[str, str], enricher_fp: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """New ``chunks`` and ``version_chunks`` rows for the figures of one version whose crop
    has a caption in ``captions`` (crop sha → text); the figure element rows get
    ``attrs.description_chunk_id`` and ``attrs.enricher_fp`` in place."""
    paths = _heading_paths(chunks, version_chunks)
    next_ordinal = max((row["ordinal"] for row in version_chunks), default=-1) + 1
    occurrences: Counter[str] = Counter()
    new_chunks, new_version_chunks = [], []
    for element, sha in figure_crops(elements):
        text = (captions.get(sha) or "").strip()
        if not text:
            continue
        path = paths.get(element["element_id"], [])
        sha_text = content_sha(text=text, heading_path=tuple(path))
        chunk_id = ids.chunk_id(document_id=version["document_id"], chunker_fp=enricher_fp,
                                content_sha=sha_text, occurrence=occurrences[sha_text])
        occurrences[sha_text] += 1
        new_chunks.append({"chunk_id": chunk_id, "document_id": version["document_id"], "chunker_fp": enricher_fp,
                           "text": text, "content_sha": sha_text, "heading_path": path,
                           "token_count": count_tokens(text), "kind": FIGURE_DESCRIPTION, "embed_text_sha": None})
        regions = element["regions"] or []
        new_version_chunks.append({"version_id": version["version_id"], "chunk_id": chunk_id,
                                   "ordinal": next_ordinal, "spans": [], "element_ids": [element["element_id"]],
                                   "pages": sorted({r["page"] for r in regions}), "regions": regions})
        next_ordinal += 1
        attrs = json.loads(element["attrs_json"] or "{}")
        attrs.update(description_chunk_id=chunk_id, enricher_fp=enricher_fp)
        element["attrs_json"] = json.dumps(attrs, sort_keys=True)
    return new_chunks, new_version_chunks


def _heading_paths(chunks: list[dict[str, Any]], version_chunks: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Element id → heading path of the (first) chunk that holds it."""
    by_chunk = {row["chunk_id"]: list(row["heading_path"] or []) for row in chunks}
    paths: dict[str, list[str]] = {}
    for row in sorted(version_chunks, key=lambda r: r["ordinal"]):
        for element_id in row["element_ids"] or []:
            paths.setdefault(element_id, by_chunk.get(row["chunk_id"], []))
    return paths
