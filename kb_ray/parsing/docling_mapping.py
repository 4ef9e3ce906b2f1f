"""Docling items → parser-neutral blocks, in reading order.

Walks a ``DoclingDocument`` tree (body and furniture layers) and emits :class:`Block`
values; the document type never leaves this module and :mod:`docling_formats`.

Docling specifics handled here:
  * inline groups (a paragraph with bold or a link is several text items) become one block,
    parts joined by a space except next to punctuation; inline code keeps its backticks;
  * a list item's text may sit in child inline groups; nesting depth comes from list groups;
  * captions are emitted right after their table or figure, and only once;
  * several title items (Markdown ``#`` sections, one title per slide) become level-1
    headings with section headers one level below, so the hierarchy survives;
  * furniture (HTML nav/footer, DOCX page headers and footers) becomes page_header or
    page_footer: by label, then by the enclosing group's name, then by position.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from docling_core.types.doc import (
    CodeItem,
    ContentLayer,
    DocItemLabel,
    DoclingDocument,
    GroupItem,
    GroupLabel,
    ListItem,
    NodeItem,
    PictureItem,
    SectionHeaderItem,
    TableItem,
    TextItem,
    TitleItem,
)

from kb_ray.parsing.blocks import BBox, Block, normalize_bbox, render_rows  # noqa: F401  (render_rows: also imported from here)

_LAYERS = frozenset({ContentLayer.BODY, ContentLayer.FURNITURE})
_LIST_GROUPS = frozenset({GroupLabel.LIST, GroupLabel.ORDERED_LIST})
_TEXT_KINDS = {
    DocItemLabel.CAPTION: "caption",
    DocItemLabel.FOOTNOTE: "footnote",
    DocItemLabel.PAGE_HEADER: "page_header",
    DocItemLabel.PAGE_FOOTER: "page_footer",
    DocItemLabel.CODE: "code",
    DocItemLabel.FORMULA: "formula",
}
FIGURE_PLACEHOLDER = "[figure]"
_CLOSING = tuple(".,;:!?)]}”’…")
_OPENING = tuple("([{“‘")


@dataclass(frozen=True)
class _Context:
    list_depth: int = -1  # -1 outside lists, 0 inside a top-level list
    furniture_kind: str | None = None  # set inside a group named like "page footer"


@dataclass
class DoclingMapping:
    """What the walk found: blocks in reading order and the document title."""

    blocks: list[Block]
    title: str | None


FigureAttrs = Callable[[PictureItem], dict[str, Any]]
"""Extra attrs for the figure block of a picture, e.g. its crop's sha (called once per
figure block, only for pictures that become one)."""


def map_document(doc: DoclingDocument, *, figure_attrs: FigureAttrs | None = None) -> DoclingMapping:
    """Turn a converted document into blocks and a title."""
    return _BlockMapper(doc, figure_attrs=figure_attrs).run()


class _BlockMapper:
    def __init__(self, doc: DoclingDocument, *, figure_attrs: FigureAttrs | None = None) -> None:
        self.doc = doc
        self.figure_attrs = figure_attrs
        self.blocks: list[Block] = []
        self.owned_captions = {ref.cref for owner in [*doc.tables, *doc.pictures] for ref in owner.captions}
        self.seen_body = False
        self.titles: dict[ContentLayer, str] = {}
        self.first_heading: str | None = None
        self.multi_title, self.level_shift = _heading_plan(doc)

    def run(self) -> DoclingMapping:
        self._walk(self.doc.body, _Context())  # furniture items hang off the body too
        return DoclingMapping(blocks=self.blocks, title=self._title())

    def _title(self) -> str | None:
        """A body title, else a furniture one (HTML <title>), else the first section
        heading; sheet names are not titles."""
        titles = self.titles
        return titles.get(ContentLayer.BODY) or titles.get(ContentLayer.FURNITURE) or self.first_heading

    def _walk(self, node: NodeItem, ctx: _Context) -> None:
        for child in _children(self.doc, node):
            self._visit(child, ctx)

    def _visit(self, item: NodeItem, ctx: _Context) -> None:
        if isinstance(item, GroupItem):
            self._group(item, ctx)
        elif isinstance(item, ListItem):
            self._list_item(item, ctx)
        elif isinstance(item, TableItem):
            self._table(item, ctx)  # rich-cell children are already in the grid text
        elif isinstance(item, PictureItem):
            self._figure(item, ctx)
        elif isinstance(item, TextItem):
            self._text(item, ctx)
            self._walk(item, ctx)
        else:  # key-value and form regions carry no reading-order text here
            self._walk(item, ctx)

    # ---- groups and lists -------------------------------------------------------------

    def _group(self, group: GroupItem, ctx: _Context) -> None:
        if group.label == GroupLabel.INLINE:
            self._emit(self._kind_for(group, ctx, "paragraph"), _inline_text(self.doc, group), group)
            return
        if group.label == GroupLabel.SHEET and group.name:
            self._emit("heading", group.name, group, level=1 - self.level_shift, with_bbox=False)
        if group.label in _LIST_GROUPS:
            ctx = replace(ctx, list_depth=ctx.list_depth + 1)
        if group.content_layer == ContentLayer.FURNITURE:
            ctx = replace(ctx, furniture_kind=_furniture_kind_of(group.name) or ctx.furniture_kind)
        self._walk(group, ctx)

    def _list_item(self, item: ListItem, ctx: _Context) -> None:
        own, nested = _split_list_children(self.doc, item)
        parts = [item.text.strip()] + [_inline_text(self.doc, part) for part in own]
        text = join_inline(parts)
        kind = self._kind_for(item, ctx, "list_item")
        if kind == "list_item":
            marker = {"marker": _list_marker(self.doc, item)}
            self._emit(kind, text, item, level=max(ctx.list_depth, 0), attrs=marker)
        else:
            self._emit(kind, text, item)
        for child in nested:
            self._visit(child, ctx)

    # ---- text, tables, figures ----------------------------------------------------------

    def _text(self, item: TextItem, ctx: _Context) -> None:
        if item.self_ref in self.owned_captions:
            return  # emitted right after its table or figure
        if isinstance(item, TitleItem) and item.text.strip():
            self.titles.setdefault(item.content_layer, item.text.strip())
        if isinstance(item, SectionHeaderItem) and item.content_layer == ContentLayer.BODY:
            self.first_heading = self.first_heading or item.text.strip() or None
        kind, level = self._text_kind(item)
        attrs = _code_attrs(item) if isinstance(item, CodeItem) else {}
        self._emit(self._kind_for(item, ctx, kind), item.text, item, level=level, attrs=attrs)

    def _text_kind(self, item: TextItem) -> tuple[str, int]:
        if isinstance(item, TitleItem):
            return ("heading", 1 - self.level_shift) if self.multi_title else ("title", 0)
        if isinstance(item, SectionHeaderItem):
            return "heading", item.level + int(self.multi_title) - self.level_shift
        return _TEXT_KINDS.get(item.label, "paragraph"), 0

    def _table(self, item: TableItem, ctx: _Context) -> None:
        rows = [[cell.text.strip() for cell in row] for row in item.data.grid]
        kind = self._kind_for(item, ctx, "table")
        attrs = {"rows": rows, "header_rows": _header_rows(item)} if kind == "table" else {}
        emitted = self._emit(kind, render_rows(rows), item, attrs=attrs)
        self._emit_captions(item, ctx, owner_emitted=emitted)

    def _figure(self, item: PictureItem, ctx: _Context) -> None:
        captions = _captions_of(self.doc, item)
        if item.content_layer == ContentLayer.FURNITURE and not captions:
            return  # a logo or decoration in a page header says nothing
        text = " ".join(cap.text.strip() for cap in captions) or FIGURE_PLACEHOLDER
        kind = self._kind_for(item, ctx, "figure")
        attrs: dict[str, Any] = {}
        if kind == "figure":
            attrs = {"image_sha": None, **(self.figure_attrs(item) if self.figure_attrs else {})}
        emitted = self._emit(kind, text, item, attrs=attrs)
        self._emit_captions(item, ctx, owner_emitted=emitted)

    def _emit_captions(self, item: TableItem | PictureItem, ctx: _Context, *, owner_emitted: bool) -> None:
        """Captions follow their table or figure; without one they are plain paragraphs."""
        for caption in _captions_of(self.doc, item):
            kind = self._kind_for(caption, ctx, "caption" if owner_emitted else "paragraph")
            self._emit(kind, caption.text, caption)

    # ---- emitting -------------------------------------------------------------------------

    def _kind_for(self, item: NodeItem, ctx: _Context, kind: str) -> str:
        """Furniture items become page_header/page_footer; body items keep ``kind``."""
        if item.content_layer != ContentLayer.FURNITURE:
            return kind
        if kind in ("page_header", "page_footer"):
            return kind
        return ctx.furniture_kind or ("page_footer" if self.seen_body else "page_header")

    def _emit(self, kind: str, text: str, item: NodeItem, *, level: int = 0,
              attrs: dict | None = None, with_bbox: bool = True) -> bool:
        text = text.strip()
        if not text:
            return False
        regions = item_regions(self.doc, item)
        page, bbox = regions[0] if regions else (None, None)
        bbox = bbox if with_bbox else None
        extra = tuple((p, b) for p, b in regions[1:] if b is not None and with_bbox)
        block = Block(kind=kind, text=text, page=page, bbox=bbox, level=level,  # type: ignore[arg-type]
                      attrs=attrs or {}, extra_regions=extra)
        self.blocks.append(block)
        self.seen_body = self.seen_body or kind not in ("page_header", "page_footer")
        return True


# ---- pure helpers ------------------------------------------------------------------------


def _children(doc: DoclingDocument, node: NodeItem) -> Iterator[NodeItem]:
    for ref in node.children:
        child = ref.resolve(doc)
        if child.content_layer in _LAYERS:
            yield child


def _heading_plan(doc: DoclingDocument) -> tuple[bool, int]:
    """(several titles?, shift) so that the shallowest heading lands on level 1."""
    body = {ContentLayer.BODY}
    items = [item for item, _ in doc.iterate_items(with_groups=True, included_content_layers=body)]
    multi_title = sum(isinstance(item, TitleItem) for item in items) > 1
    levels = [item.level + int(multi_title) for item in items if isinstance(item, SectionHeaderItem)]
    if multi_title or any(isinstance(i, GroupItem) and i.label == GroupLabel.SHEET for i in items):
        levels.append(1)
    return multi_title, (min(levels) - 1 if levels else 0)


def _captions_of(doc: DoclingDocument, item: TableItem | PictureItem) -> list[TextItem]:
    found = [ref.resolve(doc) for ref in item.captions]
    return [cap for cap in found if isinstance(cap, TextItem) and cap.text.strip()]


def _inline_text(doc: DoclingDocument, node: NodeItem) -> str:
    """The text of an item and its descendants, joined as running text."""
    own = node.text.strip() if isinstance(node, TextItem) else ""
    if own and isinstance(node, CodeItem) and "\n" not in own:
        own = _code_span(own)  # inside an inline group: inline code, not a code block
    parts = [own] + [_inline_text(doc, child) for child in _children(doc, node)]
    return join_inline(parts)


def join_inline(parts: list[str]) -> str:
    """Join inline parts (Docling strips their edges) with single spaces, but none before
    closing punctuation, after an opening bracket, or inside a pair of straight quotes."""
    joined = ""
    for part in (p for p in parts if p):
        quote_open = joined.count('"') % 2 == 1
        tight = part.startswith(_CLOSING) or joined.endswith(_OPENING) or (
            quote_open and (joined.endswith('"') or part.startswith('"')))
        joined = joined + part if tight or not joined else f"{joined} {part}"
    return joined


def _code_span(code: str) -> str:
    """Markdown inline code: backticks, more of them when the code holds one."""
    if "`" not in code:
        return f"`{code}`"
    fence = "`" * (max(len(run) for run in re.findall(r"`+", code)) + 1)
    return f"{fence} {code} {fence}"


def _split_list_children(doc: DoclingDocument, item: ListItem) -> tuple[list[NodeItem], list[NodeItem]]:
    """A list item's children: (its own text parts, nested lists and other blocks)."""
    own: list[NodeItem] = []
    nested: list[NodeItem] = []
    for child in _children(doc, item):
        is_text_part = (isinstance(child, GroupItem) and child.label == GroupLabel.INLINE) or (
            type(child) is TextItem and child.label in (DocItemLabel.TEXT, DocItemLabel.PARAGRAPH)
        )
        (own if is_text_part else nested).append(child)
    return own, nested


