"""Born-digital PDFs through pypdfium2's text layer: character boxes → blocks.

Embedded images larger than ``FIGURE_MIN_AREA`` of the page become ``figure`` blocks
(vector drawings do not), each with a PNG crop of its page region rendered at
``crop_dpi`` (``ParseResult.images``, named by ``attrs["crop_sha"]``); a paragraph cut by a page or column break is joined back into
one block whose ``extra_regions`` hold the continuation's place. Ruled tables become
``table`` blocks (``attrs["rows"]``, ``attrs["header_rows"]``, the box of the drawn grid)
when ``tables`` is on; the characters inside a table are its cells and nothing else
(:mod:`kb_ray.parsing.pdf_tables`).

pdfium is not thread-safe (two threads opening pages at once crashed the process), so
every pdfium call runs under one process-wide lock and every page, text page and
document is closed before the lock is released. Layout (lines, columns, blocks) is pure
Python in :mod:`kb_ray.parsing.pdf_layout` and runs outside the lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import math
import re
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import pdfplumber
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from kb_ray.errors import ParseError
from kb_ray.parsing import native_memory, pdf_tables
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import FURNITURE_KINDS, Block, PageInfo, ParseResult, normalize_bbox, render_rows
from kb_ray.parsing.pdf_layout import (
    CAPTION_START,
    LIST_MARKER,
    Char,
    Line,
    LineGroup,
    build_lines,
    continues_paragraph,
    figure_line,
    find_furniture,
    group_blocks,
    reading_order,
    runs_to_edge,
    same_size_class,
    table_line,
    text_edge,
    typical_pitch,
)
from kb_ray.parsing.pdf_tables import FilledTable

PDFIUM_LOCK = threading.Lock()
"""Guards every pdfium call in this process."""
FIGURE_MIN_AREA = 0.02
"""An image covering more than this share of the page is a figure; smaller ones are icons."""
FIGURE_MAX_AREA = 0.9
"""An image covering more than this share is a page scan or background, not a figure."""

_SPACE = Char(" ", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_BOLD_NAME = re.compile(r"bold|black|heavy", re.I)
_FORCE_BOLD_FLAG = 1 << 18
_PLACEHOLDER_TITLES = {"", "untitled", "unknown", "none", "title"}
_TEXT_OBJECT_ADDRESS = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(
    ctypes.cast(pdfium_c.FPDFText_GetTextObject, ctypes.c_void_p).value
)  # FPDFText_GetTextObject returning a plain int: a cheap cache key per text object


@dataclass
class PageImage:
    """An embedded image: its box in top-left display points and the figure attrs."""

    box: tuple[float, float, float, float]
    attrs: dict[str, Any]
    crop: bytes | None = None  # PNG of the page region under the box


@dataclass
class _Page:
    info: PageInfo
    chars: list[Char]
    images: list[PageImage] = field(default_factory=list)
    table_search: str = "off"  # the page_rules decision of pdf_tables, or "off"
    rules: list[dict[str, Any]] = field(default_factory=list)  # its drawn rules when searched


class PdfTextParser(Parser):
    """Reads the text layer of born-digital PDFs; scanned pages need OCR later."""

    name = "pdf_text"
    version = "4"  # 2: continuations joined across page/column breaks; images become figures; 3: line boxes; 4: tables
    mimes = frozenset({"application/pdf"})

    def __init__(self, *, figure_crops: bool = True, crop_dpi: int = 144, tables: bool = True,
                 table_seconds: float = 30.0) -> None:
        self.crop_dpi = crop_dpi if figure_crops else None
        self.tables = tables
        self.table_seconds = table_seconds

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"crop_dpi": self.crop_dpi, "tables": self.tables}
        if self.tables:
            config["table_finder"] = {"pdfplumber": pdfplumber.__version__, "settings": pdf_tables.FINDER_SETTINGS,
                                      "max_page_objects": pdf_tables.MAX_PAGE_OBJECTS,
                                      "max_page_edges": pdf_tables.MAX_PAGE_EDGES,
                                      "max_page_segments": pdf_tables.MAX_PAGE_SEGMENTS, "axis_slack": pdf_tables.AXIS_SLACK,
                                      "min_filled_share": round(pdf_tables.MIN_FILLED_SHARE, 4),
                                      "rule_thickness": pdf_tables.RULE_THICKNESS, "band_height": pdf_tables.BAND_HEIGHT,
                                      "seconds": self.table_seconds}
        return config

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        meta_title, pages = extract_pages(data, max_pages=limits.max_pages, crop_dpi=self.crop_dpi, tables=self.tables,
                                          page_memory=limits.pdfium_memory_bytes)
        if not any(page.info.has_text_layer for page in pages):
            raise ParseError(
                "no_text_layer",
                f"none of {len(pages)} pages has a text layer (scanned or image-only PDF); "
                "it needs OCR, which is a later pipeline stage",
            )
        tables, notes = self._find_tables(pages)
        blocks = layout_blocks([page.info for page in pages], [build_lines(chars) for chars, _ in tables],
                               [page.images for page in pages], [page_tables for _, page_tables in tables])
        title = meta_title or next((b.text for b in blocks if b.kind in ("title", "heading")), None)
        crops = {image.attrs["crop_sha"]: image.crop for page in pages for image in page.images if image.crop}
        return ParseResult(status="ok", parser=self.name, mime=mime, blocks=blocks,
                           pages=[page.info for page in pages], title=title, images=crops, notes=notes)

    def _find_tables(self, pages: list[_Page]) -> tuple[list[tuple[list[Char], list[FilledTable]]], list[str]]:
        """Per page, the characters outside tables and the tables; notes on pages not searched."""
        rules = {index: page.rules for index, page in enumerate(pages) if page.table_search == "search"}
        found, notes = pdf_tables.find_tables(rules, seconds=self.table_seconds)
        crowded = [str(index + 1) for index, page in enumerate(pages) if page.table_search == "too_many_objects"]
        if crowded:
            notes.append(f"tables: not searched on pages {', '.join(crowded)} (over {pdf_tables.MAX_PAGE_OBJECTS} "
                         f"objects or {pdf_tables.MAX_PAGE_SEGMENTS} path pieces)")
        out = []
        for index, page in enumerate(pages):
            filled, outside = pdf_tables.fill_tables(found.get(index, []), page.chars, join=join_lines)
            out.append((outside, filled))
        return out, notes


# -- pdfium access (always under PDFIUM_LOCK) -----------------------------------------


def extract_pages(data: bytes, *, max_pages: int, crop_dpi: int | None = None, tables: bool = False,
                  page_memory: int | None = None) -> tuple[str | None, list[_Page]]:
    """Open the PDF and read every page's characters (and, with ``crop_dpi``, render a crop
    of every figure; with ``tables``, decide whether to search the page for tables); raises
    ParseError for bad input. ``page_memory``: the address space opening the PDF, and then
    reading one page, may add in an isolated parser process (kb_ray/parsing/native_memory.py)."""
    with opened_pdf(data, max_pages=max_pages, memory=page_memory) as pdf:
        return _metadata_title(pdf), [_read_page(pdf, index, crop_dpi, tables, page_memory)
                                      for index in range(len(pdf))]


@contextlib.contextmanager
def opened_pdf(data: bytes, *, max_pages: int, memory: int | None = None) -> Iterator[pdfium.PdfDocument]:
    """The open PDF, under :data:`PDFIUM_LOCK` and closed on exit; raises ParseError when it is
    encrypted, broken, empty or over ``max_pages``. ``memory``: what opening it may allocate
    (:func:`native_memory.bounded`)."""
    with PDFIUM_LOCK:
        with native_memory.bounded(memory):
            pdf = open_pdf(data)
        try:
            count = len(pdf)
            if count > max_pages:
                raise ParseError("too_many_pages", f"{count} pages > limit {max_pages}")
            if count == 0:
                raise ParseError("empty", "the PDF has no pages")
            yield pdf
        finally:
            pdf.close()


def open_pdf(data: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise ParseError("encrypted", "the PDF is password-protected; ingest a decrypted copy") from exc
        raise ParseError("corrupt", f"pdfium cannot open it as a PDF ({exc})") from exc


def _metadata_title(pdf: pdfium.PdfDocument) -> str | None:
    title = clean_text(pdf.get_metadata_value("Title") or "")
    return None if title.lower() in _PLACEHOLDER_TITLES else title


def _read_page(pdf: pdfium.PdfDocument, index: int, crop_dpi: int | None, tables: bool = False,
               memory: int | None = None) -> _Page:
    with native_memory.bounded(memory):  # a page's content streams are inflated here, its images in render()
        return _read_loaded_page(pdf[index], index, crop_dpi, tables)


def _read_loaded_page(page: pdfium.PdfPage, index: int, crop_dpi: int | None, tables: bool) -> _Page:
    try:
        width, height, to_display = _display_transform(page)
        table_search, rules = pdf_tables.page_rules(page, to_display) if tables else ("off", [])
        textpage = page.get_textpage()
        try:
            chars = _page_chars(textpage.raw, to_display)
        finally:
            textpage.close()
        images = _page_images(page, to_display, width, height)
        if images and crop_dpi:
            _crop_figures(page, images, scale=crop_dpi / 72.0)
    finally:
        page.close()
    has_text = any(char.text != " " for char in chars)  # images alone are no text layer
    info = PageInfo(page_no=index + 1, width=width, height=height, has_text_layer=has_text)
    return _Page(info, chars, images, table_search, rules)


def _display_transform(page: pdfium.PdfPage) -> tuple[float, float, Callable]:
    """Page size as displayed and a map from PDF space to top-left display points."""
    left, bottom, right, top = page.get_bbox()
    rotation = page.get_rotation() % 360
    if rotation == 90:
        return top - bottom, right - left, lambda x, y: (y - bottom, x - left)
    if rotation == 180:
        return right - left, top - bottom, lambda x, y: (right - x, y - bottom)
    if rotation == 270:
        return top - bottom, right - left, lambda x, y: (top - y, right - x)
    return right - left, top - bottom, lambda x, y: (x - left, top - y)


def _page_images(page: pdfium.PdfPage, to_display: Callable, width: float, height: float) -> list[PageImage]:
    """Image objects (also inside form XObjects) big enough to be figures."""
    images = []
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]):
        box = _image_box(obj, to_display, width, height)
        share = (box[2] - box[0]) * (box[3] - box[1]) / (width * height)
        if FIGURE_MIN_AREA < share <= FIGURE_MAX_AREA:
            images.append(PageImage(box, _image_attrs(obj)))
    return images


def _crop_figures(page: pdfium.PdfPage, images: list[PageImage], *, scale: float) -> None:
    """Render the page once and cut each figure's box out as a PNG (what a captioner sees:
    the image as placed, clipped and rotated on the page, with anything drawn over it)."""
    bitmap = page.render(scale=scale)
    try:
        rendered = bitmap.to_pil().convert("RGB")
    finally:
        bitmap.close()
    for image in images:
        x0, y0, x1, y1 = (round(value * scale) for value in image.box)
        if x1 - x0 < 1 or y1 - y0 < 1:
            continue
        buffer = io.BytesIO()
        rendered.crop((x0, y0, x1, y1)).save(buffer, format="PNG", optimize=False)
        image.crop = buffer.getvalue()
        image.attrs["crop_sha"] = hashlib.sha256(image.crop).hexdigest()


def _image_box(obj: pdfium.PdfImage, to_display: Callable, width: float, height: float):
    """The image's bounds in display points, clipped to the page."""
    left, bottom, right, top = obj.get_bounds()
    container = obj.container
    while container is not None:  # bounds inside a form XObject are in the form's space
        left, bottom, right, top = container.get_matrix().on_rect(left, bottom, right, top)
        container = container.container
    (ax, ay), (bx, by) = to_display(left, top), to_display(right, bottom)
    x0, x1 = max(0.0, min(ax, bx)), min(width, max(ax, bx))
    y0, y1 = max(0.0, min(ay, by)), min(height, max(ay, by))
    return (x0, y0, max(x0, x1), max(y0, y1))


