"""The Serve app with a remote reranker (``search.rerank_endpoint``) over real HTTP: the
RerankerDeployment calls a real local rerank server (tests/model_server.py); when that
server fails, ``/v1/search`` still answers 200 in the fused order with ``reranked: false``."""

from __future__ import annotations

import socket

import httpx
import pytest

from kb_ray.index import build_index
from kb_ray.serving.app import start_service, stop_service
from tests.index_fixtures import copy_kb, golden_config
from tests.model_server import serve_models

# a Serve app of its own (~100 s to start on the shared 2-core box, like tests/serving/test_auth.py):
# `make test-cluster` runs it; the in-process fallback is tests/search/test_remote_models.py (default run)
pytestmark = pytest.mark.slow
QUERY = "CycleLink day pass price"


def _overlap(query: str, documents: list[str]) -> list[float]:
    words = set(query.lower().split())
    return [len(words & set(d.lower().split())) / len(words) - len(d) * 1e-6 for d in documents]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def service(golden_kb, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-remote-rerank")
    kb_root = copy_kb(golden_kb, root / "kb")
    port = _free_port()
    with serve_models(model="unused", rerank=_overlap) as server:
        config = golden_config(kb_root, f"search.rerank_endpoint={server.base_url}", "search.rerank_model=ce",
                               "search.rerank_retries=0", "search.rerank_candidates=10", "embedding.num_threads=1")
        build_index(config)
        start_service(config, port=port)
        try:
            yield f"http://127.0.0.1:{port}", server
        finally:
            stop_service()


def search(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/search", json=body, timeout=60)


def test_the_remote_reranker_orders_the_hits(service):
    url, server = service
    assert httpx.get(f"{url}/healthz", timeout=30).json()["reranker"] is True
    response = search(url, query=QUERY, k=5)
    assert response.status_code == 200
    result = response.json()
    assert result["reranked"] is True and "rerank_error" not in result
    assert [hit["ranks"]["rerank"] for hit in result["hits"]] == [1, 2, 3, 4, 5]
    scores = [hit["score"] for hit in result["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == pytest.approx(max(_overlap(QUERY, [hit["text"] for hit in result["hits"]])))
    body = server.bodies("/v1/rerank")[-1]
    assert body["model"] == "ce" and body["query"] == QUERY and len(body["documents"]) == 10


def test_a_failing_rerank_server_gives_the_fused_order_not_a_500(service):
    url, server = service
    fused = search(url, query=QUERY, k=5, rerank=False).json()
    server.set(fail_times=100, fail_status=503, fail_path="/v1/rerank")
    try:
        response = search(url, query=QUERY, k=5)
    finally:
        server.set(fail_times=0)
    assert response.status_code == 200
    result = response.json()
    assert result["reranked"] is False and "http_5xx" in result["rerank_error"] and result["k"] == 5
    assert [hit["chunk_id"] for hit in result["hits"]] == [hit["chunk_id"] for hit in fused["hits"]]
    assert search(url, query=QUERY, k=5).json()["reranked"] is True  # back once the server is
