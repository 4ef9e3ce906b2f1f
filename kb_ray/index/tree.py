"""The section tree of a generation (``index.tree``): one node per section, searchable.

Built by ``build_index`` from the same hydration rows as the text shards (so from the same
catalog versions), with the sections of kb_ray/index/sections.py. Files under
``{generation}/tree/``:

* ``nodes.parquet`` — one row per node (:data:`NODE_SCHEMA`): ids, parent, title, heading
  path, span, pages, its own chunk ids, the summary (extractive, or LLM-written with
  ``index.tree_summaries: generator``: kb_ray/index/tree_summaries.py) and key terms, and the
  document's filter columns (as in the hydration files) so filters and the gate apply to
  nodes as they do to chunks;
* ``dense.faiss`` — a flat inner-product index over the nodes' texts (path, summary, key
  terms) embedded with the generation's text embedder;
* ``lexical/`` — a channel BM25 index (kb_ray/index/channels.py) over the same texts:
  ``body`` the node text, ``heading`` the heading path and document title, ``path`` the
  file name, ``exact`` the text's compounds and numbers.

Rows are ordered by (version id, node ordinal), so a rebuild writes the same files.
"""

from __future__ import annotations

import logging
from itertools import groupby
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.bm25 import CorpusStatistics
from kb_ray.index.channels import CHANNELS, ChannelBm25Index, file_name
from kb_ray.index.dense import build_faiss_index
from kb_ray.index.rows import TIMESTAMP
from kb_ray.index.sections import (
    KEY_TERMS,
    LEAD_SENTENCES,
    PATH_SEPARATOR,
    Section,
    SectionChunk,
    document_sections,
)

logger = logging.getLogger(__name__)

TREE_DIR, NODES_FILE, DENSE_FILE, LEXICAL_DIR = "tree", "nodes.parquet", "dense.faiss", "lexical"
TREE_INDEX_FORMAT = 1
EMBED_BATCH = 256
DOCUMENT_COLUMNS = ("uri", "collection", "tags", "mime", "created_at", "metadata_json", "acl")

NODE_SCHEMA = pa.schema([
    ("node_id", pa.string()), ("document_id", pa.string()), ("version_id", pa.string()),
    ("parent_id", pa.string()), ("title", pa.string()), ("heading_path", pa.list_(pa.string())),
    ("depth", pa.int32()), ("ordinal", pa.int32()), ("span_start", pa.int64()), ("span_end", pa.int64()),
    ("pages", pa.list_(pa.int32())), ("chunk_ids", pa.list_(pa.string())), ("subtree_chunks", pa.int32()),
    ("summary", pa.string()), ("key_terms", pa.list_(pa.string())), ("document_title", pa.string()),
    ("uri", pa.string()), ("collection", pa.string()), ("tags", pa.list_(pa.string())), ("mime", pa.string()),
    ("created_at", TIMESTAMP), ("metadata_json", pa.string()), ("acl", pa.list_(pa.string())),
])


def tree_spec(analyzer: TextAnalyzer, *, summary_enricher_fp: str | None = None) -> dict[str, Any]:
    """What changes the tree's content (part of the generation's spec); ``summary_enricher_fp``:
    the LLM summary writer's fingerprint (``index.tree_summaries: generator``)."""
    spec = {"format": TREE_INDEX_FORMAT, "summary": "extractive", "lead_sentences": LEAD_SENTENCES,
            "key_terms": KEY_TERMS, "analyzer": analyzer.spec(), "dense": "flat"}
    if summary_enricher_fp is not None:  # keys only then, so the extractive tree keeps its generation ids
        spec.update(summary="generator", summary_enricher_fp=summary_enricher_fp)
    return spec


def section_chunk(row: dict[str, Any]) -> SectionChunk:
    return SectionChunk(chunk_id=row["chunk_id"], ordinal=int(row["ordinal"] or 0), text=row["text"] or "",
                        heading_path=tuple(row["heading_path"] or ()),
                        spans=tuple((s["start"], s["end"]) for s in row["spans"] or ()),
                        pages=tuple(row["pages"] or ()))


