"""Candidates gathered across shards (kb_ray/search/shard.py ``gather_ranked``), and hits hydrated
from the hydration rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb_ray.index.manifest import GenerationManifest
from kb_ray.search.evidence import ChunkText
from kb_ray.search.shard import SearchShard


@dataclass(frozen=True)
class Candidate:
    """Where one chunk lives (shard, row) and its rank and score per stage."""

    chunk_id: str
    shard: int
    row: int
    ranks: dict[str, int | None] = field(default_factory=dict)
    scores: dict[str, float | None] = field(default_factory=dict)


GENERATED_CHUNK_KINDS = frozenset({"figure_description"})  # model-written text: nothing in the document to quote


def lineage(row: dict[str, Any], manifest: GenerationManifest | None) -> dict[str, Any]:
    """How a hit was made: the ingest run and parser/chunker of its version, the embedder and
    catalog versions of its generation. ``parser_version`` is the parser fingerprint (``parser_fp``);
    version facts are ``None`` in generations built before format 3."""
    return {
        "run_id": row.get("run_id"), "parser": row.get("parser"), "parser_version": row.get("parser_fp"),
        "chunker": row.get("chunker_fp"), "pipeline_fp": row.get("pipeline_fp"),
        "embedder": manifest.embedder_fp if manifest else None,
        "generation": manifest.generation_id if manifest else None,
        "catalog_versions": dict(manifest.catalog_versions) if manifest else {},
    }


def hydrate(candidate: Candidate, shard: SearchShard, *, score: float,
            manifest: GenerationManifest | None = None) -> dict[str, Any]:
    """The hit dict the API returns; ``quote`` is the canonical text at the chunk's spans,
    ``None`` for a generated chunk (a figure's caption by a VLM), which cites its figure's
    page and box through ``regions`` instead."""
    row = shard.hydration.slice(candidate.row, 1).to_pylist()[0]
    chunk_kind = row.get("chunk_kind") or "text"  # generations built before chunk kinds were indexed
    return {
        "kind": "chunk", "chunk_id": row["chunk_id"], "document_id": row["document_id"], "version_id": row["version_id"],
        "title": row["title"], "uri": row["uri"], "collection": row["collection"], "mime": row["mime"],
        "score": score, "ranks": dict(candidate.ranks), "scores": dict(candidate.scores),
        "chunk_kind": chunk_kind, "generated": chunk_kind in GENERATED_CHUNK_KINDS,
        "text": row["text"], "quote": None if chunk_kind in GENERATED_CHUNK_KINDS else row["text"],
        "spans": [(span["start"], span["end"]) for span in row["spans"] or []],
        "pages": list(row["pages"] or []),
        "regions": [{"page": r["page"], "bbox": [round(r[c], 4) for c in ("x0", "y0", "x1", "y1")]} for r in row["regions"] or []],
        "heading_path": list(row["heading_path"] or []), "ordinal": row.get("ordinal"),
        "lineage": lineage(row, manifest),
    }


def chunk_text(candidate: Candidate, shard: SearchShard) -> ChunkText:
    """The text, spans and element regions evidence selection reads for one chunk hit."""
    table = shard.hydration
    row = {name: table.column(name)[candidate.row].as_py()
           for name in ("text", "spans", "regions", "element_regions") if name in table.column_names}
    fallback = tuple({"page": r["page"], "bbox": [round(r[c], 4) for c in ("x0", "y0", "x1", "y1")]}
                     for r in row["regions"] or [])
    return ChunkText(text=row["text"], spans=tuple((s["start"], s["end"]) for s in row["spans"] or []),
                     element_regions=tuple(row.get("element_regions") or ()), fallback_regions=fallback)


class ChunkLocator:
    """(version_id, ordinal) → that chunk's text row, across the shards of one generation."""

    def __init__(self, shards: list[SearchShard]) -> None:
        self._shards = shards
        self._where: dict[tuple[str, int], tuple[int, int]] | None = None

    def __call__(self, version_id: str, ordinal: int) -> dict[str, Any] | None:
        if self._where is None:
            self._where = {(vid, int(o)): (n, row) for n, shard in enumerate(self._shards)
                           for row, (vid, o) in enumerate(zip(shard.hydration.column("version_id").to_pylist(),
                                                              shard.hydration.column("ordinal").to_pylist()))}
        place = self._where.get((version_id, ordinal))
        if place is None:
            return None
        table = self._shards[place[0]].hydration
        return {name: table.column(name)[place[1]].as_py() for name in ("chunk_id", "ordinal", "text", "heading_path")}
