"""Ruled tables in born-digital PDFs: pdfplumber finds the grid, pdfium's characters fill it.

pdfplumber's ``find_tables`` with the *lines* strategy (ruling lines and rectangle edges
drawn on the page) gives each table's cell boxes. The cell text comes from the same
pdfium characters as the rest of the document, so a table reads like its surrounding
text. Unruled (text-aligned) tables are not looked for: pdfplumber's *text* strategy
also finds "tables" in prose and code listings, and a paragraph broken into cells is
worse than a table left as rows of text.

Costs are bounded three ways (:func:`search_decision`, before pdfminer under pdfplumber
interprets anything): only pages whose drawing could hold a grid of at least two columns
and two rows are searched (:func:`could_hold_grid`, a cheap pass over pdfium's path
objects); pages with more than ``MAX_PAGE_OBJECTS`` page objects are skipped; and a
document stops looking for tables after ``seconds``. Skipped pages are named in the
parse notes.

All boxes here are page points with a top-left origin (the display space of
:mod:`kb_ray.parsing.pdf_text`); pdfplumber uses the same convention relative to the
crop box, so its boxes are shifted by the crop box's corner only. Rotated pages are
skipped (their display transform and pdfplumber's would have to agree).
"""

from __future__ import annotations

import io
import logging
import time
from dataclasses import dataclass
from typing import Callable, Literal

import pdfplumber
import pypdfium2.raw as pdfium_c

from kb_ray.parsing.pdf_layout import Char, build_lines

logger = logging.getLogger(__name__)

FINDER_SETTINGS = {"vertical_strategy": "lines", "horizontal_strategy": "lines",
                   "snap_tolerance": 3, "join_tolerance": 3, "intersection_tolerance": 3}
"""pdfplumber ``table_settings``: ruled tables only."""
MAX_PAGE_OBJECTS = 20_000
"""Pages with more page objects (text runs, paths, images) than this are not searched."""
RULE_THICKNESS = 8.0
"""A path thinner than this (points, stroke included) is a ruling line, else a box."""
BAND_HEIGHT = 6.0
"""Vertical rules count as side by side when they cross the same band of this height (points)."""
MIN_ROWS = 2
MIN_COLUMNS = 2
MIN_FILLED_SHARE = 1 / 3
"""A grid with text in fewer of its cells is a drawing (a chart's grid, a form), not a table."""

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PageTable:
    """A table found on a page: its box and its rows of cell boxes (None: merged away)."""

    box: Box
    cells: list[list[Box | None]]


@dataclass(frozen=True)
class FilledTable:
    """A table with its cell texts, ready to become a ``table`` block."""

    box: Box
    rows: list[list[str]]
    header_rows: int


def search_decision(page) -> Literal["search", "no_grid", "too_many_objects"]:
    """Whether to look for tables on a pdfium page (cheap: no content is interpreted).
    Objects inside form XObjects count too."""
    paths = []
    for count, obj in enumerate(page.get_objects(), start=1):
        if count > MAX_PAGE_OBJECTS:
            return "too_many_objects"
        if obj.type == pdfium_c.FPDF_PAGEOBJ_PATH:
            paths.append(obj)
    return "search" if could_hold_grid(paths) else "no_grid"


