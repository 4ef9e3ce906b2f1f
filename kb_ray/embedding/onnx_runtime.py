"""The ONNX Runtime runtime of the text embedder (``onnx`` fp32; ``onnx-int8``, ``onnx-int8-mixed`` dynamic int8).

The transformer runs in ONNX Runtime (exported on first use, :mod:`kb_ray.embedding.onnx_export`);
tokenization is the model's own fast tokenizer (``tokenizer.json`` through ``tokenizers``,
truncated to ``max_seq_length`` and padded to the longest text of the batch, as
sentence-transformers does); pooling and L2 normalization are a few numpy lines. With a
warm export cache nothing here imports torch.

Tokenization stays inline: on 230-token chunks it measured about 1-2 % of a batch's time
against the forward pass (``benchmarks/results/embed.md``), not worth a second thread.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from kb_ray.embedding.late import padded_windows
from kb_ray.embedding.model_files import INSTALL_HINT, ONNX_INSTALL_HINT, ModelLayout
from kb_ray.embedding.onnx_export import QUANT_RECIPES, exported_model
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

_POOLINGS = {"mean_tokens", "cls_token", "max_tokens"}
_CPU = "CPUExecutionProvider"
_CUDA = "CUDAExecutionProvider"


class OnnxEncoder:
    """One ONNX Runtime session run per :meth:`encode` call over a batch the caller composed."""

    def __init__(self, path: Path, *, layout: ModelLayout, digest: str, runtime: str, device: str,
                 normalize: bool, num_threads: int | None, cache_dir: str | Path | None) -> None:
        ort = _import_onnxruntime()
        self.pooling = _check_layout(layout, path)
        self.device = _resolve_device(device, ort, runtime)
        self.normalize = normalize
        self.max_seq_length = layout.max_seq_length
        self.tokenizer = load_fast_tokenizer(path, max_length=layout.max_seq_length)
        model_file = exported_model(path, digest=digest, runtime=runtime, cache_dir=cache_dir)
        self.session = _session(ort, model_file, device=self.device, num_threads=num_threads)
        self._inputs = [i.name for i in self.session.get_inputs()]
        logger.info("ONNX Runtime session on %s from %s (%s)", self.device, model_file, self.session.get_providers()[0])

    def encode(self, batch: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(batch)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64), "attention_mask": mask,
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
        hidden = self.session.run(None, {name: feed[name] for name in self._inputs})[0]
        vectors = pool(hidden.astype(np.float32, copy=False), mask, self.pooling)
        if self.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors

    def token_states(self, batch: list[list[int]]) -> list[np.ndarray]:
        """The transformer's last hidden states of each token id sequence (one session run,
        padded to the longest), float32 ``[tokens, hidden]`` each."""
        input_ids, mask = padded_windows(batch)
        feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        hidden = self.session.run(None, {name: feed[name] for name in self._inputs})[0].astype(np.float32, copy=False)
        return [hidden[row, :len(ids)] for row, ids in enumerate(batch)]


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """sentence-transformers' Pooling over ``hidden`` ``[batch, tokens, dim]`` for one mode."""
    if mode == "cls_token":
        return hidden[:, 0].copy()
    weights = mask[:, :, None].astype(np.float32)
    if mode == "max_tokens":
        return np.where(weights > 0, hidden, -1e9).max(axis=1)
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


def load_fast_tokenizer(path: Path, *, max_length: int) -> Any:
    """The model's ``tokenizers.Tokenizer``, truncating at ``max_length`` and padding to the longest."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise KbRayError(f"the onnx embedding runtime needs tokenizers: {INSTALL_HINT}") from exc
    if (path / "tokenizer.json").is_file():
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    else:  # a model saved with a slow tokenizer only: transformers converts it
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True).backend_tokenizer
    pad_token = _pad_token(path)
    pad_id = tokenizer.token_to_id(pad_token)
    if pad_id is None:
        raise KbRayError(f"{path}: the tokenizer has no pad token {pad_token!r}")
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
    return tokenizer


def _pad_token(path: Path) -> str:
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        file = path / name
        if file.is_file():
            token = json.loads(file.read_text()).get("pad_token")
            if isinstance(token, dict):
                token = token.get("content")
            if token:
                return str(token)
    return "[PAD]"


def _check_layout(layout: ModelLayout, path: Path) -> str:
    extra = [t for t in layout.module_types[2:] if t != "Normalize"]
    if extra or len(layout.pooling_modes) != 1 or layout.pooling_modes[0] not in _POOLINGS:
        raise KbRayError(f"{path}: the onnx runtimes support Transformer → Pooling ({', '.join(sorted(_POOLINGS))}) "
                         f"→ [Normalize]; this model has {list(layout.module_types)} with pooling "
                         f"{list(layout.pooling_modes)}: use embedding.runtime=torch")
    return layout.pooling_modes[0]


def _resolve_device(device: str, ort: Any, runtime: str) -> str:
    has_cuda = _CUDA in ort.get_available_providers()
    if device == "auto":
        device = "cuda" if has_cuda and runtime == "onnx" else "cpu"
    if device.startswith("cuda"):
        if runtime in QUANT_RECIPES:
            raise KbRayError(f"embedding.runtime={runtime} is a CPU runtime; on CUDA use runtime onnx or torch")
        if not has_cuda:
            raise KbRayError(f"device={device!r} needs onnxruntime with the CUDAExecutionProvider (the `gpu` extra: "
                             f"onnxruntime-gpu); this onnxruntime has {ort.get_available_providers()}")
    return device


def _session(ort: Any, model_file: Path, *, device: str, num_threads: int | None) -> Any:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = num_threads or 0  # 0: ONNX Runtime's default (all cores)
    options.inter_op_num_threads = 1
    providers: list[Any] = [_CPU]
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        providers = [(_CUDA, {"device_id": index}), _CPU]
    return ort.InferenceSession(str(model_file), options, providers=providers)


def _import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise KbRayError(f"embedding.runtime onnx / onnx-int8 / onnx-int8-mixed needs onnxruntime: {ONNX_INSTALL_HINT} "
                         "(or set embedding.runtime=torch)") from exc
    return onnxruntime
