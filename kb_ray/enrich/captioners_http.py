"""``OpenAICompatibleCaptioner``: captions from an OpenAI-compatible chat-completions server.

One ``POST {endpoint}/chat/completions`` per image (a text part with the prompt and an
``image_url`` part with a PNG data URL), up to ``max_concurrency`` in flight on a thread
pool over one :class:`~kb_ray.http_client.ChatCompletionsClient` (shared with the answer
generator): connection errors, HTTP 5xx and 429 are retried ``retries`` times with a short
exponential backoff; a timeout is not retried (the image gets a ``timeout:`` error after
``timeout_s``). Token counts come from the response's ``usage``. Works against
``vllm serve`` and any other OpenAI-compatible server.
"""

from __future__ import annotations

import logging
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
from kb_ray.http_client import ChatCompletionsClient, PostFailure

logger = logging.getLogger(__name__)
_ERROR_PREFIX = {"timeout": "timeout", "connect": "http_error", "http_4xx": "http_error", "http_5xx": "http_error",
                 "bad_json": "model_error"}


class OpenAICompatibleCaptioner(Captioner):
    """Captions images through ``{endpoint}/chat/completions``."""

    def __init__(self, settings: CaptionSettings) -> None:
        super().__init__(settings)
        check_caption_settings(settings)
        self._client = ChatCompletionsClient(endpoint=settings.endpoint, api_key_env=settings.api_key_env,
                                             timeout_s=settings.timeout_s, retries=settings.retries,
                                             max_concurrency=settings.max_concurrency, setting_prefix="captions")
        self.url = self._client.url
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency, thread_name_prefix="caption-http")

    def _caption_images(self, images: list[Any]) -> list[CaptionResult]:
        return list(self._pool.map(self._caption_one, images))

    def _caption_one(self, image: Any) -> CaptionResult:
        started = time.perf_counter()
        body = self._request_body(image)
        answer = self._client.post(body)
        seconds = time.perf_counter() - started
        if isinstance(answer, PostFailure):
            return self._result(error=f"{_ERROR_PREFIX[answer.reason]}: {answer.detail}", seconds=seconds)
        return self._parse_response(answer, seconds=seconds)

    def _request_body(self, image: Any) -> dict[str, Any]:
        return {"model": self.settings.model_id, "messages": chat_messages(prompt=self.settings.prompt, image=image),
                "max_tokens": self.settings.max_new_tokens, "temperature": self.settings.temperature,
                "top_p": self.settings.top_p}

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
