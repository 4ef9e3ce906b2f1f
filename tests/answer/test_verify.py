"""Sentence splitting, [n] parsing and support scoring against only the cited passages."""

from __future__ import annotations

import pytest

from kb_ray.answer.types import Passage
from kb_ray.answer.verify import citation_numbers, claim_text, split_sentences, verify_text

PUMP = ("The AF-220 is not self-priming. Fill the volute and the suction pipe with water before the first "
        "start. During normal operation the discharge pressure must remain below 8 bar.")
GRASS = "Between 2019 and 2024 the institute transplanted 38,400 eelgrass shoots into 4.2 hectares of Halvik Bay."
PASSAGES = [Passage(n=i, chunk_id=f"c{i}", document_id=f"d{i}", version_id=f"v{i}", title=None, uri=None,
                    quote=quote, spans=[(0, len(quote))], pages=[1], regions=[])
            for i, quote in enumerate((PUMP, GRASS), start=1)]
THRESHOLD = 0.5


def test_split_keeps_markers_abbreviations_decimals_and_versions_inside_their_sentence():
    text = ("Pressure stays below 8.5 bar, e.g. with firmware 3.5.0 installed [1]. The seal is AF-SK-118. [2] "
            "Both apply [1][2].\n- a list item [1, 2]\nthe end")
    assert split_sentences(text) == [
        "Pressure stays below 8.5 bar, e.g. with firmware 3.5.0 installed [1].",
        "The seal is AF-SK-118. [2]", "Both apply [1][2].", "- a list item [1, 2]", "the end"]


def test_citation_numbers_read_every_marker_form_once():
    assert citation_numbers("A [2] b [1, 3] c [3][4].") == [2, 1, 3, 4]
    assert citation_numbers("no markers here, 2024 [sic]") == []
    assert claim_text("The seal is AF-SK-118 [2].") == "The seal is AF-SK-118."


@pytest.mark.parametrize("embed", [False, True], ids=["lexical", "lexical+minilm"])
def test_verbatim_sentences_are_supported_and_foreign_ones_flagged(embed, text_embedder):
    text = ("The AF-220 is not self-priming [1]. "
            "Between 2019 and 2024 the institute transplanted 38,400 eelgrass shoots into 4.2 hectares of Halvik Bay [2]. "
            "The institute transplanted 38,400 eelgrass shoots [1]. "  # true, but not what passage 1 says
            "Customers may return the bicycle to any docking station in the city [2].")  # in no passage
    sentences = verify_text(text, PASSAGES, threshold=THRESHOLD, embed=text_embedder.embed_texts if embed else None)
    assert [s.supported for s in sentences] == [True, True, False, False], [(s.text, s.support) for s in sentences]
    assert all(s.problem == "unsupported" for s in sentences[2:])
    assert min(s.support for s in sentences[:2]) > max(s.support for s in sentences[2:])


def test_a_number_no_cited_passage_holds_is_unsupported_even_with_every_word_present():
    sentences = verify_text("During normal operation the discharge pressure must remain below 9 bar [1]. "
                            "The institute transplanted 38400 eelgrass shoots [2].", PASSAGES, threshold=THRESHOLD)
    assert (sentences[0].supported, sentences[0].support) == (False, 0.0)
    assert sentences[1].supported  # 38400 and 38,400 are the same number


def test_missing_and_unknown_citations_are_flagged():
    sentences = verify_text("The AF-220 is not self-priming. The AF-220 is not self-priming [7].", PASSAGES,
                            threshold=THRESHOLD)
    assert [(s.supported, s.problem) for s in sentences] == [(False, "no_citation"), (False, "unknown_citation")]
