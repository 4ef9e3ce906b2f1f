import json

import pyarrow as pa
from catalog_rows import NOW, embedding_rows

from kb_ray.catalog.maintenance import generation_versions, maintain


def record_generation(catalog, versions: dict[str, int]) -> None:
    catalog.append("index_generations", pa.Table.from_pylist([{
        "generation_id": "gen_x", "kind": "hybrid", "spec_fp": "fp", "catalog_versions_json": json.dumps(versions),
        "manifest_uri": "m", "status": "ready", "created_at": NOW, "stats_json": "{}"}]))


def test_vacuum_keeps_the_versions_a_generation_was_built_from(catalog):
    for sha in ("a", "b", "c"):
        catalog.append("embeddings", embedding_rows(sha))
    built_from = catalog.table_versions()["embeddings"]
    record_generation(catalog, {"embeddings": built_from})
    catalog.delete("embeddings", "embed_text_sha = 'a'")
    catalog.append("embeddings", embedding_rows("d"))
    assert generation_versions(catalog) == {"embeddings": [built_from]}

    report = maintain(catalog, retention_hours=0)
    assert report.tables["embeddings"].kept_versions == [built_from]
    assert report.tables["embeddings"].files_removed >= 2
    old = catalog.read("embeddings", version=built_from).column("embed_text_sha").to_pylist()
    assert sorted(old) == ["a", "b", "c"]  # time travel to the generation's version still works
    assert sorted(catalog.read("embeddings").column("embed_text_sha").to_pylist()) == ["b", "c", "d"]
    assert report.tables["embeddings"].vacuumed_files >= 1  # but files only older versions used are gone
