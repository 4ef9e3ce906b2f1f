"""Parquet data files written by workers and committed later by the driver.

A worker task calls :func:`write_data_file` (through ``DeltaCatalog.write_data_file``):
it casts one Arrow table to the catalog schema and writes it as one uniquely named
Parquet file directly under the table directory. The returned :class:`DataFile` is small
and picklable; the driver collects them and commits them all in one Delta transaction
(``DeltaCatalog.commit_files``). Until that commit the file is invisible to readers and
``vacuum`` removes it if the commit never happens.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.transaction import AddAction

from kb_ray.catalog.storage import filesystem, join_uri

_FLAT_TYPES = (pa.types.is_string, pa.types.is_integer, pa.types.is_boolean)


@dataclass(frozen=True)
class DataFile:
    """One Parquet file written under a table's directory, not yet committed."""

    table_name: str
    path: str  # relative to the table root, as Delta's add action wants it
    size: int
    num_records: int
    modification_time: int  # milliseconds since the epoch
    stats: str  # Delta file statistics as JSON

    def to_add_action(self) -> AddAction:
        return AddAction(
            path=self.path,
            size=self.size,
            partition_values={},
            modification_time=self.modification_time,
            data_change=True,
            stats=self.stats,
        )


def write_data_file(
    table_uri: str,
    table_name: str,
    data: pa.Table,
    *,
    keys: tuple[str, ...],
    storage_options: dict[str, str] | None = None,
) -> DataFile:
    """Write ``data`` (already conformed to the schema) as one Parquet file."""
    relative = f"part-{uuid.uuid4().hex}-c000.snappy.parquet"
    fs, root = filesystem(table_uri, storage_options)
    path = join_uri(root, relative)
    pq.write_table(data, path, filesystem=fs, compression="snappy")
    return DataFile(
        table_name=table_name,
        path=relative,
        size=fs.get_file_info(path).size,
        num_records=data.num_rows,
        modification_time=int(time.time() * 1000),
        stats=file_stats(data, keys=keys),
    )


def file_stats(data: pa.Table, *, keys: tuple[str, ...]) -> str:
    """Delta statistics: numRecords, null counts of flat columns, min/max of key columns.

    Min/max are exact (not truncated) and only for flat key columns, where merges and
    deletes use them to prune files; large text columns would only bloat the log.
    """
    stats: dict = {"numRecords": data.num_rows, "nullCount": {}}
    minimum: dict = {}
    maximum: dict = {}
    for field, column in zip(data.schema, data.columns):
        if not any(check(field.type) for check in _FLAT_TYPES):
            continue
        stats["nullCount"][field.name] = column.null_count
        if field.name in keys and data.num_rows > column.null_count:
            bounds = pc.min_max(column).as_py()
            minimum[field.name], maximum[field.name] = bounds["min"], bounds["max"]
    if minimum:
        stats["minValues"], stats["maxValues"] = minimum, maximum
    return json.dumps(stats)
