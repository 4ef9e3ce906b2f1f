"""``OpenAICompatibleCaptioner``: captions from an OpenAI-compatible chat-completions server.

One ``POST {endpoint}/chat/completions`` per image (a text part with the prompt and an
``image_url`` part with a PNG data URL), up to ``max_concurrency`` in flight on a thread
pool over one ``httpx.Client``. Connection errors, HTTP 5xx and 429 are retried
``retries`` times with a short exponential backoff; a timeout is not retried (the image
gets a ``timeout:`` error after ``timeout_s``). Token counts come from the response's
``usage``. Works against ``vllm serve`` and any other OpenAI-compatible server.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kb_ray.config import CaptionSettings
from kb_ray.enrich.captioners import (
    Captioner,
    CaptionResult,
    chat_messages,
    check_caption_settings,
)
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_MAX_BACKOFF_S = 5.0


class OpenAICompatibleCaptioner(Captioner):
    """Captions images through ``{endpoint}/chat/completions``."""

    backoff_s = 0.25  # first retry waits this long, then doubles (capped at 5 s)

    def __init__(self, settings: CaptionSettings) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise KbRayError("captions.backend=openai needs httpx: pip install httpx") from exc
        super().__init__(settings)
        check_caption_settings(settings)
        self.url = settings.endpoint.rstrip("/") + "/chat/completions"
        self._httpx = httpx
        self._client = httpx.Client(timeout=settings.timeout_s, headers=auth_headers(settings.api_key_env),
                                    limits=httpx.Limits(max_connections=settings.max_concurrency))
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency, thread_name_prefix="caption-http")

    def _caption_images(self, images: list[Any]) -> list[CaptionResult]:
        return list(self._pool.map(self._caption_one, images))

    def _caption_one(self, image: Any) -> CaptionResult:
        started = time.perf_counter()
        body = self._request_body(image)
        answer = self._post_with_retries(body)
        seconds = time.perf_counter() - started
        if isinstance(answer, str):
            return self._result(error=answer, seconds=seconds)
        return self._parse_response(answer, seconds=seconds)

    def _request_body(self, image: Any) -> dict[str, Any]:
        return {"model": self.settings.model_id, "messages": chat_messages(prompt=self.settings.prompt, image=image),
                "max_tokens": self.settings.max_new_tokens, "temperature": self.settings.temperature,
                "top_p": self.settings.top_p}

    def _post_with_retries(self, body: dict[str, Any]) -> dict[str, Any] | str:
        """The decoded JSON answer, or an error string once the retries are spent."""
        attempts = self.settings.retries + 1
        for attempt in range(attempts):
            try:
                response = self._client.post(self.url, json=body)
            except self._httpx.TimeoutException:
                return f"timeout: no answer from {self.url} within {self.settings.timeout_s:g}s"
            except self._httpx.TransportError as exc:
                error = f"http_error: {type(exc).__name__} after {attempt + 1} attempt(s): {exc}"
            else:
                if response.status_code < 400:
                    return _json_or_error(response)
                error = f"http_error: HTTP {response.status_code} after {attempt + 1} attempt(s): {response.text[:200]}"
                if response.status_code not in _RETRY_STATUSES:
                    return error
            if attempt + 1 < attempts:
                time.sleep(min(self.backoff_s * 2 ** attempt, _MAX_BACKOFF_S))
        logger.warning("caption request failed: %s", error)
        return error

    def _parse_response(self, answer: dict[str, Any], *, seconds: float) -> CaptionResult:
        try:
            text = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return self._result(error=f"model_error: no choices[0].message.content in the answer: {str(answer)[:200]}",
                                seconds=seconds)
        usage = answer.get("usage") or {}
        if not isinstance(text, str) or not text.strip():
            return self._result(error="model_error: empty caption", seconds=seconds)
        return self._result(text=text.strip(), prompt_tokens=usage.get("prompt_tokens"),
                            completion_tokens=usage.get("completion_tokens"), seconds=seconds)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()


def auth_headers(api_key_env: str | None) -> dict[str, str]:
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise KbRayError(f"captions.api_key_env names {api_key_env!r} but that environment variable is not set; "
                         "export the API key there or unset captions.api_key_env")
    return {"Authorization": f"Bearer {key}"}


def _json_or_error(response: Any) -> dict[str, Any] | str:
    try:
        answer = response.json()
    except ValueError:
        return f"model_error: the answer is not JSON: {response.text[:200]}"
    return answer if isinstance(answer, dict) else f"model_error: the answer is not a JSON object: {str(answer)[:200]}"
