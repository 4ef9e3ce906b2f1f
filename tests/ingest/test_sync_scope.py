"""``--sync full`` tombstones only what vanished from under the roots this run listed
(kb_ray/ingest/planning.py): a collection fed from several folders keeps the documents of the
folders a run did not list. Inline ingests (no Ray) into real Delta tables."""

from __future__ import annotations

import shutil

import pyarrow as pa

from kb_ray import ids
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import run_query
from kb_ray.ingest.listing import LISTING_SCHEMA, list_sources, root_uri
from kb_ray.ingest.planning import plan_ingest
from kb_ray.ingest.run import run_ingest
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.helpers import catalog, ingest_config


def _sources(catalog: DeltaCatalog, uris: list[str]) -> None:
    rows = [{"collection": "c", "uri": uri, "key": uri, "document_id": ids.document_id(collection="c", key=uri),
             "status": "present"} for uri in uris]
    catalog.append("sources", pa.Table.from_pylist(rows, schema=catalog.read("sources").schema))


def _vanished(catalog: DeltaCatalog, roots: list[str]) -> list[str]:
    plan = plan_ingest(LISTING_SCHEMA.empty_table(), catalog=catalog, collection="c", pipeline_fp="fp", roots=roots)
    return sorted(plan.vanished.column("uri").to_pylist())


def test_only_sources_under_a_listed_root_can_vanish(tmp_path):
    cat = DeltaCatalog.open(str(tmp_path / "kb"))
    _sources(cat, ["/data/a/x.md", "/data/a/sub/y.md", "/data/ab/z.md", "/data/a.md", "s3://bucket/docs/k.md",
                   "s3://bucket/docs2/k.md", "upload://c/u.md"])
    assert _vanished(cat, ["/data/a"]) == ["/data/a/sub/y.md", "/data/a/x.md"]  # not /data/ab/…, not /data/a.md
    assert _vanished(cat, ["/data/ab/z.md"]) == ["/data/ab/z.md"]  # a file source is its own root
    assert _vanished(cat, ["s3://bucket/docs"]) == ["s3://bucket/docs/k.md"]
    assert _vanished(cat, ["/"]) == ["/data/a.md", "/data/a/sub/y.md", "/data/a/x.md", "/data/ab/z.md"]
    assert _vanished(cat, []) == []  # an upload run lists no root


def test_root_uris_are_the_prefix_of_what_the_listing_names(tmp_path):
    from kb_ray.catalog.storage import fsspec_filesystem

    fs, _ = fsspec_filesystem("memory://scope", {})
    fs.pipe("/scope/docs/a.md", b"a")
    fs.pipe("/scope/docs/sub/b.md", b"b")
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "sub" / "c.md").write_text("c")
    try:
        for source in ("memory://scope/docs/", f"{tmp_path}/docs/", f"file://{tmp_path}/docs"):
            root = root_uri(source)
            uris = [u for b in list_sources([source], collection="c", include=["**/*"]) for u in b["uri"].to_pylist()]
            assert uris and all(uri.startswith(root.rstrip("/") + "/") for uri in uris), (source, root, uris)
        assert root_uri("memory://scope/docs/") == "memory:///scope/docs"
        assert root_uri(f"file://{tmp_path}/docs") == root_uri(f"{tmp_path}/docs/") == f"{tmp_path}/docs"
    finally:
        fs.rm("/scope", recursive=True)


def test_a_full_sync_of_one_folder_keeps_the_other_folders_documents(tmp_path):
    """Two folders, one a prefix of the other's name (``a`` and ``ab``), into one collection; a
    full sync of ``a`` alone tombstones the file removed from ``a`` and nothing of ``ab``."""
    folders = {name: tmp_path / name for name in ("a", "ab")}
    for folder, files in zip(folders.values(), (("notes.txt", "guide.md"), ("faq.html", "vietnamese.txt"))):
        folder.mkdir()
        for name in files:
            shutil.copy(GOLDEN_SOURCES / name, folder / name)
    kb = tmp_path / "kb"
    first = run_ingest(ingest_config(kb, list(folders.values()), "ingest.inline_max_docs=10", "ingest.sync=full"))
    assert first.documents["new"] == 4
    (folders["a"] / "guide.md").unlink()
    report = run_ingest(ingest_config(kb, [folders["a"]], "ingest.inline_max_docs=10", "ingest.sync=full"))
    assert (report.documents["unchanged"], report.documents["deleted"]) == (1, 1)
    active = run_query(catalog(kb), "SELECT uri FROM active_documents ORDER BY uri").column("uri").to_pylist()
    assert active == [str(folders["a"] / "notes.txt"), str(folders["ab"] / "faq.html"),
                      str(folders["ab"] / "vietnamese.txt")]
    again = run_ingest(ingest_config(kb, [folders["ab"]], "ingest.inline_max_docs=10", "ingest.sync=full"))
    assert (again.documents["unchanged"], again.documents["deleted"]) == (2, 0)


def test_watch_and_ingest_help_say_what_a_full_sync_tombstones():
    from kb_ray.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    for command in ("watch", "ingest"):
        text = " ".join(commands[command].format_help().split())
        assert "full:" in text and "from other sources are" in text, text
