"""Structure: blocks → element tree, canonical text and spans.

:class:`StructureBuilder` is pure: the same blocks always give the same canonical text,
elements and ids. It nests sections by heading level, keeps furniture in the tree but out
of the canonical text, attaches captions to the table or figure next to them, and checks
``canonical[span] == element.text`` for every element before returning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kb_ray import ids
from kb_ray.errors import SpanError
from kb_ray.model import Element, Region
from kb_ray.parsing.blocks import FURNITURE_KINDS, Block
from kb_ray.structure.serializer import clean_text, separator, serialize_block

STRUCTURER_VERSION = "1"


@dataclass
class StructuredText:
    canonical_text: str
    elements: list[Element] = field(default_factory=list)


class StructureBuilder:
    """Builds the element tree and canonical text of one document version."""

    name = "structure"
    version = STRUCTURER_VERSION

    @property
    def fingerprint(self) -> str:
        return ids.fingerprint(kind="structurer", name=self.name, version=self.version, config={"serializer": "md-v1"})

    def build(self, blocks: list[Block], *, version_id: str) -> StructuredText:
        elements, parts, offset, previous = [], [], 0, None
        tracker = _SectionTracker()
        for ordinal, block in enumerate(block for block in blocks if _keep(block)):
            element = _new_element(block, ordinal=ordinal, version_id=version_id)
            if block.kind in FURNITURE_KINDS:
                element.layer, element.text = "furniture", clean_text(block.text)
            else:
                piece = serialize_block(block)
                if not piece.text:
                    continue
                gap = separator(previous, block)
                start = offset + len(gap) + len(piece.prefix)
                element.text, element.span = piece.text, (start, start + len(piece.text))
                if piece.text != block.text:  # line offsets (PDF "lines") are into the block's text
                    element.attrs.pop("lines", None)
                parts.append(gap + piece.prefix + piece.text + piece.suffix)
                offset = element.span[1] + len(piece.suffix)
                previous = block
                tracker.place(element)
            elements.append(element)
        _attach_captions(elements)
        canonical = "".join(parts)
        check_spans(canonical, elements)
        return StructuredText(canonical_text=canonical, elements=elements)


def _keep(block: Block) -> bool:
    return bool(block.text and block.text.strip()) or bool(block.attrs.get("rows"))


def _new_element(block: Block, *, ordinal: int, version_id: str) -> Element:
    regions = []
    if block.page is not None and block.bbox is not None:
        regions.append(Region(page=block.page, bbox=tuple(round(v, 4) for v in block.bbox)))
    regions += [Region(page=page, bbox=tuple(round(v, 4) for v in bbox)) for page, bbox in block.extra_regions]
    if not regions and block.page is not None:
        regions.append(Region(page=block.page, bbox=(0.0, 0.0, 1.0, 1.0)))
    return Element(
        element_id=ids.element_id(version_id=version_id, ordinal=ordinal),
        ordinal=ordinal,
        kind=block.kind,
        layer="body",
        text=block.text,
        level=block.level,
        regions=regions,
        attrs=dict(block.attrs),
    )


class _SectionTracker:
    """Nests elements under the nearest open heading of a lower level."""

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []  # (level, element_id), strictly increasing levels

    def place(self, element: Element) -> None:
        if element.kind in ("title", "heading"):
            level = 0 if element.kind == "title" else max(1, element.level)
            while self._open and self._open[-1][0] >= level:
                self._open.pop()
            element.parent_id = self._open[-1][1] if self._open else None
            self._open.append((level, element.element_id))
        else:
            element.parent_id = self._open[-1][1] if self._open else None


def _attach_captions(elements: list[Element]) -> None:
    """A caption belongs to the table/figure right before it, else right after it."""
    body = [element for element in elements if element.layer == "body"]
    for index, element in enumerate(body):
        if element.kind != "caption":
            continue
        neighbours = [body[i] for i in (index - 1, index + 1) if 0 <= i < len(body)]
        target = next((n for n in neighbours if n.kind in ("table", "figure") and "caption_id" not in n.attrs), None)
        if target is not None:
            element.parent_id = target.element_id
            target.attrs["caption_id"] = element.element_id


def check_spans(canonical: str, elements: list[Element]) -> None:
    """Raise :class:`SpanError` unless every body element's span round-trips."""
    for element in elements:
        if element.span is None:
            if element.layer == "body":
                raise SpanError(f"body element {element.element_id} has no span")
            continue
        start, end = element.span
        if canonical[start:end] != element.text:
            raise SpanError(
                f"span {element.span} of {element.element_id} ({element.kind}) does not round-trip: "
                f"{canonical[start:end][:60]!r} != {element.text[:60]!r}"
            )
