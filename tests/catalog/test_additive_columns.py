"""A catalog written before a nullable column was added still opens, reads and writes."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable

from kb_ray.catalog import contract
from kb_ray.catalog.delta import DeltaCatalog


def _drop_column_from_table(catalog: DeltaCatalog, table_name: str, column: str) -> None:
    """Recreate one table as an older kb-ray made it: without ``column``."""
    import shutil

    uri = catalog.table_uri(table_name)
    shutil.rmtree(uri)
    spec = contract.table_spec(table_name)
    schema = pa.schema([f for f in spec.schema if f.name != column])
    DeltaTable.create(uri, schema, configuration={contract.SCHEMA_VERSION_KEY: str(contract.schemas().SCHEMA_VERSION)},
                      raise_if_key_not_exists=False)
    old_row = {name: None for name in schema.names} | {"run_id": "r0", "collection": "c", "uri": "u0",
                                                       "action": "failed", "error": "corrupt: old"}
    from deltalake import write_deltalake

    write_deltalake(uri, pa.Table.from_pylist([old_row], schema=schema), mode="append")


def test_an_older_catalog_gains_the_reason_column_and_keeps_its_rows(tmp_path):
    catalog = DeltaCatalog.open(str(tmp_path))
    _drop_column_from_table(catalog, "ingest_log", "reason")
    assert "reason" not in pa.schema(DeltaTable(catalog.table_uri("ingest_log")).schema().to_arrow()).names

    reopened = DeltaCatalog.open(str(tmp_path), create=False)
    rows = reopened.read("ingest_log", columns=["uri", "reason", "error"]).to_pylist()
    assert rows == [{"uri": "u0", "reason": None, "error": "corrupt: old"}]
    reopened.append("ingest_log", pa.Table.from_pylist([{"run_id": "r1", "collection": "c", "uri": "u1",
                                                         "action": "failed", "reason": "encrypted"}]))
    reasons = dict(zip(*reopened.read("ingest_log", columns=["uri", "reason"]).to_pydict().values()))
    assert reasons == {"u0": None, "u1": "encrypted"}
