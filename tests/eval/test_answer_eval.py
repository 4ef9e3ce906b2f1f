"""Answer-eval metrics on a tiny hand-checkable case: a real (synthetic, Ray-free) Delta catalog
whose one document is two chunks, gold quotes resolved against its canonical text.

Canonical text of ``mem://a`` (version ``ver_a``)::

    "common term a part 0 about alpha things\\n\\ncommon term a part 1 about alpha things"
     chunk ch_a_0: [0, 39)                       chunk ch_a_1: [41, 80)
"""

from __future__ import annotations

import pytest

from kb_ray.answer.answerer import Answerer
from kb_ray.answer.generators.extractive import ExtractiveGenerator
from kb_ray.config import AnswerSettings
from kb_ray.eval.answers import GeneratorResult, run_answer_eval, score_answer, summarize_generator
from kb_ray.eval.dataset import EvalQuery
from kb_ray.eval.resolve import CanonicalTexts, resolve_queries
from tests.index_fixtures import SyntheticDoc, write_synthetic_catalog

PART_0, PART_1 = "common term a part 0 about alpha things", "common term a part 1 about alpha things"
ASKS_PART_1 = EvalQuery(id="q1", query="what is part 1 about", kind="factoid", answer="alpha things",
                        relevant=[{"doc": "a", "quote": "part 1 about alpha", "page": 1}])
NO_ANSWER = EvalQuery(id="q0", query="what is the boiling point of gold", kind="factoid", answer="not stated",
                      relevant=[])


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> CanonicalTexts:
    catalog = write_synthetic_catalog(tmp_path_factory.mktemp("answer_eval") / "kb", [SyntheticDoc(key="a", chunks=2)])
    return CanonicalTexts(catalog)


def citation(n: int, part: int, quote: str | None = None) -> dict:
    start = 0 if part == 0 else len(PART_0) + 2
    text = PART_0 if part == 0 else PART_1
    return {"n": n, "chunk_id": f"ch_a_{part}", "document_id": "doc_a", "version_id": "ver_a", "title": "Title a",
            "uri": "mem://a", "quote": quote or text, "spans": [[start, start + len(text)]], "pages": [1], "regions": []}


def response(citations: list[dict], sentences: list[dict], *, abstained: bool = False) -> dict:
    return {"id": "x", "answer": " ".join(s["text"] for s in sentences) or "refused", "abstained": abstained,
            "sentences": sentences, "citations": citations, "verification": "ok", "timings_ms": {"total": 10.0}}


def sentence(text: str, cites: list[int], supported: bool) -> dict:
    return {"text": text, "citations": cites, "supported": supported, "support": 1.0 if supported else 0.1}


def test_citation_recall_is_1_when_a_cited_span_overlaps_the_gold_span_and_0_when_not(texts):
    gold = resolve_queries([ASKS_PART_1], texts).spans["q1"]
    assert [(g.start, g.end) for g in gold] == [(55, 73)]  # inside ch_a_1 [41, 80), outside ch_a_0 [0, 39)
    right = score_answer(ASKS_PART_1, response([citation(1, 1)], [sentence(PART_1 + " [1]", [1], True)]), gold, texts)
    wrong = score_answer(ASKS_PART_1, response([citation(1, 0), citation(2, 0, quote="not the canonical text")],
                                               [sentence(PART_0 + " [1]", [1], True),
                                                sentence("alpha things are made up [2]", [2], False)]), gold, texts)
    assert (right.cites_gold, right.cites_gold_document, right.contains_gold) == (True, True, True)
    assert (wrong.cites_gold, wrong.cites_gold_document, wrong.contains_gold) == (False, True, False)
    # precision: right 1 of 1 marker supported; wrong: [1] supported and verbatim, [2] neither
    assert (right.citations, right.supported_citations) == (1, 1)
    assert (wrong.citations, wrong.supported_citations, wrong.verbatim_citations) == (2, 1, 1)
    refused = score_answer(NO_ANSWER, response([], [], abstained=True), [], texts)
    summary = summarize_generator(GeneratorResult(generator={"name": "hand"}, queries=[right, wrong, refused]))
    assert summary["citation_recall"] == 0.5 and summary["misses"] == ["q1"]
    assert summary["citation_precision"] == pytest.approx(2 / 3)
    assert summary["unsupported_sentence_rate"] == pytest.approx(1 / 3)
    assert summary["abstention_no_answer"] == 1.0 and summary["false_refusal"] == 0.0


def test_the_real_answerer_and_extractive_generator_through_the_answer_eval(texts):
    """The Answerer over hits of the catalog's two chunks (the search is the one scripted part):
    for q1 the extractive answer cites part 1 (recall 1); asked with only part 0 given, it
    cannot cite the gold passage (recall 0); the no-answer question gets no hits and abstains."""
    hits = {part: {"chunk_id": f"ch_a_{part}", "document_id": "doc_a", "version_id": "ver_a", "title": "Title a",
                   "uri": "mem://a", "quote": text, "text": text, "spans": [list(c["spans"][0])], "pages": [1],
                   "regions": [], "confidence": 0.9}
            for part, text, c in ((0, PART_0, citation(1, 0)), (1, PART_1, citation(1, 1)))}

    def search_with(parts: list[int]):
        def search(body: dict) -> dict:
            found = "gold" not in body["query"]
            return {"hits": [hits[p] for p in parts] if found else [], "abstain": not found}
        return search

    settings = AnswerSettings(max_sentences=1)
    answerers = {name: Answerer(settings, generator=ExtractiveGenerator(settings), search=search_with(parts))
                 for name, parts in (("both", [1, 0]), ("part0", [0]))}
    result = run_answer_eval(answerers, [ASKS_PART_1, NO_ANSWER], texts=texts, dataset="hand")
    by_name = {g.generator["name"]: summarize_generator(g) for g in result.generators}
    assert by_name["both"]["citation_recall"] == 1.0 and by_name["part0"]["citation_recall"] == 0.0
    assert by_name["both"]["gold_in_pack"] == 1.0 and by_name["part0"]["gold_in_pack"] == 0.0
    assert by_name["both"]["cites_gold_chunk"] == 1.0 and by_name["part0"]["gold_chunk_in_pack"] == 0.0
    for summary in by_name.values():
        assert summary["abstention_no_answer"] == 1.0 and summary["citation_precision"] == 1.0
        assert summary["verbatim_citations"] == 1.0 and summary["unsupported_sentence_rate"] == 0.0
