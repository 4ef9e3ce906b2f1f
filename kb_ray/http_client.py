"""``ChatCompletionsClient``: one ``POST {endpoint}/chat/completions`` with retries, shared by
the OpenAI-compatible captioner (:mod:`kb_ray.enrich.captioners_http`) and answer generator
(:mod:`kb_ray.answer.generators.openai`).

One ``httpx.Client`` (``max_connections=max_concurrency``, a bearer token from the
environment variable ``api_key_env`` names). Connection errors, HTTP 5xx and 429 are
retried ``retries`` times with a short exponential backoff; a timeout is not retried (the
caller's ``timeout_s`` has already been spent once). A failed call is a
:class:`PostFailure` with a closed ``reason`` code, never an exception.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Literal

from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_BACKOFF_S = 5.0
FailureReason = Literal["timeout", "connect", "http_4xx", "http_5xx", "bad_json"]


@dataclass(frozen=True)
class PostFailure:
    """Why a request gave no JSON answer: ``reason`` (closed set) and a human ``detail``."""

    reason: FailureReason
    detail: str
    status: int | None = None


def auth_headers(api_key_env: str | None, *, setting: str = "api_key_env") -> dict[str, str]:
    """``Authorization: Bearer $KEY`` when ``api_key_env`` names a set variable; ``{}`` when unset."""
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise KbRayError(f"{setting} names {api_key_env!r} but that environment variable is not set; "
                         f"export the API key there or unset {setting}")
    return {"Authorization": f"Bearer {key}"}


class ChatCompletionsClient:
    """Posts JSON bodies to ``{endpoint}/chat/completions``; thread-safe (one shared client)."""

    backoff_s = 0.25  # first retry waits this long, then doubles (capped at MAX_BACKOFF_S)

    def __init__(self, *, endpoint: str, api_key_env: str | None, timeout_s: float, retries: int,
                 max_concurrency: int, setting_prefix: str) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise KbRayError(f"{setting_prefix}: the OpenAI-compatible client needs httpx: pip install httpx") from exc
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.timeout_s = timeout_s
        self.retries = retries
        self._httpx = httpx
        headers = auth_headers(api_key_env, setting=f"{setting_prefix}.api_key_env")
        self._client = httpx.Client(timeout=timeout_s, headers=headers,
                                    limits=httpx.Limits(max_connections=max_concurrency))

    def post(self, body: dict[str, Any]) -> dict[str, Any] | PostFailure:
        """The decoded JSON object, or a :class:`PostFailure` once the retries are spent."""
        attempts = self.retries + 1
        for attempt in range(attempts):
            outcome = self._post_once(body, attempt=attempt + 1)
            if not isinstance(outcome, PostFailure):
                return outcome
            retryable = outcome.reason == "connect" or outcome.status in RETRY_STATUSES
            if not retryable or attempt + 1 == attempts:
                break
            time.sleep(min(self.backoff_s * 2 ** attempt, MAX_BACKOFF_S))
        logger.warning("request to %s failed: %s", self.url, outcome.detail)
        return outcome

    def _post_once(self, body: dict[str, Any], *, attempt: int) -> dict[str, Any] | PostFailure:
        try:
            response = self._client.post(self.url, json=body)
        except self._httpx.TimeoutException:
            return PostFailure("timeout", f"no answer from {self.url} within {self.timeout_s:g}s")
        except self._httpx.TransportError as exc:
            return PostFailure("connect", f"{type(exc).__name__} after {attempt} attempt(s): {exc}")
        if response.status_code >= 400:
            reason = "http_5xx" if response.status_code >= 500 else "http_4xx"
            detail = f"HTTP {response.status_code} after {attempt} attempt(s): {response.text[:200]}"
            return PostFailure(reason, detail, status=response.status_code)
        return _json_object(response)

    def close(self) -> None:
        self._client.close()


def _json_object(response: Any) -> dict[str, Any] | PostFailure:
    try:
        answer = response.json()
    except ValueError:
        return PostFailure("bad_json", f"the answer is not JSON: {response.text[:200]}")
    if not isinstance(answer, dict):
        return PostFailure("bad_json", f"the answer is not a JSON object: {str(answer)[:200]}")
    return answer
