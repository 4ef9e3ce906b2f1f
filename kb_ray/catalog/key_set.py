"""``KeySet``: which keys a catalog table holds, answered in memory.

A micro-batch asks "which of these keys are new?" of tables that only grow (embeddings,
chunks, documents, sources). Asking Delta costs a scan of the whole key column — the keys
are hashes, so no file's min/max statistics prune anything — and that cost grows with the
catalog. A ``KeySet`` reads the key column once (streamed, one record batch at a time)
and then answers from memory: 16 bytes per key (a 128-bit BLAKE2b digest of the key
values) in a sorted NumPy array, plus the keys added since in a Python set that is folded
into the array now and then. 100k keys take 1.6 MB; 10 M take 160 MB.

It is exact for what a writer needs: a key reported absent was absent when the set was
loaded and has not been added since, so a writer holding the catalog's writer lease
(kb_ray/catalog/lease.py: the only one writing) may append such rows without a MERGE. A
128-bit digest makes a false "present" (two keys, one digest) a 2**-128 event per pair.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads

from kb_ray.catalog.delta import DeltaCatalog

DIGEST_BYTES = 16
FOLD_EVERY = 65_536  # pending keys folded into the sorted array past this many


def digest(values: Sequence[object]) -> bytes:
    """The 128-bit digest of one key (its column values, in key order)."""
    text = "\x1f".join("" if value is None else str(value) for value in values)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=DIGEST_BYTES).digest()


class KeySet:
    """Membership of composite keys; load with :meth:`from_dataset`, then ``contains``/``add``."""

    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=f"S{DIGEST_BYTES}")
        self._pending: set[bytes] = set()

    @classmethod
    def from_dataset(cls, dataset: pads.Dataset, columns: Sequence[str], *,
                     filter: pads.Expression | None = None) -> KeySet:
        """Stream the key columns of ``dataset`` (rows matching ``filter``) into a new set."""
        keys = cls()
        parts = [keys._digests(batch, columns) for batch in
                 dataset.to_batches(columns=list(columns), filter=filter) if batch.num_rows]
        if parts:
            keys._sorted = np.unique(np.concatenate(parts))
        return keys

    def __len__(self) -> int:
        return len(self._sorted) + len(self._pending)

    def contains(self, rows: pa.Table, columns: Sequence[str]) -> np.ndarray:
        """A boolean per row of ``rows``: is its key (``columns``) in the set?"""
        return self._contains(self._digests(rows, columns))

    def held(self, values: Sequence[str]) -> list[str]:
        """The values of a one-column key that the set holds, in their order."""
        found = self._contains(_digest_keys((value,) for value in values))
        return [value for value, hit in zip(values, found.tolist()) if hit]

    def add(self, rows: pa.Table, columns: Sequence[str]) -> None:
        self._add_digests(self._digests(rows, columns).tolist())

    def add_values(self, values: Iterable[str]) -> None:
        """Add values of a one-column key."""
        self._add_digests(_digest_keys((value,) for value in values).tolist())

    def _contains(self, wanted: np.ndarray) -> np.ndarray:
        found = np.zeros(len(wanted), dtype=bool)
        if len(self._sorted):
            at = np.minimum(np.searchsorted(self._sorted, wanted), len(self._sorted) - 1)
            found = self._sorted[at] == wanted
        if self._pending:
            found |= np.fromiter((key in self._pending for key in wanted.tolist()), dtype=bool, count=len(wanted))
        return found

    def _add_digests(self, digests: Iterable[bytes]) -> None:
        self._pending.update(digests)
        if len(self._pending) >= FOLD_EVERY:
            fresh = np.array(sorted(self._pending), dtype=f"S{DIGEST_BYTES}")
            self._sorted = np.union1d(self._sorted, fresh)
            self._pending.clear()

    @staticmethod
    def _digests(rows: pa.Table | pa.RecordBatch, columns: Sequence[str]) -> np.ndarray:
        return _digest_keys(zip(*(rows.column(name).to_pylist() for name in columns)))


def _digest_keys(keys: Iterable[Sequence[object]]) -> np.ndarray:
    return np.array([digest(key) for key in keys], dtype=f"S{DIGEST_BYTES}")


class TableKeys:
    """The key sets of one catalog's tables, each loaded at its first use and kept.

    ``of("embeddings", ["embed_text_sha"], where={"embedder_fp": fp})`` is the set of that
    table's keys among rows whose ``where`` columns equal the given values."""

    def __init__(self, catalog: DeltaCatalog) -> None:
        self.catalog = catalog
        self._sets: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], KeySet] = {}

    def of(self, table_name: str, columns: Sequence[str], *, where: dict[str, str] | None = None) -> KeySet:
        scope = tuple(sorted((where or {}).items()))
        name = (table_name, tuple(columns), scope)
        if name not in self._sets:
            expression = None
            for column, value in scope:
                term = pads.field(column) == value
                expression = term if expression is None else expression & term
            self._sets[name] = KeySet.from_dataset(self.catalog.dataset(table_name), columns, filter=expression)
        return self._sets[name]


class RunKeys:
    """A stage's :class:`TableKeys` for the run it is working for. A stage kept between runs
    (an inline ingest keeps its stages, kb_ray/ingest/inline.py) loads them again for the
    next run, whose catalog has what the earlier one committed."""

    def __init__(self, catalog: DeltaCatalog) -> None:
        self.catalog = catalog
        self._current: tuple[str, TableKeys] | None = None

    def of_run(self, run_id: str) -> TableKeys:
        if self._current is None or self._current[0] != run_id:
            self._current = (run_id, TableKeys(self.catalog))
        return self._current[1]
