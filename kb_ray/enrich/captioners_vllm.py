"""``VllmCaptioner``: captions from a vLLM engine inside this process (a Ray actor with a GPU).

``vllm.LLM(model=model_path, ...)`` with one image per prompt; each batch of
``batch_size`` images is one ``llm.chat`` call whose conversations carry the image as an
OpenAI-style ``image_url`` data URL, so the model's own chat template places the image
tokens. Token counts come from each ``RequestOutput`` (``prompt_token_ids``, and the
``token_ids`` of its first completion). ``timeout_s`` is not enforced here (vLLM's offline
engine has no per-request deadline); ``max_new_tokens`` bounds each caption. A batch that
raises is retried image by image, so one bad prompt (e.g. over ``max_model_len``) costs
only its own caption.

vLLM is CUDA-only and pins its own torch: install it with ``pip install kb-ray[vlm]`` on
GPU images only.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kb_ray.config import CaptionSettings
from kb_ray.enrich.captioners import Captioner, CaptionResult, chat_messages
from kb_ray.enrich.captioners_local import resolve_caption_model_path
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise KbRayError("captions.backend=vllm needs vLLM (CUDA GPU machines only): pip install kb-ray[vlm]; "
                         "on CPU use backend=transformers, or backend=openai against a vLLM server") from exc
    return vllm


class VllmCaptioner(Captioner):
    """Captions images with an in-process vLLM engine."""

    def __init__(self, settings: CaptionSettings) -> None:
        vllm = _import_vllm()
        super().__init__(settings)
        self.path = resolve_caption_model_path(settings.model_path)
        self._llm = vllm.LLM(model=str(self.path), dtype=settings.dtype,
                             gpu_memory_utilization=settings.gpu_memory_utilization,
                             max_model_len=settings.max_model_len, limit_mm_per_prompt={"image": 1})
        self._params = vllm.SamplingParams(max_tokens=settings.max_new_tokens, temperature=settings.temperature,
                                           top_p=settings.top_p)
        logger.info("loaded vLLM caption model %s from %s", settings.model_id, self.path)

    def _caption_images(self, images: list[Any]) -> list[CaptionResult]:
        return self._caption_batched(images, self._caption_batch)

    def _caption_batch(self, images: list[Any]) -> list[CaptionResult]:
        conversations = [chat_messages(prompt=self.settings.prompt, image=image) for image in images]
        started = time.perf_counter()
        outputs = self._llm.chat(conversations, sampling_params=self._params, use_tqdm=False)
        share = (time.perf_counter() - started) / len(images)
        return [self._from_output(output, seconds=share) for output in outputs]

    def _from_output(self, output: Any, *, seconds: float) -> CaptionResult:
        completion = output.outputs[0]
        counts = {"prompt_tokens": len(output.prompt_token_ids or []),
                  "completion_tokens": len(completion.token_ids), "seconds": seconds}
        text = (completion.text or "").strip()
        if not text:
            return self._result(error=f"model_error: empty caption (finish_reason={completion.finish_reason})",
                                **counts)
        return self._result(text=text, **counts)

    def close(self) -> None:
        self._llm = None
