"""``search.tree.llm_navigate`` (kb_ray/search/tree.py): the configured answer generator picks the
branches the tree descent opens, against a real local OpenAI-compatible server with scripted
replies (tests/enrich/openai_server.py); every choice is a step of the descent's trace."""

from __future__ import annotations

import pytest

from kb_ray.config import AnswerSettings
from kb_ray.search import HybridSearcher
from kb_ray.search.errors import SearchRequestError
from kb_ray.search.tree import parse_choice
from tests.enrich.openai_server import serve_openai
from tests.index.test_tree import HashEmbedder
from tests.search.test_tree_search import kb  # noqa: F401 - the fixture

MODEL = "kb-ray/test-llm"
QUERY = "mechanical seal kit replacement hours"


def _navigating(config, server=None, **tree):
    search = config.search.model_copy(update={"tree": config.search.tree.model_copy(
        update={"llm_navigate": True, **tree})})
    answer = (AnswerSettings(generator="openai", endpoint=server.base_url, model_id=MODEL, retries=0)
              if server is not None else config.answer)
    return config.model_copy(update={"search": search, "answer": answer})


def _search(config, **kwargs):
    searcher = HybridSearcher.open(config, embedder=HashEmbedder(), gate_max_age_s=0.0)
    return searcher.search(QUERY, mode="tree", k=3, **kwargs)


def _llm_steps(result):
    return [step for step in result.tree["trace"] if step["step"] == "llm"]


def _after(trace, step):
    return trace[trace.index(step) + 1]


def test_the_branch_the_reply_names_is_opened_first(kb):  # noqa: F811
    config, _ = kb
    with serve_openai(model=MODEL, chat_replies=["Section 2."]) as server:
        result = _search(_navigating(config, server, llm_max_steps=1))
        requests = server.chat_requests()
    assert len(requests) == 1 and requests[0]["model"] == MODEL and requests[0]["max_tokens"] == 16
    prompt = requests[0]["messages"][1]["content"]
    assert prompt.startswith(f"Question: {QUERY}") and "\n1. " in prompt and "\n2. " in prompt
    [step] = _llm_steps(result)
    assert step["fallback"] is None and len(step["offered"]) >= 2
    assert step["chosen"] == [step["offered"][1]]  # not the score order's first
    following = _after(result.tree["trace"], step)
    assert following == {"step": "branch", "node_id": step["offered"][1], "score": following["score"]}
    plain = _search(config)  # off: the score order opens the first offered branch
    assert plain.tree["trace"][0]["node_id"] == step["offered"][0] and not _llm_steps(plain)


def test_an_unparseable_reply_keeps_the_score_order_and_says_so(kb):  # noqa: F811
    config, _ = kb
    with serve_openai(model=MODEL, chat_replies=["I cannot tell which one."]) as server:
        result = _search(_navigating(config, server, llm_max_steps=1))
    [step] = _llm_steps(result)
    assert step["fallback"] == "unparseable" and step["chosen"] == [step["offered"][0]]
    assert _after(result.tree["trace"], step)["node_id"] == step["offered"][0]
    plain = _search(config)
    assert [s for s in result.tree["trace"] if s["step"] != "llm"] == plain.tree["trace"]
    assert [h["chunk_id"] for h in result.hits] == [h["chunk_id"] for h in plain.hits]


def test_a_failed_call_falls_back(kb):  # noqa: F811
    config, _ = kb
    with serve_openai(model=MODEL, always_fail=True) as server:
        result = _search(_navigating(config, server, llm_max_steps=1))
    [step] = _llm_steps(result)
    assert step["fallback"] == "http_5xx" and step["chosen"] == [step["offered"][0]]
    assert result.hits


def test_the_step_budget_holds(kb):  # noqa: F811
    config, _ = kb
    with serve_openai(model=MODEL, chat_replies=["1"] * 10) as server:
        result = _search(_navigating(config, server, llm_max_steps=2, llm_candidates=3))
        asked = len(server.chat_requests())
    steps = _llm_steps(result)
    assert asked == 2 and len(steps) == 2 and all(len(s["offered"]) <= 3 for s in steps)
    assert all(s["fallback"] is None for s in steps)


def test_llm_navigate_without_a_generator_is_refused(kb):  # noqa: F811
    config, _ = kb
    with pytest.raises(SearchRequestError, match="llm_navigate needs a model generator"):
        _search(_navigating(config))


def test_parse_choice():
    assert parse_choice("2", 5, most=2) == [2]
    assert parse_choice("Open 3, then 1.", 5, most=2) == [3, 1]
    assert parse_choice("3, 3, 4, 5", 5, most=2) == [3, 4]
    assert parse_choice("9 or 0", 5, most=2) == []
    assert parse_choice("version 1.2 of it", 5, most=2) == []
    assert parse_choice("", 5, most=2) == []
