"""A small, real OpenAI-compatible chat-completions server for tests (stdlib only).

API::

    with serve_openai(model="kb-ray/test-vlm", api_key=None, fail_times=0, always_fail=False,
                      delay_s=0.0) as server:
        server.base_url      # "http://127.0.0.1:PORT/v1" -> captions.endpoint
        server.requests      # list[RecordedRequest]: body, authorization header, status answered
        server.max_in_flight # most requests handled at the same time so far
        server.set(fail_times=2)   # switch behaviour between calls (thread-safe)
    # closed on exit; server.close() also works

``POST /v1/chat/completions`` checks the request shape: ``model`` equal to ``model``,
``messages`` with one user message whose content has exactly one ``text`` part and one
``image_url`` part holding a ``data:image/...;base64,`` URL that decodes as an image;
anything else is answered 400 with an OpenAI-style ``{"error": {...}}``. A valid request is
answered 200 with a caption that depends only on the image::

    "A figure (W x H pixels, mean colour R,G,B) showing a chart with axes, labels and a legend."

(:func:`expected_caption` computes it from image bytes), and ``usage`` with
``prompt_tokens`` (words of the prompt + one per 28x28 image patch) and
``completion_tokens`` (words of the caption).

Behaviours (constructor keywords, or :meth:`OpenAIServer.set`):

- ``api_key``: require ``Authorization: Bearer <api_key>``, else 401;
- ``fail_times=N``: answer the next N valid requests with HTTP 500 (``fail_status``), then succeed;
- ``always_fail``: answer every request with HTTP 500;
- ``delay_s``: sleep this long before answering (to trip a client timeout).

A request can also ask for a behaviour itself with the header ``X-Test-Delay-S``.

Text chats (the answer generators): a request whose messages all have string contents
(roles ``system`` / ``user`` / ``assistant``, the last one ``user``) is answered with the next
of the scripted ``chat_replies`` (a list, consumed in order; ``server.set(chat_replies=[...])``
or ``server.script(...)``), and ``usage`` with ``prompt_tokens`` (words of all messages) and
``completion_tokens`` (words of the reply). With no scripted reply left it answers 409, so a
test that asks more than it scripted fails visibly. ``server.chat_requests()`` lists the
bodies of the text chats received. ``fail_times`` / ``always_fail`` / ``delay_s`` / ``api_key``
apply to chats too (a failed request does not consume a reply).
"""

from __future__ import annotations

import base64
import io
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from tests.json_test_server import RecordedRequest, ScriptedJsonServer

CAPTION_WORDS = "showing a chart with axes, labels and a legend."
PATCH = 28


def describe_image(image: Image.Image) -> str:
    rgb = image.convert("RGB")
    pixels = rgb.width * rgb.height
    mean = [round(sum(i * n for i, n in enumerate(rgb.histogram()[c * 256:(c + 1) * 256])) / pixels)
            for c in range(3)]
    return f"A figure ({rgb.width}x{rgb.height} pixels, mean colour {mean[0]},{mean[1]},{mean[2]}) {CAPTION_WORDS}"


def expected_caption(png_or_jpeg: bytes) -> str:
    """The caption the server gives for these (already downscaled) image bytes."""
    return describe_image(Image.open(io.BytesIO(png_or_jpeg)))


@dataclass
class _Behaviour:
    api_key: str | None = None
    fail_times: int = 0
    always_fail: bool = False
    delay_s: float = 0.0
    chat_replies: list[str] = field(default_factory=list)
    fail_status: int = 500


class _BadRequest(Exception):
    pass


