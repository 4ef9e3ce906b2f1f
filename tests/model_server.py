"""A small, real model server for tests: OpenAI-compatible ``/v1/embeddings`` and a
TEI/Jina/vLLM-style ``/v1/rerank`` (stdlib ``http.server`` on 127.0.0.1, a free port).

Built on ``tests/json_test_server.py``, like ``tests/enrich/openai_server.py`` (scripted
failures, delays, bearer key, recorded requests, a count of requests in flight), with the maths
given by the test::

    with serve_models(embed=fn, rerank=fn, model="kb-ray/test-embedder") as server:
        server.base_url       # "http://127.0.0.1:PORT/v1" -> embedding.endpoint / search.rerank_endpoint
        server.requests       # RecordedRequest: path, body, authorization, status
        server.max_in_flight  # most requests handled at once (counted from arrival to answer)
        server.set(fail_times=2, fail_status=429, fail_path="/v1/rerank", delay_s=0.0, api_key="k", embed=other_fn, rerank_shape="tei")

``POST /v1/embeddings`` takes ``{"model", "input": [str, ...], "dimensions"?}``: ``embed(texts)``
gives a float array ``[n, dim]`` (truncated to ``dimensions`` when sent, as Matryoshka servers
do); the answer lists ``data`` in *reverse* order (each item with its ``index``, which a client
must follow) and ``usage.prompt_tokens`` = words of all inputs. ``POST /v1/rerank`` takes
``{"model"?, "query", "documents", "top_n"?}``: ``rerank(query, documents)`` gives one score per
document; the answer is ``{"results": [{"index", "relevance_score"}]}`` best first, cut to
``top_n`` (``rerank_shape="jina"``), or TEI's bare list ``[{"index", "score"}]`` (``"tei"``).
A wrong model name or shape is answered 400; ``fail_times`` requests (to ``fail_path`` only,
when set) get ``fail_status`` (with ``Retry-After: 0`` on a 429) before the next succeeds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.json_test_server import RecordedRequest, ScriptedJsonServer


@dataclass
class _Behaviour:
    embed: Callable[[list[str]], np.ndarray] | None = None
    rerank: Callable[[str, list[str]], list[float]] | None = None
    api_key: str | None = None
    fail_times: int = 0
    fail_status: int = 503
    fail_path: str | None = None  # only requests to this path fail (None: any)
    delay_s: float = 0.0
    rerank_shape: str = "jina"


class ModelServer(ScriptedJsonServer):
    thread_name = "model-test-server"

    def __init__(self, *, model: str, **behaviour: Any) -> None:
        super().__init__(model=model, behaviour=_Behaviour(**behaviour))

    def bodies(self, path: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r.body for r in self.requests if r.path == path]

    def _answer(self, record: RecordedRequest, headers: Any) -> tuple[int, Any, float, dict[str, str]]:
        """Status, JSON answer, delay and extra headers."""
        with self._lock:
            self.requests.append(record)
            b = self._behaviour
            if b.api_key is not None and record.authorization != f"Bearer {b.api_key}":
                return 401, _error("invalid or missing API key"), b.delay_s, {}
            if b.fail_times > 0 and b.fail_path in (None, record.path):
                b.fail_times -= 1
                return b.fail_status, _error("injected failure"), b.delay_s, \
                    ({"Retry-After": "0"} if b.fail_status == 429 else {})
            embed, rerank, shape, delay = b.embed, b.rerank, b.rerank_shape, b.delay_s
        try:
            if record.path == "/v1/embeddings" and embed is not None:
                return 200, self._embeddings(record.body, embed), delay, {}
            if record.path == "/v1/rerank" and rerank is not None:
                return 200, _rerank_answer(record.body, rerank, shape=shape), delay, {}
        except _BadRequest as exc:
            return 400, _error(str(exc)), delay, {}
        return 404, _error(f"no route {record.path}"), 0.0, {}

    def _embeddings(self, body: Any, embed: Callable[[list[str]], np.ndarray]) -> dict[str, Any]:
        if not isinstance(body, dict) or body.get("model") != self.model:
            raise _BadRequest(f"unknown model {(body or {}).get('model')!r}; this server serves {self.model!r}")
        texts = body.get("input")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise _BadRequest("input must be a non-empty list of strings")
        vectors = np.asarray(embed(texts), dtype=np.float32)[:, : body.get("dimensions") or None]
        data = [{"object": "embedding", "index": i, "embedding": vectors[i].tolist()} for i in range(len(texts))]
        tokens = sum(len(t.split()) for t in texts)
        return {"object": "list", "model": self.model, "data": data[::-1],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class _BadRequest(Exception):
    pass


def bag_of_words(texts: list[str], *, dim: int = 16, scale: float = 3.0) -> np.ndarray:
    """Cheap deterministic vectors for tests that need no real model: hashed word counts times
    ``scale`` (unnormalized), never all zeros."""
    vectors = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            vectors[row, int(hashlib.sha256(word.encode()).hexdigest(), 16) % dim] += scale
        vectors[row, 0] += 0.5
    return vectors


def _rerank_answer(body: Any, rerank: Callable[[str, list[str]], list[float]], *, shape: str) -> Any:
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise _BadRequest("query must be a string")
    documents = body.get("documents")
    if not isinstance(documents, list) or not all(isinstance(d, str) for d in documents):
        raise _BadRequest("documents must be a list of strings")
    scores = [float(s) for s in rerank(body["query"], documents)]
    order = sorted(range(len(documents)), key=lambda i: -scores[i])[: body.get("top_n") or None]
    if shape == "tei":
        return [{"index": i, "score": scores[i]} for i in order]
    return {"model": body.get("model"), "results": [{"index": i, "relevance_score": scores[i]} for i in order],
            "usage": {"total_tokens": sum(len(d.split()) for d in documents)}}


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


@contextmanager
def serve_models(*, model: str = "kb-ray/test-embedder", **behaviour: Any) -> Iterator[ModelServer]:
    """Start a server on 127.0.0.1 (a free port) for the duration of the ``with`` block."""
    server = ModelServer(model=model, **behaviour)
    try:
        yield server
    finally:
        server.close()
