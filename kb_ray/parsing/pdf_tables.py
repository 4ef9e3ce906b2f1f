"""Ruled tables in born-digital PDFs: pdfplumber's table finder over pdfium's ruling lines.

The page's drawn rules (the straight horizontal and vertical pieces of its path objects,
rectangle edges included) are read with pdfium and handed to pdfplumber's
``TableFinder`` as explicit lines; it snaps and joins them, intersects them and groups the
cells into tables exactly as its *lines* strategy does with the edges pdfminer reads
(benchmarks/pdf_tables.py checks both give the same tables on the realdocs PDFs; this
way needs no second PDF interpreter and is ~5× faster per searched page). The cell text
comes from the same pdfium characters as the rest of the document, so a table reads like
its surrounding text.

Unruled (text-aligned) tables are not looked for: pdfplumber's *text* strategy also finds
"tables" in prose and code listings, and a paragraph broken into cells is worse than a
table left as rows of text.

Costs are bounded (:func:`search_decision`, a cheap pass over the page's objects): only
pages whose drawing could hold a grid of at least two columns and two rows are searched
(:func:`could_hold_grid`); pages with more than ``MAX_PAGE_OBJECTS`` page objects or
``MAX_PAGE_EDGES`` rules are skipped; and a document stops looking for tables after a
time budget. Skipped pages are named in the parse notes.

All boxes here are page points with a top-left origin (the display space of
:mod:`kb_ray.parsing.pdf_text`, where the characters are too).
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal

import pypdfium2.raw as pdfium_c
from pdfplumber.table import TableFinder

from kb_ray.parsing.pdf_layout import Char, build_lines

FINDER_SETTINGS = {"vertical_strategy": "explicit", "horizontal_strategy": "explicit",
                   "snap_tolerance": 3, "join_tolerance": 3, "intersection_tolerance": 3, "edge_min_length": 3}
"""pdfplumber ``table_settings`` (its defaults but the strategy): the rules come from pdfium."""
MAX_PAGE_OBJECTS = 20_000
"""Pages with more page objects (text runs, paths, images) than this are not searched."""
MAX_PAGE_SEGMENTS = 50_000
"""Pages whose paths have more pieces than this are not searched (a plot, a map)."""
MAX_PAGE_EDGES = 5_000
"""Pages drawing more rules than this are not searched (intersecting them is quadratic)."""
AXIS_SLACK = 0.01
"""A path piece is a horizontal or vertical rule when its ends differ by less than this in y or x."""
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


def page_rules(page, to_display: Callable) -> tuple[Literal["search", "no_grid", "too_many_objects"], list[dict[str, Any]]]:
    """Whether to look for tables on a pdfium page and, when so, its rules (:func:`page_edges`).
    Cheap: one pass over the page's objects (those inside form XObjects count too)."""
    paths = []
    for count, obj in enumerate(page.get_objects(), start=1):
        if count > MAX_PAGE_OBJECTS:
            return "too_many_objects", []
        if obj.type == pdfium_c.FPDF_PAGEOBJ_PATH:
            paths.append(obj)
    if sum(pdfium_c.FPDFPath_CountSegments(obj.raw) for obj in paths) > MAX_PAGE_SEGMENTS:
        return "too_many_objects", []
    if not could_hold_grid(paths):
        return "no_grid", []
    return "search", page_edges(paths, to_display)


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


def page_edges(paths: list, to_display: Callable) -> list[dict[str, Any]]:
    """The straight horizontal and vertical pieces of pdfium path objects, as pdfplumber edge
    dicts in display points (top-left origin); pieces shorter than 1 pt are left out."""
    edges: list[dict[str, Any]] = []
    x, y = ctypes.c_float(), ctypes.c_float()
    for obj in paths:
        matrices = [obj.get_matrix()]
        container = obj.container
        while container is not None:  # points inside a form XObject are in the form's space
            matrices.append(container.get_matrix())
            container = container.container
        start = current = None
        for index in range(pdfium_c.FPDFPath_CountSegments(obj.raw)):
            segment = pdfium_c.FPDFPath_GetPathSegment(obj.raw, index)
            pdfium_c.FPDFPathSegment_GetPoint(segment, x, y)
            point = _placed(x.value, y.value, matrices, to_display)
            if pdfium_c.FPDFPathSegment_GetType(segment) == pdfium_c.FPDF_SEGMENT_MOVETO or current is None:
                start = point
            else:  # a Bézier piece counts by its end points
                _add_edge(edges, current, point)
            current = point
            if pdfium_c.FPDFPathSegment_GetClose(segment):
                _add_edge(edges, point, start)
                current = start
    return edges


def _placed(x: float, y: float, matrices: list, to_display: Callable) -> tuple[float, float]:
    for matrix in matrices:
        x, y = matrix.on_point(x, y)
    return to_display(x, y)


def _add_edge(edges: list[dict[str, Any]], a: tuple[float, float], b: tuple[float, float]) -> None:
    (ax, ay), (bx, by) = a, b
    if abs(ax - bx) < AXIS_SLACK and abs(ay - by) >= 1:
        edges.append({"object_type": "rule_edge", "orientation": "v", "x0": ax, "x1": ax,
                      "top": min(ay, by), "bottom": max(ay, by), "width": 0.0, "height": abs(ay - by)})
    elif abs(ay - by) < AXIS_SLACK and abs(ax - bx) >= 1:
        edges.append({"object_type": "rule_edge", "orientation": "h", "x0": min(ax, bx), "x1": max(ax, bx),
                      "top": ay, "bottom": ay, "width": abs(ax - bx), "height": 0.0})


def find_tables(rules: dict[int, list[dict[str, Any]]], *,
                seconds: float) -> tuple[dict[int, list[PageTable]], list[str]]:
    """Tables from each page's rules (0-based page -> :func:`page_edges`), and notes on pages
    left out for cost."""
    found: dict[int, list[PageTable]] = {}
    notes: list[str] = []
    deadline = time.monotonic() + seconds
    crowded = []
    for position, (index, edges) in enumerate(sorted(rules.items())):
        if time.monotonic() > deadline:
            notes.append(f"tables: not searched on {len(rules) - position} pages past the {seconds:g} s budget")
            break
        if len(edges) > MAX_PAGE_EDGES:
            crowded.append(str(index + 1))
            continue
        found[index] = _tables_from_rules(edges)
    if crowded:
        notes.append(f"tables: not searched on pages {', '.join(crowded)} (over {MAX_PAGE_EDGES} rules)")
    return found, notes


def _tables_from_rules(edges: list[dict[str, Any]]) -> list[PageTable]:
    """pdfplumber's TableFinder on explicit lines: it reads nothing from a page (``None``)."""
    vertical = [e for e in edges if e["orientation"] == "v"]
    horizontal = [e for e in edges if e["orientation"] == "h"]
    if len(vertical) < MIN_COLUMNS + 1 or len(horizontal) < MIN_ROWS + 1:
        return []
    settings = {**FINDER_SETTINGS, "explicit_vertical_lines": vertical, "explicit_horizontal_lines": horizontal}
    return [PageTable(tuple(table.bbox), [[None if cell is None else tuple(cell) for cell in row.cells]
                                          for row in table.rows])
            for table in TableFinder(None, settings).tables]  # type: ignore[arg-type]


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
