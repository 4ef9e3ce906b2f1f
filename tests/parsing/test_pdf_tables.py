"""Ruled tables in PdfTextParser: PDFs drawn with reportlab, cells and boxes checked against what was drawn."""

from __future__ import annotations

import io

import pytest

from kb_ray.parsing.pdf_text import PdfTextParser
from kb_ray.structure.builder import StructureBuilder

platypus = pytest.importorskip("reportlab.platypus")
from reportlab.lib import colors  # noqa: E402
from reportlab.lib.pagesizes import A4  # noqa: E402
from reportlab.lib.styles import getSampleStyleSheet  # noqa: E402
from reportlab.pdfgen import canvas as canvas_module  # noqa: E402

ROWS = [
    ["Valve", "Bore (mm)", "Max. pressure (bar)", "Seal"],
    ["KV-10", "10", "16", "EPDM"],
    ["KV-25", "25", "16", "FKM"],
    ["KV-40", "40", "10", "PTFE lined"],
]
COL_WIDTHS = [80, 80, 120, 90]
PROSE = ("The KV series of ball valves is made for potable water lines in small plants. Each valve is tested at "
         "one and a half times its rated pressure before it leaves the works, and the test record is kept for ten years.")
MARGIN = 72.0


def build_pdf(story) -> bytes:
    buffer = io.BytesIO()
    doc = platypus.SimpleDocTemplate(buffer, pagesize=A4, invariant=1, leftMargin=MARGIN, rightMargin=MARGIN,
                                     topMargin=MARGIN, bottomMargin=MARGIN)
    doc.build(story)
    return buffer.getvalue()


def ruled_table(rows=ROWS, grid=True):
    table = platypus.Table(rows, colWidths=COL_WIDTHS, hAlign="LEFT")
    style = [("FONT", (0, 0), (-1, 0), "Helvetica-Bold", 9.5), ("FONT", (0, 1), (-1, -1), "Helvetica", 9.5)]
    if grid:
        style.append(("GRID", (0, 0), (-1, -1), 0.5, colors.black))
    table.setStyle(platypus.TableStyle(style))
    return table


def table_pdf(**table_kwargs) -> bytes:
    styles = getSampleStyleSheet()
    return build_pdf([platypus.Paragraph(PROSE, styles["BodyText"]),
                      platypus.Paragraph("Table 3: Ratings of the KV valves", styles["BodyText"]),
                      ruled_table(**table_kwargs),
                      platypus.Paragraph("All seals are rated from -10 °C to 80 °C.", styles["BodyText"])])


def parse(data: bytes, **options):
    return PdfTextParser(**options).parse(data, mime="application/pdf")


def test_ruled_table_is_one_table_block_with_its_cells_and_header():
    result = parse(table_pdf())
    tables = [block for block in result.blocks if block.kind == "table"]
    assert len(tables) == 1
    assert tables[0].attrs == {"rows": ROWS, "header_rows": 1}
    assert tables[0].text.splitlines()[1] == "KV-10 | 10 | 16 | EPDM"


def test_table_box_is_the_drawn_grid():
    """Drawn at a known place in PDF space (origin bottom-left); the block's box is top-left, normalized."""
    buffer = io.BytesIO()
    canvas = canvas_module.Canvas(buffer, pagesize=A4)
    canvas.setFont("Helvetica", 10)
    canvas.drawString(100, 700, PROSE[:80])
    table = ruled_table()
    _, table_height = table.wrapOn(canvas, 400, 400)
    table.drawOn(canvas, 100, 300)  # bottom-left corner of the grid
    canvas.showPage()
    canvas.save()
    block = next(block for block in parse(buffer.getvalue()).blocks if block.kind == "table")
    width, height = A4
    expected = (100 / width, (height - 300 - table_height) / height, (100 + sum(COL_WIDTHS)) / width, (height - 300) / height)
    assert block.bbox == pytest.approx(expected, abs=1.5 / width)
    assert block.attrs["rows"] == ROWS


def test_cell_text_is_not_repeated_as_paragraphs():
    result = parse(table_pdf())
    others = " ".join(block.text for block in result.blocks if block.kind != "table")
    for cell in ("KV-25", "PTFE lined", "Max. pressure (bar)", "EPDM"):
        assert cell not in others
    assert PROSE in others and "All seals are rated" in others


def test_structure_gives_gfm_and_attaches_the_caption_to_the_table():
    structured = StructureBuilder().build(parse(table_pdf()).blocks, version_id="v")
    table = next(e for e in structured.elements if e.kind == "table")
    caption = next(e for e in structured.elements if e.kind == "caption")
    assert caption.parent_id == table.element_id
    assert "| Valve | Bore (mm) | Max. pressure (bar) | Seal |\n| --- | --- | --- | --- |\n| KV-10 | 10 | 16 | EPDM |" \
        in structured.canonical_text