class OpenAIServer(ScriptedJsonServer):
    """The running server; see the module docstring."""

    thread_name = "openai-test-server"

    def __init__(self, *, model: str, **behaviour: Any) -> None:
        super().__init__(model=model, behaviour=_Behaviour(**behaviour))

    def script(self, *replies: str) -> None:
        """Queue these chat replies (after any still queued)."""
        with self._lock:
            self._behaviour.chat_replies.extend(replies)

    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the text-chat requests received so far (answered or not)."""
        with self._lock:
            return [r.body for r in self.requests if _is_text_chat(r.body)]

    def _answer(self, record: RecordedRequest, headers: Any) -> tuple[int, dict[str, Any], float, dict[str, str]]:
        """Status, JSON body, the delay before answering and extra headers (none)."""
        with self._lock:
            self.requests.append(record)
            if record.path != "/v1/chat/completions":
                return 404, _error(f"no route {record.path}", "not_found"), 0.0, {}
            b = self._behaviour
            delay = float(headers.get("X-Test-Delay-S") or b.delay_s)
            if b.api_key is not None and record.authorization != f"Bearer {b.api_key}":
                return 401, _error("invalid or missing API key", "authentication_error"), delay, {}
            try:
                reply, prompt_tokens = self._reply(record.body)
            except _BadRequest as exc:
                return 400, _error(str(exc), "invalid_request_error"), delay, {}
            if b.always_fail or b.fail_times > 0:
                b.fail_times = max(0, b.fail_times - 1)
                return b.fail_status, _error("injected failure", "server_error"), delay, {}
            if reply is None:
                if not b.chat_replies:
                    return 409, _error("no scripted chat reply left", "test_script_exhausted"), delay, {}
                reply = b.chat_replies.pop(0)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(reply.split()),
                 "total_tokens": prompt_tokens + len(reply.split())}
        choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
        return 200, {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
                     "model": self.model, "choices": [choice], "usage": usage}, delay, {}

    def _reply(self, body: Any) -> tuple[str | None, int]:
        """(caption, prompt tokens) of a caption request; (None, prompt tokens) of a text chat."""
        if _is_text_chat(body):
            if body.get("model") != self.model:
                raise _BadRequest(f"unknown model {body.get('model')!r}; this server serves {self.model!r}")
            _validate_text_chat(body["messages"])
            return None, sum(len(m["content"].split()) for m in body["messages"])
        return self._validate(body)

    def _validate(self, body: Any) -> tuple[str, int]:
        if not isinstance(body, dict):
            raise _BadRequest("the body must be a JSON object")
        if body.get("model") != self.model:
            raise _BadRequest(f"unknown model {body.get('model')!r}; this server serves {self.model!r}")
        messages = body.get("messages")
        if not isinstance(messages, list) or len(messages) != 1 or messages[0].get("role") != "user":
            raise _BadRequest("messages must be one user message")
        content = messages[0].get("content")
        if not isinstance(content, list):
            raise _BadRequest("the user message content must be a list of parts")
        texts = [part.get("text") for part in content if part.get("type") == "text"]
        urls = [(part.get("image_url") or {}).get("url") for part in content if part.get("type") == "image_url"]
        if len(texts) != 1 or len(urls) != 1 or len(content) != 2 or not isinstance(texts[0], str):
            raise _BadRequest("content must be one text part and one image_url part")
        image = _decode_data_url(urls[0])
        patches = -(-image.width // PATCH) * -(-image.height // PATCH)
        return describe_image(image), len(texts[0].split()) + patches


def _is_text_chat(body: Any) -> bool:
    messages = body.get("messages") if isinstance(body, dict) else None
    return (isinstance(messages, list) and bool(messages)
            and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages))


def _validate_text_chat(messages: list[dict[str, Any]]) -> None:
    if any(m.get("role") not in ("system", "user", "assistant") for m in messages):
        raise _BadRequest("every message role must be system, user or assistant")
    if messages[-1]["role"] != "user":
        raise _BadRequest("the last message must be the user's")


def _decode_data_url(url: Any) -> Image.Image:
    if not isinstance(url, str) or not url.startswith("data:image/") or ";base64," not in url:
        raise _BadRequest("image_url.url must be a data:image/...;base64, URL")
    try:
        image = Image.open(io.BytesIO(base64.b64decode(url.split(";base64,", 1)[1], validate=True)))
        image.load()
    except Exception as exc:  # noqa: BLE001 - any decode failure is the client's fault
        raise _BadRequest(f"image_url does not decode as an image: {type(exc).__name__}") from exc
    return image


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


@contextmanager
def serve_openai(*, model: str = "kb-ray/test-vlm", api_key: str | None = None, fail_times: int = 0,
                 always_fail: bool = False, delay_s: float = 0.0,
                 chat_replies: list[str] | None = None) -> Iterator[OpenAIServer]:
    """Start a server on 127.0.0.1 (a free port) for the duration of the ``with`` block."""
    server = OpenAIServer(model=model, api_key=api_key, fail_times=fail_times, always_fail=always_fail,
                          delay_s=delay_s, chat_replies=list(chat_replies or []))
    try:
        yield server
    finally:
        server.close()
