"""``TransformersCaptioner``: captions from a local image-text-to-text model with transformers.

Loads ``AutoModelForImageTextToText`` and its processor from ``model_path`` only (nothing
is downloaded). Qwen2-VL-family processors also hold a video processor, which transformers
builds with torchvision; where that is missing (CPU machines here) the processor is loaded
image-only: the same class, tokenizer, PIL image processor and chat template, without the
video processor a captioner never uses.

Images go through the processor's chat template (an image part, then the prompt), in
batches of ``batch_size`` with left padding; decoding is greedy at ``temperature == 0``,
else sampled with ``temperature`` / ``top_p``. Generation cannot be interrupted, so
``timeout_s`` is enforced per batch through ``generate(max_time=...)``: a caption cut off by
it gets a ``timeout:`` error. Eager attention on CPU (sdpa gave NaNs with padded batches on
CPU in transformers 5.x, see :mod:`kb_ray.pages.embedder`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from kb_ray.config import CaptionSettings
from kb_ray.embedding.torch_runtime import resolve_device
from kb_ray.enrich.captioners import Captioner, CaptionResult
from kb_ray.errors import KbRayError
from kb_ray.model_dirs import local_model_dir

logger = logging.getLogger(__name__)
_INSTALL_HINT = "pip install kb-ray[embed]"


def resolve_caption_model_path(model_path: str | None) -> Path:
    if not model_path:
        raise KbRayError("captions.backend=transformers needs captions.model_path: a local model directory "
                         "(models are never downloaded; kb_ray.enrich.tiny_vlm.build_tiny_vlm writes a tiny one)")
    return local_model_dir(model_path, what="caption model", kind="image-text-to-text model")


class TransformersCaptioner(Captioner):
    """Captions images with a local VLM (e.g. Qwen2-VL / Qwen2.5-VL Instruct) in this process."""

    def __init__(self, settings: CaptionSettings) -> None:
        torch = _import_torch()
        super().__init__(settings)
        self.path = resolve_caption_model_path(settings.model_path)
        self.device = resolve_device(settings.device, torch)
        self._torch = torch
        self.processor = load_processor(self.path)
        self.processor.tokenizer.padding_side = "left"
        self._network = _load_model(self.path, self.device, getattr(torch, settings.dtype))
        self._end_ids = _end_token_ids(self._network, self.processor.tokenizer)
        self._prompt_text = self.processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": settings.prompt}]}],
            add_generation_prompt=True, tokenize=False)
        logger.info("loaded caption model %s from %s on %s", settings.model_id, self.path, self.device)

    def _caption_images(self, images: list[Any]) -> list[CaptionResult]:
        return self._caption_batched(images, self._caption_batch)

    def _caption_batch(self, images: list[Any]) -> list[CaptionResult]:
        inputs = self.processor(text=[self._prompt_text] * len(images), images=images, padding=True,
                                return_tensors="pt").to(self.device)
        started = time.perf_counter()
        with self._torch.inference_mode():
            output = self._network.generate(**inputs, **self._generation_kwargs())
        seconds = time.perf_counter() - started
        new_tokens = output[:, inputs["input_ids"].shape[1]:].tolist()
        prompt_counts = inputs["attention_mask"].sum(dim=1).tolist()
        timed_out = seconds >= self.settings.timeout_s
        share = seconds / len(images)
        return [self._decode(tokens, int(count), timed_out=timed_out, seconds=share)
                for tokens, count in zip(new_tokens, prompt_counts, strict=True)]

    def _generation_kwargs(self) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {"max_new_tokens": s.max_new_tokens, "max_time": s.timeout_s,
                                  "pad_token_id": self.processor.tokenizer.pad_token_id, "do_sample": s.temperature > 0}
        if s.temperature > 0:
            kwargs.update(temperature=s.temperature, top_p=s.top_p)
        return kwargs

    def _decode(self, tokens: list[int], prompt_tokens: int, *, timed_out: bool, seconds: float) -> CaptionResult:
        ended = next((i for i, token in enumerate(tokens) if token in self._end_ids), None)
        generated = tokens if ended is None else tokens[:ended + 1]
        counts = {"prompt_tokens": prompt_tokens, "completion_tokens": len(generated), "seconds": seconds}
        if ended is None and len(generated) < self.settings.max_new_tokens and timed_out:
            return self._result(error=f"timeout: generation stopped by timeout_s={self.settings.timeout_s:g}s "
                                      f"after {len(generated)} tokens", **counts)
        text = self.processor.tokenizer.decode(generated, skip_special_tokens=True).strip()
        if not text:
            return self._result(error="model_error: empty caption", **counts)
        return self._result(text=text, **counts)

    def close(self) -> None:
        self._network = None


def image_only_processor_class(base: type) -> type:
    """``base`` (a Qwen2-VL-family processor class) without its video processor.

    transformers derives a processor's parts from its ``__init__`` signature, so a subclass
    whose ``__init__`` takes only the image processor and tokenizer is built, saved and
    loaded without the (torchvision-backed) video processor.
    """

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        base.__init__(self, image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    return type(f"{base.__name__}ImageOnly", (base,), {"__init__": __init__, "__module__": __name__})


def load_processor(path: Path) -> Any:
    """The model's processor: ``AutoProcessor``, else its class loaded image-only."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - e.g. no torchvision for the video processor
        processor = _load_image_only(path, reason=exc)
    if not hasattr(processor, "image_processor"):
        processor = _load_image_only(path, reason=f"AutoProcessor gave a {type(processor).__name__}")
    return processor


def _load_image_only(path: Path, *, reason: object) -> Any:
    import transformers

    name = _processor_class_name(path)
    base = getattr(transformers, name, None) if name else None
    if base is None:
        raise KbRayError(f"cannot load the processor of {path} ({reason}) and no known processor_class is recorded "
                         "in processor_config.json / preprocessor_config.json")
    logger.info("loading %s image-only from %s (%s)", name, path, str(reason).splitlines()[0][:120])
    return image_only_processor_class(base).from_pretrained(path, local_files_only=True)


def _processor_class_name(path: Path) -> str | None:
    for file in ("processor_config.json", "preprocessor_config.json"):
        config = path / file
        if config.is_file():
            name = json.loads(config.read_text(encoding="utf-8")).get("processor_class")
            if name:
                return name.removesuffix("ImageOnly")
    return None


def _load_model(path: Path, device: str, dtype: Any) -> Any:
    from transformers import AutoModelForImageTextToText

    attention = "sdpa" if device.startswith("cuda") else "eager"
    model = AutoModelForImageTextToText.from_pretrained(path, local_files_only=True, dtype=dtype,
                                                        attn_implementation=attention)
    return model.to(device).eval()


def _end_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    eos = model.generation_config.eos_token_id
    ids = eos if isinstance(eos, list) else [eos]
    return frozenset(i for i in [*ids, tokenizer.eos_token_id] if i is not None)


def _import_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise KbRayError(f"TransformersCaptioner needs torch and transformers: {_INSTALL_HINT}") from exc
    return torch
