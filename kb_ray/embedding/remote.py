"""``RemoteTextEmbedder``: chunk and query vectors from an OpenAI-compatible embeddings server.

``embedding.runtime: remote`` makes :meth:`TextEmbedder.from_settings` build this class, so
the ingest's embed stage, the query embedder in Serve, the in-process searcher and eval all
use the server with no other change. Each batch of ``batch_size`` texts is one
``POST {endpoint}/embeddings`` with ``{"model": model_id, "input": [...], "dimensions"?}``
(vLLM, TEI, llama.cpp's server and hosted APIs all answer it), up to ``max_concurrency`` in
flight; connection errors, 429, 5xx and timeouts (``timeout_s``) are retried ``retries``
times with exponential backoff through :class:`~kb_ray.http_client.JsonPostClient`. A
request that still fails raises :class:`RemoteEmbeddingError` with its ``reason`` code:
an embed micro-batch fails as a whole and the next ingest resumes it (content-addressed).

Vectors are L2-normalized here when ``normalize`` is on (servers differ in whether they do).
The fingerprint comes from the settings (:func:`~kb_ray.embedding.fingerprint.remote_embedder_fingerprint`)
and is verified against a probe vector when the embedder is built (:mod:`kb_ray.embedding.probe`).
``usage`` counts requests, retries, texts and the server's ``prompt_tokens``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from kb_ray.embedding.fingerprint import DEFAULT_TEXT_TEMPLATE, remote_embedder_fingerprint
from kb_ray.embedding.probe import PROBE_TEXT, verify_probe
from kb_ray.embedding.text import TextEmbedder
from kb_ray.errors import KbRayError
from kb_ray.http_client import JsonPostClient, PostFailure, RemoteCallError

if TYPE_CHECKING:
    from kb_ray.config import EmbeddingSettings

logger = logging.getLogger(__name__)


class RemoteEmbeddingError(RemoteCallError):
    """The embeddings server gave no vectors: ``reason`` is ``timeout``, ``connect``, ``http_4xx``,
    ``http_5xx``, ``bad_json`` (a transport failure, :class:`~kb_ray.http_client.PostFailure`) or
    ``bad_response`` (JSON without the right vectors)."""

    call = "remote embedding"


class RemoteTextEmbedder(TextEmbedder):
    """A :class:`TextEmbedder` whose forward pass is an HTTP request; see the module docstring."""

    def __init__(self, settings: EmbeddingSettings, *, batch_size: int | None = None) -> None:  # noqa: D107
        # the local model set-up of TextEmbedder.__init__ is skipped on purpose: nothing is loaded
        if not settings.endpoint:
            raise KbRayError("embedding.runtime=remote needs embedding.endpoint (e.g. http://tei:8080/v1)")
        self.settings = settings
        self.model_id = settings.model_id
        self.runtime = "remote"
        self.device = "remote"
        self.batch_size = batch_size or settings.batch_size
        self.normalize = settings.normalize
        self.text_template = DEFAULT_TEXT_TEMPLATE
        self.sort_by_length = False  # a server batches by itself
        self._client = JsonPostClient(endpoint=settings.endpoint, route="/embeddings",
                                      api_key_env=settings.api_key_env, timeout_s=settings.timeout_s,
                                      retries=settings.retries, max_concurrency=settings.max_concurrency,
                                      setting_prefix="embedding", retry_timeouts=True)
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency, thread_name_prefix="embed-http")
        self._usage_lock = threading.Lock()
        self._usage = {"requests": 0, "texts": 0, "prompt_tokens": 0}
        self._fingerprint = remote_embedder_fingerprint(model_id=settings.model_id, dimensions=settings.dimensions,
                                                        normalize=settings.normalize, text_template=self.text_template)
        probe = self._post([PROBE_TEXT])[0]
        self._dim = int(probe.shape[0])
        if settings.dimensions is not None and self._dim != settings.dimensions:
            raise KbRayError(f"embedding.dimensions={settings.dimensions} but {self._client.url} answered vectors "
                             f"of {self._dim}: the served model ignores `dimensions`; unset it")
        self.probe = verify_probe(probe, fingerprint=self._fingerprint, model_id=self.model_id,
                                  endpoint=self._client.url, cache_dir=settings.cache_dir)
        logger.info("remote embedder %s at %s (dim %d, probe digest %s)", self.model_id, self._client.url,
                    self._dim, self.probe.digest)

    @property
    def max_seq_length(self) -> int:
        raise KbRayError("a remote embedder does not know its server's token limit; chunk budgets come "
                         "from chunking.tokenizer_path / chunking.max_tokens")

    @property
    def usage(self) -> dict[str, int]:
        """Requests, retries, texts and the server's ``prompt_tokens`` since this embedder was built."""
        with self._usage_lock:
            return {**self._usage, "retries": self._client.retried}

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """``texts`` in batches of ``batch_size``, up to ``max_concurrency`` requests at once."""
        if isinstance(texts, str):
            raise TypeError("embed_texts takes a list of strings; use embed_query for one string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [texts[start:start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        parts = list(self._pool.map(self._post, batches)) if len(batches) > 1 else [self._post(batches[0])]
        vectors = np.concatenate(parts)
        if vectors.shape[1] != self.dim:
            raise RemoteEmbeddingError("bad_response", f"vectors of {vectors.shape[1]} dimensions, "
                                                       f"the probe had {self.dim}")
        return vectors

    def count_tokens(self, texts: Sequence[str], *, embedded: bool = True) -> int:
        """0: the served model's tokenizer is not here; the server's own count of what it read is
        in :attr:`usage` (the stage count ``embed_prompt_tokens``)."""
        return 0

    def embed_late(self, items: Sequence[Any], *, overlap_tokens: int = 0) -> tuple[list[np.ndarray], int]:
        """Refused: late pooling needs the model's token states, and a server answers sentence vectors."""
        raise KbRayError("index.vector_layout=late needs a local embedding model (its token states); "
                         "embedding.runtime=remote returns sentence vectors only: use another vector layout")

    def _post(self, texts: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model_id, "input": texts}
        if self.settings.dimensions is not None:
            body["dimensions"] = self.settings.dimensions
        answer = self._client.post(body)
        if isinstance(answer, PostFailure):
            raise RemoteEmbeddingError(answer.reason, answer.detail)
        vectors = _vectors(answer, count=len(texts))
        with self._usage_lock:
            self._usage["requests"] += 1
            self._usage["texts"] += len(texts)
            self._usage["prompt_tokens"] += int((answer.get("usage") or {}).get("prompt_tokens") or 0)
        return _l2_normalized(vectors) if self.normalize else vectors

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()


def _vectors(answer: dict[str, Any], *, count: int) -> np.ndarray:
    """``data[*].embedding`` in input order (by ``index``), as float32 ``[count, dim]``."""
    data = answer.get("data")
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise RemoteEmbeddingError("bad_response", f"expected `data` with {count} embeddings, got {got}")
    try:
        ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
        vectors = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteEmbeddingError("bad_response", f"`data` is not a list of float embeddings: {exc}") from exc
    if vectors.ndim != 2 or not np.isfinite(vectors).all():
        raise RemoteEmbeddingError("bad_response", "embeddings of unequal length or with NaN/inf values")
    return vectors


def _l2_normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0.0, 1.0, norms)
