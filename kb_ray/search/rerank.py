"""Reranking: a ``Reranker`` scores (query, passage) pairs; higher is better.

:func:`reranker_from_settings` is the one factory: the local :class:`CrossEncoderReranker`
(``search.rerank_model_path``), the :class:`~kb_ray.search.rerank_remote.RemoteReranker`
(``search.rerank_endpoint``), or none."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kb_ray.errors import KbRayError

if TYPE_CHECKING:
    from kb_ray.config import SearchSettings

logger = logging.getLogger(__name__)


class Reranker(Protocol):
    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


def reranker_from_settings(settings: SearchSettings, *, device: str = "cpu") -> Reranker | None:
    """The reranker ``settings`` configure (``device``: the local cross-encoder's), or None."""
    if settings.rerank_endpoint:
        from kb_ray.search.rerank_remote import RemoteReranker

        return RemoteReranker(settings)
    if settings.rerank_model_path:
        return CrossEncoderReranker(settings.rerank_model_path, device=device)
    return None


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` loaded from a local directory (never downloaded)."""

    def __init__(self, model_path: str | Path, *, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise KbRayError("reranking needs sentence-transformers: pip install kb-ray[embed]") from exc
        if not Path(model_path).is_dir():
            raise KbRayError(f"rerank model not found at {model_path}: expected a saved cross-encoder directory")
        self.model_path = str(model_path)
        self.batch_size = batch_size
        self._model = CrossEncoder(self.model_path, num_labels=1, device=device, local_files_only=True)
        logger.info("loaded cross-encoder from %s on %s", model_path, device)

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        pairs = [(query, passage) for passage in passages]
        scores = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False,
                                     convert_to_numpy=True)
        return [float(s) for s in scores.reshape(len(passages), -1)[:, 0]]
