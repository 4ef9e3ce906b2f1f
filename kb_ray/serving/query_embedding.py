"""Where the ingress gets a request's query vector (``serve.query_embedding``).

* ``IngressQueryEmbedder`` (``ingress``, the default): the text embedder inside the ingress replica.
  Concurrent queries are batched (``@serve.batch``, up to 16 per forward pass) and encoded on a worker
  thread, so the event loop keeps taking requests meanwhile. It saves the Serve hop to a separate
  replica, which cost more than the embedding itself on a 2-core box (benchmarks/results/query.md).
* ``DeploymentQueryEmbedder`` (``deployment``): calls the ``QueryEmbedder`` deployment, which can have
  replicas and a GPU of its own (``serve.embedder_replicas``, ``serve.embedder_num_gpus``); the
  cluster config (conf/cluster.yaml, serve/config.yaml) uses it.

Both give ``fingerprint()`` (for ``GET /healthz``) and ``embed(query)`` / ``embed_many(texts)``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from ray import serve
from ray.exceptions import RayActorError

if TYPE_CHECKING:
    from kb_ray.config import KbConfig

logger = logging.getLogger(__name__)
WARM_UP_QUERY = "warm-up query"
MAX_BATCH = 16  # queries per forward pass
BATCH_WAIT_S = 0.004  # how long a query waits for others to share its forward pass


async def call_once_more_if_replica_died(method: Any, *args: Any) -> Any:
    """``await method.remote(*args)``, sent a second time when the replica that took it died
    (``RayActorError``: killed, OOM, node lost). Serve drops the dead replica from its routing,
    so the retry lands on a live one, or waits for the restarted one. Only for idempotent calls
    (embedding, search): a second failure is raised (the client sees a 500)."""
    try:
        return await method.remote(*args)
    except RayActorError as exc:
        logger.warning("a replica died during a request (%s); sending it once more", type(exc).__name__)
        return await method.remote(*args)


class QueryEmbedding(Protocol):
    async def fingerprint(self) -> str: ...

    async def embed(self, query: str) -> list[float]: ...

    async def embed_many(self, texts: list[str]) -> list[list[float]]: ...


class IngressQueryEmbedder:
    """The text embedder in this process (the ingress replica): batched, off the event loop."""

    def __init__(self, config: KbConfig) -> None:
        from kb_ray.embedding.text import TextEmbedder

        self.embedder = TextEmbedder.from_settings(config.embedding, device="cpu",
                                                   num_threads=config.search.query_threads)
        self.embedder.embed_texts([WARM_UP_QUERY])  # the first inference is slow: pay it before taking traffic

    async def fingerprint(self) -> str:
        return self.embedder.fingerprint

    async def embed(self, query: str) -> list[float]:
        return await self._batched(query)

    async def embed_many(self, texts: list[str]) -> list[list[float]]:
        return list(await asyncio.gather(*(self._batched(text) for text in texts)))

    def encode(self, queries: list[str]) -> list[list[float]]:
        """One forward pass over ``queries`` (blocking: called on a worker thread)."""
        return [vector.tolist() for vector in self.embedder.embed_texts(queries)]

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=BATCH_WAIT_S)
    async def _batched(self, queries: list[str]) -> list[list[float]]:
        # one batch at a time (serve.batch's default): the tokenizer is not entered from two threads.
        # serve.batch needs a replica context: outside Serve, call encode.
        return await asyncio.to_thread(self.encode, queries)


class DeploymentQueryEmbedder:
    """The ``QueryEmbedder`` deployment, through its handle (a call whose replica died is sent once more)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def fingerprint(self) -> str:
        return await self.handle.fingerprint.remote()

    async def embed(self, query: str) -> list[float]:
        return await call_once_more_if_replica_died(self.handle.embed, query)

    async def embed_many(self, texts: list[str]) -> list[list[float]]:
        return list(await asyncio.gather(*(self.embed(text) for text in texts)))


def query_embedding_for(config: KbConfig, handle: Any) -> QueryEmbedding:
    """The ingress's query embedding: the deployment's ``handle`` when the app bound one, else its own."""
    if config.serve.query_embedding == "deployment":
        if handle is None:
            raise ValueError("serve.query_embedding=deployment but the app bound no QueryEmbedder")
        return DeploymentQueryEmbedder(handle)
    return IngressQueryEmbedder(config)
