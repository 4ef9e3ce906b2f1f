"""Figure captioning with a vision-language model, behind one small interface.

A :class:`Captioner` turns PNG/JPEG bytes into one :class:`CaptionResult` per image, in
order. A failure of one image (it does not decode, the server answered 500, the model ran
out of time) is that image's result with ``error`` set, never an exception; exceptions are
for set-up problems (no model at ``model_path``, no endpoint, a missing optional package).

Backends (``captions.backend``), built by :func:`build_captioner`:

- ``transformers``: :class:`~kb_ray.enrich.captioners_local.TransformersCaptioner`, a local
  model directory in this process (CPU or GPU);
- ``openai``: :class:`~kb_ray.enrich.captioners_http.OpenAICompatibleCaptioner`, any
  OpenAI-compatible chat-completions server (vLLM's ``vllm serve``, a hosted API);
- ``vllm``: :class:`~kb_ray.enrich.captioners_vllm.VllmCaptioner`, a vLLM engine inside
  the process (a Ray actor holding a GPU).

The fingerprint covers what decides the caption text (model, prompt, sampling, image
size), not where it runs: the same model behind vLLM in an actor or behind a vLLM HTTP
server gives the same fingerprint. Error strings start with a kind: ``bad_image:``,
``timeout:``, ``http_error:``, ``model_error:``.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kb_ray.config import CaptionSettings
from kb_ray.errors import KbRayError
from kb_ray.ids import fingerprint as make_fingerprint

logger = logging.getLogger(__name__)

CAPTIONER_VERSION = "1"


@dataclass(frozen=True)
class CaptionResult:
    """One image's caption, or why there is none. Exactly one of ``text`` / ``error`` is set.

    ``seconds`` is the wall time spent on this image; for batched backends, the batch's
    time divided by its size. ``cost_usd`` comes from the configured token prices.
    """

    text: str | None
    error: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    cost_usd: float | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.error is None):
            raise ValueError("a CaptionResult has exactly one of text and error")

    @property
    def ok(self) -> bool:
        return self.error is None


def caption_cost(settings: CaptionSettings, *, prompt_tokens: int | None,
                 completion_tokens: int | None) -> float | None:
    """Tokens / 1000 × the configured prices; None when the token counts are unknown."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * settings.price_per_1k_prompt_tokens
            + completion_tokens * settings.price_per_1k_completion_tokens) / 1000.0


def caption_fingerprint(settings: CaptionSettings) -> str:
    """What decides the caption text; backend, endpoint, device and batch sizes are left out."""
    config = {"model_id": settings.model_id, "prompt": settings.prompt, "max_new_tokens": settings.max_new_tokens,
              "temperature": settings.temperature, "top_p": settings.top_p,
              "max_image_side": settings.max_image_side}
    return make_fingerprint(kind="enricher", name="caption", version=CAPTIONER_VERSION, config=config)