def _image_attrs(obj: pdfium.PdfImage) -> dict[str, Any]:
    """sha256 of the image's stream as stored (decoding costs ~100 ms) and its pixel size."""
    try:
        sha: str | None = hashlib.sha256(bytes(obj.get_data(decode_simple=False))).hexdigest()
    except pdfium.PdfiumError:
        sha = None
    try:
        width_px, height_px = obj.get_px_size()
    except pdfium.PdfiumError:
        width_px = height_px = None
    return {"image_sha": sha, "width_px": width_px, "height_px": height_px}


def _page_chars(textpage, to_display: Callable) -> list[Char]:
    styles: dict[int, tuple[float, bool]] = {}
    rect, origin_x, origin_y = pdfium_c.FS_RECTF(), ctypes.c_double(), ctypes.c_double()
    chars: list[Char] = []
    for index in range(pdfium_c.FPDFText_CountChars(textpage)):
        text = _char_text(textpage, index)
        if text is None or text == " ":
            if text and chars and chars[-1] is not _SPACE:
                chars.append(_SPACE)
            continue
        pdfium_c.FPDFText_GetLooseCharBox(textpage, index, rect)
        pdfium_c.FPDFText_GetCharOrigin(textpage, index, origin_x, origin_y)
        size, bold = _char_style(textpage, index, styles)
        (ax, ay), (bx, by) = to_display(rect.left, rect.top), to_display(rect.right, rect.bottom)
        baseline = to_display(origin_x.value, origin_y.value)[1]
        chars.append(Char(text, min(ax, bx), min(ay, by), max(ax, bx), max(ay, by), baseline, size, bold))
    return chars


