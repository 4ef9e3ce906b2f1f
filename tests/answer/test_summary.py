"""Summary mode on golden documents: cited sections, verbatim citations, empty sections, bad names."""

from __future__ import annotations

import pytest

from kb_ray.answer.answerer import AnswerRequestError
from kb_ray.answer.sections import DocumentReferenceError
from kb_ray.answer.summary import NO_EVIDENCE
from tests.answer.modes_fixtures import answerer, assert_verbatim, catalog_text, markers  # noqa: F401
from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)


def test_derived_sections_are_cited_verbatim_from_that_document(answerer, catalog_text):
    response = answerer.answer({"query": "summarize", "mode": "summary", "documents": ["manual.pdf"]})
    manual = catalog_text["by_file"]["manual.pdf"]
    titles = [s["title"] for s in response["sections"]]
    assert titles == ["1 Introduction", "2 Specifications", "3 Installation", "4 Operation", "5 Maintenance",
                      "6 Troubleshooting"]  # the manual's own top-level sections, its title chunk folded in
    numbers = [c["n"] for c in response["citations"]]
    assert numbers == list(range(1, len(numbers) + 1))
    for section in response["sections"]:
        assert section["citations"] and section["sentences"], section
        assert markers(section["text"]) == set(section["citations"])
        assert all(s["supported"] for s in section["sentences"])
    assert {n for s in response["sections"] for n in s["citations"]} == set(numbers)
    for citation in response["citations"]:
        assert_verbatim(citation, manual, catalog_text)
    assert "below 8 bar" in next(s["text"] for s in response["sections"] if s["title"] == "4 Operation")
    assert response["answer"].startswith("## 1 Introduction\n\n") and response["verification"] == "ok"


def test_given_titles_a_heading_a_search_and_one_without_evidence(answerer, catalog_text):
    response = answerer.answer({"query": "summarize", "mode": "summary", "documents": ["Remote Work and Equipment Policy"],
                                "dimensions": ["Home office allowance", "Warranty claims for lunar rovers",
                                               "encryption of laptops"]})
    policy = catalog_text["by_file"]["policy.docx"]
    allowance, lunar, security = response["sections"]
    assert "€450" in allowance["text"] and allowance["citations"]
    assert lunar == {"title": "Warranty claims for lunar rovers", "text": NO_EVIDENCE, "sentences": [],
                     "citations": []}
    assert security["citations"] and not markers(lunar["text"])
    cited = {n for s in response["sections"] for n in s["citations"]}
    assert cited == {c["n"] for c in response["citations"]}
    for citation in response["citations"]:
        assert_verbatim(citation, policy, catalog_text)


def test_unknown_ambiguous_or_several_documents_are_clear_errors(answerer):
    with pytest.raises(DocumentReferenceError, match="no active document you may read is named 'the lunar rover manual'") as unknown:
        answerer.answer({"query": "s", "mode": "summary", "documents": ["the lunar rover manual"]})
    assert unknown.value.candidates
    with pytest.raises(DocumentReferenceError, match="ambiguous") as ambiguous:
        answerer.answer({"query": "s", "mode": "summary", "documents": ["2025"]})
    assert {"Acme Corp — Annual Safety Report 2025", "Helios BMS: Q3 2025 Roadmap Review"} <= \
        {c["title"] for c in ambiguous.value.candidates}
    with pytest.raises(AnswerRequestError, match="summary mode takes one document"):
        answerer.answer({"query": "s", "mode": "summary", "documents": ["manual.pdf", "guide.md"]})
    with pytest.raises(DocumentReferenceError, match="needs 'documents'"):
        answerer.answer({"query": "s", "mode": "summary"})
