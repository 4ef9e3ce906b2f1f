import pytest

from kb_ray.errors import SpanError
from kb_ray.model import Element
from kb_ray.parsing.blocks import Block
from kb_ray.structure.builder import StructureBuilder, check_spans

BLOCKS = [
    Block("title", "Pump Manual"),
    Block("page_header", "ACME   confidential", page=1, bbox=(0.1, 0.0, 0.9, 0.05)),
    Block("heading", "Install", level=1, page=1, bbox=(0.1, 0.1, 0.5, 0.12)),
    Block("paragraph", "Mount the  pump\nlevel.", page=1, bbox=(0.1, 0.13, 0.9, 0.2)),
    Block("heading", "Wiring", level=2),
    Block("list_item", "Red to L1", attrs={"marker": "1."}),
    Block("list_item", "Black to N", level=1),
    Block("table", "", attrs={"rows": [["Model", "kW"], ["P-1", "0.75"], ["P|2", "1.1"]], "header_rows": 1}),
    Block("caption", "Table 1: ratings"),
    Block("heading", "Care", level=1),
    Block("code", "run --fast\n    indented"),
]


def build():
    return StructureBuilder().build(BLOCKS, version_id="ver_test")


def test_canonical_text_is_the_documented_serialization():
    assert build().canonical_text == (
        "# Pump Manual\n\n# Install\n\nMount the pump level.\n\n## Wiring\n\n1. Red to L1\n  - Black to N\n\n"
        "| Model | kW |\n| --- | --- |\n| P-1 | 0.75 |\n| P\\|2 | 1.1 |\n\nTable 1: ratings\n\n# Care\n\n"
        "```\nrun --fast\n    indented\n```"
    )


def test_every_span_round_trips_and_furniture_has_none():
    structured = build()
    for element in structured.elements:
        if element.layer == "furniture":
            assert element.span is None and element.kind == "page_header"
        else:
            start, end = element.span
            assert structured.canonical_text[start:end] == element.text


def test_sections_nest_by_heading_level():
    by_kind_text = {(e.kind, e.text): e for e in build().elements}
    title = by_kind_text[("title", "Pump Manual")]
    install = by_kind_text[("heading", "Install")]
    wiring = by_kind_text[("heading", "Wiring")]
    care = by_kind_text[("heading", "Care")]
    assert install.parent_id == title.element_id
    assert wiring.parent_id == install.element_id
    assert care.parent_id == title.element_id
    assert by_kind_text[("list_item", "Red to L1")].parent_id == wiring.element_id


def test_caption_is_attached_to_its_table():
    elements = build().elements
    table = next(e for e in elements if e.kind == "table")
    caption = next(e for e in elements if e.kind == "caption")
    assert caption.parent_id == table.element_id and table.attrs["caption_id"] == caption.element_id


def test_regions_carry_page_and_bbox():
    paragraph = next(e for e in build().elements if e.kind == "paragraph")
    assert paragraph.pages == [1] and paragraph.regions[0].bbox == (0.1, 0.13, 0.9, 0.2)


def test_element_ids_are_deterministic_and_version_scoped():
    first, second = build(), build()
    assert [e.element_id for e in first.elements] == [e.element_id for e in second.elements]
    other = StructureBuilder().build(BLOCKS, version_id="ver_other")
    assert first.elements[0].element_id != other.elements[0].element_id


def test_a_broken_span_raises():
    element = Element(element_id="el_x", ordinal=0, kind="paragraph", layer="body", text="abc", span=(0, 2))
    with pytest.raises(SpanError, match="does not round-trip"):
        check_spans("abc", [element])
