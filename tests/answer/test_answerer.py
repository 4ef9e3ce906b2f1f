"""The answerer's searches (kb_ray/answer/answerer.py): what they ask of /v1/search."""

from __future__ import annotations

import pytest

from kb_ray.answer.answerer import Answerer
from kb_ray.answer.generators import abstain_threshold, make_generator
from kb_ray.config import AnswerSettings, SearchSettings
from kb_ray.search.confidence import ConfidenceModel, packaged_model_path
from tests.answer.generator_fixtures import FakeSearch, notes_hits


@pytest.mark.parametrize("evidence", ["hybrid", "lexical", None])
def test_the_searches_of_an_answer_ask_for_answer_evidence(evidence):
    """Search defaults to lexical evidence (#12); answers ask for hybrid passages unless told."""
    settings = AnswerSettings(evidence=evidence)
    search = FakeSearch(notes_hits())
    Answerer(settings, generator=make_generator(settings), search=search).answer({"query": "How long is the lease?"})
    assert search.bodies and [body["evidence"] for body in search.bodies] == [evidence] * len(search.bodies)


def test_answers_are_hybrid_by_default_and_abstain_at_that_models_threshold():
    assert AnswerSettings().evidence == "hybrid" and SearchSettings().evidence == "lexical"
    hybrid = ConfidenceModel.load(packaged_model_path("hybrid")).abstain_below
    assert abstain_threshold(SearchSettings(), evidence="hybrid") == hybrid
    assert abstain_threshold(SearchSettings()) == ConfidenceModel.load(packaged_model_path("lexical")).abstain_below
    assert abstain_threshold(SearchSettings(abstain_below=0.3), evidence="hybrid") == 0.3