def _char_text(textpage, index: int) -> str | None:
    """The character as text; ``" "`` for a word break, None for nothing to keep."""
    code = pdfium_c.FPDFText_GetUnicode(textpage, index)
    if 32 < code < 127:
        return chr(code)
    if 0xD800 <= code < 0xDC00:
        low = pdfium_c.FPDFText_GetUnicode(textpage, index + 1)
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00) if 0xDC00 <= low < 0xE000 else 0xFFFD
    elif 0xDC00 <= code < 0xE000 or code in (0, 0xFFFE, 0xFFFF, 0xAD):
        return None
    if code == 2:  # pdfium marks a hyphen that ends a line this way
        return "-"
    char = chr(code)
    if char in "\r\n":
        return None
    if char.isspace():
        return " "
    return None if unicodedata.category(char) in ("Cc", "Cf") else char


def _char_style(textpage, index: int, cache: dict[int, tuple[float, bool]]) -> tuple[float, bool]:
    """Effective font size and boldness, cached per text object."""
    key = _TEXT_OBJECT_ADDRESS(textpage, index) or 0
    if key not in cache:
        size = pdfium_c.FPDFText_GetFontSize(textpage, index)
        matrix = pdfium_c.FS_MATRIX()
        if pdfium_c.FPDFText_GetMatrix(textpage, index, matrix):
            size *= math.sqrt(abs(matrix.a * matrix.d - matrix.b * matrix.c)) or 1.0
        buffer, flags = ctypes.create_string_buffer(256), ctypes.c_int(0)
        pdfium_c.FPDFText_GetFontInfo(textpage, index, buffer, 256, flags)
        name = buffer.value.decode("latin-1", "replace")
        weight = pdfium_c.FPDFText_GetFontWeight(textpage, index)
        bold = weight >= 600 or bool(_BOLD_NAME.search(name)) or bool(flags.value & _FORCE_BOLD_FLAG)
        cache[key] = (round(size, 2), bold)
    return cache[key]


