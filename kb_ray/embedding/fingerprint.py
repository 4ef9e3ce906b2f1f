"""The text embedder's fingerprint, from the model files and the settings (no torch).

A fingerprint names a vector space: vectors under one fingerprint must be interchangeable,
because a query embedded by one process is compared with chunks embedded by others. So
the fingerprint covers the model (digest of its files), the output dimension, the token
limit, normalization and the text template — and the runtime only where the runtime's
vectors differ from the torch reference by more than :data:`VECTOR_TOLERANCE`.

Measured (``benchmarks/embed.py``, results in ``benchmarks/results/embed.md``; on 3,000
real chunk texts of the sample corpora, all-MiniLM-L6-v2, max over texts of
``|cos(torch, other) - 1|``):

- torch fp32 against itself in other batch compositions (padding): ~1e-7 — the noise
  floor every catalog already lives with;
- ONNX Runtime fp32 (exported, BERT ops fused): ~1e-7, the same floor → same fingerprint;
- torch fp16 (``model.half()``, as on CUDA): ~1e-5 (measured on CPU half kernels here);
- ONNX Runtime dynamic int8: ~1e-2 → a fingerprint of its own.

:data:`VECTOR_TOLERANCE` = 1e-4 sits two orders above the fp32 floor and fp16, and two
below int8. A cosine off by 1e-4 moves a query–chunk score by at most ~0.014 in the worst
case and, in practice, far less; the golden eval (``docs/models.md``) shows no change in
the ranking metrics for runtimes under it. Bigger differences change rankings, and mixing
such vectors in one index would silently degrade search, so they get another fingerprint
(and ``check_embedder`` refuses to mix them unless ``embedding.allow_model_switch``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kb_ray.embedding.model_files import (
    model_digest,
    read_model_layout,
    resolve_model_path,
)
from kb_ray.errors import KbRayError
from kb_ray.ids import fingerprint as make_fingerprint

if TYPE_CHECKING:
    from kb_ray.config import EmbeddingSettings

EMBEDDER_VERSION = "1"
EMBEDDER_NAME = "TextEmbedder"  # the class name the fingerprint has always carried
DEFAULT_TEXT_TEMPLATE = "{heading_path}\n{text}"
HEADING_SEPARATOR = " > "
RUNTIMES = ("torch", "onnx", "onnx-int8")
PRECISIONS = ("auto", "float32", "float16")
VECTOR_TOLERANCE = 1e-4  # max |cos - 1| against torch fp32 for a runtime to share its fingerprint
# Runtimes (and precisions) whose vectors measured beyond VECTOR_TOLERANCE: their name goes
# into the fingerprint. Every other combination keeps the torch fp32 fingerprint exactly.
_DISTINCT_VECTORS = {"onnx-int8"}


def embedder_fingerprint(settings: EmbeddingSettings) -> str:
    """The fingerprint the embedder built from ``settings`` will have, without loading it."""
    return text_embedder_fingerprint(model_path=settings.model_path, model_id=settings.model_id,
                                     normalize=settings.normalize, runtime=settings.runtime)


def text_embedder_fingerprint(*, model_path: str | Path | None, model_id: str, normalize: bool = True,
                              max_seq_length: int | None = None, text_template: str = DEFAULT_TEXT_TEMPLATE,
                              runtime: str = "torch") -> str:
    """Changes with the model's weights and config and anything that changes vectors.

    The local path is deliberately left out: the same files elsewhere are the same model.
    """
    check_runtime(runtime)
    path = resolve_model_path(model_path)
    layout = read_model_layout(path, max_seq_length=max_seq_length)
    config = {
        "model_id": model_id,
        "model_digest": model_digest(path),
        "dim": layout.dim,
        "normalize": normalize,
        "max_seq_length": layout.max_seq_length,
        "text_template": text_template,
        "heading_separator": HEADING_SEPARATOR,
    }
    if runtime in _DISTINCT_VECTORS:
        config["runtime"] = runtime
    return make_fingerprint(kind="embedder", name=EMBEDDER_NAME, version=EMBEDDER_VERSION, config=config)


def check_runtime(runtime: str) -> None:
    if runtime not in RUNTIMES:
        raise KbRayError(f"unknown embedding runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}")
