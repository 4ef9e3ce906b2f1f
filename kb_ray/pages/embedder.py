"""``PageEmbedder``: page images and queries → multivectors with a local ColQwen2 model.

Route on CPU-only machines (and the default everywhere): transformers' native
``ColQwen2ForRetrieval`` + ``ColQwen2Processor``, with the image processor built
explicitly as ``Qwen2VLImageProcessorPil`` (the PIL backend) so torchvision is never
needed. colpali-engine cannot serve here: its ColQwen2 processor imports transformers'
torchvision-backed Qwen2-VL image processor (no torchvision on these machines) and
colpali-engine >= 0.3.9 pins torch < 2.14, which ties it to a torch/torchvision pair we do
not install. On a GPU cluster it plugs in through ``backend="colpali"`` (an optional
import: ``pip install colpali-engine``), for checkpoints that ship only as colpali-engine
adapters; it is never part of the default install. Eager attention on CPU: with padded batches, sdpa on CPU gave
NaN scores in transformers 5.x.

Nothing is downloaded: ``model_path`` must be a saved model directory.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kb_ray.config import PagesSettings
from kb_ray.embedding.model_files import model_digest
from kb_ray.embedding.torch_runtime import resolve_device
from kb_ray.errors import KbRayError
from kb_ray.ids import fingerprint as make_fingerprint
from kb_ray.model_dirs import local_model_dir
from kb_ray.pages import multivectors

logger = logging.getLogger(__name__)
PAGE_EMBEDDER_VERSION = "1"
_INSTALL_HINT = "pip install kb-ray[embed]"


def resolve_page_model_path(model_path: str | None) -> Path:
    if not model_path:
        raise KbRayError("pages.enabled needs pages.model_path: a local ColQwen2 directory (models are never "
                         "downloaded; `kb-ray dev tiny-models --out DIR` writes a tiny one for tests)")
    return local_model_dir(model_path, what="page embedding model", kind="ColQwen2")


def page_embedder_fingerprint(settings: PagesSettings) -> str:
    """The fingerprint of the configured page embedder, computed without loading the model."""
    path = resolve_page_model_path(settings.model_path)
    config = {"model_id": settings.model_id, "model_digest": model_digest(path), "dtype": settings.dtype,
              "dpi": settings.dpi, "pooling": settings.pooling,
              "pool_factor": settings.pool_factor if settings.pooling != "none" else None,
              "stored_dtype": multivectors.STORED_DTYPE}
    return make_fingerprint(kind="page_embedder", name="PageEmbedder", version=PAGE_EMBEDDER_VERSION, config=config)


class PageEmbedder:
    """Embeds page images and query strings into L2-normalized multivectors ``[n, dim]``."""

    def __init__(self, settings: PagesSettings, *, backend: str = "transformers") -> None:
        torch = _import_torch()
        self.settings = settings
        self.path = resolve_page_model_path(settings.model_path)
        self.device = resolve_device(settings.device, torch)
        self.fingerprint = page_embedder_fingerprint(settings)
        self._torch = torch
        loader = _load_transformers if backend == "transformers" else _load_colpali
        self.model, self.processor = loader(self.path, self.device, getattr(torch, settings.dtype))
        self.image_token_id = self.processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.merge_size = int(self.processor.image_processor.merge_size)
        logger.info("loaded page embedder %s from %s on %s", settings.model_id, self.path, self.device)

    def embed_images(self, images: Sequence[Any]) -> list[np.ndarray]:
        """One float32 multivector per PIL image (after the configured token pooling)."""
        return self._embed_batches(images, lambda batch: self.processor.process_images(images=batch), pool=True)

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        """One float32 multivector per query string (batched)."""
        if isinstance(queries, str):
            raise TypeError("embed_queries takes a list of strings")
        return self._embed_batches(queries, lambda batch: self.processor.process_queries(text=batch), pool=False)

    def _embed_batches(self, items: Sequence[Any], process: Any, *, pool: bool) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        size = self.settings.batch_size
        for start in range(0, len(items), size):
            out += self._forward(process(list(items[start:start + size])), pool=pool)
        return out

    def _forward(self, inputs: Any, *, pool: bool) -> list[np.ndarray]:
        inputs = inputs.to(self.device)
        with self._torch.inference_mode():
            embeddings = self.model(**inputs).embeddings.float().cpu().numpy()
        mask = inputs["attention_mask"].cpu().numpy().astype(bool)
        ids = inputs["input_ids"].cpu().numpy()
        grids = inputs["image_grid_thw"].cpu().numpy() if pool and "image_grid_thw" in inputs else None
        result = []
        for i in range(len(embeddings)):
            tokens, token_ids = embeddings[i][mask[i]], ids[i][mask[i]]
            result.append(self._pool(tokens, token_ids, grids[i]) if grids is not None else tokens)
        return result

    def _pool(self, tokens: np.ndarray, token_ids: np.ndarray, grid_thw: np.ndarray) -> np.ndarray:
        mode, factor = self.settings.pooling, self.settings.pool_factor
        if mode == "none" or factor <= 1:
            return tokens
        image = token_ids == self.image_token_id
        if mode == "mean_rows":
            grid = (int(grid_thw[1]) // self.merge_size, int(grid_thw[2]) // self.merge_size)
            pooled = multivectors.mean_rows(tokens[image], grid, factor)
        else:
            pooled = multivectors.hierarchical(tokens[image], factor)
        return np.concatenate([tokens[~image], pooled]).astype(np.float32)


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise KbRayError(f"PageEmbedder needs torch and transformers: {_INSTALL_HINT}") from exc
    return torch


def _load_transformers(path: Path, device: str, dtype: Any) -> tuple[Any, Any]:
    from transformers import AutoTokenizer, ColQwen2ForRetrieval, ColQwen2Processor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    prompts = _processor_prompts(path)
    processor = ColQwen2Processor(
        image_processor=Qwen2VLImageProcessorPil.from_pretrained(path, local_files_only=True),
        tokenizer=AutoTokenizer.from_pretrained(path, local_files_only=True), **prompts)
    attention = "sdpa" if device.startswith("cuda") else "eager"
    model = ColQwen2ForRetrieval.from_pretrained(path, local_files_only=True, dtype=dtype,
                                                 attn_implementation=attention)
    return model.to(device).eval(), processor


def _processor_prompts(path: Path) -> dict[str, str]:
    config = path / "processor_config.json"
    data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    return {key: data[key] for key in ("visual_prompt_prefix", "query_prefix") if data.get(key)}


def _load_colpali(path: Path, device: str, dtype: Any) -> tuple[Any, Any]:  # pragma: no cover - GPU clusters
    try:
        from colpali_engine.models import ColQwen2, ColQwen2Processor
    except ImportError as exc:
        raise KbRayError("backend='colpali' needs colpali-engine (GPU images only): pip install colpali-engine") from exc
    model = ColQwen2.from_pretrained(str(path), torch_dtype=dtype, local_files_only=True).to(device).eval()
    return _ColpaliAdapter(model), ColQwen2Processor.from_pretrained(str(path), local_files_only=True)


class _ColpaliAdapter:  # pragma: no cover - GPU clusters
    """colpali-engine models return the embeddings tensor itself; expose ``.embeddings``."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, **inputs: Any) -> Any:
        return type("Output", (), {"embeddings": self.model(**inputs)})()
