"""The ingest's periodic compaction, run in one long-lived child process.

delta-rs rewrites every file below the compaction target in the memory of the process that
calls it: each compaction commit of a 100k-file ingest raised the driver's anonymous memory
by ~190 MB for a few seconds (benchmarks/results/scale.md), the largest single term of the
driver's RSS growth. Run in a child, that peak is the child's and ends with each
compaction; the driver only waits for the result. The child is spawned (not forked: the
driver runs Ray's and delta-rs's threads) at the first compaction and keeps its catalog
open, so a compaction does not replay the tables' logs from scratch. The compaction is
still synchronous with the commits (the writer lease makes the driver the only writer, and
a compaction racing a MERGE would conflict), so nothing else changes.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.maintenance import compact_small_files

logger = logging.getLogger(__name__)
_CATALOGS: dict[tuple, DeltaCatalog] = {}  # in the child: the catalogs it keeps open


class CompactionProcess:
    """``compact(tables, target_size=...)`` in a child process of this one; ``close()`` stops it."""

    def __init__(self, catalog: DeltaCatalog) -> None:
        self._catalog_args = (catalog.kb_root, dict(catalog.storage_options))
        self._pool: ProcessPoolExecutor | None = None

    def compact(self, table_names: Sequence[str], *, target_size: int) -> dict[str, dict[str, Any]]:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            logger.debug("started the compaction process")
        return self._pool.submit(_compact, *self._catalog_args, list(table_names), target_size).result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> CompactionProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _compact(kb_root: str, storage_options: dict[str, str], table_names: list[str],
             target_size: int) -> dict[str, dict[str, Any]]:
    key = (kb_root, tuple(sorted(storage_options.items())))
    catalog = _CATALOGS.get(key)
    if catalog is None:
        catalog = _CATALOGS[key] = DeltaCatalog(kb_root, storage_options=storage_options)
    return compact_small_files(catalog, table_names, target_size=target_size)
