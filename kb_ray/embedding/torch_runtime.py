"""The torch runtime of the text embedder: sentence-transformers, fp32 on CPU, fp16 on CUDA.

CPU notes (measured; docs/models.md): Ray gives an actor with fractional ``num_cpus``
``OMP_NUM_THREADS=1``, so ``num_threads`` sets torch's (process-wide) thread count
explicitly.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from kb_ray.embedding.late import padded_windows
from kb_ray.embedding.model_files import INSTALL_HINT
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)


class TorchEncoder:
    """One forward pass per :meth:`encode` call over a batch the caller composed."""

    def __init__(self, path: Path, *, device: str, precision: str, normalize: bool,
                 max_seq_length: int | None, num_threads: int | None) -> None:
        torch, sentence_transformer_cls = _import_backend()
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self.device = resolve_device(device, torch)
        self.precision = resolve_precision(precision, self.device)
        self.normalize = normalize
        self.model = _load_model(sentence_transformer_cls, path, self.device, normalize, max_seq_length)
        if self.precision == "float16":
            self.model.half()
        self.max_seq_length = int(self.model.max_seq_length)

    def encode(self, batch: list[str]) -> np.ndarray:
        out = self.model.encode(batch, batch_size=len(batch), normalize_embeddings=self.normalize,
                                convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def token_states(self, batch: list[list[int]]) -> list[np.ndarray]:
        """The transformer's last hidden states of each token id sequence (one forward pass,
        padded to the longest), float32 ``[tokens, hidden]`` each."""
        import torch

        padded, attention = padded_windows(batch)
        input_ids, mask = torch.from_numpy(padded), torch.from_numpy(attention)
        features = {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device),
                    "token_type_ids": torch.zeros_like(input_ids).to(self.device)}
        with torch.inference_mode():
            states = self.model[0](features)["token_embeddings"].float().cpu().numpy()
        return [states[row, :len(ids)] for row, ids in enumerate(batch)]


def resolve_device(device: str, torch: Any) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise KbRayError(f"device={device!r} was requested but torch sees no CUDA GPU; use 'cpu' or 'auto'")
    return device


def resolve_precision(precision: str, device: str) -> str:
    """``auto``: fp16 on CUDA (tensor cores, half the memory), fp32 on CPU (fp16 is slow there)."""
    if precision == "auto":
        return "float16" if device.startswith("cuda") else "float32"
    return precision


def _import_backend() -> tuple[Any, Any]:
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise KbRayError(f"the torch embedding runtime needs torch and sentence-transformers: {INSTALL_HINT}") from exc
    return torch, SentenceTransformer


def _load_model(cls: Any, path: Path, device: str, normalize: bool, max_seq_length: int | None) -> Any:
    model = cls(str(path), device=device, local_files_only=True)
    if not normalize:
        _drop_normalize_modules(model)
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    logger.info("loaded %s with sentence-transformers on %s", path, device)
    return model.eval()


def _drop_normalize_modules(model: Any) -> None:
    for name, module in list(model.named_children()):
        if type(module).__name__ == "Normalize":
            del model._modules[name]