# -- blocks from lines (pure) ---------------------------------------------------------


@dataclass
class _FontStats:
    """Document-wide font sizes: the body size and heading size classes, largest first."""

    body: float
    heading_sizes: list[float]
    title_group: LineGroup | None
    bold_headings: bool

    def heading_level(self, group: LineGroup) -> int:
        for rank, size in enumerate(self.heading_sizes):
            if _heading_shaped(group) and same_size_class(group.size, size) and group.size > self.body:
                return min(rank + 1, 6)
        return 0

    def is_bold_heading(self, group: LineGroup, text: str) -> bool:
        return (self.bold_headings and group.bold and _heading_shaped(group) and len(group.lines) <= 2 and len(text.split()) <= 12
                and not text.endswith((".", ",", ";")) and group.size >= 0.9 * self.body)


@dataclass
class _Placed:
    """A block with what deciding a continuation needs; ``flow`` is set for prose paragraphs."""

    block: Block
    flow: tuple[int, int] | None = None  # (page, flow index)
    size: float = 0.0
    open_end: bool = False


@dataclass
class _FlowGroup:
    flow: int
    group: LineGroup
    edge: float  # the flow's right text edge


def layout_blocks(infos: list[PageInfo], page_lines: list[list[Line]],
                  page_images: list[list[PageImage]] | None = None,
                  page_tables: list[list[FilledTable]] | None = None) -> list[Block]:
    """Furniture, reading order, grouping, classification and continuations for a document;
    ``page_lines`` are the lines outside ``page_tables``."""
    images = page_images or [[] for _ in infos]
    tables = page_tables or [[] for _ in infos]
    furniture = find_furniture(page_lines, [info.height for info in infos])
    flows = [reading_order([l for i, l in enumerate(lines) if i not in marks]
                           + [figure_line(n, image.box) for n, image in enumerate(page_imgs)]
                           + [table_line(n, table.box) for n, table in enumerate(page_tbls)])
             for lines, marks, page_imgs, page_tbls in zip(page_lines, furniture, images, tables)]
    pitch = typical_pitch([flow for page in flows for flow in page])
    groups = [[_FlowGroup(n, g, text_edge(flow)) for n, flow in enumerate(page) for g in group_blocks(flow, pitch)]
              for page in flows]
    stats = font_stats([[fg.group for fg in page if not fg.group.placeholder] for page in groups])
    placed: list[_Placed] = []
    for info, lines, marks, page_groups, page_imgs, page_tbls in zip(infos, page_lines, furniture, groups, images, tables):
        marked = sorted(((lines[i], kind) for i, kind in marks.items()), key=lambda m: (m[0].top, m[0].x0))
        placed += [_Placed(_furniture_block(line, kind, info)) for line, kind in marked if kind == "page_header"]
        placed += _body_blocks(page_groups, stats, info, page_imgs, page_tbls)
        placed += [_Placed(_furniture_block(line, kind, info)) for line, kind in marked if kind == "page_footer"]
    return [with_line_spans(block) for block in join_continuations([item for item in placed if item.block.text])]


