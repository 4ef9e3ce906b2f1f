"""Uploads, ingest status and deletes over real HTTP to Ray Serve on 127.0.0.1 (docs/upload.md).

One collection per tenant (``acme`` ingested from a directory, ``beta`` empty), an index over it,
and one service with ``serve.auth.enabled`` for the module. Uploaded files are ingested by the
service's own upload worker (a Ray actor running the ingest pipeline), so each upload waits for
a real ingest: the module is slow-marked. The Ray-free pieces are in tests/ingest/test_uploads.py
and tests/serving/test_upload_form.py.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from kb_ray import ids
from kb_ray.auth.keys import ApiKeyStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AuthSettings
from kb_ray.index import build_index
from kb_ray.ingest.run import run_ingest
from kb_ray.serving.app import start_service, stop_service
from tests.index_fixtures import golden_config
from tests.ingest.helpers import INLINE

pytestmark = pytest.mark.slow
PORT = 8773
URL = f"http://127.0.0.1:{PORT}"
UPLOAD_LIMIT = 64 * 1024
NOTE_V1 = b"# Zephyrine pump notes\n\nThe zephyrine impeller is checked every spring.\n"
REFRESH_S = 1.0
FRESH_WITHIN_S = REFRESH_S + 2 + 3  # the searcher's refresh interval, the 2 s gate cache, a segment load
NOTE_V2 = b"# Zephyrine pump notes\n\nThe zephyrine impeller is replaced every autumn.\n"
SEARCHERS = 2  # a delete is hidden at once by every searcher replica, not only the one the ingress asks
GATE_S = 120  # each replica caches the active versions this long: only the delete's version makes it re-read


@pytest.fixture(scope="module")
def service(ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("uploads")
    kb_root, sources = root / "kb", root / "sources"
    sources.mkdir()
    for number in range(3):
        (sources / f"acme-{number}.txt").write_text(f"acme note {number}: valve pressure inspection schedule.\n")
    report = run_ingest(golden_config(kb_root, f"ingest.sources=[{sources}]", "ingest.collection=acme",
                                      "embedding.num_threads=1", "ingest.keep_raw=true", INLINE))
    assert report.status == "succeeded", report.to_dict()
    _check_raw_blobs_kept(kb_root, sources)
    config = golden_config(kb_root, "embedding.num_threads=1", "search.evidence=lexical",
                           f"serve.upload_max_bytes={UPLOAD_LIMIT}", "index.auto_refresh=true",
                           f"serve.searcher_replicas={SEARCHERS}", f"search.gate_max_age_s={GATE_S}",
                           f"index.refresh_interval_s={REFRESH_S}", "index.compact_ratio=100")
    build_index(config)
    config.serve.auth = AuthSettings(enabled=True, tenants={"acme": ["acme"], "beta": ["beta"]}, cache_ttl_s=0.2)
    store = ApiKeyStore(DeltaCatalog.open(str(kb_root), create=False))
    keys = {name: store.create(tenant=name.split("-")[0], role=name.split("-")[1])[0]
            for name in ("acme-reader", "acme-writer", "beta-writer")}
    start_service(config, port=PORT)
    yield {"config": config, "keys": keys, "root": root, "kb_root": kb_root}
    stop_service()


def _check_raw_blobs_kept(kb_root: Path, sources: Path) -> None:
    """``ingest.keep_raw``: each source's bytes are in blobs/raw under its version's raw_sha."""
    shas = DeltaCatalog.open(str(kb_root), create=False).read("versions").column("raw_sha").to_pylist()
    kept = {(kb_root / "blobs" / "raw" / sha[:2] / sha).read_bytes() for sha in shas}
    assert len(shas) == 3 and kept == {path.read_bytes() for path in sources.iterdir()}


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def upload(key: str, files: list[tuple[str, bytes]], **fields: str) -> httpx.Response:
    return httpx.post(f"{URL}/v1/documents", files=[("file", item) for item in files], data=fields,
                      headers=_auth(key), timeout=60)


def wait_for_ingest(key: str, ingest_id: str, *, timeout_s: float = 240) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = httpx.get(f"{URL}/v1/ingests/{ingest_id}", headers=_auth(key), timeout=30).json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(1)
    raise AssertionError(f"ingest {ingest_id} did not finish in {timeout_s} s: {body}")


def search(key: str, query: str, **filters) -> list[dict]:
    response = httpx.post(f"{URL}/v1/search", json={"query": query, "k": 5, "mode": "lexical", "filter": filters},
                          headers=_auth(key), timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["hits"]


def test_upload_is_ingested_with_its_metadata_versioned_searchable_and_deleted_at_once(service):
    keys, kb_root = service["keys"], service["kb_root"]
    sent = upload(keys["acme-writer"], [("notes/zephyrine.md", NOTE_V1), ("blank.txt", b"")],
                  tags="pumps, spring", metadata='{"owner": "ops"}', acl="")
    assert sent.status_code == 202, sent.text
    body = sent.json()
    sha = ids.sha256_bytes(NOTE_V1)
    assert body["collection"] == "acme" and body["files"] == [
        {"name": "zephyrine.md", "sha256": sha, "bytes": len(NOTE_V1)},
        {"name": "blank.txt", "sha256": ids.sha256_bytes(b""), "bytes": 0}]
    assert (kb_root / "blobs" / "raw" / sha[:2] / sha).read_bytes() == NOTE_V1
    status = wait_for_ingest(keys["acme-writer"], body["ingest_id"])
    assert status["status"] == "done" and status["files"][0]["action"] == "new", status
    assert (status["files"][1]["status"], status["files"][1]["action"], status["files"][1]["reason"]) == (
        "failed", "failed", "empty"), status
    document_id = status["files"][0]["document_id"]
    assert httpx.get(f"{URL}/v1/ingests/{body['ingest_id']}", headers=_auth(keys["beta-writer"])).status_code == 404
    catalog = DeltaCatalog.open(str(kb_root), create=False)
    row = next(r for r in catalog.read("documents").to_pylist() if r["document_id"] == document_id)
    assert (row["collection"], row["uri"], row["tags"], row["acl"]) == (
        "acme", "upload://acme/zephyrine.md", ["pumps", "spring"], [])
    assert row["metadata_json"] == '{"owner": "ops"}'

    again = upload(keys["acme-writer"], [("zephyrine.md", NOTE_V2)], tags="pumps")
    changed = wait_for_ingest(keys["acme-writer"], again.json()["ingest_id"])
    assert changed["files"][0]["action"] == "changed" and changed["files"][0]["document_id"] == document_id
    assert changed["files"][0]["version_id"] != status["files"][0]["version_id"]

    # no build-index: the upload worker's ingest published a delta segment (index.auto_refresh)
    generation = _generation()
    deadline = time.monotonic() + FRESH_WITHIN_S
    while not (hits := search(keys["acme-reader"], "zephyrine impeller autumn", tags_any=["pumps"])) \
            and time.monotonic() < deadline:
        time.sleep(0.25)
    assert hits and hits[0]["document_id"] == document_id, f"not searchable {FRESH_WITHIN_S} s after its ingest"
    assert _generation() == generation  # the same base generation, with a segment: no rebuild
    assert not search(keys["acme-reader"], "zephyrine impeller autumn", tags_any=["spring"])  # v2 dropped the tag
    _retag_without_reembedding(keys, kb_root, document_id)

    path = f"{URL}/v1/documents/{document_id}"
    assert httpx.delete(path, headers=_auth(keys["beta-writer"])).status_code == 404
    assert httpx.delete(path, headers=_auth(keys["acme-reader"])).status_code == 403
    assert document_id in _found_by_concurrent_searches(keys["acme-reader"])  # every replica's gate is fresh
    deleted = httpx.delete(path, headers=_auth(keys["acme-writer"]))
    assert deleted.status_code == 200 and deleted.json()["document_id"] == document_id
    # at once, on every replica (each caches its gate for GATE_S): each search carries the delete's version
    assert document_id not in _found_by_concurrent_searches(keys["acme-reader"])
    assert httpx.delete(path, headers=_auth(keys["acme-writer"])).status_code == 404


def _found_by_concurrent_searches(key: str) -> set[str]:
    """The documents 8 searches per searcher replica find, sent 4 at a time per replica so that
    Serve's router spreads them over every replica."""
    with ThreadPoolExecutor(max_workers=4 * SEARCHERS) as pool:
        results = list(pool.map(lambda _: search(key, "zephyrine impeller autumn"), range(8 * SEARCHERS)))
    return {hit["document_id"] for hits in results for hit in hits}


