"""The upload queue, names, form fields and the upload plan (Ray-free; real Delta in tmp_path)."""

from __future__ import annotations

import io
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from kb_ray import ids
from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.errors import UploadError
from kb_ray.ingest.record import SOURCE_RECORD, conform_record
from kb_ray.ingest.stages.fetch import FetchStage
from kb_ray.ingest.upload_plan import UploadedFile, plan_uploads
from kb_ray.ingest.uploads import UploadFields, UploadQueue, display_name, ingest_status, parse_fields

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(("raw", "expected"), [
    ("report.pdf", "report.pdf"), ("docs/2024/x.md", "x.md"), ("docs\\notes.txt", "notes.txt"), ("a..b.txt", "a..b.txt"),
    ("a\x00b\x1b[31m\n.md", "ab[31m.md"), ("e\u0301t\u00e9.txt", "\u00e9t\u00e9.txt"), ("  spaced.txt ", "spaced.txt"),
])
def test_display_name_keeps_only_a_safe_last_component(raw, expected):
    assert display_name(raw) == expected


@pytest.mark.parametrize("raw", ["", None, ".", "..", "dir/", "../..", "\x00\x01", "x" * 256, "../../x.md",
                                 "docs/../../x.md", "/etc/passwd", "C:\\Users\\a\\notes.txt", "\\\\host\\share\\x.txt",
                                 "..\\x.md"])
def test_display_name_refuses_climbing_or_rooted_paths_and_names_with_nothing_usable(raw):
    with pytest.raises(UploadError) as caught:
        display_name(raw)
    assert caught.value.status == 400


def test_parse_fields_splits_lists_and_checks_metadata_and_collection():
    fields = parse_fields(collection=" manuals ", tags="a, b,,a ", acl="team:x", metadata='{"owner": "ops"}')
    assert fields == UploadFields(collection="manuals", tags=("a", "b"), acl=("team:x",), metadata={"owner": "ops"})
    assert parse_fields(collection="", tags=None, acl=None, metadata=None) == UploadFields()
    for bad in ({"metadata": "[1, 2]"}, {"metadata": "{nope"}, {"collection": "../other"}, {"collection": "a/b"}):
        with pytest.raises(UploadError):
            parse_fields(**{"collection": None, "tags": None, "acl": None, "metadata": None, **bad})


def test_raw_blobs_are_named_by_their_sha_without_a_suffix(tmp_path):
    store = BlobStore(str(tmp_path), kind="raw")
    sha = store.put_bytes(b"hello")
    assert sha == ids.sha256_bytes(b"hello")
    assert (tmp_path / "blobs" / "raw" / sha[:2] / sha).read_bytes() == b"hello"
    assert store.list_shas() == [sha] and store.get(sha) == b"hello" and store.uri(sha).endswith(f"/{sha}")
    assert store.put_bytes(b"hello") == sha and len(list((tmp_path / "blobs" / "raw").rglob("*"))) == 2
    pages = BlobStore(str(tmp_path), kind="pages")
    pages.put(sha, b"png")
    assert (tmp_path / "blobs" / "pages" / sha[:2] / f"{sha}.png").is_file() and pages.list_shas() == [sha]
    for bad in ("../../etc/passwd", sha.upper(), sha[:-1]):
        with pytest.raises(ValueError):
            store.get(bad)


def test_a_streamed_blob_is_copied_in_pieces_under_its_sha_and_leaves_no_temporary_file(tmp_path):
    store, data = BlobStore(str(tmp_path), kind="raw"), bytes(range(256)) * 40
    assert store.put_stream(io.BytesIO(data), chunk_bytes=1000) == (ids.sha256_bytes(data), len(data))
    assert store.get(ids.sha256_bytes(data)) == data and store.put_stream(io.BytesIO(data))[0] == store.put_bytes(data)
    assert store.put_stream(io.BytesIO(b"")) == (ids.sha256_bytes(b""), 0)
    assert not list((tmp_path / "blobs" / "raw").glob("*.tmp"))


