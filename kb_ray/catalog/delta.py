"""``DeltaCatalog``: the catalog of record, one Delta table per ``catalog/schemas.py`` entry.

Tables live under ``{kb_root}/tables/{name}`` (a local path or an object-store URI opened
with delta-rs ``storage_options``). Every write is cast to the contract schema first.
Idempotence is ours to enforce: delta-rs records app transactions but does not skip a
repeated one, so writers that pass ``app_id``/``app_version`` are skipped when
``transaction_version(app_id) >= app_version``.

A ``DeltaCatalog`` holds its root URI, storage options and one opened ``DeltaTable`` per
table, brought up to date with ``update_incremental()`` on each use: a micro-batch reads
only the log entries committed since its last call instead of replaying the log (and
its checkpoint) for every read and commit. Each thread keeps its own opened tables (two
threads never share one ``DeltaTable``), and they are not pickled, so a catalog still
travels to Ray workers and is safe to share across threads.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
from deltalake import DeltaTable, Schema, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from kb_ray.catalog import contract
from kb_ray.catalog.commits import (
    already_committed,
    check_files,
    commit_properties,
    retry_on_conflict,
)
from kb_ray.catalog.datafiles import DataFile, write_data_file
from kb_ray.catalog.storage import ensure_dir, join_uri, normalize_root, read_text, write_text
from kb_ray.errors import CatalogError

log = logging.getLogger(__name__)

MARKER_NAME = "_kb_ray_catalog.json"


class DeltaCatalog:
    """The Delta tables of one knowledge base. Use :meth:`open` to get one."""

    def __init__(self, kb_root: str, *, storage_options: dict[str, str] | None = None) -> None:
        self.kb_root = normalize_root(kb_root)
        self.storage_options = dict(storage_options or {})
        self._opened = threading.local()  # per thread: table name -> DeltaTable

    def __getstate__(self) -> dict[str, Any]:
        return {"kb_root": self.kb_root, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["kb_root"], storage_options=state["storage_options"])

    # -- opening -----------------------------------------------------------------------

    @classmethod
    def open(
        cls, kb_root: str, *, storage_options: dict[str, str] | None = None, create: bool = True
    ) -> DeltaCatalog:
        """Open the catalog at ``kb_root``, creating missing tables when ``create``.

        A catalog that exists (its marker is there, same schema version) always gets the
        tables this kb-ray adds created, ``create`` or not: a new table is additive, and
        readers of an older catalog must not fail on it.

        Raises ``CatalogError`` when the catalog was written under another schema
        version, or when there is no catalog and ``create`` is false.
        """
        catalog = cls(kb_root, storage_options=storage_options)
        marker = catalog._read_marker()
        if marker is not None:
            contract.check_schema_version(marker.get("schema_version"), where=catalog.marker_uri)
        for name in contract.schemas().TABLE_NAMES:
            catalog._open_or_create_table(name, create=create or marker is not None)
        if marker is None:
            catalog._write_marker()
        return catalog

    @property
    def marker_uri(self) -> str:
        return join_uri(self.kb_root, MARKER_NAME)

    def table_uri(self, table_name: str) -> str:
        contract.table_spec(table_name)
        return join_uri(self.kb_root, "tables", table_name)

    def _read_marker(self) -> dict[str, Any] | None:
        text = read_text(self.marker_uri, self.storage_options)
        return None if text is None else json.loads(text)

    def _write_marker(self) -> None:
        marker = {
            "schema_version": contract.schemas().SCHEMA_VERSION,
            "tables": list(contract.schemas().TABLE_NAMES),
            "created_at": datetime.now(timezone.utc).isoformat(),
        }
        ensure_dir(self.kb_root)
        write_text(self.marker_uri, json.dumps(marker, indent=2), self.storage_options)

    def _open_or_create_table(self, table_name: str, *, create: bool) -> None:
        uri = self.table_uri(table_name)
        if DeltaTable.is_deltatable(uri, storage_options=self.storage_options):
            found = self.delta_table(table_name).metadata().configuration.get(
                contract.SCHEMA_VERSION_KEY
            )
            contract.check_schema_version(found, where=uri)
            self._add_missing_columns(table_name)
            return
        if not create:
            raise CatalogError(
                f"no kb-ray catalog at {self.kb_root} (table {table_name!r} is missing at {uri}): "
                "run `kb-ray ingest` first, or point kb_root (--set kb_root=PATH) at an existing knowledge base"
            )
        self._create_table(table_name, uri)

    def _add_missing_columns(self, table_name: str) -> None:
        """Add the nullable columns the contract gained since the table was created (an
        additive change under the same schema version); old rows read them as null."""
        present = set(pa.schema(self.delta_table(table_name).schema().to_arrow()).names)
        missing = [field for field in contract.table_spec(table_name).schema if field.name not in present]
        if not missing:
            return
        if not all(field.nullable for field in missing):
            raise CatalogError(f"{table_name}: the catalog lacks non-nullable columns {[f.name for f in missing]}; "
                               "this needs a migration (a new schema version), not an additive change")
        try:
            self.delta_table(table_name).alter.add_columns(Schema.from_arrow(pa.schema(missing)).fields)
        except (CommitFailedError, DeltaError):  # another process added them first
            self.delta_table(table_name).update_incremental()
            if not set(f.name for f in missing) <= set(pa.schema(self.delta_table(table_name).schema().to_arrow()).names):
                raise
        log.info("added columns %s to catalog table %s", [f.name for f in missing], table_name)

    def _create_table(self, table_name: str, uri: str) -> None:
        spec = contract.table_spec(table_name)
        ensure_dir(uri)
        try:
            DeltaTable.create(
                uri,
                spec.schema,
                mode="ignore",
                partition_by=list(spec.partition_by) or None,
                name=table_name,
                description=" ".join(spec.doc.split()),
                configuration={contract.SCHEMA_VERSION_KEY: str(contract.schemas().SCHEMA_VERSION)},
                storage_options=self.storage_options,
                raise_if_key_not_exists=False,
            )
        except CommitFailedError:  # another process created it first
            if not DeltaTable.is_deltatable(uri, storage_options=self.storage_options):
                raise
        log.info("created catalog table %s at %s", table_name, uri)

    # -- reading -----------------------------------------------------------------------

    def delta_table(self, table_name: str, *, version: int | None = None) -> DeltaTable:
        """The table at its latest version (the cached one, updated incrementally), or a
        fresh ``DeltaTable`` at ``version``. Do not move the returned table to another
        version (``load_as_version``): ask for ``version=`` instead."""
        if version is not None:
            return self._load_table(table_name, version)
        tables = self._opened.__dict__.setdefault("tables", {})
        table = tables.get(table_name)
        if table is None:
            table = tables[table_name] = self._load_table(table_name, None)
        else:
            table.update_incremental()
        return table

    def _load_table(self, table_name: str, version: int | None) -> DeltaTable:
        uri = self.table_uri(table_name)
        try:
            return DeltaTable(uri, version=version, storage_options=self.storage_options)
        except TableNotFoundError as exc:
            raise CatalogError(
                f"catalog table {table_name!r} not found at {uri}: run `kb-ray ingest` first, or point "
                "kb_root (--set kb_root=PATH) at an existing knowledge base"
            ) from exc
        except DeltaError as exc:
            raise CatalogError(
                f"cannot load {table_name!r} at version {version}: {exc}. Use "
                "table_versions() for the latest version; old versions vanish after vacuum"
            ) from exc

    def dataset(self, table_name: str, *, version: int | None = None) -> pads.Dataset:
        """The table as a pyarrow dataset (only the files of that Delta version)."""
        return self.delta_table(table_name, version=version).to_pyarrow_dataset()

    def read(
        self,
        table_name: str,
        *,
        version: int | None = None,
        columns: Sequence[str] | None = None,
        filter: pads.Expression | None = None,
    ) -> pa.Table:
        """Read rows (optionally a column subset and a pyarrow filter expression)."""
        dataset = self.dataset(table_name, version=version)
        try:
            return dataset.to_table(columns=list(columns) if columns else None, filter=filter)
        except pa.ArrowNotImplementedError:
            # delta-rs merges may write string_view columns whose statistics pyarrow cannot
            # compare with plain strings: filter after reading instead of pushing down.
            table = dataset.to_table().filter(filter) if filter is not None else dataset.to_table()
            return table.select(list(columns)) if columns else table

    def table_versions(self) -> dict[str, int]:
        """The latest version of every table (what an index generation records)."""
        return {name: self.delta_table(name).version() for name in contract.schemas().TABLE_NAMES}

    def transaction_version(self, table_name: str, app_id: str) -> int | None:
        """The last committed app-transaction version of ``app_id`` on the table."""
        return self.delta_table(table_name).transaction_version(app_id)

    # -- writing -----------------------------------------------------------------------

    def append(
        self,
        table_name: str,
        data: pa.Table,
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Append rows; False (nothing written) when the app transaction is already done."""
        table = contract.conform(data, table_name)
        dt = self.delta_table(table_name)
        if already_committed(dt, app_id, app_version):
            return False
        properties = commit_properties(app_id, app_version, metadata)
        write_deltalake(dt, table, mode="append", commit_properties=properties)
        return True

    def write_data_file(self, table_name: str, data: pa.Table) -> DataFile:
        """Worker side: write one Parquet file under the table; commit it with ``commit_files``."""
        spec = contract.table_spec(table_name)
        table = contract.conform(data, table_name)
        return write_data_file(
            self.table_uri(table_name), table_name, table,
            keys=spec.keys, storage_options=self.storage_options,
        )

    def commit_files(
        self,
        table_name: str,
        files: Sequence[DataFile],
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        """Driver side: commit worker-written files in ONE Delta transaction.

        Returns False without committing when the app transaction is already recorded
        (or when there is nothing to commit and no app transaction to record).
        """
        spec = contract.table_spec(table_name)
        check_files(table_name, files)
        if not files and app_id is None:
            return False
        properties = commit_properties(app_id, app_version, metadata)

        def commit() -> bool:
            dt = self.delta_table(table_name)
            if already_committed(dt, app_id, app_version):
                return False
            dt.create_write_transaction(
                [f.to_add_action() for f in files], mode="append", schema=spec.schema,
                partition_by=list(spec.partition_by) or None, commit_properties=properties,
            )
            return True

        return retry_on_conflict(commit, what=f"commit files to {table_name}")

    def merge_upsert(
        self,
        table_name: str,
        data: pa.Table,
        *,
        keys: Sequence[str],
        app_id: str | None = None,
        app_version: int | None = None,
        metadata: dict[str, Any] | None = None,
        insert_only: bool = False,
        keep_on_update: Sequence[str] = (),
    ) -> dict[str, Any] | None:
        """MERGE on ``keys``: update all columns when matched (unless ``insert_only``; the
        ``keep_on_update`` columns keep the target's value), insert when not.

        ``insert_only`` is how content-addressed rows (embeddings) are added: delta-rs
        checks the merge against concurrent commits, so two writers adding the same key
        cannot both land it. Conflicts are retried on a freshly loaded table. Returns
        delta-rs merge metrics, or ``None`` when the app transaction is already done.
        """
        source = contract.conform(data, table_name)
        predicate = " AND ".join(f"t.{key} = s.{key}" for key in keys)
        properties = commit_properties(app_id, app_version, metadata)

        def merge() -> dict[str, Any] | None:
            dt = self.delta_table(table_name)
            if already_committed(dt, app_id, app_version):
                return None
            merger = dt.merge(
                source, predicate, source_alias="s", target_alias="t",
                commit_properties=properties,
            )
            if not insert_only:
                merger = (merger.when_matched_update({name: f"s.{name}" for name in source.column_names
                                                      if name not in keep_on_update})
                          if keep_on_update else merger.when_matched_update_all())
            return merger.when_not_matched_insert_all().execute()

        return retry_on_conflict(merge, what=f"merge into {table_name}")

    def delete(self, table_name: str, predicate: str) -> dict[str, Any]:
        """Delete rows matching a SQL predicate (e.g. ``"document_id = 'doc_1'"``)."""
        return retry_on_conflict(
            lambda: self.delta_table(table_name).delete(predicate),
            what=f"delete from {table_name}",
        )