def _retag_without_reembedding(keys: dict, kb_root: Path, document_id: str) -> None:
    """The same bytes with new tags: the document's tags change, nothing is re-embedded, and the
    new tag is filterable within the refresh delay (a segment carries document-level fields)."""
    catalog = DeltaCatalog.open(str(kb_root), create=False)
    embeddings, versions = catalog.read("embeddings").num_rows, catalog.read("versions").num_rows
    retag = wait_for_ingest(keys["acme-writer"], upload(keys["acme-writer"], [("zephyrine.md", NOTE_V2)],
                                                        tags="pumps, autumn").json()["ingest_id"])
    assert retag["status"] == "done" and retag["files"][0]["action"] == "unchanged", retag
    catalog = DeltaCatalog.open(str(kb_root), create=False)
    row = next(r for r in catalog.read("documents").to_pylist() if r["document_id"] == document_id)
    assert row["tags"] == ["pumps", "autumn"]
    assert (catalog.read("embeddings").num_rows, catalog.read("versions").num_rows) == (embeddings, versions)
    deadline = time.monotonic() + FRESH_WITHIN_S
    while not (hits := search(keys["acme-reader"], "zephyrine impeller", tags_any=["autumn"])) \
            and time.monotonic() < deadline:
        time.sleep(0.25)
    assert [hit["document_id"] for hit in hits] == [document_id]


