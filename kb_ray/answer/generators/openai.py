"""``OpenAIGenerator``: answers from any OpenAI-compatible ``/chat/completions`` server
(``vllm serve``, a llama.cpp server, a hosted API).

``answer.endpoint`` is the base URL, ``answer.model_id`` the served model name and
``answer.api_key_env`` the environment variable holding the key (sent as a bearer token).
Each call is one ``POST`` through :class:`~kb_ray.http_client.ChatCompletionsClient`
(``timeout_s``; connection errors, 5xx and 429 retried ``retries`` times with backoff), at
most ``max_concurrency`` in flight from one generator. Token counts come from the reply's
``usage``; the cost from ``price_per_1k_prompt_tokens`` / ``price_per_1k_completion_tokens``.
A failed call is ``Generation(text="", error=reason)`` with ``reason`` one of ``timeout``,
``connect``, ``http_4xx``, ``http_5xx``, ``bad_response`` (no ``choices[0].message.content``)
or ``empty_answer``; it never raises.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kb_ray.answer.generators.prompt import ChatGenerator
from kb_ray.answer.types import Generation
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError
from kb_ray.http_client import ChatCompletionsClient, PostFailure

logger = logging.getLogger(__name__)


class OpenAIGenerator(ChatGenerator):
    """Writes answers through ``{answer.endpoint}/chat/completions``."""

    backend = "openai"

    def __init__(self, settings: AnswerSettings) -> None:
        if not settings.endpoint:
            raise KbRayError("answer.generator=openai needs answer.endpoint, the server's base URL "
                             "(e.g. http://vllm:8000/v1)")
        if not settings.model_id:
            raise KbRayError("answer.generator=openai needs answer.model_id, the model name the server serves")
        super().__init__(settings, model=settings.model_id)
        self._client = ChatCompletionsClient(endpoint=settings.endpoint, api_key_env=settings.api_key_env,
                                             timeout_s=settings.timeout_s, retries=settings.retries,
                                             max_concurrency=settings.max_concurrency, setting_prefix="answer")
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)

    def complete(self, messages: list[dict[str, str]]) -> Generation:
        body = {"model": self.model, "messages": messages, "max_tokens": self.settings.max_new_tokens,
                "temperature": self.settings.temperature}
        with self._slots:
            answer = self._client.post(body)
        if isinstance(answer, PostFailure):
            return Generation(text="", error=answer.reason if answer.reason != "bad_json" else "bad_response")
        return _parse_reply(answer)

    def close(self) -> None:
        self._client.close()


def _parse_reply(answer: dict[str, Any]) -> Generation:
    usage = answer.get("usage") or {}
    counts = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
              "completion_tokens": int(usage.get("completion_tokens") or 0)}
    try:
        text = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        logger.warning("chat reply without choices[0].message.content: %s", str(answer)[:200])
        return Generation(text="", error="bad_response", **counts)
    if not isinstance(text, str) or not text.strip():
        return Generation(text="", error="empty_answer", **counts)
    return Generation(text=text, **counts)