def node_rows(hydration: pa.Table, analyzer: TextAnalyzer, *, summarizer: Any = None) -> pa.Table:
    """The nodes of every version in ``hydration`` (rows of :data:`HYDRATION_SCHEMA`).
    ``summarizer`` (kb_ray/index/tree_summaries.py) maps the sections' inputs to their LLM
    summaries (None: keep the extractive one)."""
    names = ["chunk_id", "document_id", "version_id", "title", "text", "heading_path", "spans", "pages", "ordinal",
             *DOCUMENT_COLUMNS]
    rows = sorted(hydration.select(names).to_pylist(), key=lambda r: (r["version_id"], r["ordinal"] or 0))
    out: list[dict[str, Any]] = []
    inputs: list[Any] = []
    for version_id, group in groupby(rows, key=lambda r: r["version_id"]):
        chunks = list(group)
        first = chunks[0]
        sections = document_sections(first["document_id"], version_id, first["title"],
                                     [section_chunk(r) for r in chunks], analyzer=analyzer)
        document = {"document_title": first["title"], **{name: first[name] for name in DOCUMENT_COLUMNS}}
        out.extend({**node_dict(section), **document} for section in sections)
        if summarizer is not None:
            inputs.extend(_section_inputs(sections, chunks, first["title"] or first["document_id"]))
    if summarizer is not None:
        for row, summary in zip(out, summarizer(inputs)):
            if summary:
                row["summary"] = summary
    return pa.Table.from_pylist(out, schema=NODE_SCHEMA)


def _section_inputs(sections: list[Section], chunks: list[dict[str, Any]], title: str) -> list[Any]:
    """What the summary writer sees of each section: the text of its subtree's chunks in order."""
    from kb_ray.index.tree_summaries import SectionInput

    out = []
    for section in sections:
        path = tuple(section.heading_path)
        text = "\n\n".join(c["text"] or "" for c in chunks
                            if tuple(c["heading_path"] or ())[:len(path)] == path)
        out.append(SectionInput(title=title, path=PATH_SEPARATOR.join(path), text=text))
    return out


def node_dict(section: Section) -> dict[str, Any]:
    return {name: getattr(section, name) for name in NODE_SCHEMA.names if hasattr(section, name)}


def node_texts(nodes: pa.Table) -> list[str]:
    """Path (the document title for a root), summary and key terms of each node."""
    return [f"{' > '.join(path) or title or ''}\n{summary}\n{' '.join(terms)}".strip()
            for path, title, summary, terms in zip(*(nodes.column(c).to_pylist() for c in
                                                     ("heading_path", "document_title", "summary", "key_terms")))]


def node_channels(nodes: pa.Table, analyzer: TextAnalyzer) -> dict[str, list[list[str]]]:
    texts = node_texts(nodes)
    headings = [" \n ".join([title or "", *path]) for title, path in
                zip(nodes.column("document_title").to_pylist(), nodes.column("heading_path").to_pylist())]
    return {"body": [analyzer.terms(t) for t in texts], "heading": [analyzer.terms(h) for h in headings],
            "path": [analyzer.terms(file_name(u)) for u in nodes.column("uri").to_pylist()],
            "exact": [analyzer.exact_terms(t) for t in texts]}


def build_tree_index(folder: Path, hydration: pa.Table, *, embedder: Any, analyzer: TextAnalyzer,
                     summarizer: Any = None) -> dict[str, Any] | None:
    """Write the tree files into ``folder``; the manifest entry, or None without chunks.
    ``summarizer``: LLM section summaries (``index.tree_summaries: generator``)."""
    nodes = node_rows(hydration, analyzer, summarizer=summarizer)
    if nodes.num_rows == 0:
        return None
    folder.mkdir(parents=True)
    texts = node_texts(nodes)
    vectors = np.concatenate([np.asarray(embedder.embed_texts(texts[i:i + EMBED_BATCH]), np.float32)
                              for i in range(0, len(texts), EMBED_BATCH)])
    faiss.write_index(build_faiss_index(vectors, "flat"), str(folder / DENSE_FILE))
    channels = node_channels(nodes, analyzer)
    statistics = {name: CorpusStatistics.of(channels[name]) for name in CHANNELS}
    lexical = ChannelBm25Index.build(channels, statistics, tie_keys=nodes.column("node_id").to_pylist(),
                                     analyzer=analyzer)
    lexical.save(folder / LEXICAL_DIR)
    pq.write_table(nodes, folder / NODES_FILE, compression="zstd")
    logger.info("section tree: %d nodes of %d documents", nodes.num_rows,
                len(set(nodes.column("document_id").to_pylist())))
    entry = {"format": TREE_INDEX_FORMAT, "dir": folder.name, "rows": nodes.num_rows, "dim": int(vectors.shape[1]),
             "nodes": NODES_FILE, "dense": DENSE_FILE, "lexical": LEXICAL_DIR}
    if summarizer is not None:
        entry["summaries"] = summarizer.stats
    return entry

