"""Ray-free checks of the ingress guards, the dead-replica retry and the load driver's figures."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from ray.exceptions import ActorDiedError

from kb_ray.serving.api import SearchRequest
from kb_ray.serving.deployments import call_once_more_if_replica_died
from kb_ray.serving.edge_limits import BodyGuard, BodyRules, EdgePolicy
from kb_ray.serving.http_guards import MAX_JSON_DEPTH, add_error_handlers, deeper_than, lone_surrogate_path
from kb_ray.serving.loadtest import LoadResult, RequestRecord, search_mix


@pytest.fixture(scope="module")
def client():
    app = FastAPI()
    app.add_middleware(BodyGuard, policy=EdgePolicy(BodyRules(max_bytes=250_000)))
    add_error_handlers(app)

    @app.post("/echo")
    async def echo(request: SearchRequest) -> dict:
        return {"query": request.query}

    return TestClient(app)


def test_a_streamed_body_over_the_limit_is_413_and_one_under_it_passes(client):
    assert client.post("/echo", content=iter([b" " * 150_000, b" " * 150_000])).status_code == 413
    assert client.post("/echo", content=b"x" * 250_001).json()["detail"].startswith("request body of 250001 bytes")
    assert client.post("/echo", json={"query": "pump"}).json() == {"query": "pump"}


@pytest.mark.parametrize("body", [b'{"query": "pump", "k": NaN}', b'{"query": "pump \\ud800"}',
                                  b'{"query": "pump", "k": Infinity, "\\udc00": 1}'])
def test_bodies_whose_echo_cannot_be_json_encoded_are_422_not_500(client, body):
    response = client.post("/echo", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"][0]["msg"]
    assert "input" not in response.json()["detail"][0]


def _nested(levels: int) -> bytes:
    return b'{"query": "pump", "filter": {"metadata": ' + b"[" * levels + b"]" * levels + b"}}"


def test_a_body_that_is_not_utf8_or_nested_too_deep_is_400_saying_which(client):
    """FastAPI says only "There was an error parsing the body" for both (issue #37, point 8)."""
    headers = {"content-type": "application/json"}
    not_utf8 = client.post("/echo", content=b'{"query": "pump \xff\xfe"}', headers=headers)
    assert not_utf8.status_code == 400
    assert not_utf8.json()["detail"].startswith("the request body is not valid UTF-8 (byte 0xff at offset 16)")
    limit = f"nested more than {MAX_JSON_DEPTH} levels deep"
    # the body and filter objects are 2 levels: MAX_JSON_DEPTH - 2 lists in them is the deepest body taken
    assert client.post("/echo", content=_nested(MAX_JSON_DEPTH - 2), headers=headers).status_code == 200
    for levels in (MAX_JSON_DEPTH - 1, 5_000):  # parsed, then refused by the model; Python's parser gives up
        response = client.post("/echo", content=_nested(levels), headers=headers)
        assert response.status_code == 400 and limit in response.json()["detail"], (levels, response.text)
    assert client.post("/echo", content=b"[" * 100_000 + b"]" * 100_000, headers=headers).json()["detail"] == \
        client.post("/echo", content=_nested(40), headers=headers).json()["detail"]


def test_nesting_depth_counts_arrays_and_objects():
    assert not deeper_than({"query": "x"}, 1) and deeper_than({"a": {}}, 1) and not deeper_than({"a": {}}, 2)
    assert not deeper_than("text", 0) and deeper_than([[[]]], 2) and not deeper_than([[[]]], 3)


def test_lone_surrogates_are_found_wherever_they_are():
    assert lone_surrogate_path({"query": "ok", "filter": {"tags_any": ["a", "\ud800"]}}) == "filter.tags_any[1]"
    assert lone_surrogate_path({"filter": {"\udfff": "x"}}) == "filter"
    assert lone_surrogate_path({"query": "déjà vu 😀", "filter": {"mime": ["text/plain"]}}) is None
    deep: list = []
    for _ in range(5000):  # deeper than the recursion limit: the walk is iterative
        deep = [deep]
    assert lone_surrogate_path({"metadata": deep}) is None


class _DiesOnce:
    def __init__(self, error: Exception, failures: int = 1) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    def remote(self, *args):
        self.calls += 1
        failed = self.calls <= self.failures

        async def reply():
            if failed:
                raise self.error
            return args

        return reply()


def test_a_request_whose_replica_died_is_sent_once_more_and_only_once():
    method = _DiesOnce(ActorDiedError())
    assert asyncio.run(call_once_more_if_replica_died(method, "q", 1)) == ("q", 1) and method.calls == 2
    twice = _DiesOnce(ActorDiedError(), failures=2)
    with pytest.raises(ActorDiedError):
        asyncio.run(call_once_more_if_replica_died(twice, "q"))
    other = _DiesOnce(ValueError("bad request"))
    with pytest.raises(ValueError):
        asyncio.run(call_once_more_if_replica_died(other, "q"))
    assert twice.calls == 2 and other.calls == 1


def test_load_figures_cover_the_requested_window():
    records = [RequestRecord(started_s=t, latency_ms=ms, status=s, error=None if s == 200 else e, mode="dense",
                             client=0)
               for t, ms, s, e in [(0.5, 10, 200, None), (1.5, 20, 200, None), (2.5, 1000, None, "ReadTimeout"),
                                   (3.5, 30, 500, "http_500"), (4.5, 40, 200, None)]]
    result = LoadResult(clients=1, seconds=5.0, began=0.0, records=records)
    whole = result.stats()
    assert (whole.requests, whole.errors, whole.qps) == (5, 2, 0.6)
    assert whole.errors_by_kind == {"ReadTimeout": 1, "http_500": 1} and whole.p50_ms == 20
    late = result.stats(start_s=4.0)
    assert (late.requests, late.errors, late.p99_ms) == (1, 0, 40)
    assert result.stats(start_s=9.0).p50_ms is None


def test_the_search_mix_cycles_modes_and_filters():
    bodies = search_mix(queries=[f"q{i}" for i in range(6)], modes=("dense", "lexical"), filters=(None, {"mime": "x"}))
    assert [b["mode"] for b in bodies] == ["dense", "lexical"] * 3
    assert ["filter" in b for b in bodies] == [False, True] * 3
    with pytest.raises(ValueError):
        search_mix(queries=[])