def font_stats(pages: list[list[LineGroup]]) -> _FontStats:
    counts: Counter[float] = Counter()
    bold_chars = 0
    for group in (g for page in pages for g in page):
        for line in group.lines:
            counts[round(line.size * 2) / 2] += len(line.text)
            bold_chars += len(line.text) if line.bold else 0
    body = max(counts, key=counts.__getitem__) if counts else 10.0
    candidates = [g for page in pages for g in page if _heading_shaped(g) and not same_size_class(g.size, body)]
    sizes: list[float] = []
    for size in sorted((g.size for g in candidates if g.size > body), reverse=True):
        if not sizes or not same_size_class(sizes[-1], size):
            sizes.append(size)
    title = _title_group(pages, sizes)
    if title is not None:
        sizes = sizes[1:]
    return _FontStats(body, sizes, title, bold_chars < 0.3 * max(1, sum(counts.values())))


def _title_group(pages: list[list[LineGroup]], sizes: list[float]) -> LineGroup | None:
    """The first block of page 1 when it alone uses the largest heading size."""
    if not sizes or not pages or not pages[0]:
        return None
    first = pages[0][0]
    users = [g for page in pages for g in page if same_size_class(g.size, sizes[0])]
    return first if users == [first] and same_size_class(first.size, sizes[0]) else None