def prepare_image(data: bytes, *, max_side: int) -> Any:
    """Decode PNG/JPEG bytes to an RGB PIL image whose longer side is at most ``max_side``.

    Raises ``ValueError`` (with the decoder's reason) when the bytes are not an image.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as opened:
            image = opened.convert("RGB")
    except UnidentifiedImageError as exc:
        raise ValueError(f"not an image format PIL can read ({len(data)} bytes)") from exc
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ValueError(f"cannot decode image ({len(data)} bytes): {exc}") from exc
    if max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return image


def encode_png(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def chat_messages(*, prompt: str, image: Any) -> list[dict[str, Any]]:
    """One user turn in the OpenAI chat format: the prompt, then the image as a PNG data URL."""
    url = "data:image/png;base64," + base64.b64encode(encode_png(image)).decode("ascii")
    content = [{"type": "text", "text": prompt}, {"type": "image_url", "image_url": {"url": url}}]
    return [{"role": "user", "content": content}]


class Captioner:
    """Base class: decodes and downscales images, keeps results in order, never raises per image.

    Leaf classes implement :meth:`_caption_images` over prepared RGB PIL images.
    """

    def __init__(self, settings: CaptionSettings) -> None:
        self.settings = settings
        self.model = settings.model_id

    @property
    def fingerprint(self) -> str:
        return caption_fingerprint(self.settings)

    def caption(self, *, images: list[bytes]) -> list[CaptionResult]:
        """One result per image, in order."""
        results: list[CaptionResult | None] = [None] * len(images)
        prepared, positions = [], []
        for i, data in enumerate(images):
            try:
                prepared.append(prepare_image(data, max_side=self.settings.max_image_side))
                positions.append(i)
            except ValueError as exc:
                results[i] = CaptionResult(text=None, error=f"bad_image: {exc}")
        if prepared:
            for i, result in zip(positions, self._caption_images(prepared), strict=True):
                results[i] = result
        return [result for result in results if result is not None]

    def _caption_images(self, images: list[Any]) -> list[CaptionResult]:
        raise NotImplementedError

    def _caption_batched(self, images: list[Any], caption_batch: Callable[[list[Any]], list[CaptionResult]]
                         ) -> list[CaptionResult]:
        """``caption_batch`` over batches of ``batch_size``; a batch that raises is retried image by
        image, so an image the model cannot take (e.g. an extreme aspect ratio) fails alone."""
        results: list[CaptionResult] = []
        size = self.settings.batch_size
        for start in range(0, len(images), size):
            batch = images[start:start + size]
            try:
                results += caption_batch(batch)
            except Exception as exc:  # noqa: BLE001 - a per-image failure is a result, not a crash
                if len(batch) == 1:
                    results.append(self._model_error(exc))
                    continue
                logger.warning("caption batch of %d failed (%s); retrying image by image", len(batch), exc)
                results += [self._caption_alone(caption_batch, image) for image in batch]
        return results

    def _caption_alone(self, caption_batch: Callable[[list[Any]], list[CaptionResult]], image: Any) -> CaptionResult:
        try:
            return caption_batch([image])[0]
        except Exception as exc:  # noqa: BLE001 - see _caption_batched
            return self._model_error(exc)

    def _model_error(self, exc: Exception) -> CaptionResult:
        logger.warning("caption failed: %s: %s", type(exc).__name__, exc)
        return self._result(error=f"model_error: {type(exc).__name__}: {exc}")

    def _result(self, *, text: str | None = None, error: str | None = None, prompt_tokens: int | None = None,
                completion_tokens: int | None = None, seconds: float = 0.0) -> CaptionResult:
        cost = caption_cost(self.settings, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        return CaptionResult(text=text, error=error, prompt_tokens=prompt_tokens,
                             completion_tokens=completion_tokens, seconds=seconds, cost_usd=cost)

    def close(self) -> None:
        """Release clients, pools and models (idempotent)."""

    def __enter__(self) -> Captioner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_caption_settings(settings: CaptionSettings) -> None:
    """Raise :class:`KbRayError` now for what would stop every caption actor (no endpoint, an
    unset API key variable, no model directory), without loading a model."""
    if settings.backend == "openai":
        from kb_ray.http_client import auth_headers

        if not settings.endpoint:
            raise KbRayError("captions.backend=openai needs captions.endpoint, the server's base URL "
                             "(e.g. http://vllm:8000/v1)")
        auth_headers(settings.api_key_env, setting="captions.api_key_env")
    else:
        from kb_ray.enrich.captioners_local import resolve_caption_model_path

        resolve_caption_model_path(settings.model_path)


def build_captioner(settings: CaptionSettings) -> Captioner:
    """The captioner of ``settings.backend``; loads the model or opens the client now."""
    if settings.backend == "openai":
        from kb_ray.enrich.captioners_http import OpenAICompatibleCaptioner

        return OpenAICompatibleCaptioner(settings)
    if settings.backend == "vllm":
        from kb_ray.enrich.captioners_vllm import VllmCaptioner

        return VllmCaptioner(settings)
    if settings.backend == "transformers":
        from kb_ray.enrich.captioners_local import TransformersCaptioner

        return TransformersCaptioner(settings)
    raise KbRayError(f"unknown captions.backend {settings.backend!r}: use transformers, openai or vllm")
