"""``VllmGenerator``: answers from a vLLM engine inside this process (a Serve replica with a GPU).

``vllm.LLM(model=answer.model_path, dtype, gpu_memory_utilization, max_model_len)`` loads the
local weights (nothing is downloaded); each call is one ``llm.chat`` with the prompts'
messages (the model's own chat template; several conversations are one batched call), or
``llm.generate`` on the plain-text prompts when the tokenizer has no template. Sampling: ``max_new_tokens``, ``temperature`` (0 = greedy).
Token counts come from the ``RequestOutput`` (``prompt_token_ids`` and the completion's
``token_ids``). vLLM's offline engine has no per-request deadline, so ``timeout_s`` is not
enforced here; ``max_new_tokens`` bounds each answer. A call that raises (e.g. a prompt over
``max_model_len``) is ``Generation(error="model_error")``; an empty completion is
``error="empty_answer"``.

vLLM is CUDA-only and pins its own torch: install it on GPU images only. Without it the
constructor raises a :class:`KbRayError` saying so. In Serve the engine lives in
:class:`~kb_ray.serving.generator_deployment.GeneratorDeployment` (``num_gpus`` from
``answer.num_gpus``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kb_ray.answer.generators.prompt import ChatGenerator, plain_prompt
from kb_ray.answer.generators.transformers_local import resolve_answer_model_path
from kb_ray.answer.types import Generation
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise KbRayError("answer.generator=vllm needs vLLM, which is not installed (CUDA GPU machines only: "
                         "pip install vllm on the GPU image); on CPU use answer.generator=transformers, or "
                         "answer.generator=openai against a `vllm serve` endpoint") from exc
    return vllm


class VllmGenerator(ChatGenerator):
    """Writes answers with an in-process vLLM engine."""

    backend = "vllm"

    def __init__(self, settings: AnswerSettings) -> None:
        vllm = import_vllm()
        self.path = resolve_answer_model_path(settings.model_path, backend="vllm")
        super().__init__(settings, model=settings.model_id or self.path.name)
        self._llm = vllm.LLM(model=str(self.path), dtype=settings.dtype,
                             gpu_memory_utilization=settings.gpu_memory_utilization,
                             max_model_len=settings.max_model_len)
        self._params = vllm.SamplingParams(max_tokens=settings.max_new_tokens, temperature=settings.temperature)
        self._chat = bool(getattr(self._llm.get_tokenizer(), "chat_template", None))
        self._lock = threading.Lock()  # LLM is not thread-safe; the engine batches inside one call
        logger.info("loaded vLLM answer model %s from %s", self.model, self.path)

    def complete(self, messages: list[dict[str, str]]) -> Generation:
        return self.complete_batch([messages])[0]

    def complete_batch(self, conversations: list[list[dict[str, str]]]) -> list[Generation]:
        """One engine call for all ``conversations`` (vLLM batches them); a failure fails them all."""
        try:
            with self._lock:
                if self._chat:
                    outputs = self._llm.chat(conversations, sampling_params=self._params, use_tqdm=False)
                else:
                    prompts = [plain_prompt(messages) for messages in conversations]
                    outputs = self._llm.generate(prompts, sampling_params=self._params, use_tqdm=False)
        except Exception as exc:  # noqa: BLE001 - any engine failure is these answers' error, not the service's
            logger.warning("vLLM answer generation failed: %s", exc)
            return [Generation(text="", error="model_error") for _ in conversations]
        return [_from_output(output) for output in outputs]

    def close(self) -> None:
        self._llm = None


def _from_output(output: Any) -> Generation:
    completion = output.outputs[0]
    counts = {"prompt_tokens": len(output.prompt_token_ids or []), "completion_tokens": len(completion.token_ids)}
    if not (completion.text or "").strip():
        return Generation(text="", error="empty_answer", **counts)
    return Generation(text=completion.text, **counts)
