"""``JsonPostClient``: one ``POST {endpoint}{route}`` of a JSON body with retries, shared by every
model server kb-ray talks to over HTTP: ``ChatCompletionsClient`` (``/chat/completions``) for
the OpenAI-compatible captioner (:mod:`kb_ray.enrich.captioners_http`) and answer generator
(:mod:`kb_ray.answer.generators.openai`), ``/embeddings`` for the remote text embedder
(:mod:`kb_ray.embedding.remote`) and ``/rerank`` for the remote reranker
(:mod:`kb_ray.search.rerank_remote`).

One ``httpx.Client`` (``max_connections=max_concurrency``, a bearer token from the
environment variable ``api_key_env`` names). Connection errors, HTTP 5xx and 429 are
retried ``retries`` times with a short exponential backoff (a 429's ``Retry-After`` in seconds
is honoured up to :data:`MAX_BACKOFF_S`); a timeout is not retried (the
caller's ``timeout_s`` has already been spent once) unless the client was made with
``retry_timeouts`` (the remote embedder's). A failed call is a
:class:`PostFailure` with a closed ``reason`` code, never an exception.
"""

from __future__ import annotations

import logging
import os
import threading
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
    retry_after_s: float | None = None  # a 429's or 503's Retry-After, in seconds


def auth_headers(api_key_env: str | None, *, setting: str = "api_key_env") -> dict[str, str]:
    """``Authorization: Bearer $KEY`` when ``api_key_env`` names a set variable; ``{}`` when unset."""
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise KbRayError(f"{setting} names {api_key_env!r} but that environment variable is not set; "
                         f"export the API key there or unset {setting}")
    return {"Authorization": f"Bearer {key}"}


class RemoteCallError(KbRayError):
    """A model server gave no usable answer: ``reason`` is a transport code (:class:`PostFailure`)
    or ``bad_response`` (JSON of the wrong shape), ``detail`` says more. Subclasses name the call."""

    call = "remote call"

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{self.call} failed ({reason}): {detail}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # picklable across Ray workers
        return type(self), (self.reason, self.detail)


class JsonPostClient:
    """Posts JSON bodies to ``{endpoint}{route}``; thread-safe (one shared client).

    ``answer_types``: the JSON types a successful answer may have (an object; TEI's ``/rerank``
    answers a bare list). ``retry_timeouts``: retry a timed-out request too (the embedder in a
    batch ingest, where one slow answer would otherwise fail a whole micro-batch); by default a
    timeout is final. ``retried`` counts the retries made so far (usage statistics)."""

    backoff_s = 0.25  # first retry waits this long, then doubles (capped at MAX_BACKOFF_S)

    def __init__(self, *, endpoint: str, route: str, api_key_env: str | None, timeout_s: float, retries: int,
                 max_concurrency: int, setting_prefix: str, answer_types: tuple[type, ...] = (dict,),
                 retry_timeouts: bool = False) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise KbRayError(f"{setting_prefix}: the HTTP model client needs httpx: pip install httpx") from exc
        self.url = endpoint.rstrip("/") + route
        self.timeout_s = timeout_s
        self.retries = retries
        self.retried = 0
        self._count_lock = threading.Lock()
        self.answer_types = answer_types
        self.retry_timeouts = retry_timeouts
        self._httpx = httpx
        headers = auth_headers(api_key_env, setting=f"{setting_prefix}.api_key_env")
        self._client = httpx.Client(timeout=timeout_s, headers=headers,
                                    limits=httpx.Limits(max_connections=max_concurrency))

    def post(self, body: dict[str, Any]) -> Any:
        """The decoded JSON answer, or a :class:`PostFailure` once the retries are spent."""
        attempts = self.retries + 1
        for attempt in range(attempts):
            outcome = self._post_once(body, attempt=attempt + 1)
            if not isinstance(outcome, PostFailure):
                return outcome
            retryable = (outcome.reason == "connect" or outcome.status in RETRY_STATUSES
                         or (outcome.reason == "timeout" and self.retry_timeouts))
            if not retryable or attempt + 1 == attempts:
                break
            with self._count_lock:
                self.retried += 1
            wait = outcome.retry_after_s if outcome.retry_after_s is not None else self.backoff_s * 2 ** attempt
            time.sleep(min(wait, MAX_BACKOFF_S))
        logger.warning("request to %s failed: %s", self.url, outcome.detail)
        return outcome

    def _post_once(self, body: dict[str, Any], *, attempt: int) -> Any:
        try:
            response = self._client.post(self.url, json=body)
        except self._httpx.TimeoutException:
            return PostFailure("timeout", f"no answer from {self.url} within {self.timeout_s:g}s "
                                          f"(attempt {attempt})")
        except self._httpx.TransportError as exc:
            return PostFailure("connect", f"{type(exc).__name__} after {attempt} attempt(s): {exc}")
        if response.status_code >= 400:
            reason = "http_5xx" if response.status_code >= 500 else "http_4xx"
            detail = f"HTTP {response.status_code} after {attempt} attempt(s): {response.text[:200]}"
            return PostFailure(reason, detail, status=response.status_code,
                               retry_after_s=_retry_after(response.headers.get("Retry-After")))
        return _json_answer(response, self.answer_types)

    def close(self) -> None:
        self._client.close()


class ChatCompletionsClient(JsonPostClient):
    """``POST {endpoint}/chat/completions`` (answers are JSON objects)."""

    def __init__(self, *, endpoint: str, api_key_env: str | None, timeout_s: float, retries: int,
                 max_concurrency: int, setting_prefix: str) -> None:
        super().__init__(endpoint=endpoint, route="/chat/completions", api_key_env=api_key_env, timeout_s=timeout_s,
                         retries=retries, max_concurrency=max_concurrency, setting_prefix=setting_prefix)


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` given in seconds (an HTTP date is ignored: the backoff applies)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _json_answer(response: Any, answer_types: tuple[type, ...]) -> Any:
    try:
        answer = response.json()
    except ValueError:
        return PostFailure("bad_json", f"the answer is not JSON: {response.text[:200]}")
    if not isinstance(answer, answer_types):
        kinds = " or ".join("a JSON object" if t is dict else "a JSON list" for t in answer_types)
        return PostFailure("bad_json", f"the answer is not {kinds}: {str(answer)[:200]}")
    return answer
