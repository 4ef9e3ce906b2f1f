"""Document list, versions and the chunk inspector over a real synthetic Delta catalog (no Ray)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kb_ray.index.manifest import GenerationManifest
from kb_ray.search.chunk_view import chunk_view
from kb_ray.search.document_list import (
    DocumentQueryError,
    decode_cursor,
    document_versions,
    encode_cursor,
    list_documents,
)
from tests.index_fixtures import synthetic_docs, write_synthetic_catalog

DOCS = synthetic_docs(23)
DOCS[4].active = False  # tombstoned: never listed


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    catalog = write_synthetic_catalog(tmp_path_factory.mktemp("reads") / "kb", DOCS)
    documents = catalog.read("documents").to_pylist()
    for row in documents:
        if row["key"] in ("doc-000", "doc-003"):
            row["acl"] = ["team-a"]
    catalog.merge_upsert("documents", pa.Table.from_pylist(documents, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    second = {"version_id": "ver_doc-001-v2", "document_id": "doc_doc-001", "status": "superseded",
              "raw_sha": "raw2", "n_chunks": 1, "pipeline_fp": "pfp"}
    catalog.append("versions", pa.Table.from_pylist([second]))
    return catalog


def _all_pages(catalog, *, filter=None, limit):
    ids, cursor, pages = [], None, 0
    while True:
        page = list_documents(catalog, filter=filter, limit=limit, cursor=cursor)
        ids += [row["document_id"] for row in page["documents"]]
        pages, cursor = pages + 1, page["next_cursor"]
        if cursor is None:
            return ids, pages


@pytest.mark.parametrize("limit", [1, 5, 22, 1000])
def test_pages_cover_every_active_document_once_in_id_order(catalog, limit):
    ids, pages = _all_pages(catalog, limit=limit)
    expected = sorted(f"doc_{d.key}" for d in DOCS if d.active)
    assert ids == expected and len(expected) == 22
    assert pages == -(-22 // limit)


def test_filters_narrow_like_search(catalog):
    ids, _ = _all_pages(catalog, filter={"collection": ["beta", "nope"], "tags_any": ["red"]}, limit=3)
    assert ids == sorted(f"doc_{d.key}" for d in DOCS if d.active and d.collection == "beta" and "red" in d.tags)
    ids, _ = _all_pages(catalog, filter={"mime": "text/html"}, limit=50)
    assert ids and all(next(d for d in DOCS if f"doc_{d.key}" == i).mime == "text/html" for i in ids)
    assert list_documents(catalog, filter={"collection": []}, limit=10)["documents"] == []


def test_acl_any_keeps_open_documents_and_those_sharing_a_principal(catalog):
    outsider, _ = _all_pages(catalog, filter={"acl_any": ["team-b"]}, limit=100)
    insider, _ = _all_pages(catalog, filter={"acl_any": ["team-a"]}, limit=100)
    no_principals, _ = _all_pages(catalog, filter={"acl_any": []}, limit=100)
    assert set(insider) - set(outsider) == {"doc_doc-000", "doc_doc-003"}
    assert no_principals == outsider and len(insider) == 22


@pytest.mark.parametrize("cursor", ["garbage!", encode_cursor("x")[:-3], "eyJub3QiOiAxfQ"])
def test_a_cursor_not_given_out_is_refused(catalog, cursor):
    with pytest.raises(DocumentQueryError, match="cursor"):
        list_documents(catalog, filter=None, limit=5, cursor=cursor)


@pytest.mark.parametrize("limit", [0, 1001, True])
def test_limit_bounds(catalog, limit):
    with pytest.raises(DocumentQueryError, match="limit"):
        list_documents(catalog, filter=None, limit=limit)


def test_cursor_round_trip_and_unknown_filter_key(catalog):
    assert decode_cursor(encode_cursor("doc_é/1")) == "doc_é/1" and decode_cursor(None) is None
    with pytest.raises(DocumentQueryError, match="unknown document filter keys"):
        list_documents(catalog, filter={"document_ids": ["a"]}, limit=5)


def test_versions_with_the_active_flag(catalog):
    view = document_versions(catalog, "doc_doc-001")
    by_id = {row["version_id"]: row for row in view["versions"]}
    assert set(by_id) == {"ver_doc-001", "ver_doc-001-v2"} and view["collection"] == "beta"
    assert by_id["ver_doc-001"]["active"] is True and by_id["ver_doc-001-v2"]["active"] is False
    assert by_id["ver_doc-001-v2"]["raw_sha"] == "raw2"
    tombstoned = document_versions(catalog, "doc_doc-004")
    assert [row["active"] for row in tombstoned["versions"]] == [False]
    assert document_versions(catalog, "doc_nope") is None


def test_chunk_view_has_placement_embeddings_and_lineage(catalog):
    manifest = GenerationManifest(generation_id="gen_x", kind="hybrid", spec={}, catalog_versions={"documents": 3},
                                  embedder_fp="fp_e", dim=16, lexical_type="bm25", shards=[], created_at="")
    view = chunk_view(catalog, "ch_doc-002_1", manifest=manifest)
    assert view["document_id"] == "doc_doc-002" and view["version_id"] == "ver_doc-002" and view["active"]
    assert view["text"].startswith("common term doc-002 part 1") and view["ordinal"] == 1
    assert view["regions"][0]["page"] == 1 and len(view["spans"]) == 1 and view["heading_path"] == ["Title doc-002"]
    assert [e["embedder_fp"] for e in view["embeddings"]] == ["fp_synthetic_embedder"]
    assert view["lineage"]["generation"] == "gen_x" and view["lineage"]["catalog_versions"] == {"documents": 3}
    assert chunk_view(catalog, "ch_doc-004_0", manifest=None)["active"] is False
    assert chunk_view(catalog, "ch_nope", manifest=None) is None
