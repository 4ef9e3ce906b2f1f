"""Page geometry for text-layer PDFs: characters → lines → reading-ordered flows → blocks.

Pure functions over small dataclasses in page points with a top-left origin, so the
layout rules are testable without pdfium. Thresholds are multiples of the font size so
they hold across documents:

* a line breaks where the baseline moves by more than ``BASELINE_TOL`` × size or the
  horizontal gap to the next character exceeds ``SEGMENT_GAP`` × size (a column gutter);
* a column gutter is a vertical strip in the middle of the text area that no more than
  ``GUTTER_CROSSING_SHARE`` of the narrow lines cross, with column-like text on both sides;
* consecutive lines of a flow join into one block while the baseline pitch stays within
  the document's usual line pitch, the font size class and boldness stay the same and
  the lines overlap horizontally;
* an embedded image is a *figure line* (``Line.figure`` set) and a ruled table found by
  :mod:`kb_ray.parsing.pdf_tables` a *table line* (``Line.table`` set): each takes part in
  reading order by its top edge within its column but never joins text;
* a paragraph continues across a page or column break when it does not end a sentence
  and the next one starts in lowercase, or it is prose whose last line runs to within
  ``FULL_LINE_SLACK`` of the column width from the column's right edge.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

BASELINE_TOL = 0.5
SEGMENT_GAP = 1.0
SPACE_GAP = 0.2
SIZE_CLASS_RATIO = 1.1
GUTTER_BIN = 2.0
GUTTER_MIN_WIDTH = 4.0
GUTTER_CROSSING_SHARE = 0.05
FURNITURE_ZONE = 0.08
FULL_LINE_SLACK = 0.12
FIGURE_TEXT = "[figure]"
TABLE_TEXT = "[table]"

LIST_MARKER = re.compile(r"^(?P<marker>[•\-–—*▪◦●■‣·]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s+(?=\S)")
CAPTION_START = re.compile(r"^(?:figure|fig\.|table)\s*\d+[a-z]?(?:\.\d+)*\s*(?:[.:|—–-]|$)", re.I)
_SENTENCE_END = re.compile(r"[.!?:;][\"'”’)\]]*$")
_SENTENCE_INSIDE = re.compile(r"[.!?][\"'”’)\]]*\s+\S")
_PAGE_NUMBER = re.compile(r"^[-–—\s]*(?:page\s*)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?[-–—\s]*$", re.I)


@dataclass(frozen=True, slots=True)
class Char:
    """One glyph; ``text == " "`` marks a word break (its box is not used)."""

    text: str
    x0: float
    top: float
    x1: float
    bottom: float
    baseline: float
    size: float
    bold: bool = False


@dataclass(frozen=True, slots=True)
class Line:
    """A run of characters on one baseline without a column-sized gap."""

    text: str
    x0: float
    top: float
    x1: float
    bottom: float
    baseline: float
    size: float
    bold: bool = False
    cells: int = 1  # > 1: segments of a table-like row joined by merge_row_segments
    figure: int | None = None  # set: a placeholder for the page's image with this index
    table: int | None = None  # set: a placeholder for the page's table with this index

    @property
    def placeholder(self) -> bool:
        """A stand-in for an image or a table, not text."""
        return self.figure is not None or self.table is not None

    @property
    def width(self) -> float:
        return self.x1 - self.x0


def figure_line(index: int, box: tuple[float, float, float, float]) -> Line:
    """A placeholder line for an image; its top edge serves as baseline, so it sorts
    after text above the image and before text below it."""
    x0, top, x1, bottom = box
    return Line(FIGURE_TEXT, x0, top, x1, bottom, baseline=top, size=0.0, figure=index)


def table_line(index: int, box: tuple[float, float, float, float]) -> Line:
    """A placeholder line for a table, placed in reading order like a figure line."""
    x0, top, x1, bottom = box
    return Line(TABLE_TEXT, x0, top, x1, bottom, baseline=top, size=0.0, table=index)


@dataclass
class LineGroup:
    """Lines that form one block; ``marker`` is set for list items."""

    lines: list[Line] = field(default_factory=list)
    marker: str | None = None

    @property
    def size(self) -> float:
        return max(line.size for line in self.lines)

    @property
    def bold(self) -> bool:
        return all(line.bold for line in self.lines)

    @property
    def figure(self) -> int | None:
        return self.lines[0].figure

    @property
    def table(self) -> int | None:
        return self.lines[0].table

    @property
    def placeholder(self) -> bool:
        return self.lines[0].placeholder

    @property
    def box(self) -> tuple[float, float, float, float]:
        lines = self.lines
        return (min(l.x0 for l in lines), min(l.top for l in lines),
                max(l.x1 for l in lines), max(l.bottom for l in lines))


def same_size_class(a: float, b: float) -> bool:
    return max(a, b) <= min(a, b) * SIZE_CLASS_RATIO + 0.25


# -- characters → lines -------------------------------------------------------------


def build_lines(chars: list[Char]) -> list[Line]:
    """Group characters (in content-stream order) into lines."""
    lines: list[Line] = []
    current: list[Char] = []
    pending_space = False
    for char in chars:
        if char.text == " ":
            pending_space = bool(current)
            continue
        if current and not _continues_line(current, char):
            lines.append(_make_line(current))
            current, pending_space = [], False
        if current and (pending_space or char.x0 - current[-1].x1 > SPACE_GAP * char.size):
            current.append(Char(" ", *_box(current[-1]), current[-1].baseline, char.size))
        current.append(char)
        pending_space = False
    if current:
        lines.append(_make_line(current))
    return [line for line in lines if line.text.strip()]


def _box(char: Char) -> tuple[float, float, float, float]:
    return (char.x1, char.top, char.x1, char.bottom)


def _continues_line(current: list[Char], char: Char) -> bool:
    prev = current[-1]
    size = max(prev.size, char.size)
    if abs(char.baseline - prev.baseline) > BASELINE_TOL * size:
        return False
    if char.x0 < prev.x0 - 0.5 * size:  # moved back: a new line (ligature parts share a box)
        return False
    gap = char.x0 - prev.x1
    if gap > SEGMENT_GAP * size:
        return bool(LIST_MARKER.match("".join(c.text for c in current).strip() + " x"))
    return True


def _make_line(chars: list[Char]) -> Line:
    glyphs = [c for c in chars if c.text != " "]
    text = re.sub(r"\s+", " ", "".join(c.text for c in chars)).strip()
    weights: dict[float, int] = {}
    for c in glyphs:
        weights[round(c.size * 2) / 2] = weights.get(round(c.size * 2) / 2, 0) + 1
    bold_share = sum(c.bold for c in glyphs) / len(glyphs)
    return Line(
        text=text, x0=min(c.x0 for c in glyphs), top=min(c.top for c in glyphs),
        x1=max(c.x1 for c in glyphs), bottom=max(c.bottom for c in glyphs),
        baseline=statistics.median(c.baseline for c in glyphs),
        size=max(weights, key=weights.__getitem__), bold=bold_share >= 0.6,
    )


# -- furniture ------------------------------------------------------------------------


def furniture_key(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", text.lower())).strip()


def find_furniture(pages: list[list[Line]], heights: list[float]) -> list[dict[int, str]]:
    """Per page, the indices of header/footer lines mapped to their kind."""
    found: list[dict[int, str]] = [{} for _ in pages]
    if len(pages) < 2:
        return found
    zones = [[_zone(line, height) for line in lines] for lines, height in zip(pages, heights)]
    seen: dict[tuple[str, str], set[int]] = {}
    for page_no, lines in enumerate(pages):
        for line, zone in zip(lines, zones[page_no]):
            if zone:
                seen.setdefault((zone, furniture_key(line.text)), set()).add(page_no)
    needed = max(2, (len(pages) + 1) // 2)
    for page_no, lines in enumerate(pages):
        for index, (line, zone) in enumerate(zip(lines, zones[page_no])):
            repeated = zone and len(seen[(zone, furniture_key(line.text))]) >= needed
            if repeated or (zone and _PAGE_NUMBER.match(line.text)):
                found[page_no][index] = zone
    return found


def _zone(line: Line, height: float) -> str:
    middle = (line.top + line.bottom) / 2
    if middle <= FURNITURE_ZONE * height:
        return "page_header"
    if middle >= (1 - FURNITURE_ZONE) * height:
        return "page_footer"
    return ""


# -- columns and reading order --------------------------------------------------------


def reading_order(lines: list[Line], depth: int = 0) -> list[list[Line]]:
    """Split lines into flows (column pieces and full-width runs) in reading order;
    figure lines follow the column they sit in but take no part in finding gutters."""
    gutter = find_gutter([l for l in lines if not l.placeholder]) if depth < 3 else None
    if gutter is None:
        return [merge_row_segments(lines)] if lines else []
    left_edge, right_edge = gutter
    flows: list[list[Line]] = []
    left: list[Line] = []
    right: list[Line] = []
    spanning: list[Line] = []
    for line in sorted(lines, key=lambda l: (l.top, l.x0)):
        side = left if line.x1 <= right_edge else right if line.x0 >= left_edge else None
        if side is None:
            if left or right:
                flows += reading_order(left, depth + 1) + reading_order(right, depth + 1)
                left, right = [], []
            spanning.append(line)
            continue
        if spanning:
            flows.append(merge_row_segments(spanning))
            spanning = []
        side.append(line)
    flows += reading_order(left, depth + 1) + reading_order(right, depth + 1)
    if spanning:
        flows.append(merge_row_segments(spanning))
    return flows


def find_gutter(lines: list[Line]) -> tuple[float, float] | None:
    """The widest empty vertical strip separating two columns of text, if any."""
    if len(lines) < 6:
        return None
    x0, x1 = min(l.x0 for l in lines), max(l.x1 for l in lines)
    width = x1 - x0
    narrow = [l for l in lines if l.width < 0.6 * width]
    if len(narrow) < 6:
        return None
    coverage = [0] * (int(width / GUTTER_BIN) + 1)
    for line in narrow:
        for b in range(int((line.x0 - x0) / GUTTER_BIN), int((line.x1 - x0) / GUTTER_BIN) + 1):
            coverage[b] += 1
    limit = GUTTER_CROSSING_SHARE * len(narrow)
    lo, hi = int(0.2 * width / GUTTER_BIN), int(0.8 * width / GUTTER_BIN)
    run = _widest_run([b for b in range(lo, hi + 1) if coverage[b] <= limit])
    if run is None or (run[1] - run[0]) * GUTTER_BIN < GUTTER_MIN_WIDTH:
        return None
    gutter = (x0 + run[0] * GUTTER_BIN, x0 + run[1] * GUTTER_BIN)
    return gutter if _columns_on_both_sides(lines, gutter, width) else None


def _widest_run(bins: list[int]) -> tuple[int, int] | None:
    best: tuple[int, int] | None = None
    start = prev = None
    for b in bins + [None]:  # type: ignore[list-item]
        if b is not None and prev is not None and b == prev + 1:
            prev = b
            continue
        if start is not None and (best is None or prev - start > best[1] - best[0]):
            best = (start, prev)
        start = prev = b
    return best


def _columns_on_both_sides(lines: list[Line], gutter: tuple[float, float], width: float) -> bool:
    left = [l for l in lines if l.x1 <= gutter[1]]
    right = [l for l in lines if l.x0 >= gutter[0]]
    if len(left) < 3 or len(right) < 3:
        return False
    for side in (left, right):
        if statistics.median(l.width for l in side) < 0.2 * width:
            return False
    spans = [(min(l.top for l in side), max(l.bottom for l in side)) for side in (left, right)]
    overlap = min(spans[0][1], spans[1][1]) - max(spans[0][0], spans[1][0])
    return overlap >= 0.5 * min(bottom - top for top, bottom in spans)


def merge_row_segments(lines: list[Line]) -> list[Line]:
    """Sort a flow top to bottom and join segments sharing a baseline (table rows)."""
    merged: list[Line] = []
    for line in sorted(lines, key=lambda l: (round(l.baseline), l.x0)):
        prev = merged[-1] if merged else None
        text_pair = prev is not None and not prev.placeholder and not line.placeholder
        if prev and text_pair and abs(line.baseline - prev.baseline) <= 0.3 * prev.size and line.x0 >= prev.x1:
            merged[-1] = Line(
                text=f"{prev.text} {line.text}", x0=prev.x0, top=min(prev.top, line.top),
                x1=line.x1, bottom=max(prev.bottom, line.bottom), baseline=prev.baseline,
                size=max(prev.size, line.size), bold=prev.bold and line.bold, cells=prev.cells + line.cells,
            )
        else:
            merged.append(line)
    return merged


# -- lines → blocks -------------------------------------------------------------------


def typical_pitch(flows: list[list[Line]]) -> float:
    """The usual baseline distance between lines of a paragraph, in font sizes."""
    ratios = sorted(
        (b.baseline - a.baseline) / a.size
        for flow in flows for a, b in zip(flow, flow[1:])
        if not a.placeholder and not b.placeholder and same_size_class(a.size, b.size)
        and 0.9 <= (b.baseline - a.baseline) / a.size <= 3.0
    )
    if not ratios:
        return 1.2
    return min(2.5, max(1.0, ratios[len(ratios) // 4]))


def group_blocks(flow: list[Line], pitch: float) -> list[LineGroup]:
    """Join consecutive lines of one flow into blocks; a figure or table line is a block of its own."""
    groups: list[LineGroup] = []
    for line in flow:
        if line.placeholder:
            groups.append(LineGroup([line]))
            continue
        marker = LIST_MARKER.match(line.text)
        group = groups[-1] if groups else None
        if group and not marker and not CAPTION_START.match(line.text) and _joins(group, line, pitch):
            group.lines.append(line)
        else:
            groups.append(LineGroup([line], marker.group("marker") if marker else None))
    return groups


def _joins(group: LineGroup, line: Line, pitch: float) -> bool:
    prev = group.lines[-1]
    if prev.placeholder:
        return False
    if not same_size_class(prev.size, line.size) or prev.bold != line.bold:
        return False
    if (prev.cells > 1) != (line.cells > 1):  # table rows do not run into prose
        return False
    if not 0 < line.baseline - prev.baseline <= (pitch * 1.2 + 0.1) * max(prev.size, line.size):
        return False
    if group.marker is not None and line.x0 < group.lines[0].x0 + 0.5 * line.size:
        return False
    return line.x0 < max(l.x1 for l in group.lines) and line.x1 > min(l.x0 for l in group.lines)


def text_edge(flow: list[Line]) -> float:
    """The right edge of a flow's running text (table rows and figures left out)."""
    return max((l.x1 for l in flow if not l.placeholder and l.cells == 1), default=0.0)


def runs_to_edge(group: LineGroup, edge: float) -> bool:
    """Whether the group's last line reaches the column's right edge, as a line that
    wrapped does (a paragraph's own last line is usually shorter)."""
    last = group.lines[-1]
    return last.x1 >= edge - FULL_LINE_SLACK * (edge - group.box[0])


def continues_paragraph(text: str, following: str, *, open_end: bool) -> bool:
    """Whether ``following`` (after a page or column break) carries on ``text``.

    ``text`` must not end a sentence. Then a lowercase start continues it; any other
    start only when ``text`` is prose (it ends a sentence somewhere inside) whose last
    line runs to the column edge, i.e. was cut short by the break, not by its end.
    """
    if not text or not following or _SENTENCE_END.search(text):
        return False
    return following[0].islower() or (open_end and bool(_SENTENCE_INSIDE.search(text)))


def is_page_number(text: str) -> bool:
    return bool(_PAGE_NUMBER.match(text))
