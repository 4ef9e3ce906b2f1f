"""RemoteTextEmbedder against a real local HTTP server (tests/model_server.py): request shape,
batching, bounded concurrency, retries, timeouts, bearer key, normalization, usage, probe check.

The server's vectors here are cheap hashed bags of words (no model); the golden comparison
with real MiniLM vectors is tests/search/test_remote_golden.py."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kb_ray.config import EmbeddingSettings, load_config
from kb_ray.embedding import TextEmbedder, embedder_fingerprint
from kb_ray.embedding.probe import PROBE_TEXT, PROBE_TOLERANCE, ProbeMismatchError, probe_difference
from kb_ray.embedding.remote import RemoteEmbeddingError, RemoteTextEmbedder
from kb_ray.errors import ConfigError, KbRayError
from tests.model_server import bag_of_words, serve_models

DIM = 16
MODEL = "kb-ray/test-embedder"


def shuffled_model(texts: list[str]) -> np.ndarray:
    """Another model under the same name: the same words land on other dimensions."""
    return bag_of_words(texts)[:, ::-1].copy()


@pytest.fixture
def server():
    with serve_models(model=MODEL, embed=bag_of_words) as running:
        yield running


def settings(server, tmp_path, **changes) -> EmbeddingSettings:
    values = {"runtime": "remote", "endpoint": server.base_url, "model_id": MODEL, "cache_dir": str(tmp_path / "cache"),
              "retries": 2, "timeout_s": 5.0, **changes}
    return EmbeddingSettings(**values)


def test_from_settings_builds_a_remote_embedder_with_a_settings_fingerprint(server, tmp_path):
    s = settings(server, tmp_path)
    embedder = TextEmbedder.from_settings(s)
    assert isinstance(embedder, RemoteTextEmbedder) and embedder.dim == DIM
    assert embedder.fingerprint == embedder_fingerprint(s)  # what the ingest driver checks, no request
    assert embedder_fingerprint(s.model_copy(update={"dimensions": 8})) != embedder.fingerprint
    assert embedder_fingerprint(s.model_copy(update={"normalize": False})) != embedder.fingerprint
    assert embedder_fingerprint(s.model_copy(update={"model_id": "other"})) != embedder.fingerprint
    assert embedder_fingerprint(s.model_copy(update={"endpoint": "http://elsewhere/v1"})) == embedder.fingerprint
    assert embedder_fingerprint(EmbeddingSettings()) != embedder.fingerprint
    body = server.bodies("/v1/embeddings")[0]
    assert body == {"model": MODEL, "input": [PROBE_TEXT]}  # the probe, no `dimensions` unless set


def test_vectors_are_in_input_order_and_normalized_client_side(server, tmp_path):
    texts = [f"text number {i} about pumps" if i % 3 else f"seal kit {i}" for i in range(10)]
    embedder = TextEmbedder.from_settings(settings(server, tmp_path, batch_size=3))
    vectors = embedder.embed_texts(texts)
    expected = bag_of_words(texts)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)  # the server answers data reversed
    raw = TextEmbedder.from_settings(settings(server, tmp_path / "raw", normalize=False)).embed_texts(texts)
    np.testing.assert_allclose(raw, bag_of_words(texts), atol=1e-5)
    np.testing.assert_allclose(embedder.embed_query("seal kit 3"), expected[3], atol=1e-6)


def test_batches_are_at_most_batch_size_and_concurrency_is_bounded(server, tmp_path):
    embedder = TextEmbedder.from_settings(settings(server, tmp_path, batch_size=4, max_concurrency=2))
    server.set(delay_s=0.2)
    server.max_in_flight = 0
    started = time.perf_counter()
    embedder.embed_texts([f"chunk {i}" for i in range(23)])
    seconds = time.perf_counter() - started
    sizes = [len(body["input"]) for body in server.bodies("/v1/embeddings")[1:]]  # after the probe
    assert sizes == [4, 4, 4, 4, 4, 3]
    assert server.max_in_flight == 2  # 6 requests, 2 at a time
    assert seconds >= 3 * 0.2  # at least three rounds of two


def test_dimensions_are_sent_and_a_server_that_ignores_them_is_refused(server, tmp_path):
    embedder = TextEmbedder.from_settings(settings(server, tmp_path, dimensions=8))
    assert embedder.dim == 8 and server.bodies("/v1/embeddings")[-1]["dimensions"] == 8
    with pytest.raises(KbRayError, match="embedding.dimensions=32 .* answered vectors of 16"):
        TextEmbedder.from_settings(settings(server, tmp_path, dimensions=32))


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_are_retried_then_succeed_and_counted(server, tmp_path, status):
    embedder = TextEmbedder.from_settings(settings(server, tmp_path, batch_size=2))
    server.set(fail_times=2, fail_status=status)
    vectors = embedder.embed_texts(["a b", "c d", "e f"])
    assert vectors.shape == (3, DIM)
    statuses = [r.status for r in server.requests[1:]]
    assert statuses.count(status) == 2 and statuses.count(200) == 2
    assert embedder.usage == {"requests": 3, "texts": 4, "prompt_tokens": 6 + len(PROBE_TEXT.split()), "retries": 2}


def test_retries_spent_raise_a_clear_error_with_the_reason(server, tmp_path):
    embedder = TextEmbedder.from_settings(settings(server, tmp_path, retries=1))
    server.set(fail_times=5, fail_status=503)
    with pytest.raises(RemoteEmbeddingError, match=r"\(http_5xx\): HTTP 503 after 2 attempt") as caught:
        embedder.embed_texts(["x"])
    assert caught.value.reason == "http_5xx"
    server.set(fail_times=1, fail_status=400)  # a client error is not retried
    with pytest.raises(RemoteEmbeddingError) as caught:
        embedder.embed_texts(["x"])
    assert caught.value.reason == "http_4xx" and server.requests[-1].status == 400


def test_a_timeout_is_retried_then_a_timeout_error_not_a_hang(server, tmp_path):
    embedder = TextEmbedder.from_settings(settings(server, tmp_path, timeout_s=0.3, retries=1))
    server.set(delay_s=1.5)
    started = time.perf_counter()
    with pytest.raises(RemoteEmbeddingError, match=r"\(timeout\): no answer from .*/embeddings within 0.3s "
                                                   r"\(attempt 2\)") as caught:
        embedder.embed_texts(["slow"])
    assert caught.value.reason == "timeout" and time.perf_counter() - started < 2.5  # 2 x 0.3 s + 0.25 s backoff
    assert len(server.bodies("/v1/embeddings")) == 1 + 2 and embedder.usage["retries"] == 1
    server.set(delay_s=0.0)


def test_a_server_that_is_down_is_a_connect_error(tmp_path):
    with serve_models(model=MODEL, embed=bag_of_words) as running:
        url = running.base_url
    with pytest.raises(RemoteEmbeddingError) as caught:
        TextEmbedder.from_settings(EmbeddingSettings(runtime="remote", endpoint=url, model_id=MODEL, retries=1,
                                                     cache_dir=str(tmp_path)))
    assert caught.value.reason == "connect"


def test_bearer_key_comes_from_the_named_environment_variable(server, tmp_path, monkeypatch):
    server.set(api_key="s3cret")
    with pytest.raises(KbRayError, match="embedding.api_key_env names 'KB_TEST_EMBED_KEY' but .* not set"):
        TextEmbedder.from_settings(settings(server, tmp_path, api_key_env="KB_TEST_EMBED_KEY"))
    with pytest.raises(RemoteEmbeddingError, match="HTTP 401"):
        TextEmbedder.from_settings(settings(server, tmp_path))  # no key sent
    monkeypatch.setenv("KB_TEST_EMBED_KEY", "s3cret")
    TextEmbedder.from_settings(settings(server, tmp_path, api_key_env="KB_TEST_EMBED_KEY")).embed_texts(["ok"])
    assert server.requests[-1].authorization == "Bearer s3cret" and server.requests[-1].status == 200


def test_a_changed_model_under_the_same_name_fails_the_probe_check(server, tmp_path):
    s = settings(server, tmp_path)
    first = TextEmbedder.from_settings(s)
    assert (tmp_path / "cache" / "remote-probes" / f"{first.fingerprint}.json").is_file()
    TextEmbedder.from_settings(s)  # same server, same vectors: passes (another process reads the record)
    server.set(embed=shuffled_model)
    with pytest.raises(ProbeMismatchError, match=r"serves 'kb-ray/test-embedder' with other vectors.*\|cos - 1\|"):
        TextEmbedder.from_settings(s)
    TextEmbedder.from_settings(s.model_copy(update={"model_id": MODEL, "cache_dir": str(tmp_path / "other")}))


def test_probe_tolerance_admits_fp16_noise_and_refuses_int8_sized_changes():
    rng = np.random.default_rng(0)
    recorded = rng.standard_normal(384).astype(np.float32)
    recorded /= np.linalg.norm(recorded)
    fp16 = recorded.astype(np.float16).astype(np.float32)
    assert probe_difference(recorded, fp16) is None
    noisy = recorded + rng.standard_normal(384).astype(np.float32) * 0.01  # |cos - 1| about 2e-2
    assert "tolerance" in probe_difference(recorded, noisy)
    assert "length changed" in probe_difference(recorded, recorded * (1 + 3 * PROBE_TOLERANCE))
    assert "dimensions" in probe_difference(recorded, recorded[:100])


def test_remote_settings_are_validated_when_the_config_loads(tmp_path):
    with pytest.raises(ConfigError, match="runtime=remote needs embedding.endpoint"):
        load_config(overrides=["embedding.runtime=remote"])
    config = load_config(overrides=["embedding.runtime=remote", "embedding.endpoint=http://tei:8080/v1",
                                    "embedding.dimensions=256", "embedding.api_key_env=EMBED_KEY"])
    assert config.embedding.dimensions == 256 and "EMBED_KEY" in str(config.redacted())
    with pytest.raises(KbRayError, match="no local model"):
        TextEmbedder(runtime="remote")