def _list_marker(doc: DoclingDocument, item: ListItem) -> str:
    """Docling's marker; else "-" for bullets or the item's number among its siblings."""
    if item.marker.strip():
        return item.marker.strip()
    if not item.enumerated or item.parent is None:
        return "-"
    siblings = [ref.cref for ref in item.parent.resolve(doc).children
                if isinstance(ref.resolve(doc), ListItem)]
    return f"{siblings.index(item.self_ref) + 1}." if item.self_ref in siblings else "-"


def _furniture_kind_of(name: str) -> str | None:
    lowered = name.lower()
    if "footer" in lowered:
        return "page_footer"
    if "header" in lowered or "nav" in lowered:
        return "page_header"
    return None


def _header_rows(table: TableItem) -> int:
    count = 0
    for row in table.data.grid:
        headers = [cell.column_header for cell in row if cell.text.strip()]
        if not headers or not all(headers):
            break
        count += 1
    return count


def _code_attrs(item: CodeItem) -> dict[str, Any]:
    language = getattr(item.code_language, "value", None)
    return {"language": language} if language and language.lower() != "unknown" else {}


def item_regions(doc: DoclingDocument, item: NodeItem) -> list[tuple[int, BBox | None]]:
    """(page_no, normalized top-left bbox) per provenance entry of ``item`` or, for a
    group (which has none of its own), of its first descendant that has one."""
    nodes = _self_and_descendants(doc, item) if isinstance(item, GroupItem) else iter([item])
    for node in nodes:
        provs = getattr(node, "prov", None)
        if provs:
            return [(prov.page_no, _normalized(doc, prov)) for prov in provs]
    return []


def _self_and_descendants(doc: DoclingDocument, item: NodeItem) -> Iterator[NodeItem]:
    yield item
    for child in _children(doc, item):
        yield from _self_and_descendants(doc, child)


def _normalized(doc: DoclingDocument, prov: Any) -> BBox | None:
    page = doc.pages.get(prov.page_no)
    if page is None or page.size is None or page.size.width <= 0 or page.size.height <= 0:
        return None
    box = prov.bbox.to_top_left_origin(page.size.height)
    return normalize_bbox(box.l, box.t, box.r, box.b, width=page.size.width, height=page.size.height)


def picture_crop_attrs(doc: DoclingDocument, images: dict[str, bytes], item: PictureItem) -> dict[str, Any]:
    """Encode the picture's image (a PDF crop, or the image embedded in DOCX/PPTX/HTML) as PNG
    into ``images``; the figure block names it by sha256. For ``map_document(figure_attrs=)``."""
    image = item.get_image(doc)
    if image is None:  # a picture without its image (an HTML <img> Docling did not fetch)
        return {}
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    png = buffer.getvalue()
    sha = hashlib.sha256(png).hexdigest()
    images[sha] = png
    return {"crop_sha": sha, "width_px": image.width, "height_px": image.height}