@pytest.fixture()
def catalog(tmp_path):
    return DeltaCatalog.open(str(tmp_path / "kb"))


def test_queue_claims_one_file_per_document_oldest_first_and_reports_outcomes(catalog):
    queue = UploadQueue(catalog)
    first, stored = queue.enqueue([("a.md", b"# A\n"), ("b.txt", b"b")], collection="c", tenant="acme",
                                  fields=UploadFields(tags=("t",)))
    assert stored == [{"name": "a.md", "sha256": ids.sha256_bytes(b"# A\n"), "bytes": 4},
                      {"name": "b.txt", "sha256": ids.sha256_bytes(b"b"), "bytes": 1}]
    second, spooled = queue.enqueue([("a.md", io.BytesIO(b"# A2\n"))], collection="c", tenant="acme",
                                    fields=UploadFields())  # a file (the form's spooled part) is copied in pieces
    assert spooled[0]["bytes"] == 5 and BlobStore(catalog.kb_root, kind="raw").get(spooled[0]["sha256"]) == b"# A2\n"
    assert queue.status(first)["status"] == "queued" and queue.status("ing_missing") is None
    claimed = queue.claim()
    assert sorted((row["ingest_id"], row["name"]) for row in claimed) == [(first, "a.md"), (first, "b.txt")]
    assert queue.status(first)["status"] == "running" and queue.status(second)["status"] == "queued"
    log = {"upload://c/a.md": {"action": "new", "status": "ok", "reason": None, "error": None, "version_id": "ver_1"},
           "upload://c/b.txt": {"action": "failed", "status": "failed", "reason": "empty", "error": "empty: no text",
                                "version_id": None}}
    queue.finish(claimed, run_id="run_1", outcomes=log)
    status = queue.status(first)
    assert status["status"] == "done" and status["run_id"] == "run_1" and status["tenant"] == "acme"
    assert [(f["name"], f["status"], f["action"], f["reason"]) for f in status["files"]] == [
        ("a.md", "done", "new", None), ("b.txt", "failed", "failed", "empty")]
    assert status["files"][0]["document_id"] == ids.document_id(collection="c", key="upload://c/a.md")
    assert [(row["ingest_id"], row["name"]) for row in queue.claim()] == [(second, "a.md")]


def test_files_of_several_pending_uploads_are_claimed_as_one_batch(catalog):
    """Micro-batching across uploads: every queued upload's files go to the next run together."""
    queue = UploadQueue(catalog)
    first, _ = queue.enqueue([("a.txt", b"a")], collection="c", tenant="acme", fields=UploadFields())
    second, _ = queue.enqueue([("b.txt", b"b"), ("c.txt", b"c")], collection="c", tenant="acme",
                              fields=UploadFields())
    third, _ = queue.enqueue([("d.txt", b"d")], collection="other", tenant="beta", fields=UploadFields())
    claimed = queue.claim()
    assert sorted((row["ingest_id"], row["name"]) for row in claimed) == sorted(
        [(first, "a.txt"), (second, "b.txt"), (second, "c.txt"), (third, "d.txt")])
    assert {queue.status(i)["status"] for i in (first, second, third)} == {"running"}


def test_running_files_of_a_dead_worker_are_claimed_again_and_a_crash_fails_them(catalog):
    queue = UploadQueue(catalog)
    ingest_id, _ = queue.enqueue([("a.txt", b"a")], collection="c", tenant=None, fields=UploadFields())
    assert len(queue.claim()) == 1
    again = queue.claim()
    assert len(again) == 1
    queue.finish(again, run_id=None, outcomes={}, failure="the ingest failed: CatalogBusyError")
    status = queue.status(ingest_id)
    assert status["status"] == "failed" and status["files"][0]["detail"].endswith("CatalogBusyError")
    assert queue.claim() == []


def test_ingest_status_from_file_statuses():
    assert ingest_status(["queued", "queued"]) == "queued"
    assert ingest_status(["done", "queued"]) == "running" and ingest_status(["running"]) == "running"
    assert ingest_status(["done", "failed"]) == "done" and ingest_status(["failed", "failed"]) == "failed"


