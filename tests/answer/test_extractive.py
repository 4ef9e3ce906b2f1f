"""The extractive generator end to end in-process on golden: right document and page,
abstention, citations verbatim against the catalog's canonical text, repair."""

from __future__ import annotations

import pytest

from kb_ray.answer.generators.extractive import ExtractiveGenerator, join_cited
from kb_ray.answer.sections import DocumentReferenceError
from kb_ray.answer.types import Passage, Sentence
from kb_ray.answer.verify import split_sentences
from kb_ray.catalog import DeltaCatalog
from kb_ray.config import AnswerSettings
from tests.answer.modes_fixtures import answerer  # noqa: F401  (pytest fixture)

# (question, golden file, a quote the cited passage holds, its page or None): the keyword
# queries of tests/index_fixtures.py, with the pages golden/queries.jsonl gives for those quotes
ANSWERABLE = [
    ("AquaFlow pump mechanical seal kit part number", "manual.pdf", "AF-SK-118", 3),
    ("total recordable incident rate TRIR in 2025", "headers_footers.pdf", "0.84 (2024: 1.12)", 1),
    ("how many eelgrass shoots were transplanted in Halvik Bay", "two_column.pdf", "38,400", 1),
    ("core hours remote employees must be available", "policy.docx", "between 10:00 and 15:00", None),
    ("ORCHARD_TOKEN environment variable in CI pipelines", "guide.md", "ORCHARD_TOKEN", None),
]
NO_ANSWER = ["Who won the 1998 football world cup?", "What is the boiling point of liquid nitrogen?"]




@pytest.mark.parametrize("question, filename, quote, page", ANSWERABLE)
def test_answers_cite_the_right_document_and_page(answerer, question, filename, quote, page):
    response = answerer.answer({"query": question})
    assert not response["abstained"] and response["verification"] == "ok", response
    assert quote in response["answer"]
    right = [c for c in response["citations"] if c["uri"].endswith(filename) and quote in c["quote"]]
    assert right, response["citations"]
    assert page is None or page in right[0]["pages"]
    assert page is None or all(region["page"] in right[0]["pages"] for region in right[0]["regions"])
    assert all(s["supported"] and s["citations"] for s in response["sentences"])
    assert {c["n"] for c in response["citations"]} == {n for s in response["sentences"] for n in s["citations"]}
    assert response["generator"]["backend"] == "extractive" and len(response["generator"]["fingerprint"]) == 64


@pytest.mark.parametrize("question", NO_ANSWER)
def test_no_answer_questions_abstain(answerer, question):
    response = answerer.answer({"query": question})
    assert response["abstained"] and response["verification"] == "refused"
    assert response["answer"] == AnswerSettings().refusal and response["citations"] == []


def test_qa_over_named_documents_cites_only_them(answerer):
    question = "how are maintenance intervals and inspections scheduled"
    for name in ("manual.pdf", "policy.docx"):
        response = answerer.answer({"query": question, "documents": [name]})
        assert response["citations"] or response["abstained"]
        assert all(c["uri"].endswith(name) for c in response["citations"]), response["citations"]
    within = answerer.answer({"query": ANSWERABLE[0][0], "documents": ["manual.pdf"]})
    assert not within["abstained"] and ANSWERABLE[0][2] in within["answer"]
    elsewhere = answerer.answer({"query": ANSWERABLE[0][0], "documents": ["guide.md"]})
    assert ANSWERABLE[0][2] not in elsewhere["answer"]
    assert all(c["uri"].endswith("guide.md") for c in elsewhere["citations"])
    with pytest.raises(DocumentReferenceError):
        answerer.answer({"query": question, "documents": ["no-such-document.pdf"]})


def test_an_answer_embeds_its_question_once_and_nothing_it_cites(answerer):
    """#38: evidence and sentence choice read the stored passage vectors; verification of
    verbatim sentences needs none (before: the first hits' sentences, then the question with
    the packed sentences, were embedded on every answer)."""
    question = ANSWERABLE[0][0]
    answerer.recorded.clear()
    response = answerer.answer({"query": question})
    assert not response["abstained"] and response["verification"] == "ok"
    assert answerer.recorded == [question]


def test_every_citation_is_the_canonical_text_of_an_active_version(answerer, golden_kb):
    catalog = DeltaCatalog.open(golden_kb, create=False)
    active = set(catalog.read("documents", columns=["active_version_id"]).column(0).to_pylist())
    versions = catalog.read("versions", columns=["version_id", "canonical_text"])
    canonical = dict(zip(versions.column(0).to_pylist(), versions.column(1).to_pylist()))
    checked = 0
    for question, *_ in ANSWERABLE:
        for citation in answerer.answer({"query": question})["citations"]:
            text = canonical[citation["version_id"]]
            assert citation["version_id"] in active
            assert citation["quote"] == "\n".join(text[s:e] for s, e in citation["spans"])
            checked += 1
    assert checked >= len(ANSWERABLE)


def _passage(n: int, quote: str, confidence: float) -> Passage:
    return Passage(n=n, chunk_id=f"c{n}", document_id="d", version_id="v", title=None, uri=None, quote=quote,
                   spans=[(0, len(quote))], pages=[], regions=[], confidence=confidence)


def test_repair_drops_the_flagged_sentence_and_selects_again():
    generator = ExtractiveGenerator(AnswerSettings(max_sentences=1))
    passages = [_passage(1, "The seal kit is AF-SK-118. The impeller is AF-IMP-220B.", 0.9),
                _passage(2, "Order the seal kit AF-SK-118 from the service desk.", 0.8)]
    first = generator.generate(question="seal kit part number", passages=passages, mode="qa").text
    flagged = [Sentence(first, [1], False, 0.1, "unsupported")]
    repaired = generator.repair(question="seal kit part number", passages=passages, mode="qa", answer=first,
                                flagged=flagged).text
    assert first == "The seal kit is AF-SK-118 [1]."
    assert repaired == "Order the seal kit AF-SK-118 from the service desk [2]."
    assert ExtractiveGenerator(AnswerSettings(), abstain_below=0.95).generate(
        question="seal kit", passages=passages, mode="qa").text == AnswerSettings().refusal


def test_composed_sentences_read_back_as_the_same_sentences():
    pieces = [("| Day Pass | $12.00 |", 1), ("The kit is AF-SK-118.", 2), ("ifconfig shows it (see e.g. man 8).", 1)]
    text = join_cited(pieces)
    assert split_sentences(text) == ["| Day Pass | $12.00 | [1]", "The kit is AF-SK-118 [2].",
                                     "ifconfig shows it (see e.g. man 8) [1]."]