def _generation() -> str:
    return httpx.get(f"{URL}/healthz", timeout=30).json()["generation"]


def _files_outside(root: Path, kb_root: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for folder, _, files in os.walk(root):
        if Path(folder) == kb_root or kb_root in Path(folder).parents:
            continue
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            found[os.path.join(folder, name)] = (info.st_mtime_ns, info.st_size)
    return found


def test_refused_uploads_are_clear_4xx_and_nothing_is_written_outside_kb_root(service):
    keys, root, kb_root = service["keys"], service["root"], service["kb_root"]
    before, rows_before = _files_outside(root, kb_root), _upload_rows(kb_root)
    reader = upload(keys["acme-reader"], [("a.txt", b"reader text")])
    assert reader.status_code == 403 and "writer" in reader.json()["detail"]
    other = upload(keys["acme-writer"], [("a.txt", b"text")], collection="beta")
    assert other.status_code == 403 and "beta" in other.json()["detail"]
    big = upload(keys["acme-writer"], [("big.txt", b"x" * (UPLOAD_LIMIT + 1))])
    assert big.status_code == 413 and f"{UPLOAD_LIMIT}-byte limit" in big.json()["detail"]
    exe = upload(keys["acme-writer"], [("tool.exe", b"MZ\x90\x00")])
    assert exe.status_code == 415 and "tool.exe" in exe.json()["detail"]
    dots = upload(keys["acme-writer"], [("dir/", b"text")])
    assert dots.status_code == 400 and "no usable name" in dots.json()["detail"]
    assert _upload_rows(kb_root) == rows_before  # nothing refused was queued
    escape = upload(keys["acme-writer"], [("../../../../escape.txt", b"escape attempt text")])
    assert escape.status_code == 400 and "climbs" in escape.json()["detail"]
    rooted = upload(keys["acme-writer"], [("/tmp/escape.txt", b"escape attempt text")])
    assert rooted.status_code == 400 and "root" in rooted.json()["detail"]
    assert _upload_rows(kb_root) == rows_before
    assert _files_outside(root, kb_root) == before
    assert not [path for path in kb_root.rglob("*escape*")] and not (root.parent / "escape.txt").exists()


def _upload_rows(kb_root: Path) -> int:
    return DeltaCatalog.open(str(kb_root), create=False).read("uploads").num_rows
