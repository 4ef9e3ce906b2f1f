"""Compare mode on golden documents: given and derived dimensions, cited or "not stated" cells."""

from __future__ import annotations

import pytest

from kb_ray.answer.answerer import AnswerRequestError
from kb_ray.answer.compare import NOT_STATED
from tests.answer.modes_fixtures import answerer, assert_verbatim, catalog_text, markers  # noqa: F401
from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)


def _check_cells(response, catalog_text):
    """Every cell cited (its own markers) or "not stated" with none; citations numbered once
    across the response and verbatim from the cell's own document."""
    by_n = {c["n"]: c for c in response["citations"]}
    assert sorted(by_n) == list(range(1, len(by_n) + 1))
    for cell in response["cells"]:
        if cell["text"] == NOT_STATED:
            assert cell["citations"] == [] and cell["sentences"] == []
            continue
        assert cell["citations"] and markers(cell["text"]) == set(cell["citations"]), cell
        assert all(s["supported"] for s in cell["sentences"])
        for n in cell["citations"]:
            assert_verbatim(by_n[n], cell["document_id"], catalog_text)
    assert {n for cell in response["cells"] for n in cell["citations"]} == set(by_n)


def test_given_dimensions(answerer, catalog_text):
    response = answerer.answer({"query": "compare", "mode": "compare", "documents": ["manual.pdf", "policy.docx"],
                                "dimensions": ["maximum discharge pressure", "home office allowance"]})
    manual, policy = catalog_text["by_file"]["manual.pdf"], catalog_text["by_file"]["policy.docx"]
    cells = {(c["document_id"], c["dimension"]): c for c in response["cells"]}
    assert len(cells) == 4
    assert "8 bar" in cells[(manual, "maximum discharge pressure")]["text"]
    assert "€450" in cells[(policy, "home office allowance")]["text"]
    assert cells[(policy, "maximum discharge pressure")]["text"] == NOT_STATED
    assert cells[(manual, "home office allowance")]["text"] == NOT_STATED
    _check_cells(response, catalog_text)
    table = response["answer"].splitlines()
    assert table[0] == ("| Dimension | AquaFlow AF-220 Operating and Maintenance Manual | "
                        "Remote Work and Equipment Policy |")
    assert table[2].startswith("| maximum discharge pressure | During normal operation") and len(table) == 4


def test_derived_dimensions_start_with_shared_headings(answerer, catalog_text):
    response = answerer.answer({"query": "compare", "mode": "compare", "documents": ["manual.pdf", "guide.md"]})
    assert response["dimensions"][:2] == ["Installation", "Troubleshooting"]  # headings both documents have
    assert len(response["dimensions"]) <= answerer.settings.max_compare_dimensions
    assert len(response["cells"]) == 2 * len(response["dimensions"])
    shared = [c for c in response["cells"] if c["dimension"] in ("Installation", "Troubleshooting")]
    assert all(c["text"] != NOT_STATED for c in shared)
    _check_cells(response, catalog_text)


def test_compare_needs_two_documents(answerer):
    with pytest.raises(AnswerRequestError, match="two or more documents"):
        answerer.answer({"query": "compare", "mode": "compare", "documents": ["manual.pdf", "manual.pdf"]})
    with pytest.raises(AnswerRequestError, match="no headings to compare them on"):
        answerer.answer({"query": "compare", "mode": "compare", "documents": ["notes.txt", "no_headings.pdf"]})
