"""Captioners against real components: a local OpenAI-compatible HTTP server and a tiny
random-weight Qwen2-VL built offline (module-scoped)."""

from __future__ import annotations

import importlib.util
import io
import json
import time
from pathlib import Path

import httpx
import pytest
from PIL import Image

from kb_ray.config import CaptionSettings
from kb_ray.enrich.captioners import (
    CaptionResult,
    build_captioner,
    caption_fingerprint,
    encode_png,
    prepare_image,
)
from kb_ray.errors import KbRayError
from tests.enrich.openai_server import CAPTION_WORDS, expected_caption, serve_openai

MODEL = "kb-ray/test-vlm"


def png(width: int, height: int, colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg(width: int, height: int, colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="JPEG")
    return buffer.getvalue()


def http_settings(server, **overrides) -> CaptionSettings:
    return CaptionSettings(backend="openai", endpoint=server.base_url, model_id=MODEL, **overrides)


# --- OpenAI-compatible backend -------------------------------------------------------------


def test_openai_captions_with_usage_and_cost():
    images = [png(120, 80, (255, 0, 0)), jpeg(64, 64, (0, 0, 255)), png(300, 40, (10, 200, 10))]
    with serve_openai(model=MODEL) as server:
        settings = http_settings(server, price_per_1k_prompt_tokens=0.5, price_per_1k_completion_tokens=2.0,
                                 max_new_tokens=77, temperature=0.2, top_p=0.9)
        with build_captioner(settings) as captioner:
            results = captioner.caption(images=images)
        bodies = [request.body for request in server.requests]
    assert [r.text for r in results] == [expected_caption(encode_png(prepare_image(i, max_side=1024))) for i in images]
    assert "A figure (120x80 pixels, mean colour 255,0,0)" in results[0].text and CAPTION_WORDS in results[0].text
    for result in results:
        assert result.error is None and result.prompt_tokens > 0
        assert result.completion_tokens == len(result.text.split())
        expected_cost = (result.prompt_tokens * 0.5 + result.completion_tokens * 2.0) / 1000
        assert result.cost_usd == pytest.approx(expected_cost) and result.seconds > 0
    assert len(bodies) == 3
    assert {(b["model"], b["max_tokens"], b["temperature"], b["top_p"]) for b in bodies} == {(MODEL, 77, 0.2, 0.9)}


def test_openai_downscales_before_sending():
    with serve_openai(model=MODEL) as server, build_captioner(http_settings(server, max_image_side=512)) as captioner:
        [result] = captioner.caption(images=[png(2000, 500)])
    assert result.text.startswith("A figure (512x128 pixels")


def test_openai_sends_bearer_token_from_env(monkeypatch):
    monkeypatch.setenv("KB_RAY_TEST_VLM_KEY", "sekret")
    with serve_openai(model=MODEL, api_key="sekret") as server:
        with build_captioner(http_settings(server, api_key_env="KB_RAY_TEST_VLM_KEY")) as captioner:
            [ok] = captioner.caption(images=[png(40, 40)])
        with build_captioner(http_settings(server, retries=0)) as anonymous:
            [refused] = anonymous.caption(images=[png(40, 40)])
        authorizations = [request.authorization for request in server.requests]
    assert ok.text and refused.error.startswith("http_error: HTTP 401")
    assert authorizations == ["Bearer sekret", None]


def test_openai_api_key_env_must_be_set(monkeypatch):
    monkeypatch.delenv("KB_RAY_TEST_UNSET_KEY", raising=False)
    with pytest.raises(KbRayError, match="KB_RAY_TEST_UNSET_KEY"):
        build_captioner(CaptionSettings(backend="openai", endpoint="http://127.0.0.1:9/v1",
                                        api_key_env="KB_RAY_TEST_UNSET_KEY"))


def test_openai_needs_an_endpoint():
    with pytest.raises(KbRayError, match="captions.endpoint"):
        build_captioner(CaptionSettings(backend="openai"))


def test_openai_retries_server_errors_then_succeeds():
    with serve_openai(model=MODEL, fail_times=2) as server, build_captioner(http_settings(server, retries=2)) as c:
        [result] = c.caption(images=[png(50, 50)])
        statuses = [request.status for request in server.requests]
    assert result.text and statuses == [500, 500, 200]


def test_openai_persistent_500_is_an_error_result_not_an_exception():
    with serve_openai(model=MODEL, always_fail=True) as server, build_captioner(http_settings(server, retries=1)) as c:
        results = c.caption(images=[png(50, 50), png(60, 60)])
        attempts = len(server.requests)
    assert [r.text for r in results] == [None, None] and attempts == 4
    assert all(r.error.startswith("http_error: HTTP 500 after 2 attempt(s)") for r in results)
    assert all(r.cost_usd is None and r.prompt_tokens is None for r in results)


def test_openai_timeout_is_a_quick_error_result_and_not_retried():
    with serve_openai(model=MODEL, delay_s=3.0) as server:
        with build_captioner(http_settings(server, timeout_s=0.3, retries=2)) as captioner:
            started = time.perf_counter()
            [result] = captioner.caption(images=[png(50, 50)])
            elapsed = time.perf_counter() - started
        attempts = len(server.requests)
    assert result.error.startswith("timeout:") and elapsed < 2.0 and attempts == 1


def test_openai_connection_refused_is_an_error_result():
    with serve_openai(model=MODEL) as server:
        endpoint = server.base_url
    with build_captioner(CaptionSettings(backend="openai", endpoint=endpoint, retries=1)) as captioner:
        [result] = captioner.caption(images=[png(30, 30)])
    assert result.error.startswith("http_error: ConnectError after 2 attempt(s)")


def test_openai_concurrent_requests_answer_in_order():
    colours = [(i * 20, 255 - i * 20, 100) for i in range(12)]
    images = [png(40 + i, 30, colour) for i, colour in enumerate(colours)]
    with serve_openai(model=MODEL, delay_s=0.3) as server:
        with build_captioner(http_settings(server, max_concurrency=4)) as captioner:
            started = time.perf_counter()
            results = captioner.caption(images=images)
            elapsed = time.perf_counter() - started
        in_flight = server.max_in_flight
    assert [r.text for r in results] == [expected_caption(image) for image in images]
    assert 2 <= in_flight <= 4 and elapsed < 12 * 0.3 / 2  # one at a time would take 3.6 s


def test_openai_bad_image_fails_alone_and_is_not_sent():
    with serve_openai(model=MODEL) as server, build_captioner(http_settings(server)) as captioner:
        results = captioner.caption(images=[png(20, 20), b"\x89PNG\r\n\x1a\n truncated", png(30, 30)])
        sent = len(server.requests)
    assert results[0].text and results[2].text and sent == 2
    assert results[1].text is None and results[1].error.startswith("bad_image:")


def test_openai_server_rejects_malformed_requests():
    with serve_openai(model=MODEL) as server:
        url = server.base_url + "/chat/completions"
        no_image = {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
        broken = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        not_an_image = {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, broken]}]}
        answers = [httpx.post(url, json=body) for body in (no_image, not_an_image, {"model": "other"})]
    assert [a.status_code for a in answers] == [400, 400, 400]
    assert all(a.json()["error"]["type"] == "invalid_request_error" for a in answers)


