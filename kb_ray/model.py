"""The document model: pure data, no I/O.

Vocabulary (docs/architecture.md, Vocabulary):

* :class:`Document` — stable identity of one source across versions.
* :class:`DocumentVersion` — one immutable parse of one raw byte string: canonical text,
  fingerprints, status.
* :class:`Element` — a node of the element tree with a ``span`` into the canonical text
  (``canonical[span] == text``) and ``regions`` on pages.
* :class:`Chunk` — a retrievable unit with content identity (unchanged text keeps its id);
  :class:`VersionChunk` says where that chunk sits in one version.

Spans are half-open ``(start, end)`` character offsets into the canonical text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kb_ray.parsing.blocks import BBox

Span = tuple[int, int]
Layer = Literal["body", "furniture"]
VersionStatus = Literal["staged", "committed", "failed", "superseded"]


@dataclass(frozen=True)
class Region:
    """Where (part of) an element sits on a page: 1-based page, normalized bbox."""

    page: int
    bbox: BBox
    char_span: Span | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"page": self.page, "bbox": list(self.bbox)}
        if self.char_span is not None:
            out["char_span"] = list(self.char_span)
        return out


@dataclass(frozen=True)
class Page:
    page_no: int
    width: float
    height: float
    has_text_layer: bool = True


@dataclass
class Element:
    """One node of the element tree.

    ``span`` is ``None`` only for furniture (page headers/footers), which is kept in the
    tree but not in the canonical text.
    """

    element_id: str
    ordinal: int
    kind: str
    layer: Layer
    text: str
    level: int = 0
    parent_id: str | None = None
    span: Span | None = None
    regions: list[Region] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def pages(self) -> list[int]:
        return sorted({region.page for region in self.regions})


@dataclass(frozen=True)
class Document:
    document_id: str
    collection: str
    key: str
    uri: str
    title: str | None = None
    mime: str = "application/octet-stream"
    tags: tuple[str, ...] = ()
    active_version_id: str | None = None
    deleted_at: str | None = None


@dataclass(frozen=True)
class Chunk:
    """A retrievable unit with content identity.

    ``chunk_id = H(document_id, chunker_fp, content_sha, occurrence)``: the same text under
    the same heading path in the next version keeps its id, so its embedding is reused.
    ``content_sha`` covers the heading path and the text (what an embedder sees).
    """

    chunk_id: str
    document_id: str
    chunker_fp: str
    text: str
    content_sha: str
    heading_path: tuple[str, ...]
    token_count: int
    kind: str = "text"  # text | table | figure


@dataclass(frozen=True)
class VersionChunk:
    """Where a chunk sits in one version.

    ``chunk.text == "\\n".join(canonical[s:e] for s, e in spans)``; several spans occur when
    a table split by rows repeats its header row.
    """

    chunk: Chunk
    ordinal: int
    spans: tuple[Span, ...]
    element_ids: tuple[str, ...]
    pages: tuple[int, ...]
    regions: tuple[Region, ...]

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id

    @property
    def text(self) -> str:
        return self.chunk.text


@dataclass
class DocumentVersion:
    """One parse of one document's raw bytes, with everything derived from it."""

    version_id: str
    document_id: str
    raw_sha: str
    pipeline_fp: str
    parser: str
    mime: str
    status: VersionStatus
    canonical_text: str = ""
    text_sha: str = ""
    title: str | None = None
    elements: list[Element] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)
    chunks: list[VersionChunk] = field(default_factory=list)
    error: str | None = None  # display text of a failure: "reason: detail" (see kb_ray/outcomes.py)
    reason: str | None = None  # the failure's code, a kb_ray.outcomes.Reason
    detail: str = ""
    fallback_from: str | None = None  # the parser that failed before the one that produced this version
    stats: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # did not stop the version: e.g. a parser fallback
    images: dict[str, bytes] = field(default_factory=dict)  # sha256 -> PNG of figure crops (blob store)