def _upload(tmp_path, name: str, data: bytes, **fields) -> UploadedFile:
    store = BlobStore(str(tmp_path / "kb"), kind="raw")
    sha = store.put_bytes(data)
    return UploadedFile(collection="c", name=name, location=store.uri(sha), size=len(data), uploaded_at=T0, **fields)


def test_plan_uploads_reads_blobs_and_layers_form_over_front_matter(catalog, tmp_path):
    md = _upload(tmp_path, "guide.md", b"---\ntags: [fm]\ntitle: From front matter\nacl: [fm-acl]\n---\n# G\n",
                 tags=["form"], metadata={"k": 1})
    bad = _upload(tmp_path, "bad.md", b"---\ntags: [unclosed\n---\nbody\n")
    plan, metadata = plan_uploads([md, bad], catalog=catalog, pipeline_fp="fp", storage_options={})
    assert plan.todo.column("uri").to_pylist() == ["upload://c/guide.md"]
    assert plan.todo.column("location").to_pylist() == [md.location] and plan.vanished.num_rows == 0
    resolved = metadata.documents[ids.document_id(collection="c", key="upload://c/guide.md")]
    assert (resolved.tags, resolved.acl, resolved.metadata, resolved.title) == (
        ["form"], ["fm-acl"], {"k": 1}, "From front matter")
    assert [(row["uri"], row["reason"]) for row in metadata.failed] == [("upload://c/bad.md", "bad_metadata")]


def test_fetch_reads_the_location_and_keep_raw_stores_listed_sources(tmp_path):
    source = tmp_path / "src.txt"
    source.write_bytes(b"listed bytes")
    blob = _upload(tmp_path, "up.txt", b"uploaded bytes")
    raw = BlobStore(str(tmp_path / "kb2"), kind="raw")
    stage = FetchStage(storage_options={}, pipeline_fp="fp", raw_blobs=raw)
    rows = [{"collection": "c", "uri": "upload://c/up.txt", "key": "upload://c/up.txt", "location": blob.location,
             "document_id": "doc_a", "mtime": T0},
            {"collection": "c", "uri": str(source), "key": str(source), "document_id": "doc_b", "mtime": T0}]
    out, _ = stage.process(conform_record(pa.Table.from_pylist(rows), SOURCE_RECORD))
    assert out.column("status").to_pylist() == ["ok", "ok"]
    assert out.column("data").to_pylist() == [b"uploaded bytes", b"listed bytes"]
    assert sorted(raw.list_shas()) == sorted(ids.sha256_bytes(d) for d in (b"uploaded bytes", b"listed bytes"))
    assert FetchStage(storage_options={}, pipeline_fp="fp").raw_blobs is None  # ingest.keep_raw off: nothing kept


def test_a_batch_plan_never_counts_uploaded_documents_as_vanished(catalog):
    from kb_ray.ingest.listing import LISTING_SCHEMA
    from kb_ray.ingest.planning import plan_ingest

    sources = pa.Table.from_pylist([
        {"collection": "c", "uri": uri, "key": uri, "document_id": ids.document_id(collection="c", key=uri),
         "status": "present"} for uri in ("upload://c/up.md", "/data/c/gone.txt")], schema=catalog.read("sources").schema)
    catalog.append("sources", sources)
    plan = plan_ingest(LISTING_SCHEMA.empty_table(), catalog=catalog, collection="c", pipeline_fp="fp",
                       roots=["/data/c", "upload://c"])  # even a root that names them
    assert plan.vanished.column("uri").to_pylist() == ["/data/c/gone.txt"]


def test_the_raw_blob_store_travels_to_ray_workers_by_pickle(tmp_path):
    import pickle

    store = pickle.loads(pickle.dumps(BlobStore(str(tmp_path), kind="raw")))
    assert store.get(store.put_bytes(b"pickled")) == b"pickled"
