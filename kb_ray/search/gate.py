"""The hydration gate at query time: which versions are active in the catalog right now.

An index generation is built from past table versions; documents may since have been
tombstoned or superseded. ``ActivePointers`` reads ``documents.active_version_id`` from
the latest catalog version, caching it for ``max_age_s`` seconds, so a hit is shown only
while its version is still the document's active one (promise 4, docs/architecture.md).
With ``version`` it reads ``documents`` at that Delta version instead: the pointers as they
were (as-of search, kb_ray/search/as_of.py); a past version never changes, so it is read once.
:meth:`ActivePointers.at_least` drops a cached set read before a given ``documents`` version:
the service passes the version a delete committed at with every later search, so every
searcher replica hides the document at once (docs/upload.md).
"""

from __future__ import annotations

import itertools
import threading
import time

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.delta import DeltaCatalog

_tokens = itertools.count(1)


class ActivePointers:
    def __init__(self, catalog: DeltaCatalog, *, max_age_s: float = 2.0, version: int | None = None) -> None:
        self.catalog = catalog
        self.version = version
        self.max_age_s = float("inf") if version is not None else max_age_s
        self._lock = threading.Lock()
        self._snapshot: tuple[int, float, pa.Array] | None = None
        self._read_from = -1  # the cached set was read at this documents version or a later one

    def snapshot(self) -> tuple[int, pa.Array]:
        """``(token, active version ids)``; the token changes whenever the set is re-read."""
        with self._lock:
            if self._snapshot is None or time.monotonic() - self._snapshot[1] > self.max_age_s:
                self._read_from, active = self._read()
                self._snapshot = (next(_tokens), time.monotonic(), active)
            return self._snapshot[0], self._snapshot[2]

    def invalidate(self) -> None:
        with self._lock:
            self._snapshot = None

    def at_least(self, documents_version: int) -> None:
        """Re-read on the next :meth:`snapshot` unless the cached set is from ``documents_version``
        or later (a write the caller knows of, such as a delete, is then never missed)."""
        with self._lock:
            if self._snapshot is not None and self.version is None and self._read_from < documents_version:
                self._snapshot = None

    def _read(self) -> tuple[int, pa.Array]:
        """``(a documents version at or before the one read, active version ids)``."""
        known = self.version if self.version is not None else self.catalog.delta_table("documents").version()
        table = self.catalog.read("documents", version=self.version, columns=["active_version_id"],
                                  filter=pc.field("active_version_id").is_valid())
        return known, pc.unique(table.column("active_version_id")).cast(pa.string())
