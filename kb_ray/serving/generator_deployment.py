"""``GeneratorDeployment``: the answer model in its own Serve deployment (``num_gpus`` from
``answer.num_gpus``), bound by :func:`kb_ray.serving.app.build_app` when
``answer.generator == "vllm"``; and ``DeploymentGenerator``, the
:class:`~kb_ray.answer.types.Generator` the answer ingress uses to call it.

The replica builds the generator with ``make_generator(answer settings)`` (the vLLM engine
loads there, on its GPU). Concurrent ``generate`` / ``repair`` calls from all ingress
replicas are gathered by ``@serve.batch`` into one ``complete_batch`` call, so vLLM batches
them in one engine step loop. Prompts are built and answers priced in the replica, by the
same code as in-process generators (:mod:`kb_ray.answer.generators.prompt`).

``DeploymentGenerator`` is synchronous (the :class:`~kb_ray.answer.answerer.Answerer` is):
it waits on ``DeploymentResponse.result()``, which Serve forbids on an event loop thread, so
the ingress runs the Answerer in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ray import serve

from kb_ray.answer.generators.prompt import answer_messages, repair_messages
from kb_ray.answer.types import AnswerMode, Generation, Passage, Sentence
from kb_ray.config import AnswerSettings

MAX_BATCH = 16
BATCH_WAIT_S = 0.01


@serve.deployment
class GeneratorDeployment:
    def __init__(self, settings: AnswerSettings) -> None:
        from kb_ray.answer.generators import make_generator

        self.settings = settings
        self.generator = make_generator(settings)

    def describe(self) -> dict[str, Any]:
        g = self.generator
        return {"backend": g.backend, "model": g.model, "fingerprint": g.fingerprint}

    async def generate(self, *, question: str, passages: list[Passage], mode: AnswerMode) -> Generation:
        return await self._run(answer_messages(question=question, passages=passages, mode=mode,
                                               refusal=self.settings.refusal))

    async def repair(self, *, question: str, passages: list[Passage], mode: AnswerMode, answer: str,
                     flagged: list[Sentence]) -> Generation:
        return await self._run(repair_messages(question=question, passages=passages, mode=mode,
                                               refusal=self.settings.refusal, answer=answer, flagged=flagged))

    async def _run(self, messages: list[dict[str, str]]) -> Generation:
        started = time.perf_counter()
        result = await self._complete(messages)
        return self.generator.priced(result, seconds=time.perf_counter() - started)

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=BATCH_WAIT_S)
    async def _complete(self, conversations: list[list[dict[str, str]]]) -> list[Generation]:
        return await asyncio.to_thread(self.generator.complete_batch, conversations)


class DeploymentGenerator:
    """A :class:`~kb_ray.answer.types.Generator` whose calls go to a ``GeneratorDeployment`` handle."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._described: dict[str, Any] | None = None

    @property
    def backend(self) -> str:
        return self._describe()["backend"]

    @property
    def model(self) -> str | None:
        return self._describe()["model"]

    @property
    def fingerprint(self) -> str:
        return self._describe()["fingerprint"]

    def _describe(self) -> dict[str, Any]:
        """Asked once, on first use (from the Answerer's worker thread, not the constructor)."""
        if self._described is None:
            self._described = self._handle.describe.remote().result()
        return self._described

    def generate(self, *, question: str, passages: list[Passage], mode: AnswerMode) -> Generation:
        return self._handle.generate.remote(question=question, passages=passages, mode=mode).result()

    def repair(self, *, question: str, passages: list[Passage], mode: AnswerMode, answer: str,
               flagged: list[Sentence]) -> Generation:
        return self._handle.repair.remote(question=question, passages=passages, mode=mode, answer=answer,
                                          flagged=flagged).result()


def bind_generator(settings: AnswerSettings) -> Any | None:
    """The bound ``GeneratorDeployment`` when ``settings.generator == "vllm"``, else None (the other
    generators run inside the ingress replica)."""
    if settings.generator != "vllm":
        return None
    return GeneratorDeployment.options(name="AnswerGenerator", num_replicas=1, ray_actor_options={
        "num_cpus": 0.25, "num_gpus": settings.num_gpus}).bind(settings)
