"""Embedding stages: dense text vectors from local models (nothing is downloaded)."""

from kb_ray.embedding.text import (
    DEFAULT_MODEL_ID,
    DEFAULT_TEXT_TEMPLATE,
    VECTOR_COLUMN,
    TextEmbedder,
    default_model_path,
    model_digest,
)

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_TEXT_TEMPLATE",
    "VECTOR_COLUMN",
    "TextEmbedder",
    "default_model_path",
    "model_digest",
]
