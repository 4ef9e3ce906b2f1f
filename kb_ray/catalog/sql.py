"""Read-only DuckDB sessions over the catalog.

Every catalog table is registered as a view over ``DeltaTable.to_pyarrow_dataset()`` at
the selected table version (DuckDB's own delta extension needs a download, which these
machines cannot do), then the views of ``catalog/views.sql`` are created. The session is
an in-memory DuckDB with external access disabled after set-up: queries cannot write
files, and registered Arrow datasets cannot be written through, so nothing goes back to
the catalog. A ``catalog_table_versions`` view says which version of each table the
session reads.

``as_of`` selects table versions (Delta versions are per table, not global):

* ``None`` — the latest version of every table.
* ``dict`` — ``{table: version}``, e.g. the ``catalog_versions_json`` an index generation
  recorded; tables not named are read at their latest version.
* ``int`` — that version for each table whose history reaches it; a table whose latest
  version is lower is read at its latest. Handy for one table or a quick look back;
  for a consistent multi-table snapshot pass the dict or a time.
* ``datetime`` — each table at its own version at that time, from the Delta log's commit
  timestamps (kb_ray/catalog/time_travel.py); a table with no commit that early is read at
  version 0, its empty creation. The consistent snapshot of "the catalog at 10:00".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import duckdb
import pyarrow as pa

from kb_ray.catalog import contract
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.time_travel import versions_at_time
from kb_ray.errors import CatalogError

AsOf = int | datetime | Mapping[str, int] | None


def open_sql_session(catalog: DeltaCatalog, *, as_of: AsOf = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every table and catalog view registered."""
    versions = resolve_versions(catalog, as_of)
    connection = duckdb.connect(":memory:")
    # delta-rs merges and deletes write string_view Parquet columns, and pyarrow 26 cannot
    # evaluate a pushed-down string filter against them ("no kernel matching (string,
    # string_view)"). Keep filters in DuckDB until the writer or pyarrow closes that gap.
    connection.execute("SET disabled_optimizers = 'filter_pushdown'")
    for name, version in versions.items():
        connection.register(name, catalog.dataset(name, version=version))
    connection.register("catalog_table_versions", _versions_table(versions))
    views = _views_sql()
    if views.strip():
        connection.execute(views)
    connection.execute("SET enable_external_access = false")
    connection.execute("SET lock_configuration = true")  # and no later SET may undo it
    return connection


def run_query(catalog: DeltaCatalog, sql: str, *, as_of: AsOf = None) -> pa.Table:
    """Run one query in a fresh read-only session and return the result as Arrow."""
    connection = open_sql_session(catalog, as_of=as_of)
    try:
        return connection.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise CatalogError(f"catalog query failed: {exc}") from exc
    finally:
        connection.close()


def resolve_versions(catalog: DeltaCatalog, as_of: AsOf) -> dict[str, int]:
    """The table version each table is read at, for the ``as_of`` rules above."""
    latest = catalog.table_versions()
    if as_of is None:
        return latest
    if isinstance(as_of, datetime):
        return versions_at_time(catalog, as_of, latest)
    if isinstance(as_of, int):
        return {name: min(as_of, version) for name, version in latest.items()}
    unknown = sorted(set(as_of) - set(latest))
    if unknown:
        raise CatalogError(f"as_of names unknown tables {unknown}; known: {sorted(latest)}")
    too_new = {n: v for n, v in as_of.items() if v > latest[n] or v < 0}
    if too_new:
        raise CatalogError(
            f"as_of versions {too_new} do not exist; latest versions are "
            f"{ {n: latest[n] for n in too_new} }"
        )
    return {**latest, **{name: int(version) for name, version in as_of.items()}}


def list_ready_queries() -> list[str]:
    """Names of the ready queries in ``catalog/queries/`` (file names without ``.sql``)."""
    return sorted(path.stem for path in (contract.contract_dir() / "queries").glob("*.sql"))


def load_ready_query(name: str) -> str:
    """The SQL text of one ready query."""
    path = contract.contract_dir() / "queries" / f"{name}.sql"
    if not path.is_file():
        raise CatalogError(
            f"no ready query named {name!r}; available: {', '.join(list_ready_queries())}"
        )
    return path.read_text(encoding="utf-8")


def _views_sql() -> str:
    path = contract.contract_dir() / "views.sql"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _versions_table(versions: Mapping[str, int]) -> pa.Table:
    return pa.table(
        {
            "table_name": pa.array(list(versions), pa.string()),
            "version": pa.array(list(versions.values()), pa.int64()),
        }
    )
