"""DoclingFormatsParser on small DOCX/PPTX/XLSX/HTML/Markdown inputs built in tmp_path."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kb_ray.parsing import docling_formats
from kb_ray.parsing.blocks import BLOCK_KINDS, ParseResult
from kb_ray.parsing.docling_formats import (
    DOCX_MIME,
    HTML_MIME,
    MARKDOWN_MIME,
    PPTX_MIME,
    XLSX_MIME,
    DoclingFormatsParser,
)

docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")
openpyxl = pytest.importorskip("openpyxl")

GOLDEN_SOURCES = Path(__file__).resolve().parents[2] / "golden" / "sources"
MIME_BY_SUFFIX = {".docx": DOCX_MIME, ".pptx": PPTX_MIME, ".xlsx": XLSX_MIME,
                  ".html": HTML_MIME, ".htm": HTML_MIME, ".md": MARKDOWN_MIME}


@pytest.fixture(scope="module")
def parser() -> DoclingFormatsParser:
    return DoclingFormatsParser()


def parse_file(parser: DoclingFormatsParser, path: Path) -> ParseResult:
    return parser.parse(path.read_bytes(), mime=MIME_BY_SUFFIX[path.suffix], filename=path.name)


def kinds_and_texts(result: ParseResult) -> list[tuple[str, int, str]]:
    return [(b.kind, b.level, b.text) for b in result.blocks]


def assert_well_formed(result: ParseResult) -> None:
    assert result.status == "ok", result.error
    for block in result.blocks:
        assert block.kind in BLOCK_KINDS
        assert block.text.strip()
        if block.bbox is not None:
            x0, y0, x1, y1 = block.bbox
            assert 0.0 <= x0 <= x1 <= 1.0 and 0.0 <= y0 <= y1 <= 1.0


# ---- DOCX ---------------------------------------------------------------------------------


@pytest.fixture
def policy_docx(tmp_path: Path) -> Path:
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "ACME confidential"
    document.sections[0].footer.paragraphs[0].text = "Internal use only"
    document.add_heading("Travel policy", 0)
    document.add_heading("Scope", 1)
    paragraph = document.add_paragraph("Applies to ")
    paragraph.add_run("all").bold = True
    paragraph.add_run(" staff.")
    document.add_heading("Rules", 2)
    document.add_paragraph("Book early", style="List Bullet")
    document.add_paragraph("Use the portal", style="List Bullet 2")
    document.add_paragraph("Ask your manager", style="List Number")
    table = document.add_table(rows=3, cols=2)
    for r, row in enumerate([["Class", "Limit"], ["Economy", "500"], ["Business", "2000"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    path = tmp_path / "policy.docx"
    document.save(path)
    return path


def test_docx_headings_have_levels_and_title(parser, policy_docx):
    result = parse_file(parser, policy_docx)
    assert_well_formed(result)
    headings = [(b.kind, b.level, b.text) for b in result.blocks if b.kind in ("title", "heading")]
    assert headings == [("title", 0, "Travel policy"), ("heading", 1, "Scope"), ("heading", 2, "Rules")]
    assert result.title == "Travel policy"
    assert ("paragraph", 0, "Applies to all staff.") in kinds_and_texts(result)


def test_docx_nested_list_levels_and_markers(parser, policy_docx):
    items = [b for b in parse_file(parser, policy_docx).blocks if b.kind == "list_item"]
    assert [(b.text, b.level) for b in items] == [
        ("Book early", 0), ("Use the portal", 1), ("Ask your manager", 0),
    ]
    assert items[0].attrs["marker"] == "-"
    assert items[2].attrs["marker"] == "1."


def test_docx_table_rows_header_and_text(parser, policy_docx):
    (table,) = [b for b in parse_file(parser, policy_docx).blocks if b.kind == "table"]
    assert table.attrs["rows"] == [["Class", "Limit"], ["Economy", "500"], ["Business", "2000"]]
    assert table.attrs["header_rows"] == 1
    assert table.text == "Class | Limit\nEconomy | 500\nBusiness | 2000"


def test_docx_has_no_pages_and_page_furniture(parser, policy_docx):
    result = parse_file(parser, policy_docx)
    assert result.pages == []
    assert all(b.page is None and b.bbox is None for b in result.blocks)
    furniture = {(b.kind, b.text) for b in result.blocks if b.kind in ("page_header", "page_footer")}
    assert furniture == {("page_header", "ACME confidential"), ("page_footer", "Internal use only")}


# ---- PPTX ---------------------------------------------------------------------------------


@pytest.fixture
def slides_pptx(tmp_path: Path) -> Path:
    from pptx.util import Inches

    deck = pptx.Presentation()
    for title, body in [("Quarterly review", "Revenue grew"), ("Next steps", "Hire two engineers")]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    grid = deck.slides[1].shapes.add_table(2, 2, Inches(1), Inches(5), Inches(4), Inches(1)).table
    for (r, c), text in {(0, 0): "Role", (0, 1): "Count", (1, 0): "Engineer", (1, 1): "2"}.items():
        grid.cell(r, c).text = text
    path = tmp_path / "slides.pptx"
    deck.save(path)
    return path


def test_pptx_slides_are_pages_with_normalized_boxes(parser, slides_pptx):
    result = parse_file(parser, slides_pptx)
    assert_well_formed(result)
    assert [(p.page_no, p.width, p.height) for p in result.pages] == [(1, 720.0, 540.0), (2, 720.0, 540.0)]
    assert all(b.page in (1, 2) and b.bbox is not None for b in result.blocks)
    by_text = {b.text: b for b in result.blocks}
    assert by_text["Revenue grew"].page == 1 and by_text["Hire two engineers"].page == 2
    title_box = by_text["Quarterly review"].bbox
    assert title_box[1] < by_text["Revenue grew"].bbox[1]  # title sits above the body


def test_pptx_slide_titles_become_headings(parser, slides_pptx):
    result = parse_file(parser, slides_pptx)
    headings = [(b.text, b.level, b.page) for b in result.blocks if b.kind == "heading"]
    assert headings == [("Quarterly review", 1, 1), ("Next steps", 1, 2)]
    assert result.title == "Quarterly review"
    (table,) = [b for b in result.blocks if b.kind == "table"]
    assert table.page == 2 and table.attrs["rows"] == [["Role", "Count"], ["Engineer", "2"]]


# ---- XLSX ---------------------------------------------------------------------------------


def test_xlsx_sheets_are_pages_with_tables(parser, tmp_path):
    workbook = openpyxl.Workbook()
    stock = workbook.active
    stock.title = "Stock"
    for row in [["sku", "qty"], ["A-1", 4], ["B-2", 7]]:
        stock.append(row)
    prices = workbook.create_sheet("Prices")
    prices["B2"], prices["C2"], prices["B3"], prices["C3"] = "sku", "price", "A-1", 9.5
    path = tmp_path / "inventory.xlsx"
    workbook.save(path)

    result = parse_file(parser, path)
    assert_well_formed(result)
    assert [p.page_no for p in result.pages] == [1, 2]
    tables = [b for b in result.blocks if b.kind == "table"]
    assert [(t.page, t.attrs["rows"], t.attrs["header_rows"]) for t in tables] == [
        (1, [["sku", "qty"], ["A-1", "4"], ["B-2", "7"]], 1),
        (2, [["sku", "price"], ["A-1", "9.5"]], 1),
    ]
    assert tables[0].bbox == (0.0, 0.0, 1.0, 1.0)
    assert [(b.text, b.page) for b in result.blocks if b.kind == "heading"] == [("Stock", 1), ("Prices", 2)]


# ---- HTML ---------------------------------------------------------------------------------

FAQ_HTML = """<html><head><title>FAQ - ACME</title></head><body>
<header><nav><a href="/">Home</a> <a href="/docs">Docs</a></nav></header>
<main><h1>FAQ</h1><p>Answers to <b>common</b> questions.</p>
<h2>Accounts</h2><p>How to reset a password.</p><h3>Locked out</h3><p>Call support.</p><ol><li>Open settings</li><li>Reset</li></ol>
<table><caption>Table 1: plans</caption><tr><th>Plan</th><th>Price</th></tr><tr><td>Basic</td><td>$5</td></tr></table>
<figure><img src="chart.png"><figcaption>Figure 1: usage</figcaption></figure></main>
<footer><p>Copyright 2024 ACME</p></footer></body></html>"""


def test_html_structure_furniture_and_table(parser, tmp_path):
    path = tmp_path / "faq.html"
    path.write_text(FAQ_HTML)
    result = parse_file(parser, path)
    assert_well_formed(result)
    blocks = kinds_and_texts(result)
    assert ("page_header", 0, "Home Docs") in blocks
    assert blocks[-1] == ("page_footer", 0, "Copyright 2024 ACME")
    headings = [t for t in blocks if t[0] in ("title", "heading")]
    assert headings == [("title", 0, "FAQ"), ("heading", 1, "Accounts"), ("heading", 2, "Locked out")]
    assert ("paragraph", 0, "Answers to common questions.") in blocks
    steps = [(b.text, b.attrs) for b in result.blocks if b.kind == "list_item"]
    assert steps == [("Open settings", {"marker": "1."}), ("Reset", {"marker": "2."})]
    assert result.title == "FAQ"
    index = next(i for i, b in enumerate(result.blocks) if b.kind == "table")
    table, caption = result.blocks[index : index + 2]
    assert table.attrs == {"rows": [["Plan", "Price"], ["Basic", "$5"]], "header_rows": 1}
    assert table.text == "Plan | Price\nBasic | $5"
    assert (caption.kind, caption.text) == ("caption", "Table 1: plans")
    assert [t for _, _, t in blocks].count("Table 1: plans") == 1


def test_html_figure_is_followed_by_its_caption_once(parser, tmp_path):
    path = tmp_path / "faq.html"
    path.write_text(FAQ_HTML)
    blocks = parse_file(parser, path).blocks
    index = next(i for i, b in enumerate(blocks) if b.kind == "figure")
    assert blocks[index].text == "Figure 1: usage" and blocks[index].attrs == {"image_sha": None}
    assert blocks[index + 1].kind == "caption" and blocks[index + 1].text == "Figure 1: usage"
    assert sum(b.kind == "caption" for b in blocks) == 2  # the table's and the figure's, once each


def test_figure_without_caption_gets_a_placeholder(parser):
    result = parser.parse(b"Text.\n\n![](chart.png)\n", mime=MARKDOWN_MIME, filename="f.md")
    assert ("figure", 0, "[figure]") in kinds_and_texts(result)


def test_html_without_text_fails_empty(parser):
    result = parser.parse(b"<html><body>  <div></div></body></html>", mime=HTML_MIME, filename="empty.html")
    assert result.status == "failed" and result.error.startswith("empty")


# ---- Markdown -----------------------------------------------------------------------------

GUIDE_MD = """# Guide

