"""``POST /v1/answer`` inside the ingress: an :class:`Answerer` over the ingress's own async
search and embed paths (Ray-free: it only sees coroutine functions and an event loop).

The Answerer is synchronous, so a request runs it in a worker thread; its ``search`` and
``embed`` calls hop back onto the ingress's event loop, where the deployment handles live.
The generator (extractive, or a client of an OpenAI-compatible endpoint) lives here, made
on the first request so a misconfigured generator fails that request (HTTP 400), not the
service; with ``answer.generator=vllm`` it is a ``DeploymentGenerator`` over the GPU
``GeneratorDeployment`` (kb_ray/serving/generator_deployment.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from kb_ray.answer.answerer import Answerer
from kb_ray.answer.generators import abstain_threshold, make_generator
from kb_ray.answer.local import open_document_catalog
from kb_ray.answer.types import Generator
from kb_ray.auth.scope import ReadScope
from kb_ray.config import KbConfig

AsyncSearch = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
AsyncEmbed = Callable[[list[str]], Awaitable[np.ndarray]]


class ServiceAnswerer:
    def __init__(self, config: KbConfig, *, search: AsyncSearch, embed: AsyncEmbed,
                 log: Callable[..., None] | None = None, generator_handle: Any = None) -> None:
        self.config = config
        self._search, self._embed = search, embed
        self.log = log
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generator: Generator | None = None
        self._generator_handle = generator_handle  # a GeneratorDeployment (answer.generator=vllm)

    async def answer(self, request: dict[str, Any], *, scope: ReadScope) -> dict[str, Any]:
        """One answer inside ``scope``: each of its searches and document lookups, and its log row
        (tagged with the tenant, whose feedback alone it takes)."""
        self._loop = asyncio.get_running_loop()
        request = dict(request)
        as_of = request.pop("as_of", None)  # every search of this answer reads the catalog at that point
        search = self.search_sync if as_of is None else (lambda body: self.search_sync({**body, "as_of": as_of}))
        log = None if self.log is None else functools.partial(self.log, tenant=scope.tenant)
        answerer = Answerer(self.config.answer, generator=self.generator(), search=search, scope=scope,
                            embed=self.embed_sync, log=log, catalog=lambda: open_document_catalog(self.config))
        return await asyncio.to_thread(answerer.answer, request)

    def generator(self) -> Generator:
        if self._generator is None and self._generator_handle is not None:
            from kb_ray.serving.generator_deployment import DeploymentGenerator

            self._generator = DeploymentGenerator(self._generator_handle)
        if self._generator is None:
            threshold = abstain_threshold(self.config.search, evidence=self.config.answer.evidence)
            self._generator = make_generator(self.config.answer, abstain_below=threshold)
        return self._generator

    def search_sync(self, body: dict[str, Any]) -> dict[str, Any]:
        return asyncio.run_coroutine_threadsafe(self._search(body), self._loop).result()

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        return np.asarray(asyncio.run_coroutine_threadsafe(self._embed(list(texts)), self._loop).result(),
                          dtype=np.float32)
