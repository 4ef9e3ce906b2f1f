"""How the CLI prints a hit: an exact quote in quotes, a generated figure description marked as such."""

from __future__ import annotations

from kb_ray.serving.api import citation_line

REGION = {"page": 2, "bbox": [0.1, 0.34, 0.82, 0.63]}


def test_a_quote_is_printed_in_quotes_with_page_and_box():
    hit = {"title": "Field Note", "document_id": "doc_1", "regions": [REGION], "quote": "Figure 1:\n relative power",
           "text": "Figure 1:\n relative power"}
    assert citation_line(hit) == 'Field Note, page 2, box [0.10, 0.34, 0.82, 0.63]: "Figure 1: relative power"'


def test_a_generated_figure_description_is_never_printed_as_a_quote():
    hit = {"title": "Field Note", "document_id": "doc_1", "regions": [REGION], "quote": None,
           "text": "A line chart of relative power against cell temperature."}
    line = citation_line(hit)
    assert line == ("Field Note, page 2, box [0.10, 0.34, 0.82, 0.63]: [figure, described by a model] "
                    "A line chart of relative power against cell temperature.")
    assert '"' not in line
