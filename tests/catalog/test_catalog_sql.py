"""Read-only DuckDB sessions over a real Delta catalog."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import duckdb
import pyarrow as pa
import pytest
from catalog_rows import embedding_rows

from kb_ray.catalog.contract import schemas, table_spec
from kb_ray.catalog.sql import (
    list_ready_queries,
    load_ready_query,
    open_sql_session,
    resolve_versions,
    run_query,
)
from kb_ray.errors import CatalogError

READY_QUERIES = {
    "documents_by_status", "failure_reasons", "chunks_per_document",
    "embedding_coverage", "stage_durations",
}


def test_session_has_a_view_for_every_table_and_catalog_view(catalog):
    connection = open_sql_session(catalog)
    names = {row[0] for row in connection.execute("SHOW TABLES").fetchall()}
    expected = set(schemas().TABLE_NAMES) | {"active_documents", "active_chunks"}
    assert expected <= names
    for name in schemas().TABLE_NAMES:
        assert connection.execute(f"SELECT count(*) FROM {name}").fetchone() == (0,)


def test_views_apply_the_hydration_gate(populated_catalog):
    active = run_query(populated_catalog, "SELECT document_id FROM active_documents ORDER BY 1")
    assert active.column("document_id").to_pylist() == ["doc_a", "doc_c"]
    chunks = run_query(populated_catalog, "SELECT chunk_id FROM active_chunks ORDER BY 1")
    assert chunks.column("chunk_id").to_pylist() == ["ch_1", "ch_2", "ch_3"]


def test_ready_queries_are_listed_and_each_runs(populated_catalog):
    assert READY_QUERIES <= set(list_ready_queries())
    for name in list_ready_queries():
        sql = load_ready_query(name)
        assert sql.lstrip().startswith("--"), f"{name}.sql needs a comment header"
        run_query(populated_catalog, sql)


def test_ready_queries_run_on_an_empty_catalog(catalog):
    for name in list_ready_queries():
        run_query(catalog, load_ready_query(name))


def test_embedding_coverage_counts_active_chunks(populated_catalog):
    result = run_query(populated_catalog, load_ready_query("embedding_coverage")).to_pylist()
    assert result == [
        {"embedder_fp": "fp_e", "n_active_chunks": 3, "n_embedded": 2,
         "share_embedded": pytest.approx(2 / 3)}
    ]


def test_failure_reasons_groups_by_reason(populated_catalog):
    result = run_query(populated_catalog, load_ready_query("failure_reasons")).to_pylist()
    assert [(r["reason"], r["n_failures"]) for r in result] == [("encrypted", 1)]


def test_failure_reasons_takes_the_example_uri_and_error_from_the_same_failure(catalog):
    """min(uri) and min(error) taken apart named a.pdf with b.pdf's error."""
    failures = [("file:///a.pdf", "corrupt: pdfium cannot open a.pdf"), ("file:///b.pdf", "corrupt: b.pdf is truncated")]
    catalog.append("ingest_log", pa.Table.from_pylist(
        [{"run_id": "run_1", "collection": "c", "uri": uri, "action": "failed", "status": "failed", "error": error,
          "reason": "corrupt"} for uri, error in failures], schema=table_spec("ingest_log").schema))
    (row,) = run_query(catalog, load_ready_query("failure_reasons")).to_pylist()
    assert (row["reason"], row["n_failures"]) == ("corrupt", 2)
    assert (row["example_uri"], row["example_error"]) == failures[0]


def test_unknown_ready_query_names_the_available_ones():
    with pytest.raises(CatalogError, match="embedding_coverage"):
        load_ready_query("no_such_query")


def test_as_of_reads_older_table_versions(catalog):
    catalog.append("embeddings", embedding_rows("s1"))
    catalog.append("embeddings", embedding_rows("s2"))
    count = "SELECT count(*) AS n FROM embeddings"
    assert run_query(catalog, count).column("n").to_pylist() == [2]
    assert run_query(catalog, count, as_of={"embeddings": 1}).column("n").to_pylist() == [1]
    assert run_query(catalog, count, as_of=1).column("n").to_pylist() == [1]
    versions = run_query(catalog, "SELECT * FROM catalog_table_versions", as_of=1)
    read_at = dict(zip(*versions.to_pydict().values()))
    assert read_at["embeddings"] == 1 and read_at["chunks"] == 0  # chunks never reached 1


def test_as_of_rejects_unknown_tables_and_versions(catalog):
    with pytest.raises(CatalogError, match="unknown tables"):
        resolve_versions(catalog, {"nope": 0})
    with pytest.raises(CatalogError, match="do not exist"):
        resolve_versions(catalog, {"embeddings": 5})


def test_session_is_read_only(populated_catalog, tmp_path):
    connection = open_sql_session(populated_catalog)
    with pytest.raises(duckdb.Error):
        connection.execute(f"COPY documents TO '{tmp_path / 'out.parquet'}'")
    with pytest.raises(duckdb.Error):
        connection.execute("INSERT INTO documents (document_id) VALUES ('doc_x')")
    assert populated_catalog.read("documents").num_rows == 3


@pytest.mark.parametrize("statement", [
    "SELECT * FROM read_text('/etc/hostname')", "SELECT * FROM read_csv('/etc/passwd')", "SELECT * FROM glob('/*')",
    "ATTACH '{tmp}/other.duckdb'", "INSTALL httpfs", "LOAD httpfs", "SET enable_external_access = true",
    "SET lock_configuration = false", "SET memory_limit = '1TB'",
])
def test_session_reaches_no_file_extension_or_setting(populated_catalog, tmp_path, statement):
    connection = open_sql_session(populated_catalog)
    with pytest.raises(duckdb.Error):
        connection.execute(statement.format(tmp=tmp_path))
    assert not (tmp_path / "other.duckdb").exists()


def test_query_errors_become_catalog_errors(catalog):
    with pytest.raises(CatalogError, match="catalog query failed"):
        run_query(catalog, "SELECT no_such_column FROM documents")


def test_as_of_a_time_reads_each_table_at_its_own_version(catalog):
    def now():
        time.sleep(0.02)
        moment = datetime.now(timezone.utc)
        time.sleep(0.02)
        return moment

    before = now()
    catalog.append("embeddings", embedding_rows("t1"))
    between = now()
    catalog.append("embeddings", embedding_rows("t2"))
    count = "SELECT count(*) AS n FROM embeddings"
    assert run_query(catalog, count, as_of=between).column("n").to_pylist() == [1]
    assert run_query(catalog, count, as_of=before).column("n").to_pylist() == [0]
    read_at = resolve_versions(catalog, between)
    assert read_at["embeddings"] == 1 and read_at["chunks"] == 0
    with pytest.raises(CatalogError, match="no history"):
        resolve_versions(catalog, datetime(2000, 1, 1, tzinfo=timezone.utc))