def _heading_shaped(group: LineGroup) -> bool:
    """Short enough for a heading; a leading "1." may number a section, a bullet may not."""
    numbered = group.marker is None or group.marker[0].isalnum() or group.marker[0] == "("
    return numbered and all(l.cells == 1 for l in group.lines) and len(group.lines) <= 3 and sum(len(l.text) for l in group.lines) <= 200


def _body_blocks(groups: list[_FlowGroup], stats: _FontStats, info: PageInfo,
                 images: list[PageImage], tables: list[FilledTable]) -> list[_Placed]:
    placed: list[_Placed] = []
    list_x: list[float] = []
    for flow_group in groups:
        group = flow_group.group
        if group.placeholder:
            list_x.clear()
            block = _figure_block(group, info, images) if group.figure is not None else _table_block(group, info, tables)
            placed.append(_Placed(block))
            continue
        text = join_lines([line.text for line in group.lines])
        kind, level = _classify(group, text, stats)
        attrs: dict = {}
        if kind == "list_item":
            text = clean_text(LIST_MARKER.sub("", text, count=1))
            level, attrs = _list_depth(list_x, group.lines[0].x0), {"marker": group.marker}
        else:
            list_x.clear()
        attrs[_LINES] = [(line.text, info.page_no, _bbox((line.x0, line.top, line.x1, line.bottom), info))
                         for line in group.lines]
        block = Block(kind=kind, text=text, page=info.page_no, bbox=_bbox(group.box, info), level=level, attrs=attrs)
        prose = kind == "paragraph" and all(line.cells == 1 for line in group.lines)
        placed.append(_Placed(block, (info.page_no, flow_group.flow), group.size,
                              runs_to_edge(group, flow_group.edge)) if prose else _Placed(block))
    return placed


def _figure_block(group: LineGroup, info: PageInfo, images: list[PageImage]) -> Block:
    """A figure placeholder; a "Figure N" caption right after it attaches in structure building."""
    attrs = dict(images[group.figure].attrs)  # type: ignore[index]
    return Block(kind="figure", text=group.lines[0].text, page=info.page_no, bbox=_bbox(group.box, info), attrs=attrs)


def _table_block(group: LineGroup, info: PageInfo, tables: list[FilledTable]) -> Block:
    """A ruled table: its rows as cells; a "Table N" caption next to it attaches in structure building."""
    table = tables[group.table]  # type: ignore[index]
    attrs = {"rows": table.rows, "header_rows": table.header_rows}
    return Block(kind="table", text=render_rows(table.rows), page=info.page_no, bbox=_bbox(table.box, info), attrs=attrs)


def join_continuations(placed: list[_Placed]) -> list[Block]:
    """Join a prose paragraph that a page or column break cut in two; page headers and
    footers in between stay where they are."""
    out: list[_Placed] = []
    last_body: int | None = None
    for item in placed:
        if item.block.kind in FURNITURE_KINDS:
            out.append(item)
            continue
        previous = out[last_body] if last_body is not None else None
        if previous is not None and _continues(previous, item):
            out[last_body] = _joined(previous, item)  # type: ignore[index]
            continue
        out.append(item)
        last_body = len(out) - 1
    return [item.block for item in out]


def _continues(first: _Placed, second: _Placed) -> bool:
    if first.flow is None or second.flow is None or first.flow == second.flow:
        return False
    return same_size_class(first.size, second.size) and continues_paragraph(
        first.block.text, second.block.text, open_end=first.open_end)