Intro with **bold** text.

## Install

- one
  - two
    - three
1. first
2. second

```python
print("hi")
```

| key | value |
|-----|-------|
| a   | 1     |
"""


def test_markdown_headings_lists_code_and_table(parser):
    result = parser.parse(GUIDE_MD.encode(), mime=MARKDOWN_MIME, filename="guide.md")
    assert_well_formed(result)
    blocks = kinds_and_texts(result)
    assert blocks[:3] == [
        ("title", 0, "Guide"), ("paragraph", 0, "Intro with bold text."), ("heading", 1, "Install"),
    ]
    items = [b for b in result.blocks if b.kind == "list_item"]
    assert [(b.text, b.level, b.attrs.get("marker")) for b in items] == [
        ("one", 0, "-"), ("two", 1, "-"), ("three", 2, "-"), ("first", 0, "1."), ("second", 0, "2."),
    ]
    (code,) = [b for b in result.blocks if b.kind == "code"]
    assert code.text == 'print("hi")'
    (table,) = [b for b in result.blocks if b.kind == "table"]
    assert table.attrs == {"rows": [["key", "value"], ["a", "1"]], "header_rows": 1}
    assert all(b.page is None and b.bbox is None for b in result.blocks)


def test_markdown_several_top_headings_keep_their_hierarchy(parser):
    text = "# Install\n\nstep\n\n## Linux\n\napt\n\n# Usage\n\nrun\n"
    result = parser.parse(text.encode(), mime=MARKDOWN_MIME, filename="notes.md")
    headings = [(b.text, b.level) for b in result.blocks if b.kind == "heading"]
    assert headings == [("Install", 1), ("Linux", 2), ("Usage", 1)]
    assert result.title == "Install"


def test_markdown_inline_parts_join_without_space_before_punctuation(parser):
    text = ('It prints `orchard 2.4.1 (build 7f3c2e1)`. See [the docs](http://x.example), '
            'then run (`make`) and "`go`" now.\n\n- set `key`; done\n')
    result = parser.parse(text.encode(), mime=MARKDOWN_MIME, filename="inline.md")
    assert kinds_and_texts(result) == [
        ("paragraph", 0, 'It prints `orchard 2.4.1 (build 7f3c2e1)`. See the docs, then run (`make`) and "`go`" now.'),
        ("list_item", 0, "set `key`; done"),
    ]


def test_mime_decides_format_when_filename_has_no_extension(parser):
    result = parser.parse(b"# Readme\n\nHello.\n", mime=MARKDOWN_MIME, filename="README")
    assert result.status == "ok", result.error
    assert kinds_and_texts(result) == [("title", 0, "Readme"), ("paragraph", 0, "Hello.")]


# ---- failures, configuration, reuse -------------------------------------------------------


def test_corrupt_docx_fails_corrupt(parser):
    result = parser.parse(bytes(range(256)) * 20, mime=DOCX_MIME, filename="broken.docx")
    assert result.status == "failed"
    assert result.error.startswith("corrupt: ")


def test_unsupported_mime_fails(parser):
    result = parser.parse(b"%PDF-1.4", mime="application/pdf", filename="a.pdf")
    assert result.status == "failed" and result.error.startswith("unsupported_type")


def test_too_many_slides_fails(parser, slides_pptx):
    from kb_ray.parsing.base import ParseLimits

    data = slides_pptx.read_bytes()
    result = parser.parse(data, mime=PPTX_MIME, filename="s.pptx", limits=ParseLimits(max_pages=1))
    assert result.status == "failed" and result.error.startswith("too_many_pages")


def test_converter_is_built_once_per_parser(monkeypatch):
    calls = []
    real = docling_formats.build_converter
    monkeypatch.setattr(docling_formats, "build_converter", lambda: calls.append(1) or real())
    fresh = DoclingFormatsParser()
    for _ in range(2):
        assert fresh.parse(b"# A\n\nb\n", mime=MARKDOWN_MIME, filename="a.md").status == "ok"
    assert calls == [1]


def test_config_names_docling_version(parser):
    config = parser.config()
    assert config["docling"] not in ("", "unknown")
    assert parser.name == "docling" and parser.version == "3"
    assert parser.fingerprint


def test_converts_without_torch(tmp_path):
    source = tmp_path / "doc.md"
    source.write_text("# Title\n\nBody text.\n")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # import torch now raises ImportError
        from kb_ray.parsing.docling_formats import DoclingFormatsParser
        data = open({str(source)!r}, "rb").read()
        result = DoclingFormatsParser().parse(data, mime="text/markdown", filename="doc.md")
        assert result.status == "ok", result.error
        print([(b.kind, b.text) for b in result.blocks])
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "('title', 'Title'), ('paragraph', 'Body text.')" in completed.stdout


# ---- golden sources -----------------------------------------------------------------------

GOLDEN_FILES = sorted(p for p in GOLDEN_SOURCES.glob("*") if p.suffix in MIME_BY_SUFFIX)


@pytest.mark.parametrize("path", GOLDEN_FILES or [None], ids=lambda p: p.name if p else "none")
def test_golden_sources_parse_ok(parser, path):
    if path is None:
        pytest.skip(f"no golden sources under {GOLDEN_SOURCES}")
    result = parse_file(parser, path)
    assert_well_formed(result)
    assert any(b.kind not in ("page_header", "page_footer") for b in result.blocks)


def test_docx_picture_becomes_a_figure_with_its_image_as_crop(parser, tmp_path):
    from docx import Document
    from docx.shared import Inches
    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (120, 80), (200, 30, 30)).save(png, format="PNG")
    document = Document()
    document.add_heading("Wiring", level=1)
    document.add_paragraph("The diagram shows the pump's terminal box.")
    document.add_picture(io.BytesIO(png.getvalue()), width=Inches(2))
    document.add_paragraph("Figure 3: Terminal box.")
    path = tmp_path / "wiring.docx"
    document.save(path)

    result = parse_file(parser, path)
    (figure,) = [block for block in result.blocks if block.kind == "figure"]
    crop = result.images[figure.attrs["crop_sha"]]
    assert crop.startswith(b"\x89PNG") and Image.open(io.BytesIO(crop)).size == (120, 80)
    assert set(result.images) == {figure.attrs["crop_sha"]}
