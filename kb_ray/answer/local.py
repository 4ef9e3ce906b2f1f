"""An in-process :class:`Answerer`: ``HybridSearcher`` and the packaged text embedder, no Ray."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kb_ray.answer.answerer import Answerer
from kb_ray.answer.generators import make_generator
from kb_ray.config import KbConfig


def local_answerer(config: KbConfig, *, embedder: Any = None,
                   log: Callable[[dict, dict], None] | None = None) -> Answerer:
    """Answers over the live index generation of ``config.kb_root``. ``embedder``: an already
    loaded ``TextEmbedder`` (default: ``TextEmbedder.from_settings(config.embedding)``). ``log``: the
    answers' log (default: the ``answers`` table of the catalog when ``answer.log`` is true)."""
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.search.searcher import HybridSearcher

    if embedder is None:
        embedder = TextEmbedder.from_settings(config.embedding, num_threads=config.search.query_threads)
    searcher = HybridSearcher.open(config, embedder=embedder)
    if log is None and config.answer.log:
        from kb_ray.answer.log import AnswerLog

        answer_log = AnswerLog(searcher.catalog)

        def log(request: dict, response: dict) -> None:  # the row names the generation searched
            answer_log.append(request, {"generation": searcher.generation, **response})
    threshold = searcher.assembler.threshold(config.answer.evidence or config.search.evidence)
    generator = make_generator(config.answer, abstain_below=threshold)
    return Answerer(config.answer, generator=generator, search=searcher_search(searcher),
                    embed=embedder.embed_texts, log=log, catalog=lambda: open_document_catalog(config))


def searcher_search(searcher: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ``/v1/search`` body → ``SearchResult.to_dict()`` over an in-process searcher."""

    def search(body: dict[str, Any]) -> dict[str, Any]:
        searcher.refresh()
        return searcher.search(body["query"], k=body.get("k"), mode=body.get("mode") or "hybrid",
                               filters=body.get("filter"), rerank=body.get("rerank"),
                               context_chars=body.get("context_chars") or 0,
                               evidence=body.get("evidence")).to_dict()

    return search


def open_document_catalog(config: KbConfig) -> Any:
    """The catalog summary and compare read the named documents from (opened, never created;
    once per kb_root: reading a document view goes through a fresh SQL session anyway)."""
    return _open_catalog(config.kb_root, tuple(sorted(config.storage_options.items())))


@functools.lru_cache(maxsize=8)
def _open_catalog(kb_root: str, storage_options: tuple[tuple[str, str], ...]) -> Any:
    from kb_ray.catalog.delta import DeltaCatalog

    return DeltaCatalog.open(kb_root, storage_options=dict(storage_options), create=False)
