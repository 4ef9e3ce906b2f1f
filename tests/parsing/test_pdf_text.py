"""PdfTextParser on PDFs generated with reportlab, plus the pure layout rules."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb_ray.parsing.base import ParseLimits
from kb_ray.parsing.blocks import ParseResult
from kb_ray.parsing.pdf_layout import (
    Char,
    Line,
    build_lines,
    continues_paragraph,
    find_furniture,
    find_gutter,
    reading_order,
)
from kb_ray.parsing.pdf_text import PdfTextParser, join_lines

canvas_module = pytest.importorskip("reportlab.pdfgen.canvas")

GOLDEN_PDFS = sorted((Path(__file__).resolve().parents[2] / "golden" / "sources").glob("*.pdf"))
BODY = "This is body text that fills a line of the generated test document with words"
PAGE_W, PAGE_H = 612.0, 792.0


def make_pdf(draw_pages, **canvas_kwargs) -> bytes:
    """One PDF page per callable; each gets the reportlab canvas."""
    buffer = io.BytesIO()
    canvas = canvas_module.Canvas(buffer, pagesize=(PAGE_W, PAGE_H), **canvas_kwargs)
    for draw in draw_pages:
        draw(canvas)
        canvas.showPage()
    canvas.save()
    return buffer.getvalue()


def text_at(canvas, x, y, text, size=10, font="Helvetica"):
    canvas.setFont(font, size)
    canvas.drawString(x, y, text)


def paragraph(canvas, y, lines=3, size=10, x=72, text=BODY):
    for i in range(lines):
        text_at(canvas, x, y - i * size * 1.2, f"{text} {i}", size)
    return y - lines * size * 1.2 - size


def parse(data: bytes, **kwargs) -> ParseResult:
    return PdfTextParser().parse(data, mime="application/pdf", **kwargs)


def kinds(result: ParseResult, kind: str):
    return [block for block in result.blocks if block.kind == kind]


def heading_doc(canvas):
    y = 720
    for section in ("Introduction", "Methods"):
        text_at(canvas, 72, y, f"{section} overview", 18, "Helvetica-Bold")
        y = paragraph(canvas, y - 28)
        text_at(canvas, 72, y, f"{section} details", 14)
        y = paragraph(canvas, y - 22)


def test_headings_get_levels_by_font_size():
    result = parse(make_pdf([heading_doc]))
    assert result.status == "ok", result.error
    headings = [(b.text, b.level) for b in kinds(result, "heading")]
    assert headings == [("Introduction overview", 1), ("Introduction details", 2),
                        ("Methods overview", 1), ("Methods details", 2)]
    paragraphs = kinds(result, "paragraph")
    assert len(paragraphs) == 4
    assert paragraphs[0].text.startswith(BODY + " 0 " + BODY)
    assert result.title == "Introduction overview"


def test_unique_largest_first_block_is_title_and_bold_line_is_low_heading():
    def draw(canvas):
        text_at(canvas, 72, 730, "A Study of Things", 24)
        text_at(canvas, 72, 690, "Background", 14)
        y = paragraph(canvas, 670)
        text_at(canvas, 72, y, "Key findings", 10, "Helvetica-Bold")
        paragraph(canvas, y - 16)

    result = parse(make_pdf([draw]))
    assert result.blocks[0].kind == "title" and result.blocks[0].text == "A Study of Things"
    assert [(b.text, b.level) for b in kinds(result, "heading")] == [("Background", 1), ("Key findings", 2)]
    assert result.title == "A Study of Things"


def test_metadata_title_wins():
    def draw(canvas):
        canvas.setTitle("Annual Report 2024")
        paragraph(canvas, 700)

    assert parse(make_pdf([draw])).title == "Annual Report 2024"


def two_column_page(canvas):
    text_at(canvas, 72, 740, "A Two Column Paper Title Spanning The Page Width", 16)
    for i in range(20):
        y = 700 - i * 12
        text_at(canvas, 72, y, f"Left column sentence number {i:02d} goes here ok", 9)
        text_at(canvas, 320, y, f"Right column sentence number {i:02d} goes here", 9)


def test_two_columns_read_left_column_first():
    result = parse(make_pdf([two_column_page]))
    text = "\n".join(block.text for block in result.blocks)
    assert result.blocks[0].text.startswith("A Two Column Paper Title")
    assert text.index("Left column sentence number 19") < text.index("Right column sentence number 00")
    assert not any("Left" in b.text and "Right" in b.text for b in result.blocks)


def test_furniture_repeated_header_footer_and_page_numbers():
    def page(n):
        def draw(canvas):
            text_at(canvas, 72, 760, "ACME Corp Quarterly Report", 8)
            text_at(canvas, 280, 30, f"Page {n} of 3", 8)
            paragraph(canvas, 700, text=f"Body of page {n} says something useful here")
        return draw

    result = parse(make_pdf([page(n) for n in (1, 2, 3)]))
    headers, footers = kinds(result, "page_header"), kinds(result, "page_footer")
    assert [(b.page, b.text) for b in headers] == [(n, "ACME Corp Quarterly Report") for n in (1, 2, 3)]
    assert [(b.page, b.text) for b in footers] == [(n, f"Page {n} of 3") for n in (1, 2, 3)]
    assert all(b.kind == "paragraph" for b in result.blocks if "Body of page" in b.text)
    assert [b.kind for b in result.blocks if b.page == 2] == ["page_header", "paragraph", "page_footer"]


def test_lone_page_number_is_footer_and_single_page_has_no_furniture():
    def page(n):
        return lambda canvas: (paragraph(canvas, 700), text_at(canvas, 300, 30, str(n)))

    assert [b.text for b in kinds(parse(make_pdf([page(7), page(8)])), "page_footer")] == ["7", "8"]
    assert not kinds(parse(make_pdf([page(1)])), "page_footer")


def test_bullets_and_enumerations_become_list_items():
    def draw(canvas):
        text_at(canvas, 72, 700, "Shopping list:")
        text_at(canvas, 72, 686, "• Apples from the market")
        text_at(canvas, 72, 674, "• Bread that is long enough to wrap onto")
        text_at(canvas, 82, 662, "a continuation line")
        text_at(canvas, 72, 650, "- Milk")
        text_at(canvas, 72, 638, "2) Cheese")
        text_at(canvas, 72, 626, "a. Olives")

    items = kinds(parse(make_pdf([draw])), "list_item")
    assert [(b.attrs["marker"], b.text) for b in items] == [
        ("•", "Apples from the market"), ("•", "Bread that is long enough to wrap onto a continuation line"),
        ("-", "Milk"), ("2)", "Cheese"), ("a.", "Olives"),
    ]


def test_captions_and_hyphenated_line_breaks():
    def draw(canvas):
        text_at(canvas, 72, 700, "The manu-")
        text_at(canvas, 72, 688, "al explains the well-")
        text_at(canvas, 72, 676, "Known method.")
        text_at(canvas, 72, 640, "Figure 3: Throughput per node")

    result = parse(make_pdf([draw]))
    assert result.blocks[0].text == "The manual explains the well- Known method."
    assert [b.text for b in kinds(result, "caption")] == ["Figure 3: Throughput per node"]


def page_with_footer(number: int, draw_body):
    def draw(canvas):
        draw_body(canvas)
        text_at(canvas, 72, 40, f"Page {number}")
    return draw


def continued_paragraph_pdf(first_end: str, second_start: str) -> bytes:
    """Page 1 ends with a paragraph whose last line is ``first_end``; page 2 starts with
    ``second_start``; both pages carry a page-number footer."""
    def first(canvas):
        y = paragraph(canvas, 200)
        paragraph(canvas, y - 8, lines=2)
        text_at(canvas, 72, y - 8 - 2 * 12, first_end)

    def second(canvas):
        text_at(canvas, 72, 720, second_start)
        text_at(canvas, 72, 708, "and then it ends.")
        paragraph(canvas, 680)

    return make_pdf([page_with_footer(1, first), page_with_footer(2, second)])


@pytest.mark.parametrize("first_end, second_start", [
    ("this paragraph carries on until the very bottom of the first page and then it", "continues here"),
    ("Rail is cheap. This paragraph carries on until the bottom of the first page and reaches", "North Quay"),
    ("this paragraph carries on until the very bottom of the first page with a hyphen-", "ated word"),
])
def test_paragraph_cut_by_a_page_break_is_one_block(first_end, second_start):
    result = parse(continued_paragraph_pdf(first_end, second_start))
    assert result.status == "ok", result.error
    joined = [b for b in result.blocks if first_end[:-3] in b.text]
    assert len(joined) == 1
    block = joined[0]
    tail = second_start.split()[-1]
    assert block.text.endswith(f"{tail} and then it ends.") and block.kind == "paragraph"
    assert "hyphenated word" in block.text or "hyphen" not in first_end
    assert block.page == 1 and block.bbox[3] > 0.8
    ((page, bbox),) = block.extra_regions
    assert page == 2 and bbox[1] < 0.1 and bbox[3] < 0.15
    assert not any(b.text.startswith(second_start) for b in result.blocks)
    order = [b.kind for b in result.blocks]
    assert order.index("page_footer") == result.blocks.index(block) + 1  # the footer stays in place


@pytest.mark.parametrize("first_end, second_start", [
    ("this paragraph carries on until the very bottom of the first page and it ends.", "continues here"),
    ("this paragraph carries on until the very bottom of the first page (it ends.)", "continues here"),
    ("Yours sincerely,", "Jonathan Abernathy"),
])
def test_paragraph_that_ends_at_the_page_end_is_not_joined(first_end, second_start):
    result = parse(continued_paragraph_pdf(first_end, second_start))
    texts = [b.text for b in result.blocks]
    assert any(t.endswith(first_end) for t in texts)
    assert any(t.startswith(f"{second_start} and then it ends.") for t in texts)
    assert all(not b.extra_regions for b in result.blocks)


def test_embedded_image_is_a_figure_followed_by_its_caption():
    from PIL import Image
    from reportlab.lib.utils import ImageReader

    chart = Image.new("RGB", (300, 150), "white")
    chart.paste((200, 30, 30), (20, 20, 280, 130))
    icon = ImageReader(Image.new("RGB", (16, 16), "blue"))

    def draw(canvas):
        paragraph(canvas, 720)
        canvas.drawImage(ImageReader(chart), 72, 400, width=300, height=150)
        canvas.drawImage(icon, 500, 720, width=16, height=16)  # too small to be a figure
        canvas.rect(72, 200, 400, 100)  # vector drawing: not a figure
        text_at(canvas, 72, 385, "Figure 1: Output against temperature")
        paragraph(canvas, 360)

    result = parse(make_pdf([draw]))
    assert result.status == "ok", result.error
    assert [b.kind for b in result.blocks] == ["paragraph", "figure", "caption", "paragraph"]
    figure = result.blocks[1]
    assert figure.text == "[figure]" and figure.page == 1
    expected = (72 / PAGE_W, (PAGE_H - 550) / PAGE_H, 372 / PAGE_W, (PAGE_H - 400) / PAGE_H)
    assert figure.bbox == pytest.approx(expected, abs=0.002)
    assert len(figure.attrs["image_sha"]) == 64
    assert (figure.attrs["width_px"], figure.attrs["height_px"]) == (300, 150)


def test_image_inside_a_form_xobject_gets_page_coordinates():
    from PIL import Image
    from reportlab.lib.utils import ImageReader

    chart = ImageReader(Image.new("RGB", (100, 50), "red"))

    def draw(canvas):
        paragraph(canvas, 720)
        canvas.beginForm("chart")
        canvas.drawImage(chart, 0, 0, width=100, height=50)
        canvas.endForm()
        canvas.saveState()
        canvas.translate(100, 300)
        canvas.scale(2, 2)
        canvas.doForm("chart")
        canvas.restoreState()

    (figure,) = kinds(parse(make_pdf([draw])), "figure")
    expected = (100 / PAGE_W, (PAGE_H - 400) / PAGE_H, 300 / PAGE_W, (PAGE_H - 300) / PAGE_H)
    assert figure.bbox == pytest.approx(expected, abs=0.002)


def test_image_in_the_right_column_is_read_with_that_column():
    from PIL import Image
    from reportlab.lib.utils import ImageReader

    chart = ImageReader(Image.new("RGB", (100, 100), "green"))

    def draw(canvas):
        two_column_page(canvas)
        canvas.drawImage(chart, 320, 330, width=200, height=120)
        text_at(canvas, 320, 310, "Figure 2: Right column chart", 9)

    result = parse(make_pdf([draw]))
    texts = [b.text[:26] for b in result.blocks]
    assert texts == ["A Two Column Paper Title S", "Left column sentence numbe", "Right column sentence numb",
                     "[figure]", "Figure 2: Right column cha"]
    assert result.blocks[3].bbox[0] == pytest.approx(320 / PAGE_W, abs=0.002)


def test_bboxes_are_normalized_and_on_the_right_page():
    result = parse(make_pdf([lambda c: paragraph(c, 700), lambda c: text_at(c, 306, 396, "Second page text")]))
    assert {b.page for b in result.blocks} == {1, 2}
    for block in result.blocks:
        assert block.bbox is not None and all(0.0 <= v <= 1.0 for v in block.bbox)
        assert block.bbox[0] < block.bbox[2] and block.bbox[1] < block.bbox[3]
    second = next(b for b in result.blocks if b.text == "Second page text")
    assert second.page == 2
    assert second.bbox[0] == pytest.approx(0.5, abs=0.01)
    assert second.bbox[1] < 0.5 < second.bbox[3] + 0.01
    first = next(b for b in result.blocks if b.page == 1)
    assert first.bbox[1] == pytest.approx((PAGE_H - 700 - 10) / PAGE_H, abs=0.02)
    assert [(p.page_no, p.width, p.height, p.has_text_layer) for p in result.pages] == [
        (1, PAGE_W, PAGE_H, True), (2, PAGE_W, PAGE_H, True)]


# -- failures -------------------------------------------------------------------------


def test_encrypted_pdf_fails_with_reason():
    result = parse(make_pdf([lambda c: paragraph(c, 700)], encrypt="secret"))
    assert result.status == "failed" and result.error.startswith("encrypted")


def test_truncated_pdf_is_corrupt():
    data = make_pdf([lambda c: paragraph(c, 700)] * 2)
    result = parse(data[: len(data) // 2])
    assert result.status == "failed" and result.error.startswith("corrupt")


def test_png_named_pdf_is_corrupt(tmp_path):
    from PIL import Image

    path = tmp_path / "image.pdf"
    Image.new("RGB", (20, 20), "red").save(path, format="PNG")
    result = parse(path.read_bytes(), filename=path.name)
    assert result.status == "failed" and result.error.startswith("corrupt")


def test_empty_bytes_fail_as_empty():
    result = parse(b"")
    assert result.status == "failed" and result.error.startswith("empty")


def test_page_limit_is_checked_before_extraction():
    data = make_pdf([lambda c: paragraph(c, 700)] * 5)
    result = parse(data, limits=ParseLimits(max_pages=3))
    assert result.status == "failed" and result.error.startswith("too_many_pages")
    assert parse(data, limits=ParseLimits(max_pages=5)).status == "ok"


def test_image_only_pdf_has_no_text_layer():
    from PIL import Image
    from reportlab.lib.utils import ImageReader

    image = ImageReader(Image.new("RGB", (100, 100), "blue"))
    result = parse(make_pdf([lambda c: c.drawImage(image, 72, 500, 200, 200)]))
    assert result.status == "failed" and result.error.startswith("no_text_layer")
    assert "OCR" in result.error


def test_concurrent_parsing_matches_serial():
    documents = [make_pdf([heading_doc]), make_pdf([two_column_page] * 3),
                 make_pdf([lambda c: paragraph(c, 700, lines=30)] * 4), make_pdf([heading_doc] * 2)]
    serial = [parse(d).blocks for d in documents]
    results: dict[int, list] = {}

    def work(index: int) -> None:
        for _ in range(3):
            results[index] = parse(documents[index]).blocks

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(documents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [results[i] for i in range(len(documents))] == serial


@pytest.mark.parametrize("path", GOLDEN_PDFS, ids=[p.name for p in GOLDEN_PDFS])
def test_golden_pdfs_parse(path):
    result = parse(path.read_bytes(), filename=path.name)
    assert result.status == "ok", result.error
    assert result.blocks
    page_count = len(result.pages)
    for block in result.blocks:
        assert block.page is not None and 1 <= block.page <= page_count
        assert block.bbox is not None and all(0.0 <= v <= 1.0 for v in block.bbox)


# -- pure layout rules (no pdfium) ----------------------------------------------------


def chars_for(text: str, x: float, baseline: float, size: float = 10.0, advance: float = 5.0):
    out = []
    for ch in text:
        out.append(Char(ch, x, baseline - size, x + advance, baseline + 2, baseline, size))
        x += advance
    return out


def line(text: str, x0: float, baseline: float, width: float, size: float = 10.0) -> Line:
    return Line(text, x0, baseline - size, x0 + width, baseline + 2, baseline, size)


def test_build_lines_splits_on_baseline_and_gutter_gaps():
    chars = chars_for("left words", 72, 100) + chars_for("right", 200, 100) + chars_for("next", 72, 112)
    assert [l.text for l in build_lines(chars)] == ["left words", "right", "next"]


def test_build_lines_keeps_ligature_parts_that_share_a_box():
    chars = chars_for("spec", 72, 100) + chars_for("i", 92, 100)
    chars += [Char("f", 97, 90, 103, 102, 100, 10.0), Char("i", 97, 90, 103, 102, 100, 10.0)]
    chars += chars_for("cation", 103, 100)
    assert [l.text for l in build_lines(chars)] == ["specification"]


def test_build_lines_keeps_bullet_with_its_text_across_a_gap():
    chars = chars_for("•", 72, 100) + chars_for("item", 100, 100)
    assert [l.text for l in build_lines(chars)] == ["• item"]


def test_gutter_found_only_between_columns():
    left = [line(f"l{i}", 72, 100 + 12 * i, 220) for i in range(10)]
    right = [line(f"r{i}", 320, 100 + 12 * i, 220) for i in range(10)]
    gutter = find_gutter(left + right)
    assert gutter is not None and 292 <= gutter[0] < gutter[1] <= 320
    assert find_gutter([line(f"w{i}", 72, 100 + 12 * i, 468) for i in range(20)]) is None
    flows = reading_order([line("title", 72, 80, 468)] + right + left)
    assert [[l.text for l in flow][0] for flow in flows] == ["title", "l0", "r0"]


def test_find_furniture_normalizes_digits():
    pages = [[line(f"Report page {n}", 72, 20, 100), line("body", 72, 400, 400)] for n in range(3)]
    assert find_furniture(pages, [792.0] * 3) == [{0: "page_header"}] * 3
    assert find_furniture(pages[:1], [792.0]) == [{}]


def test_continues_paragraph_needs_an_open_sentence():
    assert continues_paragraph("berth at", "north quay", open_end=False)
    assert continues_paragraph("It grew. A berth at", "North Quay", open_end=True)
    assert not continues_paragraph("It grew. A berth at", "North Quay", open_end=False)
    assert not continues_paragraph("A berth at", "North Quay", open_end=True)  # no sentence: a label?
    for ended in ("in 2029.", "is it?", "as follows:", "ends;", 'he said "stop."', "(see above.)"):
        assert not continues_paragraph(ended, "and more", open_end=True)


def test_join_lines_dehyphenates_only_before_lowercase():
    assert join_lines(["manu-", "al"]) == "manual"
    assert join_lines(["self-", "Driving"]) == "self- Driving"
    assert join_lines(["a\x07b", "cafe\u0301"]) == "ab café"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(20, 400)), max_size=40))
def test_reading_order_keeps_every_line_once(specs):
    lines = [line(f"w{i}", 40 + 200 * col, 60 + 12 * row, width) for i, (col, row, width) in enumerate(specs)]
    words = sorted(word for flow in reading_order(lines) for l in flow for word in l.text.split())
    assert words == sorted(l.text for l in lines)


def test_line_boxes_map_each_line_to_its_characters_hyphenation_and_markers_included():
    def draw(canvas):
        text_at(canvas, 72, 700, "The manu-")
        text_at(canvas, 72, 688, "al explains the well-")
        text_at(canvas, 72, 676, "Known method.")
        text_at(canvas, 72, 640, "• Bread that is long enough to wrap onto")
        text_at(canvas, 82, 628, "a continuation line")

    result = parse(make_pdf([draw]))
    paragraph_block, item = result.blocks[0], kinds(result, "list_item")[0]
    assert [paragraph_block.text[a:b] for a, b, *_ in paragraph_block.attrs["lines"]] == [
        "The manu", "al explains the well-", "Known method."]
    assert [item.text[a:b] for a, b, *_ in item.attrs["lines"]] == [
        "Bread that is long enough to wrap onto", "a continuation line"]
    tops = [line[4] for line in paragraph_block.attrs["lines"]]
    assert tops == sorted(tops) and all(line[2] == 1 for line in paragraph_block.attrs["lines"])


@pytest.mark.parametrize("pdf", GOLDEN_PDFS, ids=lambda p: p.name)
def test_golden_line_boxes_lie_inside_their_block_and_cover_its_text(pdf):
    result = parse(pdf.read_bytes())
    multi_line = [b for b in result.blocks if "lines" in b.attrs]
    assert multi_line or pdf.name == "figure.pdf"
    for block in multi_line:
        regions = [(block.page, block.bbox), *block.extra_regions]  # a continuation may sit on the same page
        cursor = 0
        for start, end, page, *box in block.attrs["lines"]:
            assert cursor <= start < end <= len(block.text) and not block.text[cursor:start].strip()
            assert any(p == page and o[0] - 1e-3 <= box[0] <= box[2] <= o[2] + 1e-3
                       and o[1] - 1e-3 <= box[1] <= box[3] <= o[3] + 1e-3 for p, o in regions)
            cursor = end
        assert cursor == len(block.text)
