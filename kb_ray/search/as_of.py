"""As-of search: the index generation and hydration gate a past catalog point is searched with.

A point is ``{"catalog_version": N}`` — N is a version of the ``documents`` table, the table
whose ``active_version_id`` decides what is visible — or ``{"timestamp": "ISO-8601"}``, which
:class:`~kb_ray.catalog.time_travel.CommitTimeline` resolves to each table's own version at that
time. The generation chosen is the newest retained one (highest ``documents`` version, then
latest built) whose ``catalog_versions`` are all ≤ the point (for ``catalog_version``: whose
``documents`` version is ≤ N), built with the same embedder as the live generation when one is
given; the gate then reads ``documents`` at the point's ``documents`` version, so a document
deleted after the point is still found and one added after it is not. No such generation (or a
point before the catalog's history) raises :class:`NoCoveringGeneration` (HTTP 409).
docs/search.md, "As-of search".
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.time_travel import CommitTimeline, parse_timestamp
from kb_ray.errors import CatalogError, KbRayError
from kb_ray.index.generations import GenerationError, load_manifest
from kb_ray.index.manifest import GenerationManifest

GATE_TABLE = "documents"


class NoCoveringGeneration(KbRayError):
    """No retained index generation (or catalog history) covers an as-of point; HTTP 409."""


class AsOfError(KbRayError):
    """An as-of point is malformed (both or neither key, a version that does not exist yet); HTTP 400."""


@dataclass(frozen=True)
class AsOfTarget:
    """What an as-of search reads: one generation, and ``documents`` at one version."""

    generation_id: str
    documents_version: int
    point: dict[str, int]  # the resolved point: table -> version (only documents for catalog_version)
    segment: int = 0  # the generation's delta segments 1..segment are searched with it (kb_ray/index/segments.py)


def resolve_point(catalog: DeltaCatalog, as_of: dict[str, Any], *, timeline: CommitTimeline | None = None,
                  tables: tuple[str, ...] = ()) -> dict[str, int]:
    """The point as table versions: ``{"documents": N}``, or every table of ``tables`` (and
    ``documents``) at the timestamp."""
    version, timestamp = as_of.get("catalog_version"), as_of.get("timestamp")
    if (version is None) == (timestamp is None):
        raise AsOfError('as_of takes exactly one of {"catalog_version": N} or {"timestamp": "ISO-8601"}')
    if version is not None:
        latest = catalog.delta_table(GATE_TABLE).version()
        if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= latest:
            raise AsOfError(f"as_of.catalog_version is a version of the documents table, 0..{latest}; got {version!r}")
        return {GATE_TABLE: version}
    when = parse_timestamp(timestamp)
    found = (timeline or CommitTimeline(catalog)).versions_at(sorted({GATE_TABLE, *tables}), when)
    missing = sorted(name for name, v in found.items() if v is None)
    if missing:
        raise NoCoveringGeneration(f"the catalog has no history at {when.isoformat()} (tables {missing} had no "
                                   "commit yet, or their history was vacuumed): pick a later time")
    return {name: int(v) for name, v in found.items()}


def retained_generations(catalog: DeltaCatalog) -> list[dict[str, Any]]:
    """``index_generations`` rows as ``{"generation_id", "segment", "catalog_versions", "created_at"}``:
    a delta segment's row (id ``gen_…/seg_NNNN``) is its base generation searched with segments
    1..NNNN, covering the versions that segment was built at."""
    rows = catalog.read("index_generations", columns=["generation_id", "catalog_versions_json", "created_at"])
    return [{**_generation_and_segment(r["generation_id"]),
             "catalog_versions": json.loads(r["catalog_versions_json"] or "{}"), "created_at": r["created_at"]}
            for r in rows.to_pylist()]


def _generation_and_segment(row_id: str) -> dict[str, Any]:
    base, _, segment = row_id.partition("/")
    return {"generation_id": base, "segment": int(segment.removeprefix("seg_")) if segment else 0}


def covering(generations: list[dict[str, Any]], point: dict[str, int]) -> list[dict[str, Any]]:
    """The generations covered by ``point``, best first (the newest ``documents`` version, then built
    latest): every table both name is at or below the point (a timestamp point names every table the
    generations name; a ``catalog_version`` point names ``documents`` only)."""
    def inside(versions: dict[str, int]) -> bool:
        return GATE_TABLE in versions and all(v <= point[name] for name, v in versions.items() if name in point)

    found = [g for g in generations if inside(g["catalog_versions"])]
    return sorted(found, key=lambda g: (g["catalog_versions"][GATE_TABLE], str(g["created_at"]), g["segment"]),
                  reverse=True)


def choose_target(catalog: DeltaCatalog, as_of: dict[str, Any], *, kb_root: str,
                  storage_options: dict[str, str] | None = None, embedder_fp: str | None = None,
                  timeline: CommitTimeline | None = None) -> AsOfTarget:
    """The generation and gate version for ``as_of``; raises NoCoveringGeneration or AsOfError."""
    generations = retained_generations(catalog)
    tables = tuple(sorted({name for g in generations for name in g["catalog_versions"]}))
    point = resolve_point(catalog, as_of, timeline=timeline, tables=tables)
    for candidate in covering(generations, point):
        manifest = _manifest_or_none(kb_root, candidate["generation_id"], storage_options)
        if manifest is not None and (embedder_fp is None or manifest.embedder_fp == embedder_fp):
            return AsOfTarget(manifest.generation_id, point[GATE_TABLE], point, segment=candidate["segment"])
    raise NoCoveringGeneration(f"no retained index generation covers as_of {_shown(as_of)} (catalog point "
                               f"{point}): every kept generation was built from later table versions, or "
                               "with another embedder; pick a later point or build an index at it "
                               "(build_index with catalog_versions)")


def _manifest_or_none(kb_root: str, generation_id: str, storage_options: dict[str, str] | None
                      ) -> GenerationManifest | None:
    try:
        return load_manifest(kb_root, generation_id, storage_options=storage_options)
    except GenerationError:  # dropped since it was recorded
        return None


def _shown(as_of: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in as_of.items() if v is not None}, default=str)


class AsOfSearchers:
    """A small LRU of searchers pinned to (generation, documents version), made by ``make``
    (``HybridSearcher.at`` in the service), each with its past gate read before it is kept; thread-safe."""

    def __init__(self, catalog: DeltaCatalog, *, kb_root: str, make: Any, storage_options: dict[str, str] | None = None,
                 size: int = 4) -> None:
        self.catalog, self.kb_root, self.make, self.size = catalog, kb_root, make, size
        self.storage_options = storage_options
        self.timeline = CommitTimeline(catalog)
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, int, int], Any] = OrderedDict()

    def searcher_for(self, as_of: dict[str, Any], *, embedder_fp: str | None = None) -> Any:
        try:
            target = choose_target(self.catalog, as_of, kb_root=self.kb_root, storage_options=self.storage_options,
                                   embedder_fp=embedder_fp, timeline=self.timeline)
        except CatalogError as exc:  # a bad timestamp, or a documents version vacuum took
            raise AsOfError(str(exc)) from exc
        key = (target.generation_id, target.segment, target.documents_version)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        searcher = self.make(generation_id=target.generation_id, gate_version=target.documents_version,
                             segment=target.segment)
        try:
            searcher.gate.snapshot()  # read the past pointers now: vacuum may have removed them
        except (CatalogError, OSError) as exc:
            raise NoCoveringGeneration(f"documents version {target.documents_version} can no longer be read "
                                       f"(vacuumed?): pick a later point ({exc})") from exc
        with self._lock:
            self._cache[key] = searcher
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return searcher