def test_unruled_grid_of_text_and_prose_make_no_table():
    styles = getSampleStyleSheet()
    prose = build_pdf([platypus.Paragraph(PROSE, styles["BodyText"]) for _ in range(8)])
    assert not [b for b in parse(prose).blocks if b.kind == "table"]
    unruled = parse(table_pdf(grid=False))
    assert not [b for b in unruled.blocks if b.kind == "table"]
    assert "KV-25" in " ".join(b.text for b in unruled.blocks)  # the rows are still text


def test_boxed_code_listing_is_not_a_table():
    styles = getSampleStyleSheet()
    code = platypus.Table([["$ make install"], ["$ make check"]], colWidths=[300])
    code.setStyle(platypus.TableStyle([("BOX", (0, 0), (-1, -1), 0.5, colors.black),
                                       ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black)]))
    result = parse(build_pdf([platypus.Paragraph(PROSE, styles["BodyText"]), code]))
    assert not [b for b in result.blocks if b.kind == "table"]
    assert "$ make check" in " ".join(b.text for b in result.blocks)


def test_tables_off_gives_rows_as_text_and_another_fingerprint():
    result = parse(table_pdf(), tables=False)
    assert not [b for b in result.blocks if b.kind == "table"]
    assert "KV-40" in " ".join(b.text for b in result.blocks)
    on, off = PdfTextParser(), PdfTextParser(tables=False)
    assert on.fingerprint != off.fingerprint
    assert on.config()["table_finder"]["pdfplumber"]
    assert on.fingerprint != PdfTextParser(table_seconds=5.0).fingerprint


def test_spent_time_budget_skips_table_search_with_a_note():
    result = parse(table_pdf(), table_seconds=1e-9)
    assert not [b for b in result.blocks if b.kind == "table"]
    assert any("not searched" in note for note in result.notes)


def test_a_grid_with_text_in_few_cells_stays_text_in_its_order():
    from kb_ray.parsing.pdf_layout import Char
    from kb_ray.parsing.pdf_tables import PageTable, fill_tables
    from kb_ray.parsing.pdf_text import join_lines

    cells = [[(x, y, x + 50, y + 20) for x in (100, 150, 200)] for y in (100, 120, 140)]
    grid = PageTable((100, 100, 250, 160), cells)
    chars = [Char("a", 10, 10, 15, 20, 18, 10), Char("b", 110, 105, 115, 115, 113, 10), Char("c", 20, 10, 25, 20, 18, 10)]
    tables, outside = fill_tables([grid], chars, join=join_lines)
    assert tables == [] and [c.text for c in outside] == ["a", "b", "c"]  # 1 of 9 cells has text
    full = [Char(t, x + 5, y + 5, x + 10, y + 15, y + 13, 10) for row in cells for t, (x, y, _, _) in zip("xyz", row)]
    tables, outside = fill_tables([grid], chars[:1] + full, join=join_lines)
    assert [c.text for c in outside] == ["a"] and tables[0].rows == [["x", "y", "z"]] * 3


def test_only_pages_drawing_a_grid_are_searched_and_rules_are_in_display_points():
    import pypdfium2 as pdfium

    from kb_ray.parsing.pdf_tables import page_rules
    from kb_ray.parsing.pdf_text import _display_transform

    styles = getSampleStyleSheet()
    code = platypus.Table([["$ make install"], ["$ make check"]], colWidths=[300])
    code.setStyle(platypus.TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)]))
    pages = {"grid": table_pdf(), "code box": build_pdf([code]), "prose": build_pdf([platypus.Paragraph(PROSE, styles["BodyText"])])}
    decisions = {}
    for name, data in pages.items():
        pdf = pdfium.PdfDocument(data)
        decisions[name], rules = page_rules(pdf[0], _display_transform(pdf[0])[2])
        if name == "grid":  # 5 vertical rules from the table's left edge, top-left origin like the characters
            xs = sorted({round(e["x0"]) for e in rules if e["orientation"] == "v"})
            assert xs == [round(MARGIN + 6 + sum(COL_WIDTHS[:n])) for n in range(5)]  # + the frame's 6 pt padding
            assert all(0 < e["top"] < A4[1] / 2 for e in rules)  # near the top of the page, not the bottom
        pdf.close()
    assert decisions == {"grid": "search", "code box": "no_grid", "prose": "no_grid"}


def test_page_over_the_object_limit_is_not_searched_and_named_in_the_notes(monkeypatch):
    from kb_ray.parsing import pdf_tables

    monkeypatch.setattr(pdf_tables, "MAX_PAGE_OBJECTS", 5)
    result = parse(table_pdf())
    assert not [b for b in result.blocks if b.kind == "table"]
    assert result.notes == ["tables: not searched on pages 1 (over 5 objects or 50000 path pieces)"]
    assert "KV-25" in " ".join(b.text for b in result.blocks)


def test_parse_settings_reach_the_parser_and_its_fingerprint():
    from kb_ray.config import ParseSettings
    from kb_ray.processing import build_router

    on = build_router(ParseSettings(isolate=False))
    off = build_router(ParseSettings(isolate=False, pdf_tables=False, pdf_table_seconds=3))
    assert on.parser("pdf_text").config()["tables"] is True and off.parser("pdf_text").config()["tables"] is False
    assert on.fingerprint != off.fingerprint
