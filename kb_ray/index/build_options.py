"""A generation's build options: the settings that decide what it holds.

Shards, dense and lexical index types, the BM25 analyzer, passage vectors, the section tree,
the concept graph, contextual texts, the embedder that embeds tree sections and contexts, and
the generator that writes generated contexts or summaries. A build records them in the
generation's manifest (``build_options``), and every delta segment and compaction over that
generation is built with them, not with the refreshing process's config (docs/indexes.md): an
upload through a service configured without ``index.tree`` keeps the live generation's tree.
Where the catalog lives, devices, threads and batch sizes stay the caller's. A manifest written
before the options were recorded has them read back from its spec (:func:`options_from_spec`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kb_ray.config import IndexSettings, KbConfig
from kb_ray.embedding.fingerprint import embedder_fingerprint
from kb_ray.index.manifest import GenerationManifest
from kb_ray.index.vector_layout import VectorLayout

INDEX_OPTIONS = ("shards", "dense", "flat_max_vectors", "hnsw_m", "ivf_nlist", "passage_chars", "vector_layout",
                 "late_overlap_tokens", "lexical",
                 "lexical_stem", "lexical_identifiers", "lexical_heading_in_body", "tree", "graph", "contextual",
                 "contextual_writer", "contextual_in", "contextual_document_chars", "contextual_max_tokens",
                 "tree_summaries", "tree_summary_input_chars", "tree_summary_max_tokens")
EMBEDDER_OPTIONS = ("model_path", "model_id", "runtime", "normalize", "endpoint", "api_key_env", "dimensions")
GENERATOR_OPTIONS = ("generator", "model_id", "model_path", "endpoint", "api_key_env", "temperature")


def build_options(config: KbConfig) -> dict[str, dict[str, Any]]:
    """What a generation built with ``config`` records in its manifest."""
    return {"index": _pick(config.index, INDEX_OPTIONS), "embedding": _pick(config.embedding, EMBEDDER_OPTIONS),
            "answer": _pick(config.answer, GENERATOR_OPTIONS)}


def generation_config(config: KbConfig, manifest: GenerationManifest) -> KbConfig:
    """``config`` with the build options of ``manifest``'s generation. The embedder's settings
    are taken only where the configured embedder is another one than the generation's, the
    generator's only where the generation has generated contexts or summaries."""
    recorded = manifest.build_options or {"index": options_from_spec(manifest.spec)}
    index = config.index.model_copy(update=recorded.get("index", {}))
    update: dict[str, Any] = {"index": index}
    if recorded.get("embedding") and manifest.embedder_fp and not _same_embedder(config, manifest.embedder_fp):
        update["embedding"] = config.embedding.model_copy(update=recorded["embedding"])
    if recorded.get("answer") and _uses_generator(index):
        update["answer"] = config.answer.model_copy(update=recorded["answer"])
    return config.model_copy(update=update)


def options_from_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The index options a manifest's spec tells (kb_ray/index/build.py ``index_spec``); the
    generator budgets (``*_max_tokens``, ``*_chars``) it does not, and they stay the caller's."""
    options = {key: spec[key] for key in ("shards", "dense", "flat_max_vectors", "hnsw_m", "ivf_nlist", "lexical")
               if key in spec}
    layout = VectorLayout.from_spec(spec)
    options.update(passage_chars=layout.max_chars, vector_layout=layout.kind, late_overlap_tokens=layout.overlap_tokens)
    lexical_text = spec.get("lexical_text") if isinstance(spec.get("lexical_text"), dict) else {}
    if "heading_in_body" in lexical_text:
        options["lexical_heading_in_body"] = lexical_text["heading_in_body"]
    analyzer = lexical_text.get("analyzer") or (spec.get("tree") or {}).get("analyzer")
    if analyzer:
        options.update(lexical_stem=analyzer["stem"], lexical_identifiers=analyzer["identifiers"])
    options.update(tree="tree" in spec, graph="graph" in spec, contextual="contextual" in spec)
    if "tree" in spec:
        options["tree_summaries"] = spec["tree"].get("summary", "extractive")
    if "contextual" in spec:
        options.update(contextual_writer=spec["contextual"].get("writer", "extractive"),
                       contextual_in=spec["contextual"].get("in", "both"))
    return options


def _pick(settings: BaseModel, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: value for name, value in settings.model_dump(mode="json").items() if name in names}


def _same_embedder(config: KbConfig, embedder_fp: str) -> bool:
    return embedder_fingerprint(config.embedding) == embedder_fp


def _uses_generator(index: IndexSettings) -> bool:
    return (index.contextual and index.contextual_writer == "generator") or \
        (index.tree and index.tree_summaries == "generator")
