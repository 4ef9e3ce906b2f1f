"""Captions → figure-description chunks: placement, identity, and what is left alone."""

from __future__ import annotations

import json

from kb_ray.enrich.figure_chunks import (
    FIGURE_DESCRIPTION,
    description_rows,
    figure_crops,
)

REGION = {"page": 2, "x0": 0.1, "y0": 0.3, "x1": 0.8, "y1": 0.6}


def version_rows(*, crop_sha: str | None = "c" * 64, layer: str = "body"):
    version = {"version_id": "ver_1", "document_id": "doc_1"}
    elements = [
        {"element_id": "el_h", "ordinal": 0, "kind": "heading", "layer": "body", "attrs_json": "{}", "regions": []},
        {"element_id": "el_f", "ordinal": 1, "kind": "figure", "layer": layer, "regions": [REGION],
         "attrs_json": json.dumps({"image_sha": None, **({"crop_sha": crop_sha} if crop_sha else {})})},
    ]
    chunks = [{"chunk_id": "ch_1", "heading_path": ["Results"]}]
    version_chunks = [{"chunk_id": "ch_1", "ordinal": 0, "element_ids": ["el_h", "el_f"]}]
    return version, elements, chunks, version_chunks


def describe(captions, **kwargs):
    version, elements, chunks, version_chunks = version_rows(**kwargs)
    new_chunks, new_vcs = description_rows(version=version, elements=elements, chunks=chunks,
                                           version_chunks=version_chunks, captions=captions, enricher_fp="fp_e")
    return elements, new_chunks, new_vcs


def test_a_caption_becomes_a_chunk_at_its_figure_with_the_figure_section():
    elements, (chunk,), (placed,) = describe({"c" * 64: "  A line chart of power against temperature. "})
    assert chunk["text"] == "A line chart of power against temperature."
    assert chunk["kind"] == FIGURE_DESCRIPTION and chunk["heading_path"] == ["Results"]
    assert chunk["chunker_fp"] == "fp_e" and chunk["token_count"] == 8
    assert placed["spans"] == [] and placed["element_ids"] == ["el_f"] and placed["ordinal"] == 1
    assert placed["pages"] == [2] and placed["regions"] == [REGION]
    attrs = json.loads(elements[1]["attrs_json"])
    assert attrs["description_chunk_id"] == chunk["chunk_id"] and attrs["enricher_fp"] == "fp_e"


def test_same_caption_same_chunk_id_and_no_caption_no_chunk():
    _, (first,), _ = describe({"c" * 64: "A chart."})
    _, (again,), _ = describe({"c" * 64: "A chart."})
    _, (other,), _ = describe({"c" * 64: "Another chart."})
    assert first["chunk_id"] == again["chunk_id"] != other["chunk_id"]
    assert describe({})[1:] == ([], []) and describe({"c" * 64: "   "})[1:] == ([], [])


def test_figures_without_crop_or_outside_the_body_are_not_described():
    assert figure_crops(version_rows(crop_sha=None)[1]) == []
    assert figure_crops(version_rows(layer="furniture")[1]) == []
    assert describe({"c" * 64: "A chart."}, layer="furniture")[1:] == ([], [])
