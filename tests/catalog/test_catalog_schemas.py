"""The catalog contract itself: declarations are complete and consistent."""

from __future__ import annotations

import pyarrow as pa

from kb_ray.catalog.contract import schemas

EXPECTED_TABLES = {
    "sources", "documents", "versions", "elements", "pages", "chunks", "version_chunks", "concepts", "mentions",
    "embeddings", "page_embeddings", "enrichments", "ingest_runs", "ingest_log", "index_generations",
    "answers", "feedback", "leases", "api_keys", "uploads",
}


def test_schema_version_is_an_int():
    assert isinstance(schemas().SCHEMA_VERSION, int)


def test_every_table_is_declared_with_keys_and_a_doc():
    tables = schemas().TABLES
    assert set(tables) == EXPECTED_TABLES
    for name, spec in tables.items():
        assert spec.name == name
        assert spec.keys and set(spec.keys) <= set(spec.schema.names)
        assert set(spec.partition_by) <= set(spec.schema.names)
        assert len(spec.doc.split()) > 15, f"{name} needs a one-paragraph docstring"
        for key in spec.keys:
            assert not spec.schema.field(key).nullable, f"{name}.{key} must be non-null"


def test_strings_are_plain_and_timestamps_are_utc_microseconds():
    def walk(data_type):
        yield data_type
        for index in range(data_type.num_fields):
            yield from walk(data_type.field(index).type)

    for spec in schemas().TABLES.values():
        for field in spec.schema:
            for data_type in walk(field.type):
                assert not pa.types.is_large_string(data_type)
                assert not pa.types.is_large_list(data_type)
                if pa.types.is_timestamp(data_type):
                    assert (data_type.unit, data_type.tz) == ("us", "UTC")