def _joined(first: _Placed, second: _Placed) -> _Placed:
    a, b = first.block, second.block
    regions = a.extra_regions + ((b.page, b.bbox),) + b.extra_regions  # type: ignore[operator]
    lines = {_LINES: a.attrs.get(_LINES, []) + b.attrs.get(_LINES, [])}
    block = replace(a, text=join_lines([a.text, b.text]), extra_regions=regions, attrs={**a.attrs, **lines})
    return _Placed(block, second.flow, second.size, second.open_end)


def _classify(group: LineGroup, text: str, stats: _FontStats) -> tuple[str, int]:
    if group is stats.title_group:
        return "title", 0
    if CAPTION_START.match(text):
        return "caption", 0
    level = stats.heading_level(group)
    if level:
        return "heading", level
    if stats.is_bold_heading(group, text):
        return "heading", min(len(stats.heading_sizes) + 1, 6)
    if group.marker is not None:
        return "list_item", 0
    return "paragraph", 0


def _list_depth(positions: list[float], x0: float) -> int:
    """Nesting depth of a list item from the distinct indents seen in this list run."""
    if not any(abs(p - x0) <= 2.0 for p in positions):
        positions.append(x0)
    return sum(1 for p in positions if p < x0 - 2.0)


def _furniture_block(line: Line, kind: str, info: PageInfo) -> Block:
    box = (line.x0, line.top, line.x1, line.bottom)
    return Block(kind=kind, text=clean_text(line.text), page=info.page_no, bbox=_bbox(box, info))  # type: ignore[arg-type]


def _bbox(box: tuple[float, float, float, float], info: PageInfo):
    return normalize_bbox(*box, width=info.width, height=info.height)


# -- line boxes -----------------------------------------------------------------------

_LINES = "_lines"  # while laying out: (text, page, bbox) per line; with_line_spans() turns it into "lines"


def with_line_spans(block: Block) -> Block:
    """The block with ``attrs["lines"] = [[start, end, page, x0, y0, x1, y1], ...]``: each
    line's characters in ``block.text`` and its box, so evidence can point at lines. Lines
    that cannot be placed (text changed by joining) leave the block without ``lines``."""
    attrs = dict(block.attrs)
    raw = attrs.pop(_LINES, None)
    spans = locate_lines(block.text, [text for text, _, _ in raw]) if raw and len(raw) > 1 else None
    if spans is not None:
        attrs["lines"] = [[a, b, page, *(round(v, 4) for v in bbox)] for (a, b), (_, page, bbox) in zip(spans, raw)]
    return replace(block, attrs=attrs)


def locate_lines(text: str, lines: list[str]) -> list[tuple[int, int]] | None:
    """Each line's (start, end) in ``text``, in order; None when one is not found."""
    spans, cursor = [], 0
    for line in lines:
        piece = clean_text(line)
        for candidate in (piece, clean_text(LIST_MARKER.sub("", piece, count=1)), piece.rstrip("-\u2010")):
            found = text.find(candidate, cursor) if candidate else -1
            if found >= 0 and not text[cursor:found].strip():
                spans.append((found, found + len(candidate)))
                cursor = found + len(candidate)
                break
        else:
            return None
    return spans


# -- text normalization ---------------------------------------------------------------


def join_lines(texts: list[str]) -> str:
    """Join a block's lines with spaces, undoing hyphenation before a lowercase word."""
    joined = ""
    for text in (t.strip() for t in texts):
        if not text:
            continue
        if len(joined) >= 2 and joined[-1] in "-\u2010" and joined[-2].isalpha() and text[0].islower():
            joined = joined[:-1] + text
        else:
            joined = f"{joined} {text}" if joined else text
    return clean_text(joined)


def clean_text(text: str) -> str:
    """NFC, no control or format characters, single spaces."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(" " if ch.isspace() else ch for ch in text if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf"))
    return re.sub(r" {2,}", " ", text).strip()