# --- transformers backend on the tiny VLM --------------------------------------------------


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> str:
    from kb_ray.enrich.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("models") / "vlm-tiny")


def local_settings(model_path: str, **overrides) -> CaptionSettings:
    values = {"model_path": model_path, "model_id": "kb-ray/tiny-vlm", "max_new_tokens": 8, "batch_size": 2,
              **overrides}
    return CaptionSettings(**values)


@pytest.fixture(scope="module")
def local_captioner(tiny_vlm):
    with build_captioner(local_settings(tiny_vlm, price_per_1k_prompt_tokens=1.0)) as captioner:
        yield captioner


def test_tiny_vlm_is_small_and_names_its_processor(tiny_vlm):
    files = list(Path(tiny_vlm).iterdir())
    assert sum(f.stat().st_size for f in files) < 5 * 2**20
    assert json.loads((Path(tiny_vlm) / "processor_config.json").read_text())["processor_class"] == "Qwen2VLProcessor"


def test_transformers_gives_one_caption_per_image_with_token_counts(local_captioner):
    images = [png(120, 80, (255, 0, 0)), jpeg(64, 64, (0, 0, 255)), png(300, 40, (10, 200, 10))]
    results = local_captioner.caption(images=images)
    assert len(results) == 3
    for result in results:
        assert result.error is None and result.text
        assert result.prompt_tokens > 0 and 0 < result.completion_tokens <= 8
        assert result.cost_usd == pytest.approx(result.prompt_tokens / 1000)


