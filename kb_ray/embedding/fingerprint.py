"""The text embedder's fingerprint, from the model files and the settings (no torch).

A fingerprint names a vector space: vectors under one fingerprint must be interchangeable,
because a query embedded by one process is compared with chunks embedded by others. So
the fingerprint covers the model (digest of its files), the output dimension, the token
limit, normalization and the text template — and the runtime only where the runtime's
vectors differ from the torch reference by more than :data:`VECTOR_TOLERANCE`.

Measured against torch fp32 on real chunk texts (golden sources, docs, package
descriptions, chunked by the structural chunker; ``benchmarks/embed.py``, figures in
``benchmarks/results/embed.md``), as max over texts of ``|cos(torch, other) - 1|``:

- torch fp32 itself with other batches (other padding): 2.4e-7 (300 texts), the noise
  floor every catalog already lives with;
- ONNX Runtime fp32 (exported, BERT ops fused): 2.4e-7, the same floor, and the golden
  eval ranks identically (same Recall@5 and MRR to 4 digits) → same fingerprint;
- torch fp16 (``model.half()``, the CUDA default): 3.1e-4 on CPU half kernels (20 texts;
  CUDA's fp16 GEMMs accumulate in fp32 and are expected to be closer; the ``gpu`` test in
  ``tests/embedding`` checks the bound on a GPU) → same fingerprint;
- ONNX Runtime dynamic int8 (per-channel weights): 1.6e-2 (mean 7e-3), and golden dense
  Recall@5 drops by 0.022 → a fingerprint of its own;
- ``onnx-int8-mixed`` (int8 with the embedding tables and each layer's FFN down projection
  in fp32): 1.1e-2 on 1,605 realdocs chunks (mean 2.5e-3), closer but still 11x the
  tolerance, and golden dense Recall@5 drops by 0.033 (realdocs: within 0.01) → a
  fingerprint of its own too (``benchmarks/embed_quality.py``, ``benchmarks/results/embed.md``).
  Dynamic int8 vectors also depend on the batch (one activation scale per padded batch): the
  same chunk in other batches measured up to 7e-3 apart (onnx-int8: 2e-2).

:data:`VECTOR_TOLERANCE` = 1e-3 sits three times above fp16 and sixteen times below int8.
Vectors under it are interchangeable for search (a GPU-ingested catalog is served by a CPU
query embedder); beyond it rankings change (int8), and mixing such vectors in one index
would silently degrade search, so they get another fingerprint (``check_embedder`` then
refuses to mix them unless ``embedding.allow_model_switch``). The golden effect of fp16
itself could not be measured here (no GPU).

A remote embedder (``runtime: remote``, :mod:`kb_ray.embedding.remote`) has no files to
digest: its fingerprint covers the served model's name, the requested ``dimensions``,
normalization and the text template (:func:`remote_embedder_fingerprint`). That a server
still serves the same vectors under that name is checked by a probe vector against the
same :data:`VECTOR_TOLERANCE` (:mod:`kb_ray.embedding.probe`).
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
RUNTIMES = ("torch", "onnx", "onnx-int8", "onnx-int8-mixed", "remote")
PRECISIONS = ("auto", "float32", "float16")
VECTOR_TOLERANCE = 1e-3  # max |cos - 1| against torch fp32 for a runtime to share its fingerprint
# Runtimes (and precisions) whose vectors measured beyond VECTOR_TOLERANCE: their name goes
# into the fingerprint. Every other combination keeps the torch fp32 fingerprint exactly.
_DISTINCT_VECTORS = {"onnx-int8", "onnx-int8-mixed"}


def embedder_fingerprint(settings: EmbeddingSettings) -> str:
    """The fingerprint the embedder built from ``settings`` will have, without loading it
    (or, for a remote embedder, without calling the server)."""
    if settings.runtime == "remote":
        return remote_embedder_fingerprint(model_id=settings.model_id, dimensions=settings.dimensions,
                                           normalize=settings.normalize)
    return text_embedder_fingerprint(model_path=settings.model_path, model_id=settings.model_id,
                                     normalize=settings.normalize, runtime=settings.runtime)


def text_embedder_fingerprint(*, model_path: str | Path | None, model_id: str, normalize: bool = True,
                              max_seq_length: int | None = None, text_template: str = DEFAULT_TEXT_TEMPLATE,
                              runtime: str = "torch") -> str:
    """Changes with the model's weights and config and anything that changes vectors.

    The local path is deliberately left out: the same files elsewhere are the same model.
    """
    check_runtime(runtime)
    if runtime == "remote":
        raise KbRayError("a remote embedder has no model files: use embedder_fingerprint(settings)")
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


def remote_embedder_fingerprint(*, model_id: str, dimensions: int | None, normalize: bool,
                                text_template: str = DEFAULT_TEXT_TEMPLATE) -> str:
    """A served model's vector space: its name, the requested size, normalization, template.

    The endpoint is left out (the same model behind another server is the same space); the
    probe check (:mod:`kb_ray.embedding.probe`) catches a server that changed the model behind
    the name."""
    config = {"model_id": model_id, "dimensions": dimensions, "normalize": normalize,
              "text_template": text_template, "heading_separator": HEADING_SEPARATOR}
    return make_fingerprint(kind="embedder", name="RemoteTextEmbedder", version=EMBEDDER_VERSION, config=config)


def check_runtime(runtime: str) -> None:
    if runtime not in RUNTIMES:
        raise KbRayError(f"unknown embedding runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}")
