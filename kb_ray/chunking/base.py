"""What every chunker shares: the interface and turning spans into chunks with ids.

A chunker decides *where* chunks start and end (as spans into the canonical text);
:func:`assemble_chunks` turns those drafts into :class:`VersionChunk` objects with
content-derived ids, pages and regions, and checks that every span round-trips.
"""

from __future__ import annotations

import abc
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kb_ray import ids
from kb_ray.chunking.tokens import count_tokens
from kb_ray.errors import SpanError
from kb_ray.model import Chunk, Element, Region, Span, VersionChunk


@dataclass
class ChunkDraft:
    """A chunk before it has an id: spans into the canonical text plus context."""

    spans: list[Span]
    element_ids: list[str] = field(default_factory=list)
    heading_path: tuple[str, ...] = ()
    kind: str = "text"


class Chunker(abc.ABC):
    name = "chunker"
    version = "1"

    def config(self) -> dict[str, Any]:
        return {}

    @property
    def fingerprint(self) -> str:
        return ids.fingerprint(kind="chunker", name=self.name, version=self.version, config=self.config())

    def chunk(self, canonical: str, elements: list[Element], *, document_id: str) -> list[VersionChunk]:
        drafts = self.draft(canonical, elements)
        return assemble_chunks(drafts, canonical=canonical, elements=elements,
                               document_id=document_id, chunker_fp=self.fingerprint)

    @abc.abstractmethod
    def draft(self, canonical: str, elements: list[Element]) -> list[ChunkDraft]:
        """Decide the chunk boundaries."""


def chunk_text(canonical: str, spans: list[Span] | tuple[Span, ...]) -> str:
    return "\n".join(canonical[start:end] for start, end in spans)


def content_sha(*, text: str, heading_path: tuple[str, ...]) -> str:
    return ids.sha256_text("\n".join(heading_path) + "\n\n" + text)


def assemble_chunks(
    drafts: list[ChunkDraft], *, canonical: str, elements: list[Element], document_id: str, chunker_fp: str
) -> list[VersionChunk]:
    body = [element for element in elements if element.span is not None]
    occurrences: Counter[str] = Counter()
    chunks = []
    for ordinal, draft in enumerate(drafts):
        text = chunk_text(canonical, draft.spans)
        if not text.strip():
            continue
        sha = content_sha(text=text, heading_path=draft.heading_path)
        chunk = Chunk(
            chunk_id=ids.chunk_id(document_id=document_id, chunker_fp=chunker_fp,
                                  content_sha=sha, occurrence=occurrences[sha]),
            document_id=document_id, chunker_fp=chunker_fp, text=text, content_sha=sha,
            heading_path=draft.heading_path, token_count=count_tokens(text), kind=draft.kind,
        )
        occurrences[sha] += 1
        covered = _overlapping(body, draft.spans)
        regions = tuple(region for element in covered for region in element.regions)
        chunks.append(VersionChunk(
            chunk=chunk, ordinal=len(chunks), spans=tuple(draft.spans),
            element_ids=tuple(draft.element_ids or [element.element_id for element in covered]),
            pages=tuple(sorted({region.page for region in regions})), regions=_dedupe(regions),
        ))
    check_chunk_spans(canonical, chunks)
    return chunks


def _overlapping(elements: list[Element], spans: list[Span]) -> list[Element]:
    return [
        element for element in elements
        if any(element.span[0] < end and start < element.span[1] for start, end in spans)  # type: ignore[index]
    ]


def _dedupe(regions: tuple[Region, ...]) -> tuple[Region, ...]:
    return tuple(dict.fromkeys(regions))


def check_chunk_spans(canonical: str, chunks: list[VersionChunk]) -> None:
    for placed in chunks:
        for start, end in placed.spans:
            if not 0 <= start <= end <= len(canonical):
                raise SpanError(f"chunk {placed.chunk_id} span {(start, end)} is outside the canonical text")
        if chunk_text(canonical, placed.spans) != placed.text:
            raise SpanError(f"chunk {placed.chunk_id} text does not equal the canonical text at its spans")
