"""The read API, /metrics and as-of search over real HTTP to Ray Serve on 127.0.0.1, with API keys
on (docs/documents_api.md, docs/search.md "As-of search"). A private copy of the golden catalog
(tests/index_fixtures.py) gets an acl on one document, an index, then a document deleted
(tombstoned through the catalog API, as kb_ray/ingest/commit.py does) after the build."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import httpx
import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kb_ray.auth.keys import ApiKeyStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AuthSettings
from kb_ray.index import build_index
from kb_ray.serving.app import start_service, stop_service
from tests.index_fixtures import copy_kb, golden_config

pytestmark = pytest.mark.slow
PORT = 8774
URL = f"http://127.0.0.1:{PORT}"
QUERY = "mechanical seal kit part number for the AquaFlow pump"


def _upsert_documents(catalog: DeltaCatalog, rows: list[dict]) -> None:
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=catalog.read("documents").schema),
                         keys=["document_id"])


def _by_uri(catalog: DeltaCatalog, suffix: str) -> dict:
    return next(row for row in catalog.read("documents").to_pylist() if row["uri"].endswith(suffix))


@pytest.fixture(scope="module")
def service(golden_kb, tmp_path_factory):
    kb_root = copy_kb(golden_kb, tmp_path_factory.mktemp("readapi") / "kb")
    catalog = DeltaCatalog.open(kb_root, create=False)
    _upsert_documents(catalog, [{**_by_uri(catalog, "policy.docx"), "acl": ["team-a"]}])
    config = golden_config(kb_root, "embedding.num_threads=1", "search.evidence=lexical")
    manifest = build_index(config)
    kept = catalog.delta_table("documents").version()
    time.sleep(0.05)
    before_delete = datetime.now(timezone.utc)
    time.sleep(0.05)
    manual = _by_uri(catalog, "manual.pdf")
    now = datetime.now(timezone.utc)
    _upsert_documents(catalog, [{**manual, "active_version_id": None, "deleted_at": now, "updated_at": now}])
    config.serve.auth = AuthSettings(enabled=True, tenants={"acme": ["default"], "other": ["elsewhere"]},
                                     cache_ttl_s=0.2)
    store = ApiKeyStore(catalog)
    keys = {"reader": store.create(tenant="acme", role="reader")[0],
            "team-a": store.create(tenant="acme", role="reader", principals=["team-a"])[0],
            "other": store.create(tenant="other", role="reader")[0],
            "admin": store.create(tenant="acme", role="admin")[0]}
    start_service(config, port=PORT)
    yield {"keys": keys, "kept": kept, "before_delete": before_delete, "manual": manual["document_id"],
           "policy": _by_uri(catalog, "policy.docx")["document_id"], "generation": manifest.generation_id,
           "catalog": catalog}
    stop_service()


def get(path: str, key: str, **params) -> httpx.Response:
    return httpx.get(f"{URL}{path}", params=params, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def search(key: str, **body) -> httpx.Response:
    return httpx.post(f"{URL}/v1/search", json={"query": QUERY, "k": 5, "rerank": False, **body},
                      headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _all_documents(key: str, **params) -> list[str]:
    ids, cursor = [], None
    while True:
        page = get("/v1/documents", key, limit=2, **params, **({"cursor": cursor} if cursor else {}))
        assert page.status_code == 200, page.text
        ids += [row["document_id"] for row in page.json()["documents"]]
        if (cursor := page.json()["next_cursor"]) is None:
            return ids


def test_list_pages_are_scoped_and_acl_filtered(service):
    active = {r["document_id"] for r in service["catalog"].read("documents").to_pylist() if r["active_version_id"]}
    with_acl = _all_documents(service["keys"]["team-a"])
    assert with_acl == sorted(active) and service["manual"] not in with_acl
    assert set(with_acl) - set(_all_documents(service["keys"]["reader"])) == {service["policy"]}
    assert _all_documents(service["keys"]["other"]) == []
    assert _all_documents(service["keys"]["other"], collection="default") == []  # narrows, never widens
    assert get("/v1/documents", service["keys"]["reader"], limit=1001).status_code == 400
    assert get("/v1/documents", service["keys"]["reader"], cursor="nonsense").status_code == 400


def test_versions_and_chunk_inspector_with_tenant_404s(service):
    keys, policy = service["keys"], service["policy"]
    versions = get(f"/v1/documents/{policy}/versions", keys["team-a"])
    assert versions.status_code == 200 and [v["active"] for v in versions.json()["versions"]] == [True]
    assert get(f"/v1/documents/{policy}/versions", keys["reader"]).status_code == 404  # acl
    assert get(f"/v1/documents/{policy}/versions", keys["other"]).status_code == 404  # tenant
    assert get("/v1/documents/doc_unknown/versions", keys["reader"]).status_code == 404
    hit = next(h for h in search(keys["reader"], as_of={"catalog_version": service["kept"]}).json()["hits"]
               if "AF-SK-118" in h["text"])
    chunk = get(f"/v1/chunks/{hit['chunk_id']}", keys["reader"])
    assert chunk.status_code == 200, chunk.text
    view = chunk.json()
    assert view["text"] == hit["text"] and view["spans"] == [list(s) for s in hit["spans"]]
    assert view["regions"] == hit["regions"] and view["heading_path"] == hit["heading_path"]
    assert view["lineage"] == hit["lineage"] and view["elements"] and view["embeddings"]
    assert view["active"] is False  # its document was deleted after the build
    assert get(f"/v1/chunks/{hit['chunk_id']}", keys["other"]).status_code == 404


def test_page_images_honour_the_tenant_acl_and_the_key(service):
    keys = service["keys"]
    pdf = next(h for h in search(keys["reader"]).json()["hits"] if h["mime"] == "application/pdf")
    path = f"/v1/documents/{pdf['document_id']}/pages/1.png"
    image = get(path, keys["reader"], dpi=50)
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert get(path, keys["other"], dpi=50).status_code == 404  # another tenant's: as if it did not exist
    assert httpx.get(f"{URL}{path}", timeout=60).status_code == 401
    assert get(f"/v1/documents/{service['manual']}/pages/1.png", keys["reader"]).status_code == 404  # deleted
    # the acl is checked before the format: a caller without the principal learns nothing more than 404
    policy = f"/v1/documents/{service['policy']}/pages/1.png"
    assert "PDFs and PPTX only" in get(policy, keys["team-a"]).json()["detail"]
    refused = get(policy, keys["reader"])
    assert refused.status_code == 404 and refused.json()["detail"] == f"no document {service['policy']}"
    text = f"/v1/documents/{service['policy']}/text"
    assert get(text, keys["team-a"]).json()["text"] and get(text, keys["reader"]).status_code == 404  # acl
    assert get(text, keys["other"]).status_code == 404  # tenant


def test_document_tree_honours_the_tenant_acl_and_the_delete(service):
    keys, policy = service["keys"], service["policy"]
    tree = get(f"/v1/documents/{policy}/tree", keys["team-a"])
    assert tree.status_code == 200, tree.text
    root = tree.json()["tree"]
    assert root["heading_path"] == [] and root["children"] and root["subtree_chunks"] >= 1
    assert all(child["heading_path"][:-1] == [] for child in root["children"])
    assert get(f"/v1/documents/{policy}/tree", keys["reader"]).status_code == 404  # acl
    assert get(f"/v1/documents/{policy}/tree", keys["other"]).status_code == 404  # tenant
    assert get(f"/v1/documents/{service['manual']}/tree", keys["reader"]).status_code == 404  # deleted


def test_as_of_before_and_after_the_delete_and_a_too_old_point(service):
    keys, manual = service["keys"], service["manual"]
    deadline = time.monotonic() + 10
    while manual in {h["document_id"] for h in search(keys["reader"]).json()["hits"]}:
        assert time.monotonic() < deadline, "the delete never reached the gate"
        time.sleep(0.5)
    for point in ({"catalog_version": service["kept"]}, {"timestamp": service["before_delete"].isoformat()}):
        result = search(keys["reader"], as_of=point)
        assert result.status_code == 200, result.text
        assert manual in {h["document_id"] for h in result.json()["hits"]}, point
        assert result.json()["generation"] == service["generation"]
    latest_point = service["catalog"].delta_table("documents").version()
    after = search(keys["reader"], as_of={"catalog_version": latest_point}).json()
    assert manual not in {h["document_id"] for h in after["hits"]}
    too_old = search(keys["reader"], as_of={"catalog_version": 0})
    assert too_old.status_code == 409 and "no retained index generation" in too_old.json()["detail"]
    assert search(keys["reader"], as_of={"catalog_version": 1, "timestamp": "2026-01-01"}).status_code == 422


def test_answer_as_of(service):
    keys, manual = service["keys"], service["manual"]

    def answer(as_of: dict) -> httpx.Response:
        return httpx.post(f"{URL}/v1/answer", json={"query": QUERY, "as_of": as_of}, timeout=120,
                          headers={"Authorization": f"Bearer {keys['reader']}"})

    before = answer({"catalog_version": service["kept"]})
    assert before.status_code == 200, before.text
    assert manual in {c.get("document_id") for c in before.json()["citations"]}, before.json()
    too_old = answer({"catalog_version": 0})
    assert too_old.status_code == 409 and "no retained index generation" in too_old.json()["detail"]


def test_metrics_parse_and_count_requests(service):
    keys = service["keys"]
    assert get("/metrics", keys["reader"]).status_code == 403  # an admin route
    assert search(keys["reader"]).status_code == 200
    assert get("/v1/documents/doc_unknown/versions", keys["reader"]).status_code == 404
    scraped = get("/metrics", keys["admin"])
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    samples = [s for family in text_string_to_metric_families(scraped.text) for s in family.samples]
    count = {(s.name, s.labels.get("route"), s.labels.get("status")): s.value for s in samples}
    assert count[("kb_ray_http_requests_total", "/v1/documents/{document_id}/versions", "404")] >= 1
    assert count[("kb_ray_http_requests_total", "/metrics", "403")] >= 1
    assert count[("kb_ray_http_request_duration_seconds_count", "/v1/search", None)] >= 1
    generation = [s for s in samples if s.name == "kb_ray_index_generation"]
    assert [(s.labels["generation"], s.value) for s in generation] == [(service["generation"], 1.0)]
    active = sum(1 for r in service["catalog"].read("documents").to_pylist() if r["active_version_id"])
    assert [s.value for s in samples if s.name == "kb_ray_documents"] == [active]
