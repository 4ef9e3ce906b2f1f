"""The ``openai`` generator through the Answerer, against a real local OpenAI-compatible HTTP
server (tests/enrich/openai_server.py) with scripted chat replies, over search hits of a real
golden document (tests/answer/generator_fixtures.py). Passages: [1] the treasurer's report,
[2] water and irrigation, [3] the waiting list of golden/sources/notes.txt."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from kb_ray.answer.answerer import Answerer
from kb_ray.answer.generators import make_generator
from kb_ray.answer.generators.openai import OpenAIGenerator
from kb_ray.answer.pack import evidence_pack
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError
from tests.answer.generator_fixtures import TITLE, FakeSearch, notes_hits
from tests.enrich.openai_server import serve_openai

MODEL = "kb-ray/test-llm"
QUESTION = "How many names are on the garden's waiting list?"
GOOD = "The waiting list now has 23 names [3]."
SETTINGS = AnswerSettings()
PASSAGES = evidence_pack(hits=notes_hits(), settings=SETTINGS)


def openai_settings(server, **overrides) -> AnswerSettings:
    return AnswerSettings(generator="openai", endpoint=server.base_url, model_id=MODEL, **overrides)


def make_openai(server, **overrides) -> OpenAIGenerator:
    return make_generator(openai_settings(server, **overrides))


def ask(server, **overrides) -> dict:
    settings = openai_settings(server, **overrides)
    answerer = Answerer(settings, generator=make_generator(settings), search=FakeSearch(notes_hits()))
    return answerer.answer({"query": QUESTION})


def problems(response: dict) -> list[str | None]:
    return [s["problem"] for s in response["sentences"]]


# --- through the Answerer ----------------------------------------------------------------------


def test_a_correctly_cited_reply_is_supported_and_cites_the_given_passage():
    with serve_openai(model=MODEL, chat_replies=[GOOD]) as server:
        response = ask(server)
        [body] = server.chat_requests()
    assert response["answer"] == GOOD and response["verification"] == "ok" and not response["abstained"]
    assert [(s["citations"], s["supported"]) for s in response["sentences"]] == [([3], True)]
    assert [c["n"] for c in response["citations"]] == [3] and response["citations"][0]["quote"] == PASSAGES[2].quote
    assert response["generator"]["backend"] == "openai" and response["generator"]["model"] == MODEL
    assert len(response["generator"]["fingerprint"]) == 64 and response["repaired"] is False
    assert f"[3] {TITLE}, page 1: Kath reported on the waiting list" in body["messages"][1]["content"]


def test_an_unknown_citation_number_is_repaired_by_the_repair_round():
    with serve_openai(model=MODEL, chat_replies=["The waiting list now has 23 names [7].", GOOD]) as server:
        response = ask(server)
        first, repair = server.chat_requests()
    assert response["answer"] == GOOD and response["verification"] == "repaired" and response["repaired"]
    assert all(s["supported"] for s in response["sentences"]) and [c["n"] for c in response["citations"]] == [3]
    assert [m["role"] for m in repair["messages"]] == ["system", "user", "assistant", "user"]
    assert repair["messages"][:2] == first["messages"]
    assert repair["messages"][2]["content"] == "The waiting list now has 23 names [7]."
    assert ('"The waiting list now has 23 names [7].": unknown_citation: it cites a number that was not given ([7])'
            in repair["messages"][3]["content"])


def test_an_unsupported_citation_stays_flagged_when_the_repair_repeats_it():
    wrong = "The waiting list now has 23 names [1]."  # [1] is the treasurer's report
    with serve_openai(model=MODEL, chat_replies=[wrong, wrong]) as server:
        response = ask(server)
        repair = server.chat_requests()[1]
    assert response["verification"] == "flagged" and response["repaired"] and not response["abstained"]
    assert response["answer"] == wrong and problems(response) == ["unsupported"]
    assert response["sentences"][0]["supported"] is False and response["sentences"][0]["support"] < 0.5
    assert '"The waiting list now has 23 names [1].": unsupported' in repair["messages"][3]["content"]


def test_fail_closed_turns_a_still_unsupported_answer_into_the_refusal():
    wrong = "The waiting list now has 23 names [1]."
    with serve_openai(model=MODEL, chat_replies=[wrong, wrong]) as server:
        response = ask(server, fail_closed=True)
        asked = len(server.chat_requests())
    assert response["answer"] == SETTINGS.refusal and response["abstained"] and response["verification"] == "refused"
    assert response["citations"] == [] and asked == 2


def test_a_timeout_is_an_error_code_and_a_refusal_not_an_exception():
    with serve_openai(model=MODEL, delay_s=2.0, chat_replies=[GOOD]) as server:
        started = time.perf_counter()
        response = ask(server, timeout_s=0.3, retries=2)
        elapsed = time.perf_counter() - started
        attempts = len(server.chat_requests())
    assert response["error"] == "timeout" and response["abstained"] and response["answer"] == SETTINGS.refusal
    assert response["verification"] == "refused" and response["citations"] == [] and response["sentences"] == []
    assert attempts == 1 and elapsed < 1.5  # a timeout is not retried


def test_a_persistent_5xx_is_retried_then_refused():
    with serve_openai(model=MODEL, always_fail=True, chat_replies=[GOOD]) as server:
        response = ask(server, retries=1)
        statuses = [r.status for r in server.requests]
    assert response["error"] == "http_5xx" and response["abstained"] and response["answer"] == SETTINGS.refusal
    assert statuses == [500, 500]


def test_usage_and_cost_add_up_over_the_answer_and_its_repair():
    with serve_openai(model=MODEL, chat_replies=["The waiting list now has 23 names [7].", GOOD]) as server:
        response = ask(server, price_per_1k_prompt_tokens=0.5, price_per_1k_completion_tokens=2.0)
        bodies = server.chat_requests()
    prompt_words = sum(len(m["content"].split()) for body in bodies for m in body["messages"])
    completion_words = 2 * len(GOOD.split())
    assert response["usage"]["prompt_tokens"] == prompt_words
    assert response["usage"]["completion_tokens"] == completion_words
    assert response["usage"]["cost_usd"] == pytest.approx((prompt_words * 0.5 + completion_words * 2.0) / 1000)


def test_the_refusal_sentence_from_the_model_is_an_abstention():
    with serve_openai(model=MODEL, chat_replies=[SETTINGS.refusal]) as server:
        response = ask(server)
    assert response["abstained"] and response["answer"] == SETTINGS.refusal and response["citations"] == []


# --- the generator alone -----------------------------------------------------------------------


def test_generation_records_usage_cost_and_sends_the_sampling_settings():
    with serve_openai(model=MODEL, chat_replies=[GOOD]) as server:
        generator = make_openai(server, price_per_1k_prompt_tokens=0.5, price_per_1k_completion_tokens=2.0,
                                max_new_tokens=99, temperature=0.3)
        result = generator.generate(question=QUESTION, passages=PASSAGES, mode="qa")
        [body] = server.chat_requests()
    words = sum(len(m["content"].split()) for m in body["messages"])
    assert result.error is None and result.text == GOOD
    assert (result.prompt_tokens, result.completion_tokens) == (words, len(GOOD.split()))
    assert result.cost_usd == pytest.approx((words * 0.5 + len(GOOD.split()) * 2.0) / 1000) and result.seconds > 0
    assert (body["model"], body["max_tokens"], body["temperature"]) == (MODEL, 99, 0.3)


def test_bearer_token_comes_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("KB_RAY_TEST_LLM_KEY", "sekret")
    with serve_openai(model=MODEL, api_key="sekret", chat_replies=[GOOD]) as server:
        ok = make_openai(server, api_key_env="KB_RAY_TEST_LLM_KEY").generate(question=QUESTION, passages=PASSAGES,
                                                                            mode="qa")
        refused = make_openai(server, retries=0).generate(question=QUESTION, passages=PASSAGES, mode="qa")
        authorizations = [r.authorization for r in server.requests]
    assert ok.text == GOOD and (refused.text, refused.error) == ("", "http_4xx")
    assert authorizations == ["Bearer sekret", None]


def test_missing_endpoint_model_or_key_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("KB_RAY_TEST_UNSET_KEY", raising=False)
    with pytest.raises(KbRayError, match="answer.endpoint"):
        make_generator(AnswerSettings(generator="openai", model_id=MODEL))
    with pytest.raises(KbRayError, match="answer.model_id"):
        make_generator(AnswerSettings(generator="openai", endpoint="http://127.0.0.1:9/v1"))
    with pytest.raises(KbRayError, match="answer.api_key_env names 'KB_RAY_TEST_UNSET_KEY'"):
        make_generator(AnswerSettings(generator="openai", endpoint="http://127.0.0.1:9/v1", model_id=MODEL,
                                      api_key_env="KB_RAY_TEST_UNSET_KEY"))


def test_server_errors_are_retried_then_succeed():
    with serve_openai(model=MODEL, fail_times=2, chat_replies=[GOOD]) as server:
        result = make_openai(server, retries=2).generate(question=QUESTION, passages=PASSAGES, mode="qa")
        statuses = [r.status for r in server.requests]
    assert result.text == GOOD and statuses == [500, 500, 200]


def test_connection_refused_is_an_error_code():
    with serve_openai(model=MODEL) as server:
        settings = openai_settings(server, retries=1)
    result = make_generator(settings).generate(question=QUESTION, passages=PASSAGES, mode="qa")
    assert (result.text, result.error) == ("", "connect")


def test_an_empty_reply_is_an_empty_answer_error():
    with serve_openai(model=MODEL, chat_replies=["   "]) as server:
        result = make_openai(server).generate(question=QUESTION, passages=PASSAGES, mode="qa")
    assert (result.text, result.error) == ("", "empty_answer") and result.prompt_tokens > 0


def test_concurrency_is_bounded_by_max_concurrency():
    replies = [f"Reply {i} [1]." for i in range(8)]
    with serve_openai(model=MODEL, delay_s=0.3, chat_replies=replies) as server:
        generator = make_openai(server, max_concurrency=2)
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda i: generator.generate(question=f"q{i}", passages=PASSAGES, mode="qa"),
                                    range(8)))
        in_flight = server.max_in_flight
    assert sorted(r.text for r in results) == sorted(replies) and in_flight == 2


def test_429_is_retried_and_other_4xx_are_not():
    with serve_openai(model=MODEL, chat_replies=[GOOD]) as server:
        server.set(fail_times=1, fail_status=429)
        retried = make_openai(server, retries=1).generate(question=QUESTION, passages=PASSAGES, mode="qa")
        server.set(fail_times=1, fail_status=400)
        response = ask(server, retries=3)
        statuses = [r.status for r in server.requests]
    assert retried.text == GOOD and statuses[:2] == [429, 200]
    assert response["error"] == "http_4xx" and response["abstained"] and statuses[2:] == [400]