def test_transformers_left_padding_keeps_batched_captions_equal_to_single(local_captioner):
    small, large = png(56, 56, (0, 0, 0)), png(224, 224, (255, 255, 255))
    batched = local_captioner.caption(images=[small, large])
    single = [local_captioner.caption(images=[image])[0] for image in (small, large)]
    assert batched[0].prompt_tokens < batched[1].prompt_tokens  # the batch was padded
    assert [r.text for r in batched] == [r.text for r in single]


def test_transformers_bad_image_fails_alone(local_captioner):
    results = local_captioner.caption(images=[png(50, 50), b"not an image at all", png(60, 60)])
    assert results[0].text and results[2].text
    assert results[1].text is None and results[1].error.startswith("bad_image:")


def test_transformers_image_the_model_rejects_fails_alone(local_captioner):
    results = local_captioner.caption(images=[png(50, 50), png(1, 500), png(60, 60)])  # aspect ratio over 200
    assert results[0].text and results[2].text
    assert results[1].error.startswith("model_error: ValueError") and results[1].cost_usd is None


def test_transformers_downscales_before_the_processor(tiny_vlm, local_captioner):
    small, large = png(56, 56), png(560, 560)
    full = local_captioner.caption(images=[small, large])
    with build_captioner(local_settings(tiny_vlm, max_image_side=56)) as capped:
        downscaled = capped.caption(images=[small, large])
    assert full[0].prompt_tokens < full[1].prompt_tokens
    assert downscaled[0].prompt_tokens == downscaled[1].prompt_tokens == full[0].prompt_tokens


def test_transformers_timeout_marks_cut_off_captions(tiny_vlm):
    with build_captioner(local_settings(tiny_vlm, timeout_s=0.001, max_new_tokens=64)) as captioner:
        results = captioner.caption(images=[png(50, 50), png(70, 50)])
    assert all(r.error.startswith("timeout:") and r.completion_tokens < 64 for r in results)


def test_transformers_sampling_when_temperature_is_positive(tiny_vlm):
    with build_captioner(local_settings(tiny_vlm, temperature=0.8, top_p=0.9)) as captioner:
        [result] = captioner.caption(images=[png(50, 50)])
    assert result.text and result.completion_tokens > 0


def test_transformers_missing_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(KbRayError, match="caption model not found at"):
        build_captioner(local_settings(str(tmp_path / "nowhere")))
    with pytest.raises(KbRayError, match="needs captions.model_path"):
        build_captioner(CaptionSettings(backend="transformers"))


# --- interface ----------------------------------------------------------------------------


def test_fingerprint_follows_what_decides_the_caption_text():
    base = CaptionSettings(backend="openai", endpoint="http://a/v1", model_id="m")
    same = [base.model_copy(update=u) for u in ({"backend": "vllm"}, {"endpoint": "http://b/v1"}, {"batch_size": 1},
                                                {"max_concurrency": 2}, {"device": "cuda"}, {"timeout_s": 5.0})]
    different = [base.model_copy(update=u) for u in ({"prompt": "Say it."}, {"model_id": "n"}, {"temperature": 0.5},
                                                     {"top_p": 0.5}, {"max_new_tokens": 9}, {"max_image_side": 64})]
    assert {caption_fingerprint(s) for s in same} == {caption_fingerprint(base)}
    assert len({caption_fingerprint(s) for s in [base, *different]}) == 1 + len(different)
    with serve_openai(model="m") as server:
        with build_captioner(base.model_copy(update={"endpoint": server.base_url})) as captioner:
            assert captioner.fingerprint == caption_fingerprint(base) and captioner.model == "m"


def test_prepare_image_keeps_aspect_and_limits_the_longer_side():
    assert prepare_image(png(2000, 500), max_side=1024).size == (1024, 256)
    assert prepare_image(png(300, 900), max_side=1024).size == (300, 900)
    with pytest.raises(ValueError, match="not an image format"):
        prepare_image(b"nope", max_side=1024)


def test_caption_result_has_exactly_one_of_text_and_error():
    with pytest.raises(ValueError):
        CaptionResult(text="a", error="b")
    with pytest.raises(ValueError):
        CaptionResult(text=None, error=None)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_vllm_backend_without_vllm_names_the_extra():
    with pytest.raises(KbRayError, match=r"kb-ray\[vlm\]"):
        build_captioner(CaptionSettings(backend="vllm", model_path="/nowhere"))
