"""Embedding stages: dense text vectors from local models (nothing is downloaded) or from a model
server over HTTP (``runtime: remote``, :mod:`kb_ray.embedding.remote`)."""

from kb_ray.embedding.fingerprint import (
    DEFAULT_TEXT_TEMPLATE,
    RUNTIMES,
    embedder_fingerprint,
)
from kb_ray.embedding.model_files import default_model_path, model_digest
from kb_ray.embedding.text import DEFAULT_MODEL_ID, VECTOR_COLUMN, TextEmbedder

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_TEXT_TEMPLATE",
    "RUNTIMES",
    "VECTOR_COLUMN",
    "TextEmbedder",
    "default_model_path",
    "embedder_fingerprint",
    "model_digest",
]
