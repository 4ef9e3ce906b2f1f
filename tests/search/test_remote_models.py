"""Remote model servers behind the search interfaces, against real local HTTP servers
(tests/model_server.py) whose maths is the packaged MiniLM:

- a golden ingest + build_index + search with ``embedding.runtime=remote`` ranks like the
  local embedder's golden catalog (one remote ingest for the module, through Ray: the embed
  actor and this process each check the probe record);
- a remote reranker reorders hits as its server says, and a failing one keeps the fused
  order with ``reranked: false`` instead of failing the search.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from kb_ray.config import SearchSettings
from kb_ray.embedding.remote import RemoteTextEmbedder
from kb_ray.index import build_index
from kb_ray.search import HybridSearcher
from kb_ray.search.rerank import reranker_from_settings
from kb_ray.search.rerank_remote import RemoteReranker, RerankError
from tests.index_fixtures import GOLDEN_QUERIES, golden_config
from tests.model_server import serve_models

# the tests over the remote-embedded golden catalog (module fixture: a Ray ingest through the model
# server, ~36 s) are slow; the remote embedder and reranker clients are tested without Ray in
# tests/embedding/test_remote_embedder.py and below; make test-cluster (CI) runs them
SLOW_REMOTE_KB = pytest.mark.slow

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def model_server(text_embedder):
    lock = threading.Lock()  # one forward pass at a time on the shared model

    def embed(texts: list[str]) -> np.ndarray:
        with lock:
            return text_embedder.embed_texts(texts)

    with serve_models(model=MODEL, embed=embed, rerank=_by_word_overlap) as server:
        yield server


def _by_word_overlap(query: str, documents: list[str]) -> list[float]:
    """The scripted reranker: the share of query words in the document, then shorter first."""
    words = set(query.lower().split())
    return [len(words & set(d.lower().split())) / len(words) - len(d) * 1e-6 for d in documents]


@pytest.fixture(scope="module")
def remote_kb(tmp_path_factory, model_server, ray_session):
    from kb_ray.ingest.run import run_ingest

    root = tmp_path_factory.mktemp("remote") / "kb"
    config = golden_config(root, "embedding.runtime=remote", f"embedding.endpoint={model_server.base_url}",
                           f"embedding.cache_dir={root.parent / 'cache'}", "embedding.batch_size=16",
                           "embedding.max_concurrency=2", "index.shards=1", "search.evidence=lexical")
    report = run_ingest(config)
    assert report.status == "succeeded", report.to_dict()
    return config, report


@pytest.fixture(scope="module")
def remote_searcher(remote_kb):
    config, _ = remote_kb
    return HybridSearcher.open(config, generation_id=build_index(config).generation_id)


@pytest.fixture(scope="module")
def local_searcher(golden_kb, text_embedder):
    config = golden_config(golden_kb, "index.shards=1", "search.evidence=lexical")  # evidence does not rank
    return HybridSearcher.open(config, generation_id=build_index(config).generation_id, embedder=text_embedder)


def report_fp(config) -> str:
    from kb_ray.embedding import embedder_fingerprint

    return embedder_fingerprint(config.embedding)


@SLOW_REMOTE_KB
def test_remote_ingest_batches_and_records_usage(remote_kb, model_server):
    config, report = remote_kb
    bodies = model_server.bodies("/v1/embeddings")
    assert bodies and all(len(body["input"]) <= 16 and body["model"] == MODEL for body in bodies)
    assert model_server.max_in_flight <= 2  # one embed actor, max_concurrency 2
    counts = report.stages["embed_write"]["counts"]
    assert counts["embed_requests"] >= report.embeddings["computed"] / 16 > 0
    assert counts["embed_prompt_tokens"] > 0 and counts["embed_retries"] == 0
    assert "remote embedding requests" in report.render()
    probes = list((Path(config.embedding.cache_dir) / "remote-probes").glob("*.json"))
    assert [p.stem for p in probes] == [report_fp(config)]  # recorded by the embed actor (a Ray worker)


@SLOW_REMOTE_KB
@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_remote_embedder_ranks_golden_like_the_local_one(remote_searcher, local_searcher, mode):
    assert isinstance(remote_searcher._get_embedder(), RemoteTextEmbedder)
    assert remote_searcher.manifest.embedder_fp != local_searcher.manifest.embedder_fp
    same_top1, overlap = 0, []
    for query, _, _ in GOLDEN_QUERIES:
        remote = [h["text"] for h in remote_searcher.search(query, k=10, mode=mode, rerank=False).hits]
        local = [h["text"] for h in local_searcher.search(query, k=10, mode=mode, rerank=False).hits]
        same_top1 += remote[0] == local[0]
        overlap.append(len(set(remote) & set(local)) / 10)
    print(f"{mode}: top-1 identical {same_top1}/{len(GOLDEN_QUERIES)}, mean top-10 overlap {np.mean(overlap):.3f}")
    assert same_top1 == len(GOLDEN_QUERIES) and min(overlap) >= 0.9


@SLOW_REMOTE_KB
def test_remote_reranker_orders_hits_as_the_server_scores_them(remote_kb, remote_searcher, model_server):
    config, _ = remote_kb
    settings = config.search.model_copy(update={"rerank_endpoint": model_server.base_url, "rerank_model": "ce",
                                                "rerank_candidates": 8})
    reranker = reranker_from_settings(settings)
    assert isinstance(reranker, RemoteReranker)
    searcher = HybridSearcher(config.model_copy(update={"search": settings}), generation_id=remote_searcher.generation,
                              reranker=reranker, embedder=remote_searcher._get_embedder())
    query = "AquaFlow pump seal kit part number"
    result = searcher.search(query, k=5)
    assert result.reranked and result.rerank_error is None
    scores = [h["scores"]["rerank"] for h in result.hits]
    assert [h["ranks"]["rerank"] for h in result.hits] == [1, 2, 3, 4, 5] and scores == sorted(scores, reverse=True)
    assert scores[0] == pytest.approx(max(_by_word_overlap(query, [h["text"] for h in result.hits])))
    body = model_server.bodies("/v1/rerank")[-1]
    assert body["model"] == "ce" and body["query"] == query and len(body["documents"]) == 8


@SLOW_REMOTE_KB
def test_a_failing_reranker_keeps_the_fused_order_not_an_error(remote_kb, remote_searcher, model_server):
    config, _ = remote_kb
    settings = config.search.model_copy(update={"rerank_endpoint": model_server.base_url, "rerank_retries": 1,
                                                "rerank_candidates": 8})
    searcher = HybridSearcher(config.model_copy(update={"search": settings}), generation_id=remote_searcher.generation,
                              reranker=RemoteReranker(settings), embedder=remote_searcher._get_embedder())
    fused = searcher.search("day pass price", k=5, rerank=False)
    model_server.set(fail_times=2, fail_status=503, fail_path="/v1/rerank")
    result = searcher.search("day pass price", k=5)
    assert result.reranked is False and "http_5xx" in result.rerank_error and "HTTP 503 after 2" in result.rerank_error
    assert [h["chunk_id"] for h in result.hits] == [h["chunk_id"] for h in fused.hits]
    assert all(h["ranks"]["rerank"] is None for h in result.hits)
    assert result.to_dict()["rerank_error"] == result.rerank_error and "rerank_error" not in fused.to_dict()
    assert searcher.search("day pass price", k=5).reranked is True  # the server is back


@pytest.mark.parametrize("shape", ["jina", "tei"])
def test_rerank_answer_shapes_and_top_n(model_server, shape):
    model_server.set(rerank_shape=shape)
    try:
        docs = ["pump seal kit", "bike day pass price", "pump"]
        reranker = RemoteReranker(SearchSettings(rerank_endpoint=model_server.base_url))
        assert reranker.score("pump seal", docs) == pytest.approx(_by_word_overlap("pump seal", docs))
        top1 = RemoteReranker(SearchSettings(rerank_endpoint=model_server.base_url, rerank_top_n=1))
        scores = top1.score("pump seal", docs)
        assert scores[0] == pytest.approx(1.0, abs=1e-4) and scores[1] == scores[2] < scores[0]
        assert model_server.bodies("/v1/rerank")[-1]["top_n"] == 1
    finally:
        model_server.set(rerank_shape="jina")


def test_rerank_errors_are_reason_codes_and_many_fail_alone(model_server, monkeypatch):
    settings = SearchSettings(rerank_endpoint=model_server.base_url, rerank_retries=0, rerank_timeout_s=0.3,
                              rerank_api_key_env="KB_TEST_RERANK_KEY")
    monkeypatch.setenv("KB_TEST_RERANK_KEY", "r3rank")
    reranker = RemoteReranker(settings)
    model_server.set(delay_s=1.0)
    with pytest.raises(RerankError, match=r"\(timeout\)") as caught:
        reranker.score("q", ["a"])
    assert caught.value.reason == "timeout" and model_server.requests[-1].authorization == "Bearer r3rank"
    model_server.set(delay_s=0.0, fail_times=1, fail_status=429, fail_path="/v1/rerank")
    outcomes = reranker.score_many([("pump", ["pump", "seal"]), ("pump", ["pump", "seal"])])
    failed = [o for o in outcomes if isinstance(o, RerankError)]
    assert len(failed) == 1 and failed[0].reason == "http_4xx" and "HTTP 429" in failed[0].detail
    assert [o for o in outcomes if o is not failed[0]] == [pytest.approx([1.0 - 4e-6, 0.0 - 4e-6])]
