"""Parser-neutral output: what every parser returns, whatever library it wraps.

A parser turns bytes into a flat, reading-ordered list of :class:`Block` plus the
pages it saw. Library types (pypdfium2 objects, ``DoclingDocument``) never leave the
parser module. Structure building (:mod:`kb_ray.structure`) turns blocks into the
element tree and canonical text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kb_ray.outcomes import Reason, reason_code, render_error

BlockKind = Literal[
    "title",
    "heading",
    "paragraph",
    "list_item",
    "table",
    "figure",
    "caption",
    "code",
    "formula",
    "footnote",
    "page_header",
    "page_footer",
]
BLOCK_KINDS: tuple[str, ...] = BlockKind.__args__  # type: ignore[attr-defined]
FURNITURE_KINDS = frozenset({"page_header", "page_footer"})

ParseStatus = Literal["ok", "failed"]

BBox = tuple[float, float, float, float]
"""x0, y0, x1, y1 normalized to [0, 1], origin top-left."""


@dataclass(frozen=True)
class PageInfo:
    """One page (PDF page, slide, sheet) as the parser saw it. Sizes in points."""

    page_no: int  # 1-based
    width: float
    height: float
    has_text_layer: bool = True


@dataclass(frozen=True)
class Block:
    """One unit of content in reading order.

    ``page`` is 1-based or ``None`` for formats without pages (DOCX, HTML, Markdown).
    ``bbox`` is normalized to [0, 1] with origin top-left, or ``None``.
    ``level`` is the heading level (1 = top) for headings, the nesting depth (0 = top)
    for list items, and 0 otherwise.
    ``attrs`` holds kind-specific data:
      * table: ``{"rows": [[cell, ...], ...], "header_rows": int}``
      * figure: ``{"image_sha": str | None, "crop_sha": str | None}``: ``crop_sha`` names
        the figure's PNG crop in :attr:`ParseResult.images`; its caption, if any, is a separate
        ``caption`` block that directly follows the figure or table it describes.
      * list_item: ``{"marker": "-" | "1." ...}`` (optional, ordered lists)
    A block may also span pages: ``extra_regions`` lists further (page, bbox) pairs.
    """

    kind: BlockKind
    text: str
    page: int | None = None
    bbox: BBox | None = None
    level: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)
    extra_regions: tuple[tuple[int, BBox], ...] = ()


@dataclass
class ParseResult:
    """The outcome of parsing one document: blocks or a failure with a reason.

    A failure has a ``reason`` (a :class:`~kb_ray.outcomes.Reason` code) and a human
    ``detail``; :attr:`error` renders both for display. A success that a later parser of
    the chain produced names the first parser that failed in ``fallback_from`` (and
    ``fallback_reason``), and says so in ``notes``.
    """

    status: ParseStatus
    parser: str
    mime: str
    blocks: list[Block] = field(default_factory=list)
    pages: list[PageInfo] = field(default_factory=list)
    title: str | None = None
    reason: Reason | None = None
    detail: str = ""
    seconds: float = 0.0
    images: dict[str, bytes] = field(default_factory=dict)  # sha256 -> PNG of each figure crop
    notes: list[str] = field(default_factory=list)  # human notes, e.g. which parser failed before this one
    fallback_from: str | None = None  # the chain's first parser, when it failed and this one succeeded
    fallback_reason: Reason | None = None  # why it failed

    @classmethod
    def failed(cls, *, parser: str, mime: str, reason: str | Reason, detail: str = "") -> "ParseResult":
        return cls(status="failed", parser=parser, mime=mime, reason=reason_code(reason), detail=detail)

    @property
    def error(self) -> str | None:
        """``"reason: detail"`` of a failure, for display (never parsed back)."""
        return render_error(self.reason, self.detail)


def normalize_bbox(
    x0: float, top: float, x1: float, bottom: float, *, width: float, height: float
) -> BBox:
    """Normalize a top-left-origin box in page units to [0, 1], clamped and ordered."""

    def clamp(value: float) -> float:
        return min(1.0, max(0.0, value))

    nx0, nx1 = sorted((clamp(x0 / width), clamp(x1 / width)))
    ny0, ny1 = sorted((clamp(top / height), clamp(bottom / height)))
    return (nx0, ny0, nx1, ny1)


def render_rows(rows: list[list[str]]) -> str:
    """Plain rendering of a table (a table block's ``text``): cells joined by " | ", rows by newlines."""
    lines = (" | ".join(row) for row in rows)
    return "\n".join(line for line in lines if line.replace("|", "").strip())