def could_hold_grid(paths: list) -> bool:
    """Whether pdfium path objects draw rules for a grid of ≥ 2 columns and rows: 2 horizontal
    rule positions, and 3 vertical rule positions side by side in one band of height
    (rectangles count with their edges; a boxed code listing has 2). Over-approximates,
    never under: a large many-segment path always qualifies."""
    verticals: list[tuple[float, float, float]] = []  # x, bottom, top
    ys: list[float] = []
    for obj in paths:
        left, bottom, right, top = obj.get_bounds()
        width, height = right - left, top - bottom
        if pdfium_c.FPDFPath_CountSegments(obj.raw) > 5 and width > 30 and height > 10:
            return True
        if width < RULE_THICKNESS and height < RULE_THICKNESS:
            continue
        if width < RULE_THICKNESS:
            verticals.append(((left + right) / 2, bottom, top))
        elif height < RULE_THICKNESS:
            ys.append((bottom + top) / 2)
        else:
            verticals += [(left, bottom, top), (right, bottom, top)]
            ys += [bottom, top]
    if _positions(ys) < MIN_ROWS:
        return False
    bands: dict[int, set[int]] = {}
    for x, bottom, top in verticals:
        for band in range(int(bottom // BAND_HEIGHT), int(top // BAND_HEIGHT) + 1):
            bands.setdefault(band, set()).add(round(x))
    return any(len(xs) > MIN_COLUMNS and _positions(list(xs)) > MIN_COLUMNS for xs in bands.values())


def _positions(values: list[float], tolerance: float = 3.0) -> int:
    count, last = 0, None
    for value in sorted(values):
        if last is None or value - last > tolerance:
            count += 1
        last = value
    return count


def find_tables(data: bytes, pages: list[int], *, seconds: float) -> tuple[dict[int, list[PageTable]], list[str]]:
    """Tables on the given 0-based ``pages`` and notes on pages skipped for cost."""
    found: dict[int, list[PageTable]] = {}
    notes: list[str] = []
    if not pages:
        return found, notes
    deadline = time.monotonic() + seconds
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for position, index in enumerate(pages):
            if time.monotonic() > deadline:
                notes.append(f"tables: not searched on {len(pages) - position} pages past the {seconds:g} s budget")
                break
            page = pdf.pages[index]
            try:
                found[index] = [_page_table(table, page.bbox) for table in page.find_tables(FINDER_SETTINGS)]
            finally:
                page.close()
    return found, notes


def _page_table(table, origin: Box) -> PageTable:
    dx, dy = origin[0], origin[1]

    def shift(box):
        return None if box is None else (box[0] - dx, box[1] - dy, box[2] - dx, box[3] - dy)

    return PageTable(shift(table.bbox), [[shift(cell) for cell in row.cells] for row in table.rows])


def fill_tables(tables: list[PageTable], chars: list[Char], *,
                join: Callable[[list[str]], str]) -> tuple[list[FilledTable], list[Char]]:
    """Cell texts from the characters inside each table's cells; returns the tables that
    hold text like a table does and, in their order, the characters outside them (a word
    break goes with the character before it)."""
    owners: list[int | None] = []
    for char in chars:
        if char.text == " ":
            owners.append(owners[-1] if owners else None)
            continue
        x, y = (char.x0 + char.x1) / 2, (char.top + char.bottom) / 2
        owners.append(next((i for i, table in enumerate(tables) if _contains(table.box, x, y)), None))
    filled: dict[int, FilledTable] = {}
    for index, table in enumerate(tables):
        result = _filled(table, [c for c, owner in zip(chars, owners) if owner == index], join)
        if result is not None:  # else not a table after all: its text stays text
            filled[index] = result
    outside = [char for char, owner in zip(chars, owners) if owner not in filled]
    return list(filled.values()), outside


def _filled(table: PageTable, chars: list[Char], join: Callable[[list[str]], str]) -> FilledTable | None:
    width = max((len(row) for row in table.cells), default=0)
    if len(table.cells) < MIN_ROWS or width < MIN_COLUMNS:
        return None
    cells = [box for row in table.cells for box in row if box is not None]
    texts: dict[Box, list[Char]] = {box: [] for box in cells}
    last: list[Char] | None = None
    for char in chars:
        if char.text != " ":
            x, y = (char.x0 + char.x1) / 2, (char.top + char.bottom) / 2
            last = next((texts[box] for box in cells if _contains(box, x, y)), None)
        if last is not None:
            last.append(char)
    rows = [[join([line.text for line in build_lines(texts[box])]) if box is not None else "" for box in row] for row in table.cells]
    if sum(1 for row in rows for cell in row if cell) < MIN_FILLED_SHARE * len(cells):
        return None
    return FilledTable(table.box, rows, _header_rows(table.cells[0], texts))


def _header_rows(first_row: list[Box | None], texts: dict[Box, list[Char]]) -> int:
    """1 when the first row is set in bold, as table headers usually are, else 0."""
    glyphs = [c for box in first_row if box is not None for c in texts[box] if c.text != " "]
    return int(bool(glyphs) and sum(c.bold for c in glyphs) >= 0.6 * len(glyphs))


def _contains(box: Box, x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]
