"""Access to the catalog contract declared in the top-level ``catalog/`` folder.

``catalog/`` holds declarations only (schemas, views, ready queries); this module finds
it, loads ``catalog/schemas.py`` and conforms Arrow data to a table's schema. The folder
is found next to the ``kb_ray`` package (repository checkout or editable install), or at
``$KB_RAY_CATALOG_DIR``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

import pyarrow as pa

from kb_ray.errors import CatalogError

SCHEMA_VERSION_KEY = "kb_ray.schema_version"


def contract_dir() -> Path:
    """The ``catalog/`` folder holding schemas, views and ready queries."""
    override = os.environ.get("KB_RAY_CATALOG_DIR")
    folder = Path(override) if override else Path(__file__).resolve().parents[2] / "catalog"
    if not (folder / "schemas.py").is_file():
        raise CatalogError(
            f"catalog contract not found at {folder}: run from a kb-ray checkout or set "
            "KB_RAY_CATALOG_DIR to the folder holding catalog/schemas.py"
        )
    return folder


@lru_cache(maxsize=1)
def schemas() -> ModuleType:
    """The ``catalog.schemas`` module (imported once, by package name when possible)."""
    path = contract_dir() / "schemas.py"
    try:
        module = importlib.import_module("catalog.schemas")
        if Path(module.__file__ or "").resolve() == path.resolve():
            return module
    except ImportError:
        pass
    return _load_from_file("_kb_ray_catalog_schemas", path)


def _load_from_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while executing
    spec.loader.exec_module(module)
    return module


def table_spec(table_name: str):
    """The ``TableSpec`` of one table; unknown names raise with the known ones."""
    tables = schemas().TABLES
    if table_name not in tables:
        raise CatalogError(
            f"unknown catalog table {table_name!r}; known tables: {', '.join(tables)}"
        )
    return tables[table_name]


def conform(data: pa.Table, table_name: str) -> pa.Table:
    """Cast ``data`` to the table's schema: column order, types, nullability.

    Missing nullable columns become nulls; a missing key column or an unknown column is
    an error (fail loud on integrity). Casting also turns ``large_string`` into
    ``string`` and naive timestamps into UTC, which Delta appends would otherwise reject.
    """
    schema = table_spec(table_name).schema
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    extra = [name for name in data.column_names if name not in schema.names]
    if extra:
        raise CatalogError(
            f"{table_name}: columns {extra} are not in the catalog schema; drop them or "
            f"add them to catalog/schemas.py (expected {schema.names})"
        )
    columns = [_column(data, field, table_name) for field in schema]
    try:
        return pa.Table.from_arrays(columns, names=schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise CatalogError(f"{table_name}: data does not fit the catalog schema: {exc}") from exc


def _column(data: pa.Table, field: pa.Field, table_name: str) -> pa.ChunkedArray:
    if field.name in data.column_names:
        return data.column(field.name)
    if field.nullable:
        return pa.chunked_array([pa.nulls(data.num_rows, field.type)])
    raise CatalogError(f"{table_name}: key column {field.name!r} is missing from the data")


def check_schema_version(found: object, *, where: str) -> None:
    """Refuse a catalog written under a schema version this code does not know."""
    expected = schemas().SCHEMA_VERSION
    if str(found) == str(expected):
        return
    raise CatalogError(
        f"catalog schema version mismatch at {where}: found {found}, this kb-ray expects "
        f"{expected}. Open it with the kb-ray release that wrote it, or migrate the "
        f"catalog to version {expected} (or point kb_root at a new location)."
    )
